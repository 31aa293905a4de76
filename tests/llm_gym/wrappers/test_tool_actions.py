"""`llm_gym.wrappers.tool_actions`: a multi-turn env played through one `act` tool, differential
against TRL 1.16's own tool loop (`GRPOTrainer._tool_call_loop` and `_get_tool_suffix_ids`, run on a
stand-in trainer whose only scripted part is generation) on the offline Qwen3 tokenizer with TRL's
Qwen3 template: same prompt tokens as `apply_chat_template(..., tools=[act])`, same episode tokens
turn by turn, same tool masks, same number of turns and the same reward as `TextEnvironment`."""

from __future__ import annotations

from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest

from tests._adapter_helpers import ensure_catalog
from tests._real_tokenizers import skip_unless_available, tokenizer_dir

ensure_catalog()

from llm_gym.wrappers.tool_actions import (  # noqa: E402
    ACT_TOOL,
    DEFAULT_INSTRUCTION,
    ToolActionsEnv,
    register_tool_actions,
    tool_actions_id,
)

ENV_ID = "llm/GuessNumber-v0"
ACT_ID = register_tool_actions(ENV_ID)
# The episodes below script guesses for the classic game, 1..max_number (range_starts=1).
CLASSIC = {"range_starts": 1}
END = "<|im_end|>"


def call(*messages: str) -> str:
    """An assistant turn calling `act` once per message, as Qwen3's template writes it."""
    blocks = [f'<tool_call>\n{{"name": "act", "arguments": {{"message": "{m}"}}}}\n</tool_call>'
              for m in messages]
    return "\n".join(blocks) + END


@pytest.fixture(scope="module")
def qwen3(real_tokenizer_root, tmp_path_factory):
    """(directory, tokenizer): the offline Qwen3 tokenizer with TRL's Qwen3 template and response
    parser, saved where `gym.make(tokenizer=DIR)` loads it."""
    skip_unless_available("qwen3")
    pytest.importorskip("trl")
    from transformers import AutoTokenizer
    from trl.chat_template_utils import add_response_schema, qwen3_chat_template

    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir("qwen3", real_tokenizer_root)))
    tok.chat_template = qwen3_chat_template
    path = tmp_path_factory.mktemp("qwen3_trl")
    tok.save_pretrained(str(path))
    return str(path), add_response_schema(tok)


class _TRLLoop:
    """Just enough of a `GRPOTrainer` for TRL's own `_tool_call_loop` to run one episode; the
    model's turns come from a script instead of `generate`."""

    def __init__(self, tok, env, script, *, max_iterations, max_completion_length, max_model_len):
        from trl import GRPOTrainer
        from trl.chat_template_utils import get_training_chat_template, is_chat_template_prefix_preserving

        self._loop = GRPOTrainer._tool_call_loop.__get__(self)
        self._get_tool_suffix_ids = GRPOTrainer._get_tool_suffix_ids.__get__(self)
        self._tokenizer = self.processing_class = tok
        # as GRPOTrainer.__init__ does with tools: a prefix-preserving training template if needed
        self.chat_template = (None if is_chat_template_prefix_preserving(tok)
                              else get_training_chat_template(tok))
        self.chat_template_kwargs = {}
        self._is_vlm, self.use_vllm = False, False
        self.model = SimpleNamespace(config=SimpleNamespace(max_position_embeddings=max_model_len))
        self.max_completion_length = max_completion_length
        self.max_tool_calling_iterations = max_iterations
        self.tools = [env.act]
        self.environment_factories = {None: None}
        self._env_tools = {None: [env.act]}
        self._batch_environments = [None]
        self._sync_tool_dicts, self._async_tool_dicts = [{"act": env.act}], [{}]
        self._script = list(script)
        self.generated = 0

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations,
                              has_tool_images=False):
        # Past the script TRL gets one plain END turn, which ends its loop; being asked again means
        # the loop runs on (it allows 10**9 iterations here): fail instead of growing without end.
        assert self.generated <= len(self._script), "TRL's loop asked for turns past the script's end"
        turn = self._script[self.generated] if self.generated < len(self._script) else END
        self.generated += 1
        ids = self._tokenizer(turn, add_special_tokens=False)["input_ids"]
        return [ids], None


def trl_episode(tok, task_seed, turns, *, max_iterations=None, max_completion_length=4096,
                max_model_len=32768, **knobs):
    """TRL's episode for the scripted `turns`: (prompt ids, completion ids, tool mask, reward,
    model turns, tool calls, tool failures)."""
    from trl.chat_template_utils import parse_response

    from llm_gym.adapters.trl import TextEnvironment, multi_turn_dataset

    knobs = {**CLASSIC, **knobs}
    env = TextEnvironment(ENV_ID, **knobs)
    row = dict(multi_turn_dataset(ENV_ID, 1, seed=0, **knobs)[0], task_seed=task_seed)
    prompt = [dict(m) for m in row["prompt"]]
    prompt[-1]["content"] += env.reset(**row)
    loop = _TRLLoop(tok, env, turns[1:], max_iterations=max_iterations or 10**9,
                    max_completion_length=max_completion_length, max_model_len=max_model_len)
    prompt_ids = list(tok.apply_chat_template(prompt, tools=[env.act], add_generation_prompt=True,
                                              chat_template=loop.chat_template, tokenize=True,
                                              return_dict=False))  # _tokenize_prompts' call
    first = tok(turns[0], add_special_tokens=False)["input_ids"]
    completions = [[parse_response(tok, first, prefix=prompt_ids, tools=[env.act])]]
    mask, _c, ids, _lp, calls, failures, _img = loop._loop(
        [prompt], [prompt_ids], [list(first)], completions, None, None, {})
    return dict(prompt=prompt_ids, completion=ids[0], mask=mask[0], reward=env.get_reward(),
                turns=1 + loop.generated, calls=calls, failures=failures)


def our_episode(path, task_seed, turns, tok, **knobs):
    """Our episode for the same scripted turns through `gym.make`: every observation, the rewards,
    the info of every step. Asserts the prefix property on every continuing step."""
    env = gym.make(ACT_ID, tokenizer=path, renderer="chat_template", **{**CLASSIC, **knobs})
    ob, info = env.reset(seed=task_seed)
    obs, actions, rewards, infos = [ob.tolist()], [], [], []
    for turn in turns:
        action = tok(turn, add_special_tokens=False)["input_ids"]
        actions.append(action)
        nxt, reward, terminated, truncated, info = env.step(np.asarray(action))
        rewards.append(float(reward))
        infos.append(info)
        if terminated or truncated:
            break
        assert nxt.tolist()[:len(obs[-1]) + len(action)] == obs[-1] + action  # prefix property
        obs.append(nxt.tolist())
    else:
        raise AssertionError("the scripted turns did not end the episode")
    return env, obs, actions, rewards, infos


def assert_same_episode(path, tok, task_seed, turns, exact_tokens=True, **knobs):
    trl_knobs = {k: knobs[k] for k in ("max_number", "max_turns") if k in knobs}
    trl = trl_episode(tok, task_seed, turns, max_iterations=knobs.get("max_tool_calling_iterations"),
                      max_completion_length=knobs.get("max_completion_length", 4096), **trl_knobs)
    env, obs, actions, rewards, infos = our_episode(path, task_seed, turns, tok, **knobs)
    assert obs[0] == trl["prompt"]  # the prompt TRL feeds its model, token for token
    ours = obs[-1] + actions[-1]  # the whole episode: the last observation and the last turn
    if exact_tokens:
        assert ours == trl["prompt"] + trl["completion"]
        # TRL's tool mask (1 = sampled) is our split into sampled actions and env tokens
        ours_mask = [0] * len(ours)
        for ob, action in zip(obs, actions):
            ours_mask[len(ob):len(ob) + len(action)] = [1] * len(action)
        assert ours_mask[len(trl["prompt"]):] == trl["mask"]
    assert len(rewards) == trl["turns"]
    assert sum(rewards) == pytest.approx(trl["reward"])
    assert sum(i["metrics"]["tool_calls"] for i in infos) == trl["calls"]
    assert sum(i["metrics"]["tool_errors"] for i in infos) == trl["failures"]
    return env, obs, rewards, infos, trl


def test_act_schema_is_what_transformers_derives_from_the_trl_adapter():
    from transformers.utils import get_json_schema

    from llm_gym.adapters.trl import TextEnvironment, multi_turn_dataset

    assert get_json_schema(TextEnvironment.act) == {"type": "function", "function": dict(ACT_TOOL)}
    assert multi_turn_dataset(ENV_ID, 1)[0]["prompt"][0]["content"] == DEFAULT_INSTRUCTION


def test_ids_and_bad_configuration():
    assert ACT_ID == tool_actions_id(ENV_ID) == "llm/GuessNumber-act-v0"
    assert register_tool_actions(ENV_ID) == ACT_ID  # idempotent
    with pytest.raises(ValueError, match="not a registered env id"):
        register_tool_actions("llm/NoSuchEnv-v0")
    with pytest.raises(ValueError, match="after_done"):
        gym.make(ACT_ID, after_done="sometimes")
    with pytest.raises(ValueError, match="max_tool_calling_iterations"):
        gym.make(ACT_ID, max_tool_calling_iterations=-1)
    with pytest.raises(TypeError, match="max_numbr"):  # the wrapped source's own knob check
        gym.make(ACT_ID, max_numbr=5)


def test_prompt_is_hf_apply_chat_template_with_tools(qwen3):
    path, tok = qwen3
    env = gym.make(ACT_ID, tokenizer=path, renderer="chat_template", max_number=50, **CLASSIC)
    ob, info = env.reset(seed=3)
    text = "Guess my number from 1 to 50. After each guess I say Higher or Lower. You have 8 " \
           "guesses. Reply with just the number."
    inner = gym.make(ENV_ID, tokenizer=path, renderer="chat_template", max_number=50, **CLASSIC)
    assert text in inner.reset(seed=3)[1]["text"]  # the plain env's opening
    tools = [{"type": "function", "function": dict(ACT_TOOL)}]
    expected = tok.apply_chat_template([{"role": "user", "content": DEFAULT_INSTRUCTION + text}],
                                       tools=tools, add_generation_prompt=True, tokenize=True,
                                       return_dict=False)
    assert ob.tolist() == list(expected)
    assert "<tools>" in info["text"] and '"name": "act"' in info["text"]


def test_scripted_win_matches_trl_and_the_plain_env(qwen3):
    path, tok = qwen3
    seed = 11
    probe = gym.make(ACT_ID, tokenizer=path, renderer="chat_template", **CLASSIC)
    probe.reset(seed=seed)
    secret = probe.unwrapped.current_env.env.secret
    lo, hi, guesses = 1, 20, []
    while True:
        guess = (lo + hi) // 2
        guesses.append(guess)
        if guess == secret:
            break
        lo, hi = (guess + 1, hi) if guess < secret else (lo, guess - 1)
    turns = [call(str(g)) for g in guesses] + ["I won." + END]
    env, obs, rewards, infos, trl = assert_same_episode(path, tok, seed, turns)
    assert sum(rewards) == 1.0 and trl["reward"] == 1.0
    assert infos[len(guesses) - 1]["metrics"]["env/solved"] == 1.0
    assert "The episode is over. Total reward: 1." in tok.decode(obs[-1])
    assert infos[-1]["metrics"]["stop/completed"] == 1.0
    # The plain env, played with the same guesses, has the same return.
    plain = gym.make(ENV_ID, tokenizer=path, renderer="chat_template", **CLASSIC)
    plain.reset(seed=seed)
    end = tok.convert_tokens_to_ids(END)
    total = 0.0
    for g in guesses:
        _o, r, term, _t, _i = plain.step(np.asarray(tok(str(g), add_special_tokens=False)["input_ids"] + [end]))
        total += r
    assert term and total == sum(rewards)


def test_invalid_guesses_and_rewards_match_trl(qwen3):
    path, tok = qwen3
    turns = [call("banana"), call("0"), call("5"), "no more" + END]
    _env, obs, rewards, _infos, _trl = assert_same_episode(path, tok, 2, turns)
    assert rewards[:2] == [-0.1, -0.1]
    assert "Invalid. Reply with one whole number from 1 to 20." in tok.decode(obs[2])


def test_a_reply_without_tool_call_ends_the_episode_like_trl(qwen3):
    path, tok = qwen3
    _env, obs, rewards, infos, trl = assert_same_episode(path, tok, 5, ["7" + END])
    assert rewards == [0.0] and trl["turns"] == 1 and trl["calls"] == 0
    assert infos[0]["metrics"]["no_tool_call"] == 1.0 and infos[0]["metrics"]["stop/completed"] == 1.0


@pytest.mark.parametrize("bad", [
    '<tool_call>\n{"name": "act", "argu\n</tool_call>' + END,          # invalid JSON
    '<tool_call>\n{"arguments": {"message": "7"}}\n</tool_call>' + END,  # no name
    '<tool_call>\n{"name": "act", "arguments": {"message": "7"}}' + END,  # unclosed block
    call("3")[:-len(END)] + '\n<tool_call>\n{bad}\n</tool_call>' + END,  # one good, one bad
])
def test_malformed_tool_calls_end_the_episode_like_trl(qwen3, bad):
    path, tok = qwen3
    _env, _obs, rewards, infos, trl = assert_same_episode(path, tok, 7, [call("4"), bad])
    assert len(rewards) == 2 and trl["calls"] == 1
    assert infos[-1]["metrics"]["malformed_tool_call"] == 1.0
    assert infos[-1]["metrics"]["stop/parse_error"] == 1.0


def test_wrong_tool_name_gets_trls_error_reply(qwen3):
    path, tok = qwen3
    wrong = '<tool_call>\n{"name": "guess", "arguments": {"message": "7"}}\n</tool_call>' + END
    _env, obs, rewards, infos, trl = assert_same_episode(path, tok, 9, [wrong, call("8"), "ok" + END])
    assert trl["failures"] == 1 and infos[0]["metrics"]["tool_errors"] == 1.0
    assert "{'error': 'Tool guess not found.'}" in tok.decode(obs[1])


@pytest.mark.parametrize("bad_call", [
    '<tool_call>\n{"name": "act", "arguments": {}}\n</tool_call>' + END,          # missing argument
    '<tool_call>\n{"name": "act"}\n</tool_call>' + END,                            # no arguments
    '<tool_call>\n{"name": "act", "arguments": "7"}\n</tool_call>' + END,          # not an object
    '<tool_call>\n{"name": "act", "arguments": {"message": "7", "x": 1}}\n</tool_call>' + END,
    '<tool_call>\n{"name": "act", "arguments": {"message": 7}}\n</tool_call>' + END,  # not a str
])
def test_unrunnable_calls_are_error_replies_like_trl(qwen3, bad_call):
    """The reply's wording names `act()` (Python names the method's qualified name), so the
    tokens differ there; turns, calls, failures and reward are TRL's."""
    path, tok = qwen3
    _env, obs, rewards, infos, _trl = assert_same_episode(
        path, tok, 4, [bad_call, call("10"), "stop" + END], exact_tokens=False)
    assert rewards[0] == 0.0 and infos[0]["metrics"]["tool_errors"] == 1.0
    assert "{'error': " in tok.decode(obs[1])


def test_two_calls_in_one_turn_and_the_iteration_cap_match_trl(qwen3):
    path, tok = qwen3
    assert_same_episode(path, tok, 1, [call("3", "17"), call("9"), "done" + END])
    _env, _obs, _r, infos, trl = assert_same_episode(
        path, tok, 1, [call("2"), call("3"), call("4"), call("5")], max_tool_calling_iterations=2)
    assert trl["turns"] == 3 and infos[-1]["metrics"]["stop/max_tool_calls"] == 1.0


@pytest.mark.parametrize("budget,reason", [
    (80, "parse_error"),  # the third turn is cut to the budget mid-call (TRL cuts it, then parses)
    (60, "max_tokens"),   # the second tool reply would overrun the budget (TRL rolls it back)
])
def test_completion_budget_matches_trl(qwen3, budget, reason):
    path, tok = qwen3
    _env, _obs, _r, infos, trl = assert_same_episode(
        path, tok, 6, [call("2"), call("3"), call("4"), call("5")], exact_tokens=False,
        max_completion_length=budget)
    assert infos[-1]["metrics"][f"stop/{reason}"] == 1.0
    assert len(trl["completion"]) <= budget


def test_after_done_end_stops_with_the_wrapped_env(qwen3):
    path, tok = qwen3
    env = gym.make(ACT_ID, tokenizer=path, renderer="chat_template", max_turns=2, after_done="end",
                   **CLASSIC)
    env.reset(seed=0)
    secret = env.unwrapped.current_env.env.secret
    wrong = str(1 if secret != 1 else 2)
    _o, r1, t1, _tr, _i = env.step(np.asarray(tok(call(wrong), add_special_tokens=False)["input_ids"]))
    _o, r2, t2, _tr, info = env.step(np.asarray(tok(call(wrong), add_special_tokens=False)["input_ids"]))
    assert not t1 and t2 and r1 + r2 == 0.0
    assert info["metrics"]["env_done"] == 1.0 and info["metrics"]["stop/completed"] == 1.0


def test_same_seed_same_episode(qwen3):
    path, tok = qwen3
    turns = [call("10"), call("5"), call("15"), "bye" + END]
    first = our_episode(path, 21, turns, tok)[1:4]
    again = our_episode(path, 21, turns, tok)[1:4]
    assert first == again
    secrets = {gym.make(ACT_ID).unwrapped.source.make_env(np.random.default_rng(s)).env.secret
               for s in range(8)}
    assert len(secrets) > 1  # the seed, not a constant, picks the task


def test_trainable_through_the_group_builder(qwen3):
    """`GymEnvGroupBuilder` / `GymRLDataset` (the public grouping wrapper) make the wrapped episodes."""
    import asyncio

    from llm_gym import GymRLDataset

    path, tok = qwen3
    dataset = GymRLDataset(ACT_ID, batch_size=1, group_size=2, seed=0, tokenizer=path,
                           renderer="chat_template")
    builder = dataset.get_batch(0)[0]

    async def play():
        envs = await builder.make_envs()
        obs = [await e.initial_observation() for e in envs]
        steps = [await e.step(tok(call("10"), add_special_tokens=False)["input_ids"]) for e in envs]
        await builder.cleanup()
        return obs, steps

    obs, steps = asyncio.run(play())
    assert obs[0][0].to_ints() == obs[1][0].to_ints()  # one task per group
    assert all(not s.episode_done and s.metrics["tool_calls"] == 1 for s in steps)
    assert steps[0].next_observation.to_ints() == steps[1].next_observation.to_ints()


def test_wraps_a_seed_api_env_directly(qwen3):
    """`ToolActionsEnv` over a seed-API episode made by hand (no registration)."""
    import asyncio

    from llm_gym import get_renderer, load_tokenizer

    path, tok = qwen3
    renderer = get_renderer("chat_template", load_tokenizer(path))
    source = gym.make(ENV_ID, tokenizer=path, renderer="chat_template").unwrapped.source
    episode = ToolActionsEnv(source.make_env(np.random.default_rng(0)), renderer)

    async def play():
        ob, stop = await episode.initial_observation()
        step = await episode.step(tok(call("10"), add_special_tokens=False)["input_ids"])
        return ob, stop, step

    ob, stop, step = asyncio.run(play())
    assert tok.convert_tokens_to_ids(END) in stop and "<tools>" in tok.decode(ob.to_ints())
    assert step.next_observation.to_ints()[:ob.length] == ob.to_ints()
