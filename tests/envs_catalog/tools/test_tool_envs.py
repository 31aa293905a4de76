"""The tool env (`llm_gym.rl.tool_env`) and the `tools` catalog family.

Gold: a scripted policy that calls the tool correctly and then answers scores the max a tool-using
policy can (1 - tool_call_cost per call), and answering right without a tool scores 1. Adversarial:
hedged and wrong answers, tool spam past max_tool_calls, malformed JSON, unknown tools, a raising
tool, huge tool output, require_tool, calculator abuse. The answer contract (`FinalNumberAnswer`:
its unit or nouns from the question, its instruction in the system prompt, only the final turn
read) and the generated attack suite through Calculator and PythonTool. Plus the env mechanics
(concurrency, executor, ids, parse-error policy, max_turns, the runner's seams), check_env and
determinism.
"""

from __future__ import annotations

import gc
import asyncio
import json
import re
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import llm_gym  # noqa: F401  (registers the catalog)
from envs_catalog.tools.calculator import CalculatorSource, calculate, calculator
from envs_catalog.tools.python_tool import PythonToolSource, format_run
from envs_catalog.tools.sandboxed import CLOSED_REPLY
from llm_gym import get_renderer, load_tokenizer
from llm_gym.completers import TokenCompleter, TokensWithLogprobs
from llm_gym.renderers import ToolCall
from llm_gym.renderers.tools import format_assistant_text
from llm_gym.rl import do_single_rollout
from llm_gym.rl.rollout_limits import ParseErrorPolicy
from llm_gym.rl.tool_env import AgentToolMessageEnv, build_agent_tool_env
from llm_gym.tools import tool
from tests._adapter_helpers import ensure_catalog

ensure_catalog()
TOK = load_tokenizer()
RENDERER = get_renderer("chatml", TOK)
END = RENDERER.im_end


def call_text(name: str, content: str = "", n: int = 1, **arguments) -> str:
    calls = [ToolCall(function=ToolCall.FunctionBody(name=name, arguments=json.dumps(arguments)))] * n
    return format_assistant_text({"role": "assistant", "content": content, "tool_calls": calls})


def act(text: str) -> list[int]:
    return TOK.encode(text) + [END]


class Scripted(TokenCompleter):
    """Replies from `script(observation_text) -> reply_text`."""

    def __init__(self, script):
        self.script = script

    async def __call__(self, model_input, stop, *, max_tokens=None):
        tokens = act(self.script(TOK.decode(model_input.to_ints())))
        return TokensWithLogprobs(tokens, [-0.5] * len(tokens))


def question_of(text: str) -> str:
    return text.rsplit("<|im_start|>user\n", 1)[1].split("<|im_end|>", 1)[0]


def last_tool_output(text: str) -> str | None:
    found = re.findall(r"<\|im_start\|>tool\n(.*?)<\|im_end\|>", text, re.DOTALL)
    return found[-1] if found else None


CALC_EXPR = [  # question pattern -> calculator expression
    (r"holds (\d+) crates with (\d+) bottles.*?(\d+) bottles are shipped", "{0} * {1} - {2}"),
    (r"packs (\d+) eggs into cartons that hold (\d+)", "{0} // {1}"),
    (r"at (\d+) km per hour for (\d+) hours, then at (\d+) km per hour for (\d+)", "{0}*{1} + {2}*{3}"),
    (r"What is (\d+) × (\d+) \+ (\d+) × (\d+)\?", "{0} * {1} + {2} * {3}"),
    (r"What is \((\d+) \+ (\d+)\) × (\d+) − (\d+)\?", "({0} + {1}) * {2} - {3}"),
]


def calculator_gold(text: str) -> str:
    out = last_tool_output(text)
    if out is not None:
        return out
    q = question_of(text)
    for pattern, expr in CALC_EXPR:
        m = re.search(pattern, q)
        if m:
            return call_text("calculator", expression=expr.format(*m.groups()))
    raise AssertionError(f"no template matched {q!r}")


PY_CODE = [
    (r"sum of all prime numbers less than (\d+)",
     "n={0}\ns=bytearray([1])*n\ns[:2]=b'\\x00\\x00'\nfor i in range(2,int(n**.5)+1):\n"
     "    if s[i]: s[i*i::i]=bytearray(len(range(i*i,n,i)))\nprint(sum(i for i in range(n) if s[i]))"),
    (r"from 1 to (\d+) are divisible by (\d+) or by (\d+), but not by (\d+)",
     "print(sum(1 for i in range(1,{0}+1) if (i%{1}==0 or i%{2}==0) and i%{3}!=0))"),
    (r"remainder when (\d+)\^(\d+) is divided by (\d+)", "print(pow({0},{1},{2}))"),
    (r"What is F\((\d+)\) modulo (\d+)", "a,b=0,1\nfor _ in range({0}): a,b=b,(a+b)%{1}\nprint(a)"),
    (r"digits of (\d+)\^(\d+)", "print(sum(map(int,str({0}**{1}))))"),
]


def python_gold(text: str) -> str:
    out = last_tool_output(text)
    if out is not None:
        return out.strip()
    q = question_of(text)
    for pattern, code in PY_CODE:
        m = re.search(pattern, q)
        if m:
            return call_text("python", code=code.format(*m.groups()))
    raise AssertionError(f"no template matched {q!r}")


def run(source, seed, script):
    env = source.make_env(np.random.default_rng(seed))
    traj = asyncio.run(do_single_rollout(Scripted(script), env))
    return env, traj, sum(t.reward for t in traj.transitions)


# --- gold ----------------------------------------------------------------------------------------
def test_calculator_gold_scores_max():
    source = CalculatorSource(renderer=RENDERER)
    for seed in range(12):
        env, traj, total = run(source, seed, calculator_gold)
        assert total == pytest.approx(1.0 - 0.05), (seed, traj.transitions[-1].logs)
        last = traj.transitions[-1]
        assert last.metrics["correct"] == 1.0 and last.metrics["tool_calls"] == 1.0
        assert last.metrics["stop/completed"] == 1.0
        # answering right without the tool scores the card's max
        _, _, direct = run(source, seed, lambda text, a=env.answer: str(a))
        assert direct == pytest.approx(source.reward_range[1]) == 1.0


def test_python_tool_gold_scores_max():
    source = PythonToolSource(renderer=RENDERER, scale=1)
    kinds = set()
    for seed in range(6):
        env, traj, total = run(source, seed, python_gold)
        kinds.add(env.question.split()[2])
        assert total == pytest.approx(0.95), (seed, env.question, traj.transitions[-1].logs)
        assert traj.transitions[-1].metrics["used_tool"] == 1.0
    assert len(kinds) >= 2


# --- adversarial -----------------------------------------------------------------------------------
def test_hedged_wrong_and_conflicting_answers_score_zero():
    source = CalculatorSource(renderer=RENDERER)
    env = source.make_env(np.random.default_rng(3))
    a = env.answer
    for reply in (f"{a} or {a + 1}", f"Answer: {a + 1}", f"{a}, actually {a + 1}", "I don't know", ""):
        _, traj, total = run(source, 3, lambda text, r=reply: r)
        assert total == 0.0, reply
        assert traj.transitions[-1].metrics["correct"] == 0.0


def test_require_tool_gives_no_credit_without_a_successful_call():
    source = CalculatorSource(renderer=RENDERER, require_tool=True)
    env = source.make_env(np.random.default_rng(1))
    _, _, direct = run(source, 1, lambda text, a=env.answer: str(a))
    assert direct == 0.0

    def failed_call_then_answer(text, a=env.answer):
        return str(a) if last_tool_output(text) else call_text("calculator", expression="1 +")

    _, traj, total = run(source, 1, failed_call_then_answer)
    assert total == pytest.approx(-0.05) and traj.transitions[-1].metrics["used_tool"] == 0.0
    _, _, gold = run(source, 1, calculator_gold)
    assert gold == pytest.approx(0.95)


def test_tool_spam_beyond_max_tool_calls_is_cut():
    source = CalculatorSource(renderer=RENDERER, max_tool_calls=3, max_turns=10)
    _, traj, total = run(source, 0, lambda text: call_text("calculator", n=2, expression="1+1"))
    last = traj.transitions[-1]
    assert last.metrics["stop/max_tool_calls"] == 1.0 and last.metrics["tool_calls"] == 3.0
    assert "1 tool call(s) dropped" in last.logs["tool_calls_dropped"]
    assert total == pytest.approx(-0.15) == source.reward_range[0]
    assert len(traj.transitions) == 2


def test_max_turns_ends_a_tool_loop():
    source = CalculatorSource(renderer=RENDERER, max_turns=2, max_tool_calls=10)
    _, traj, total = run(source, 0, lambda text: call_text("calculator", expression="2*3"))
    assert len(traj.transitions) == 2 and traj.transitions[-1].metrics["stop/max_turns"] == 1.0
    assert total == pytest.approx(-0.1)


def test_malformed_json_and_broken_framing():
    source = CalculatorSource(renderer=RENDERER)
    _, traj, total = run(source, 0, lambda text: '<tool_call>\n{"name": "calculator", "arguments": {]}\n</tool_call>')
    assert total == -0.1 and traj.transitions[-1].metrics["stop/parse_error"] == 1.0
    assert "Invalid JSON" in traj.transitions[-1].logs["parse_errors"]
    # a response with no end of turn (truncated framing) is a structural failure
    env = source.make_env(np.random.default_rng(0))

    async def go():
        await env.initial_observation()
        return await env.step(TOK.encode("12"))

    step = asyncio.run(go())
    assert step.episode_done and step.reward == -0.1 and step.metrics["parse_error"] == 1.0


def test_unknown_tool_and_bad_arguments_become_tool_errors():
    source = CalculatorSource(renderer=RENDERER)
    replies = iter([call_text("search", query="x"), call_text("calculator", expr="1"), "7"])
    _, traj, _ = run(source, 0, lambda text: next(replies))
    texts = [TOK.decode(t.ob.to_ints()) for t in traj.transitions]
    assert "Error: Tool 'search' not found" in texts[1]
    assert "unknown argument(s) ['expr']" in texts[2]
    assert traj.transitions[-1].metrics["tool_errors"] == 2.0


@pytest.mark.parametrize("expression, expected", [
    ("(12 + 30) * 4 / 5", "168/5 (≈ 33.6)"), ("2 ** 10 - 1", "1023"), ("7 // 2 + 7 % 2", "4"),
    ("1.5 × 4", "6"), ("-3^2", "-9"), ("10 ÷ 4", "5/2 (≈ 2.5)"),
])
def test_calculator_values(expression, expected):
    assert calculator(expression) == expected


@pytest.mark.parametrize("expression", [
    "__import__('os').system('true')", "x + 1", "2 ** 1000", "9 ** 64 ** 2", "1 / 0", "3 % 0",
    "(" * 300 + "1" + ")" * 300, "[1, 2]", "lambda: 1", "1 if 1 else 2", "'a' * 3", "",
])
def test_calculator_refuses_everything_else(expression):
    with pytest.raises((ValueError, ZeroDivisionError, RecursionError)):
        calculate(expression)
    result = asyncio.run(calculator.run(__import__("llm_gym.tools", fromlist=["ToolInput"]).ToolInput(
        {"expression": expression})))
    assert result.messages[0]["content"].startswith("Error: ")


def test_python_tool_reports_failures_and_caps_output():
    source = PythonToolSource(renderer=RENDERER, scale=1, timeout_s=1.0)
    replies = iter([call_text("python", code="raise ValueError('nope')"),
                    call_text("python", code="print('x' * 100000)"),
                    call_text("python", code="import time; time.sleep(30)"), "1"])
    _, traj, total = run(source, 0, lambda text: next(replies))
    texts = [TOK.decode(t.ob.to_ints()) for t in traj.transitions]
    assert "Error: the program failed (exit status 1)" in texts[1] and "ValueError: nope" in texts[1]
    assert "[output truncated: 91809 more characters]" in texts[2]  # 100001 chars cut to 8192
    assert "Error: timed out after 1 s" in texts[3]
    assert traj.transitions[-1].metrics["tool_calls"] == 3.0 and total == pytest.approx(-0.15)


def test_format_run_without_output():
    class R:
        stdout, stderr, exit, timed_out, killed_by = "", "", 0, False, None

    assert "no output" in format_run(R(), 5)


# --- env mechanics ------------------------------------------------------------------------------
def test_async_tools_run_concurrently_and_sync_ones_in_the_executor():
    state = {"active": 0, "peak": 0}

    @tool
    async def slow(x: int) -> int:
        """Wait a little."""
        state["active"] += 1
        state["peak"] = max(state["peak"], state["active"])
        await asyncio.sleep(0.05)
        state["active"] -= 1
        return x

    seen = []

    @tool
    def blocking(x: int) -> int:
        """Block a little."""
        import threading
        seen.append(threading.current_thread().name)
        return x * 2

    from concurrent.futures import ThreadPoolExecutor

    async def episode(pool, i):
        env = build_agent_tool_env(RENDERER, [slow, blocking], [{"role": "user", "content": "go"}],
                                   lambda messages: 1.0, executor=pool)
        await env.initial_observation()
        step = await env.step(act(call_text("slow", n=2, x=i) + "\n" + call_text("blocking", x=i)))
        return env, step

    async def group():
        with ThreadPoolExecutor(2, thread_name_prefix="tools") as pool:
            return await asyncio.gather(*(episode(pool, i) for i in range(4)))

    results = asyncio.run(group())
    assert state["peak"] == 8  # every async call of the group in flight at once
    assert seen and all(name.startswith("tools") for name in seen)
    for i, (env, step) in enumerate(results):
        tool_msgs = [m for m in env.message_env.history if m["role"] == "tool"]
        assert [m["content"] for m in tool_msgs] == [str(i), str(i), str(2 * i)]
        assert [m["tool_call_id"] for m in tool_msgs] == ["call_1_0", "call_1_1", "call_1_2"]
        assistant = env.message_env.history[1]
        assert [c.id for c in assistant["tool_calls"]] == ["call_1_0", "call_1_1", "call_1_2"]
        assert not step.episode_done and step.reward == 0.0


def test_parse_error_policy_retries_content_failures():
    env = build_agent_tool_env(RENDERER, [calculator], [{"role": "user", "content": "2+2?"}],
                               lambda messages: (1.0, {"graded": 1.0}),
                               parse_error_policy=ParseErrorPolicy(max_consecutive=1, penalty_per_error=0.2))
    bad = act("<tool_call>\n{oops}\n</tool_call>")

    async def go():
        await env.initial_observation()
        first = await env.step(bad)
        second = await env.step(bad)
        return first, second

    first, second = asyncio.run(go())
    assert not first.episode_done and first.reward == -0.2
    assert "formatting issue" in TOK.decode(first.next_observation.to_ints())
    assert second.episode_done and second.metrics["stop/parse_error"] == 1.0 and second.reward == 0.0


def test_runner_seams_and_tool_timeout():
    @tool
    async def hang() -> str:
        """Never returns."""
        await asyncio.sleep(60)
        return "late"

    env = build_agent_tool_env(RENDERER, [hang], [{"role": "user", "content": "x"}], lambda m: 0.5,
                               max_tool_calls=5, tool_timeout_s=0.05)
    env.set_max_tool_calls(1)
    assert env.message_env.max_tool_calls == 1
    env.set_parse_error_policy(ParseErrorPolicy())
    assert env.message_env.parse_error_policy == ParseErrorPolicy()

    async def go():
        await env.initial_observation()
        return await env.step(act(call_text("hang")))

    step = asyncio.run(go())
    assert "timed out after 0.05 s" in env.message_env.history[-1]["content"]
    assert not step.episode_done
    with pytest.raises(ValueError, match="max_turns"):
        AgentToolMessageEnv([], [], 0, lambda m: 0.0)


@pytest.mark.parametrize("env_id", ["llm/Calculator-v0", "llm/PythonTool-v0"])
def test_gym_face_check_env_and_determinism(env_id):
    gc.collect()  # earlier tests' garbage: its ResourceWarnings are not this block's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(gym.make(env_id).unwrapped)
    assert [str(w.message) for w in caught] == []

    def episode(seed):
        env = gym.make(env_id)
        ob, _ = env.reset(seed=seed)
        first = tuple(ob)
        ob2, reward, terminated, truncated, info = env.step(np.array(act(call_text(
            "calculator" if "Calc" in env_id else "python",
            **({"expression": "6*7"} if "Calc" in env_id else {"code": "print(6*7)"})))))
        assert not terminated and "42" in TOK.decode(list(ob2))
        assert list(ob2[: len(first)]) == list(first)  # the prefix property through the gym face
        _, reward2, terminated2, *_ = env.step(np.array(act("42")))
        return first, tuple(ob2), reward, reward2, terminated2

    assert episode(5) == episode(5)
    assert len({episode(s)[0] for s in range(6)}) >= 3


def test_splits_are_disjoint():
    for cls in (CalculatorSource, PythonToolSource):
        qs = {split: {cls(renderer=RENDERER, split=split).make_env(np.random.default_rng(s)).question
                      for s in range(40)} for split in ("train", "test")}
        assert qs["train"] and qs["test"] and not qs["train"] & qs["test"]


def test_bad_knobs_raise():
    with pytest.raises(ValueError, match="digits"):
        CalculatorSource(renderer=RENDERER, digits=9)
    with pytest.raises(ValueError, match="require_tool"):
        CalculatorSource(renderer=RENDERER, require_tool="yes")
    with pytest.raises(TypeError, match="unexpected keyword"):
        PythonToolSource(renderer=RENDERER, scal=2)


# --- fuzz -----------------------------------------------------------------------------------------
FUZZ_PIECES = ["<tool_call>", "</tool_call>", '{"name": "calculator", "arguments": ', '{"name": "python", ',
               '"arguments": {"code": "print(1)"}}', '{"expression": "1+"}', "}", "{", "\n", "42",
               "<think>", "</think>", "Answer: 7", " or 8", "\\boxed{", "<|im_end|>", "\x00", "é"]


@pytest.mark.parametrize("env_id", ["llm/Calculator-v0", "llm/PythonTool-v0"])
def test_fuzz_actions_never_raise_and_rewards_stay_in_range(env_id):
    rng = np.random.default_rng(0)
    env = gym.make(env_id)
    lo, hi = env.unwrapped.reward_range
    episodes = 0
    for seed in range(25):
        env.reset(seed=seed)
        total, done, steps = 0.0, False, 0
        while not done:
            kind = rng.integers(3)
            if kind == 0:  # random ids, some outside the vocabulary
                action = rng.integers(0, TOK.vocab_size + 50, size=int(rng.integers(0, 40))).tolist()
            else:
                text = "".join(rng.choice(FUZZ_PIECES) for _ in range(int(rng.integers(0, 12))))
                action = TOK.encode(text) + ([END] if kind == 1 else [])
            _, reward, terminated, truncated, info = env.step(np.array(action, dtype=np.int64))
            total += reward
            steps += 1
            done = terminated or truncated
            assert steps <= 10
        assert lo - 1e-9 <= total <= hi + 1e-9, (seed, total)
        episodes += 1
    assert episodes == 25


# --- the offline Qwen3 tokenizer ------------------------------------------------------------------


def test_calculator_on_qwen3_matches_the_template_and_keeps_the_prefix(real_tokenizers):
    path, tok = real_tokenizers("qwen3")
    gc.collect()  # earlier tests' garbage: its ResourceWarnings are not this block's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(gym.make("llm/Calculator-v0", tokenizer=path).unwrapped)
    assert [str(w.message) for w in caught] == []
    env = gym.make("llm/Calculator-v0", tokenizer=path)
    ob, _ = env.reset(seed=2)
    source_env = env.unwrapped.current_env
    messages = list(source_env.message_env.initial_messages)
    hf_tools = [{"type": "function", "function": calculator.to_spec()}]

    def template(msgs):
        out = tok.apply_chat_template(msgs, tools=hf_tools, add_generation_prompt=True, tokenize=True)
        return list(out["input_ids"] if hasattr(out, "keys") else out)

    assert ob.tolist() == template(messages)
    end = tok.convert_tokens_to_ids("<|im_end|>")
    text = calculator_gold(tok.decode(ob.tolist()))
    action = list(tok.encode(text, add_special_tokens=False)) + [end]
    ob2, reward, terminated, _, info = env.step(np.array(action))
    assert not terminated and reward == 0.0
    assert ob2[: len(ob) + len(action)].tolist() == ob.tolist() + action
    history = source_env.message_env.history
    hf_history = [dict(m) for m in history[:-2]] + [
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
            "name": "calculator", "arguments": json.loads(history[-2]["tool_calls"][0].function.arguments)}}]},
        {"role": "tool", "content": history[-1]["content"]},
    ]
    assert ob2.tolist() == template(hf_history)  # token-exact with the HF template and tools=
    answer = history[-1]["content"]
    final = list(tok.encode(answer, add_special_tokens=False)) + [end]
    _, reward, terminated, _, info = env.step(np.array(final))
    assert terminated and reward == pytest.approx(0.95) and info["metrics"]["correct"] == 1.0


def test_group_cleanup_kills_a_python_tool_run_still_going():
    """An abandoned episode (a rollout strategy gave up on it) must not keep its sandboxed
    program running: `GymEnvGroupBuilder.cleanup()` releases each episode's env, whose tool
    closes its own sandbox, killing the run; the awaiting tool call then returns an error, and a
    later call gets the closed-sandbox error instead of a new run."""
    from llm_gym.wrappers.grouping import GymEnvGroupBuilder

    forever = call_text("python", code="while True:\n    pass")

    async def go():
        builder = GymEnvGroupBuilder("llm/PythonTool-v0", 1, 0, timeout_s=60.0)
        (adapter,) = await builder.make_envs()
        await adapter.initial_observation()
        tool = adapter.seed_api_env.message_env.tools[0]
        step = asyncio.ensure_future(adapter.step(act(forever)))
        for _ in range(1200):  # wait until the program runs in its sandbox
            await asyncio.sleep(0.05)
            if tool._sandbox is not None and tool._sandbox._inflight:
                break
        assert tool._sandbox is not None and tool._sandbox._inflight, "the tool call never started"
        await builder.cleanup()
        result = await asyncio.wait_for(step, 30)  # killed, not the 60 s timeout
        later = await tool.fn(code="print(1)")
        return result, tool, later

    result, tool, later = asyncio.run(go())
    assert "Error: the program failed (cancelled)" in TOK.decode(result.next_observation.to_ints())
    assert not tool._sandbox._inflight
    assert later == CLOSED_REPLY


def test_a_groups_python_tool_calls_overlap_through_the_gym_group_builder():
    """The trainer's path (`GymEnvGroupBuilder` over `gym.make` ids) awaits TextEnv's `astep`,
    so G episodes' sandboxed tool runs are in flight together instead of each one blocking the
    loop for the rest: seen as several runs alive at once."""
    from llm_gym.rl import do_group_rollout
    from llm_gym.wrappers.grouping import GymEnvGroupBuilder

    sleepy = call_text("python", code="import time\ntime.sleep(1.5)\nprint(7)")
    builder = GymEnvGroupBuilder("llm/PythonTool-v0", 4, 3)
    peak = 0

    class Policy(TokenCompleter):
        async def __call__(self, model_input, stop, *, max_tokens=None):
            text = TOK.decode(model_input.to_ints())
            tokens = act("7" if last_tool_output(text) is not None else sleepy)
            return TokensWithLogprobs(tokens, [-0.5] * len(tokens))

    async def watch(done: asyncio.Event):
        nonlocal peak
        while not done.is_set():
            tools = [e.seed_api_env.message_env.tools[0] for e in builder._envs
                     if e.seed_api_env is not None]
            peak = max(peak, sum(len(t._sandbox._inflight) for t in tools if t._sandbox is not None))
            await asyncio.sleep(0.02)

    async def go():
        done = asyncio.Event()
        watcher = asyncio.ensure_future(watch(done))
        try:
            return await do_group_rollout(builder, Policy())
        finally:
            done.set()
            await watcher

    group = asyncio.run(go())
    assert [t.transitions[-1].metrics["tool_calls"] for t in group.trajectories_G] == [1.0] * 4
    assert peak >= 2, f"the group's tool runs never overlapped (peak {peak})"


# --- scripted cases (what `llm-gym check` runs) ----------------------------------------------------
from llm_gym.scripted import case_source, run_scripted_case  # noqa: E402
from envs_catalog.tools.base import tool_call_text  # noqa: E402
from envs_catalog.tools.python_tool import _problem as python_problem  # noqa: E402
from envs_catalog.tools.calculator import _problem as calculator_problem  # noqa: E402

ROLE_COLON = get_renderer("role_colon", TOK)
REQUIRED_TOOL_CASES = {
    "call the tool, then answer what it printed", "answer without a tool (require_tool on)",
    "hedge", "two answers", "injection", "malformed tool call", "tool spam past max_tool_calls",
    "the answer in a list of wrong ones", "empty answer",
}


@pytest.mark.parametrize("cls", [CalculatorSource, PythonToolSource])
def test_scripted_cases_score_as_declared(cls):
    cases = cls(renderer=RENDERER).scripted_cases()
    names = {c.name for c in cases}
    assert REQUIRED_TOOL_CASES <= names and len(names) == len(cases)
    assert [c.name for c in cases if c.kind == "gold"][0] == "call the tool, then answer what it printed"
    for case in cases:
        if case.kind == "adversarial":  # no false credit: at most what a correct-but-unused
            assert case.high <= 0.0  # tool or no answer gets
        for renderer, split, seed in ((RENDERER, "train", 0), (ROLE_COLON, "test", 1)):
            outcome = run_scripted_case(case_source(cls, case, renderer, split), case, seed)
            assert outcome.ok, (case.name, split, seed, outcome.episode_return, outcome.replies)
    gold = next(c for c in cases if c.kind == "gold")
    assert gold.low == gold.high == pytest.approx(0.95)
    spam = next(c for c in cases if c.name == "tool spam past max_tool_calls")
    assert spam.high == pytest.approx(cls(renderer=RENDERER, **spam.knobs).reward_range[0])


@pytest.mark.parametrize("cls", [CalculatorSource, PythonToolSource])
def test_the_gold_agent_reads_the_task_not_the_prompt(cls):
    """The gold call is kept on the env (`env.gold_call`, from the source's `draw_solved`), and the
    tool's output is what the gold agent answers: the call must really solve the task."""
    source = cls(renderer=RENDERER, **({"scale": 1} if cls is PythonToolSource else {}))
    for seed in range(3):
        env = source.make_env(np.random.default_rng(seed))
        name, arguments = env.gold_call
        assert name == ("calculator" if cls is CalculatorSource else "python")
        assert env.question and env.answer is not None
        # the same task as the old regex helpers read off the prompt
        helper = calculator_gold if cls is CalculatorSource else python_gold
        text = f"<|im_start|>user\n{env.question}<|im_end|>"
        assert json.loads(re.search(r"\{.*\}", helper(text), re.DOTALL).group())["name"] == name
        _, traj, total = run(source, seed, lambda text, env=env: (
            last_tool_output(text).strip() if last_tool_output(text) is not None
            else tool_call_text(*env.gold_call)))
        assert total == pytest.approx(0.95), traj.transitions[-1].logs


@pytest.mark.parametrize("digits", [1, 3, 6])
def test_calculator_gold_expressions_evaluate_to_the_answer(digits):
    for seed in range(300):
        key, question, answer, expression = calculator_problem(np.random.default_rng(seed), digits)
        assert calculate(expression) == answer, (key, expression)


@pytest.mark.parametrize("scale,seeds", [(1, 60), (2, 60), (3, 15)])
def test_python_gold_programs_print_the_answer(scale, seeds):
    import contextlib
    import io

    kinds = set()
    for seed in range(seeds):
        key, question, answer, program = python_problem(np.random.default_rng(seed), scale)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(program, {})  # our own trusted program, on the host
        assert out.getvalue() == f"{answer}\n", (key, program)
        kinds.add(key.split(":")[0])
    assert kinds <= {"primes", "div", "pow", "fib", "digits"} and len(kinds) >= 3
    if seeds >= 60:
        assert len(kinds) == 5


def test_drawing_the_gold_call_leaves_the_tasks_unchanged():
    """draw_task (question, answer) is draw_solved without the call, from the same draws."""
    for cls in (CalculatorSource, PythonToolSource):
        source = cls(renderer=RENDERER, split="test")
        for seed in range(10):
            q, a, call = source.draw_solved(np.random.default_rng(seed))
            assert source.draw_task(np.random.default_rng(seed)) == (q, a) and call is not None


def test_python_tool_keeps_working_across_resets_of_one_env():
    """Releasing an episode closes its tool's sandbox: the next episode of the same env gets a
    tool of its own (a tool shared by the source answered CLOSED_REPLY from the second reset)."""
    env = gym.make("llm/PythonTool-v0")
    for seed in range(3):
        env.reset(seed=seed)
        ob, *_ = env.step(np.array(act(call_text("python", code="print(6 * 7)"))))
        text = TOK.decode(list(ob))
        assert CLOSED_REPLY not in text and last_tool_output(text).strip() == "42", (seed, text[-200:])
    env.close()


# --- the answer contract ---------------------------------------------------------------------------
from envs_catalog.tools.base import FinalNumberAnswer, answer_words, final_instruction  # noqa: E402
from envs_catalog.tools.calculator import SYSTEM_PROMPT as CALCULATOR_PROMPT  # noqa: E402
from envs_catalog.tools.python_tool import SYSTEM_PROMPT as PYTHON_PROMPT  # noqa: E402
from llm_gym.checks.attacks import audit_source  # noqa: E402


def test_answer_words_name_the_unit_or_the_nouns_the_question_asks_for():
    assert answer_words("How many kilometres does it travel in total?") == ("km", ())
    assert answer_words("How many bottles are left in the warehouse?") == (None, ("bottles", "bottle"))
    assert answer_words("How many different values of city occur?") == (None, ("values", "value"))
    assert answer_words("What is 12 × 34 + 5 × 6?") == (None, ())


def test_the_system_prompts_instruction_is_the_contracts():
    assert final_instruction("the final number only") == "reply with the final number only, with no tool call."
    instruction = FinalNumberAnswer(name="the final number only").instruction()
    assert CALCULATOR_PROMPT.endswith("When you are done, " + instruction)
    assert PYTHON_PROMPT.endswith("When you are done, " + instruction)


def test_calculator_env_grades_its_final_turn_by_its_contract():
    source = CalculatorSource(renderer=RENDERER)
    kinds = set()
    for seed in range(40):
        env = source.make_env(np.random.default_rng(seed))
        contract, a = env.answer_contract, env.answer
        assert isinstance(contract, FinalNumberAnswer) and env.gold_answer == a and contract.context == env.question
        if contract.unit is not None:  # "How many kilometres": a length, converted exactly
            kinds.add("unit")
            assert contract.grade(f"{a} km", a).correct and contract.grade(f"{a * 1000} metres", a).correct
            assert not contract.grade(f"{a} metres", a).correct
        elif contract.nouns:
            kinds.add("noun")
            noun = sorted(contract.nouns)[-1]
            assert contract.grade(f"{a} {noun}", a).correct and contract.grade(f"Answer: {a} {noun}.", a).correct
            assert not contract.grade(f"{a} pebbles", a).correct
        # the policy: a declared answer is read, prose around it is not; a second value voids it
        assert contract.grade(f"Let me compute: maybe {a + 1}?\n\nAnswer: {a}\n\nI used the tool.", a).correct
        assert not contract.grade(f"Answer: {a}\nMy backup answer is {a + 1}.", a).correct
        assert not contract.grade(f"Answer: {a} or {a + 1}", a).correct
    assert kinds == {"unit", "noun"}


def test_a_number_in_the_tool_result_is_never_read_as_the_answer():
    """Only the final turn is read: a tool result holding a wrong number cannot void or earn the
    credit, and neither can a reply that only points at it."""
    source = CalculatorSource(renderer=RENDERER)
    env = source.make_env(np.random.default_rng(2))
    a = env.answer

    def script(text, a=a):
        out = last_tool_output(text)
        if out is None:
            return call_text("calculator", expression=f"{a} + 1")  # prints a + 1
        return f"The tool printed {out.strip()}, but I add it up myself.\n\nAnswer: {a}"

    _, traj, total = run(source, 2, script)
    assert total == pytest.approx(0.95) and traj.transitions[-1].metrics["correct"] == 1.0
    _, _, pointing = run(source, 2, lambda text: "The answer is what the tool printed."
                         if last_tool_output(text) else call_text("calculator", expression=f"{a} * 1"))
    assert pointing == pytest.approx(-0.05)


@pytest.mark.parametrize("cls,per_seed", [(CalculatorSource, 150), (PythonToolSource, 40)])
def test_the_generated_attack_suite_finds_nothing(cls, per_seed):
    knobs = {"scale": 1} if cls is PythonToolSource else {}
    report = audit_source(lambda k: cls(renderer=RENDERER, **knobs, **k), [0], per_seed=per_seed)
    assert report.runs >= 2 * per_seed and not report.skipped, report.skipped
    assert (report.false_credits, report.false_denials) == (0, 0), report.findings
