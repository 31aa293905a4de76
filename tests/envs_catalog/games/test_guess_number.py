"""llm/GuessNumber-v0: binary search wins, rewards, prefix property, splits, determinism, the answer
contract (what a guess is under the one answer policy) and the generated attack audit."""

from __future__ import annotations

import asyncio
import math
import re

import numpy as np
import pytest

from envs_catalog.games.guess_number import GuessNumberSource, held_out_tasks
from llm_gym import TokensWithLogprobs, get_renderer, load_tokenizer
from llm_gym.completers import TokenCompleter
from llm_gym.renderers.continuation import Continuation
from llm_gym.rl import do_single_rollout, trajectory_to_data

TOK = load_tokenizer()
IM_END = TOK.convert_tokens_to_ids("<|im_end|>")
RENDERERS = {"chatml": get_renderer("chatml", TOK), "role_colon": get_renderer("role_colon", TOK)}


def encode_reply(renderer_name: str, text: str) -> list[int]:
    if renderer_name == "chatml":
        return TOK.encode(text) + [IM_END]
    return TOK.encode(" " + text + "\n\nUser:")


class BinarySearch(TokenCompleter):
    """Reads the range from the intro and the last feedback from the observation text, and
    bisects."""

    def __init__(self, renderer_name: str, max_number: int):
        self.renderer_name, self.max_number, self.last = renderer_name, max_number, None
        self.lo = self.hi = 0

    async def __call__(self, model_input, stop, *, max_tokens=None):
        text = TOK.decode(model_input.to_ints())
        tail = text[-40:]
        if self.last is None:
            found = re.search(r"from (\d+) to (\d+)\.", text)
            assert found, text
            self.lo, self.hi = int(found.group(1)), int(found.group(2))
            assert self.hi - self.lo + 1 == self.max_number  # the range holds max_number numbers
        else:
            if "Higher" in tail:
                self.lo = self.last + 1
            elif "Lower" in tail:
                self.hi = self.last - 1
        self.last = (self.lo + self.hi) // 2
        tokens = encode_reply(self.renderer_name, str(self.last))
        return TokensWithLogprobs(tokens, [-0.5] * len(tokens))


@pytest.mark.parametrize("renderer_name", ["chatml", "role_colon"])
@pytest.mark.parametrize("split", ["train", "test"])
def test_binary_search_always_wins_with_prefix_property(renderer_name, split):
    src = GuessNumberSource(renderer=RENDERERS[renderer_name], split=split, max_number=50,
                            max_turns=6)
    assert math.ceil(math.log2(51)) <= 6
    for seed in range(40):
        env = src.make_env(np.random.default_rng(seed))
        traj = asyncio.run(do_single_rollout(BinarySearch(renderer_name, 50), env))
        assert traj.stop_reason is None
        assert sum(t.reward for t in traj.transitions) == 1.0
        assert traj.transitions[-1].metrics["solved"] == 1.0
        for before, after in zip(traj.transitions, traj.transitions[1:]):
            expected_prefix = before.ob.to_ints() + before.ac.tokens
            assert after.ob.to_ints()[: len(expected_prefix)] == expected_prefix
        assert len(trajectory_to_data(traj, 1.0)) == 1  # one datum per game


def test_chatml_continuation_equals_a_full_rerender():
    renderer = RENDERERS["chatml"]
    cont = Continuation(renderer)
    convo = [{"role": "user", "content": "Guess."}]
    ob = cont.first(convo)
    for guess, feedback in [("10", "Higher."), ("15", "Lower.")]:
        convo += [{"role": "assistant", "content": guess}, {"role": "user", "content": feedback}]
        step = cont.next(ob, encode_reply("chatml", guess), convo)
        ob = step.observation
        assert step.mode == "extended" and step.metrics["continuation/extended"] == 1.0
        assert ob == renderer.build_generation_prompt(convo)


def test_role_colon_continuation_equals_a_full_rerender():
    renderer = RENDERERS["role_colon"]
    cont = Continuation(renderer)
    convo = [{"role": "user", "content": "Guess."}]
    ob = cont.first(convo)
    convo += [{"role": "assistant", "content": "10"}, {"role": "user", "content": "Higher."}]
    step = cont.next(ob, TOK.encode(" 10\n\nUser:"), convo)
    ob = step.observation
    assert step.mode == "extended"
    assert ob == renderer.build_generation_prompt(convo)
    # an action without the stop text still extends the observation and closes the turn (the
    # byte tokenizer's bytes are the canonical tokens, so this is the template's rendering too)
    convo += [{"role": "assistant", "content": "12"}, {"role": "user", "content": "Lower."}]
    step2 = cont.next(ob, TOK.encode(" 12"), convo)
    assert step2.mode == "extended" and step2.observation == renderer.build_generation_prompt(convo)
    assert step2.observation.to_ints()[: ob.length] == ob.to_ints()
    assert TOK.decode(step2.observation.to_ints()).endswith("Assistant: 12\n\nUser: Lower.\n\nAssistant:")


def test_a_custom_renderer_gets_the_generic_continuation():
    from llm_gym.renderers import ChatMLRenderer

    class Custom(ChatMLRenderer):  # overrides rendering, so no chatml fast path
        def build_generation_prompt(self, messages, role="assistant", prefill=None):
            return super().build_generation_prompt(messages, role, prefill)

    src = GuessNumberSource(renderer=Custom(TOK), max_number=50, max_turns=6)
    assert not isinstance(src.continuation._turns, type(Continuation(RENDERERS["chatml"])._turns))
    env = src.make_env(np.random.default_rng(0))
    traj = asyncio.run(do_single_rollout(BinarySearch("chatml", 50), env))
    assert traj.transitions[-1].metrics["solved"] == 1.0
    assert all(t.metrics["continuation/extended"] == 1.0 for t in traj.transitions[:-1])
    assert len(trajectory_to_data(traj, 1.0)) == 1


def play(src, seed, replies):
    """Play `replies` (token lists); return the list of StepResults and observations."""
    env = src.make_env(np.random.default_rng(seed))

    async def go():
        ob, _ = await env.initial_observation()
        obs, results = [ob], []
        for action in replies:
            result = await env.step(action)
            results.append(result)
            if result.episode_done:
                break
            assert result.next_observation.to_ints()[: ob.length + len(action)] == ob.to_ints() + action
            ob = result.next_observation
            obs.append(ob)
        return env, obs, results

    return asyncio.run(go())


def lowest_wrong(env) -> int:
    """The range's lowest number that is not the secret: a valid wrong guess ("Higher.")."""
    return env.range_start if env.secret != env.range_start else env.range_start + 1


def test_wrong_guesses_until_out_of_turns_score_zero():
    src = GuessNumberSource(renderer=RENDERERS["chatml"], max_number=20, max_turns=3)
    env = src.make_env(np.random.default_rng(0))
    wrong = lowest_wrong(env)
    env, obs, results = play(src, 0, [encode_reply("chatml", str(wrong))] * 5)
    assert len(results) == 3 and results[-1].episode_done
    assert [r.reward for r in results] == [0.0, 0.0, 0.0]
    assert results[-1].metrics["solved"] == 0.0 and results[-1].metrics["turns"] == 3
    assert TOK.decode(obs[1].to_ints()).endswith("Higher.<|im_end|>\n<|im_start|>assistant\n")


@pytest.mark.parametrize(
    "bad_action",
    [TOK.encode("5 or 6") + [IM_END], TOK.encode("") + [IM_END], TOK.encode("99") + [IM_END],
     TOK.encode("seven or eight") + [IM_END], TOK.encode("10"), [0xFF, 0xFE, IM_END],
     TOK.encode("Guess: 4\nGuess: 5") + [IM_END], TOK.encode("Answer: 4 (or 5)") + [IM_END]],
)
def test_invalid_turns_are_penalised_and_the_game_continues(bad_action):
    src = GuessNumberSource(renderer=RENDERERS["chatml"], max_number=20, max_turns=4,
                            range_starts=1)  # the classic 1..20, where 99 is out of range
    env = src.make_env(np.random.default_rng(1))
    _, obs, results = play(src, 1, [bad_action, encode_reply("chatml", str(env.secret))])
    assert results[0].reward == pytest.approx(-0.1) and results[0].metrics["invalid"] == 1.0
    assert not results[0].episode_done
    assert "Invalid. Reply with one whole number from 1 to 20." in TOK.decode(obs[1].to_ints())
    assert results[1].reward == 1.0 and results[1].metrics["invalid_turns"] == 1
    assert sum(r.reward for r in results) == pytest.approx(0.9)


def test_out_of_vocab_ids_end_the_game_with_the_penalty():
    src = GuessNumberSource(renderer=RENDERERS["chatml"])
    _, _, results = play(src, 0, [[10**9, 5, IM_END]])
    assert results[0].episode_done and results[0].reward == pytest.approx(-0.1)
    lo, hi = src.reward_range
    assert (lo, hi) == (pytest.approx(-0.8), 1.0) and lo <= results[0].reward <= hi


def test_determinism_and_variety():
    src = GuessNumberSource(renderer=RENDERERS["chatml"], max_number=100)
    secret = lambda seed: src.make_env(np.random.default_rng(seed)).secret  # noqa: E731
    assert secret(5) == secret(5)
    assert len({secret(s) for s in range(200)}) >= 50
    a, obs_a, res_a = play(src, 9, [encode_reply("chatml", "50")] * 2)
    b, obs_b, res_b = play(src, 9, [encode_reply("chatml", "50")] * 2)
    assert obs_a == obs_b and [r.reward for r in res_a] == [r.reward for r in res_b]


def _task_keys(split, seeds, **knobs):
    src = GuessNumberSource(renderer=RENDERERS["chatml"], split=split, **knobs)
    return [tuple(src.task_key(src.make_env(np.random.default_rng(s)))) for s in seeds]


@pytest.mark.parametrize("max_number, range_starts",
                         [(4, 1), (5, 1), (6, 1), (20, 1), (50, 1), (1000, 1), (4, 3), (20, 100)])
def test_splits_are_disjoint_and_cover_all_tasks(max_number, range_starts):
    knobs = {"max_number": max_number, "range_starts": range_starts}
    test = held_out_tasks(max_number, range_starts)
    every = {(start, start + k) for start in range(1, range_starts + 1) for k in range(max_number)}
    assert test and set(test) < every  # never empty, and some task is left to train on
    assert len(test) == max(1, len(every) // 10)
    assert set(_task_keys("test", range(50), **knobs)) <= set(test)
    train = _task_keys("train", range(200), **knobs)
    assert not set(train) & set(test)
    for start, secret in train:
        assert 1 <= start <= range_starts and start <= secret < start + max_number


def test_the_held_out_split_has_at_least_100_distinct_tasks_at_the_defaults():
    """Issue 23: a held-out evaluation at the default knobs covers >= 100 distinct episodes."""
    test = held_out_tasks(20, 100)
    assert len(test) == 200 and len({start for start, _ in test}) > 50
    drawn = set(_task_keys("test", range(1500)))
    assert len(drawn) >= 100 and drawn <= set(test)
    assert not drawn & set(_task_keys("train", range(1500)))  # disjoint by task key


def test_range_starts_1_is_the_classic_game():
    src = GuessNumberSource(renderer=RENDERERS["chatml"], range_starts=1)
    for seed in range(30):
        env = src.make_env(np.random.default_rng(seed))
        assert (env.range_start, env.range_end) == (1, 20) and 1 <= env.secret <= 20
    ob, _ = asyncio.run(src.make_env(np.random.default_rng(0)).initial_observation())
    assert "Guess my number from 1 to 20. " in TOK.decode(ob.to_ints())
    assert set(_task_keys("train", range(300), range_starts=1)) | set(held_out_tasks(20, 1)) == {
        (1, s) for s in range(1, 21)}


def test_guesses_outside_the_drawn_range_are_invalid():
    src = GuessNumberSource(renderer=RENDERERS["chatml"], max_turns=4)
    seed = next(s for s in range(100) if src.make_env(np.random.default_rng(s)).range_start > 1)
    env = src.make_env(np.random.default_rng(seed))
    below, above = env.range_start - 1, env.range_end + 1
    _, obs, results = play(src, seed, [encode_reply("chatml", str(below)),
                                       encode_reply("chatml", str(above)),
                                       encode_reply("chatml", str(env.secret))])
    assert [r.metrics["invalid"] for r in results] == [1.0, 1.0, 0.0]
    assert [r.reward for r in results] == [pytest.approx(-0.1), pytest.approx(-0.1), 1.0]
    assert (f"Invalid. Reply with one whole number from {env.range_start} to {env.range_end}."
            in TOK.decode(obs[1].to_ints()))


@pytest.mark.parametrize(
    "knobs,pattern",
    [({"max_number": 3}, r"max_number must be in \[4, 10000\], got 3"),
     ({"range_starts": 0}, r"range_starts must be in \[1, 1000\], got 0"),
     ({"max_number": 5000, "range_starts": 201},
      r"max_number \* range_starts must be at most 1,000,000.*5000 \* 201; lower range_starts"),
     ({"max_turns": 0}, r"max_turns must be in \[1, 100\], got 0"),
     ({"invalid_penalty": -1}, r"invalid_penalty must be in"),
     ({"max_numbr": 10}, r"unexpected keyword argument 'max_numbr'.*Did you mean: 'max_numbr' -> 'max_number'")],
)
def test_bad_knobs_are_named(knobs, pattern):
    with pytest.raises((ValueError, TypeError), match=pattern):
        GuessNumberSource(renderer=RENDERERS["chatml"], **knobs)


def test_prompt_states_the_rules():
    src = GuessNumberSource(renderer=RENDERERS["chatml"], max_number=50, max_turns=7)
    env = src.make_env(np.random.default_rng(0))
    ob, _ = asyncio.run(env.initial_observation())
    found = re.search(r"from (\d+) to (\d+)\..*You have 7 guesses", TOK.decode(ob.to_ints()))
    assert found and (int(found.group(1)), int(found.group(2))) == (env.range_start, env.range_end)
    assert env.range_end - env.range_start + 1 == 50


def test_a_huge_action_ends_the_game_instead_of_growing_the_observation():
    src = GuessNumberSource(renderer=RENDERERS["chatml"])  # max_context_tokens=8192 by default
    huge = TOK.encode("7 " * 50_000) + [IM_END]  # 100k tokens
    _, _, results = play(src, 0, [huge])
    result = results[0]
    assert result.episode_done and result.reward == pytest.approx(-0.1)  # too long: invalid
    assert result.metrics["context_exceeded"] == 1.0 and result.logs["stop_reason"] == "context_exceeded"
    assert result.next_observation.length == 0
    lo, hi = src.reward_range
    assert lo <= result.reward <= hi


def test_context_cap_ends_a_long_game_with_the_turns_reward():
    src = GuessNumberSource(renderer=RENDERERS["chatml"], max_number=20, max_turns=100,
                            max_context_tokens=400)
    env = src.make_env(np.random.default_rng(0))
    wrong = lowest_wrong(env)
    env, obs, results = play(src, 0, [encode_reply("chatml", str(wrong))] * 100)
    assert results[-1].episode_done and len(results) < 100
    assert results[-1].reward == 0.0 and results[-1].metrics["context_exceeded"] == 1.0
    assert results[-1].metrics["solved"] == 0.0 and results[-1].logs["stop_reason"] == "context_exceeded"
    assert max(ob.length for ob in obs) <= 400


def test_stop_reasons_of_solved_and_out_of_turns_games():
    src = GuessNumberSource(renderer=RENDERERS["chatml"], max_number=20, max_turns=1)
    env = src.make_env(np.random.default_rng(2))
    _, _, solved = play(src, 2, [encode_reply("chatml", str(env.secret))])
    wrong = lowest_wrong(env)
    _, _, lost = play(src, 2, [encode_reply("chatml", str(wrong))])
    assert solved[0].logs["stop_reason"] == "solved" and solved[0].metrics["context_exceeded"] == 0.0
    assert lost[0].logs["stop_reason"] == "out_of_turns" and lost[0].metrics["solved"] == 0.0


@pytest.mark.parametrize("reply", ["seven", "My guess is seven.", "Answer: 7", "\\boxed{7}"])
def test_guesses_in_words_and_marked_forms_are_read(reply):
    src = GuessNumberSource(renderer=RENDERERS["chatml"], max_number=20, range_starts=1)
    seed = next(s for s in range(200) if src.make_env(np.random.default_rng(s)).secret == 7)
    _, _, results = play(src, seed, [encode_reply("chatml", reply)])
    assert results[0].reward == 1.0 and results[0].metrics["solved"] == 1.0


def test_max_context_tokens_knob_is_checked():
    with pytest.raises(ValueError, match=r"max_context_tokens must be in \[256, 1000000\], got 10"):
        GuessNumberSource(renderer=RENDERERS["chatml"], max_context_tokens=10)


# --- scripted cases (gold and adversarial), the transcript bisection ------------------------------
from envs_catalog.games.guess_number import GuessNumberEnv, bisect_from_transcript  # noqa: E402
from llm_gym.grading import MAX_RESPONSE_CHARS  # noqa: E402
from llm_gym.scripted import ScriptedCase, case_source, reply_tokens, run_scripted_case  # noqa: E402

GN_CASES = {c.name: c for c in GuessNumberSource(renderer=RENDERERS["chatml"]).scripted_cases()}
# the exact return of each adversarial case at the defaults (8 turns, penalty 0.1)
GN_EXPECTED = {name: -0.8 for name, c in GN_CASES.items() if c.kind == "adversarial"}
GN_EXPECTED.update({"same wrong number every turn": 0.0, "feedback echoed": -0.7})


def test_scripted_cases_are_declared_with_no_false_credit():
    cases = list(GN_CASES.values())
    assert all(isinstance(c, ScriptedCase) for c in cases)
    assert {c.kind for c in cases} == {"gold", "adversarial"}
    assert len([c for c in cases if c.kind == "adversarial"]) >= 10
    for c in cases:
        if c.kind == "gold":
            assert (c.low, c.high) == (1.0, 1.0)
        else:
            assert c.high <= 0.0 and c.low >= -0.8 - 1e-9  # at most what an unsolved game earns


@pytest.mark.parametrize("renderer_name", ["chatml", "role_colon"])
@pytest.mark.parametrize("split", ["train", "test"])
def test_scripted_cases_score_as_declared(renderer_name, split):
    for case in GN_CASES.values():
        src = case_source(GuessNumberSource, case, RENDERERS[renderer_name], split,
                          max_number=20, max_turns=8)
        for seed in range(3):
            outcome = run_scripted_case(src, case, seed)
            assert outcome.ok, (case.name, seed, outcome.episode_return, outcome.replies)
            if case.kind == "gold":
                assert outcome.episode_return == 1.0
            else:
                assert outcome.episode_return == pytest.approx(GN_EXPECTED[case.name]), case.name


def _play_script(renderer_name, secret, max_number, max_turns, reply, range_start=1):
    """Play `reply(env, observation_text)` on a game with a chosen task; (return, turns)."""
    renderer = RENDERERS[renderer_name]
    env = GuessNumberEnv(renderer, secret, max_number=max_number, max_turns=max_turns,
                         invalid_penalty=0.1, range_start=range_start)

    async def go():
        ob, stop = await env.initial_observation()
        total, turns = 0.0, 0
        while True:
            result = await env.step(reply_tokens(renderer, reply(env, TOK.decode(ob.to_ints())), stop))
            total, turns = total + result.reward, turns + 1
            if result.episode_done:
                return total, turns, result
            ob = result.next_observation

    return asyncio.run(go())


@pytest.mark.parametrize("renderer_name", ["chatml", "role_colon"])
@pytest.mark.parametrize("max_number", [4, 20, 100])
def test_transcript_bisection_wins_every_secret_within_the_log_bound(renderer_name, max_number):
    gold = GuessNumberSource(renderer=RENDERERS[renderer_name], max_number=max_number,
                             max_turns=1).scripted_cases()[0]
    needed = math.ceil(math.log2(max_number + 1))
    assert gold.knobs == {"max_turns": needed}  # the case raises max_turns to what it needs
    secrets = range(1, max_number + 1) if max_number <= 20 else range(1, max_number + 1, 7)
    for secret in secrets:
        total, turns, last = _play_script(renderer_name, secret, max_number, needed, gold.reply)
        assert total == 1.0 and turns <= needed and last.metrics["solved"] == 1.0, secret


def test_the_gold_case_wins_every_held_out_task_within_its_turn_budget():
    """All 200 held-out tasks at the defaults (20 numbers, 100 range starts): binary search from
    the transcript wins each within ceil(log2(21)) = 5 guesses, fewer than the 8 allowed."""
    gold = GN_CASES["binary search from the transcript"]
    for start, secret in held_out_tasks(20, 100):
        total, turns, last = _play_script("chatml", secret, 20, 8, gold.reply, range_start=start)
        assert (total, last.metrics["solved"]) == (1.0, 1.0) and turns <= 5, (start, secret)


def test_bisect_from_transcript_reads_guesses_and_feedback_in_order():
    intro = "Guess my number from 1 to 20. After each guess I say Higher or Lower. You have 8 " \
            "guesses. Reply with just the number."
    assert bisect_from_transcript(intro) == 10  # "Lower." in the intro is not feedback
    chatml = intro + "<|im_end|>\n<|im_start|>assistant\n10<|im_end|>\n<|im_start|>user\nHigher."
    assert bisect_from_transcript(chatml) == 15
    role_colon = intro + "\n\nAssistant: 10\n\nUser: Higher.\n\nAssistant: 15\n\nUser: Lower.\n\n"
    assert bisect_from_transcript(role_colon) == 12
    # an invalid turn in between changes nothing
    mixed = intro + "\n\nAssistant: pass\n\nUser: Invalid. Reply with one whole number from 1 to " \
                    "20.\n\nAssistant: 10\n\nUser: Lower.\n\n"
    assert bisect_from_transcript(mixed) == 5
    shifted = intro.replace("from 1 to 20", "from 37 to 56") + "\n\nAssistant: 46\n\nUser: Higher.\n\n"
    assert bisect_from_transcript(shifted.split("\n\nAssistant")[0]) == 46
    assert bisect_from_transcript(shifted) == 51
    with pytest.raises(ValueError, match="intro"):
        bisect_from_transcript("no game here")


def test_the_secret_repeated_past_the_reply_cap_is_an_invalid_turn():
    src = GuessNumberSource(renderer=RENDERERS["chatml"], max_number=20)
    env = src.make_env(np.random.default_rng(0))
    text = " ".join([str(env.secret)] * (MAX_RESPONSE_CHARS // 2))
    assert len(text) > MAX_RESPONSE_CHARS
    _, _, results = play(src, 0, [encode_reply("chatml", text)])
    assert results[0].reward == pytest.approx(-0.1) and results[0].metrics["invalid"] == 1.0
    assert results[0].logs["guess_status"] == "too_long"
    # the same number twice on the read line is not one number: no guess
    _, _, results = play(src, 0, [encode_reply("chatml", f"{env.secret} {env.secret}")])
    assert results[0].reward == pytest.approx(-0.1) and results[0].logs["guess_status"] == "malformed"
    # ... while the same guess declared twice is one guess
    _, _, results = play(src, 0, [encode_reply("chatml", f"Guess: {env.secret}\nAnswer: {env.secret}")])
    assert results[0].reward == 1.0


# --- the answer contract and the generated attacks ------------------------------------------------
from envs_catalog.games.guess_number import guess_contract  # noqa: E402
from llm_gym.checks.attacks import audit_source  # noqa: E402


@pytest.mark.parametrize("reply,value", [
    ("7", 7), ("seven", 7), ("My guess is 7.", 7), ("Guess: 7", 7), ("Answer: seven", 7), ("\\boxed{7}", 7),
    ("I guess 7", 7), ("I'll say 7", 7), ("Let's go with 7", 7), ("**7**", 7), ("7.0", 7),
    ("It is between 5 and 9.\n\nGuess: 7\n\nIf that is wrong, 8 might work.", 7),  # prose not read
    ("5 was too low.\n7", 7), ("1\n5", 5),  # no declaration: the last line stating a number
    ("1<|pad|>5", 5),  # a special token is a line break: never 15
])
def test_the_contract_reads_one_guess(reply, value):
    reading = guess_contract().read(reply)
    assert (reading.status, reading.value) == ("ok", value)


@pytest.mark.parametrize("reply,status", [
    ("5 or 6", "malformed"), ("7 7", "malformed"), ("1, 2, 3", "malformed"), ("at least 7", "malformed"),
    ("It is not 7.", "malformed"), ("Guess: 6\nGuess: 7", "conflicting"),
    ("Answer: 7\nMy backup guess is 8.", "conflicting"), ("Higher.", "no_answer"), ("", "empty"),
    ("7\ufffd", "invalid_text"), ("\u0667", "unsupported_digits"),
])
def test_the_contract_refuses_everything_else(reply, status):
    assert guess_contract().read(reply).status == status


def test_the_env_declares_its_contract_and_gold_and_the_prompt_comes_from_it():
    src = GuessNumberSource(renderer=RENDERERS["chatml"])
    env = src.make_env(np.random.default_rng(3))
    assert env.answer_contract.labels == ("answer", "guess") and env.gold_answer == env.secret
    assert env.answer_contract.instruction(brief=True) == "Reply with just the number."
    ob, _ = asyncio.run(env.initial_observation())
    assert TOK.decode(ob.to_ints()).split("<|im_end|>")[0].endswith(
        f"You have 8 guesses. {env.answer_contract.instruction(brief=True)}")
    assert "POLICY" in GuessNumberSource.card.description and GuessNumberSource.card.answer_contract


def test_a_non_integer_guess_is_invalid():
    env = GuessNumberEnv(RENDERERS["chatml"], 7, max_number=20, max_turns=4, invalid_penalty=0.1)

    async def go():
        await env.initial_observation()
        return await env.step(encode_reply("chatml", "7.5"))

    result = asyncio.run(go())
    assert result.reward == pytest.approx(-0.1) and result.logs["guess_status"] == "not_an_integer"


def test_the_generated_attacks_get_no_false_credit_or_denial():
    renderer = RENDERERS["chatml"]
    report = audit_source(lambda knobs: GuessNumberSource(renderer=renderer, **knobs), [0, 1], per_seed=100)
    assert report.runs == 400 and not report.skipped, report.skipped
    assert (report.false_credits, report.false_denials) == (0, 0), report.findings[:5]
