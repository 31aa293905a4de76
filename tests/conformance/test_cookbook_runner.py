"""Differential conformance of the rollout runner's hooks, runner-imposed stops and parse-error
policy, and of the renderers' content helpers: the cookbook's `run_rollout` / `EnvFromMessageEnv`
/ `renderers.base` functions against ours.

The env and the hooks are written once, against the cookbook's names (`_SOURCE`), and ported for
llm_gym by the mechanical import switch (`port.port_source`), as a user would. Each case runs one
rollout on both sides with the same scripted policy and tokenizer, then compares the trajectory
(every observation, action, logprob, reward, metric, log, stop reason), the hooks' event log (what
each hook saw, in order), what the env was told through its seams, and the trajectory's datums.
"""

from __future__ import annotations

import asyncio
import random
import re
import sys
import types as pytypes

import pytest

from tests.conformance.conftest import require_cookbook
from tests.conformance.port import port_source
from tests.conformance.test_cookbook_recipes import STOP, ScriptedPolicy, Side, _arr, _diff, _ints

_SOURCE = '''
from tinker_cookbook.rl.message_env import EnvFromMessageEnv, MessageEnv, MessageStepResult
from tinker_cookbook.rl.rollout_limits import ParseErrorPolicy, RolloutLimits
from tinker_cookbook.rl.rollout_runner import RolloutHooks, run_rollout
from tinker_cookbook.rl.rollout_strategy import rollout_strategy_from_config
from tinker_cookbook.rl.types import STOP_METRIC_PREFIX, StopReason
from tinker_cookbook.rl.data_processing import trajectory_to_data


class ChatEnv(MessageEnv):
    """`turns` assistant turns; each answered with "More."; the last one reports stop/completed."""

    def __init__(self, player, turns):
        self.messages = [{"role": "user", "content": f"Talk to me, player {player}."}]
        self.turns = turns
        self.seams = {}

    async def initial_observation(self):
        return list(self.messages)

    async def step(self, message):
        self.messages.append(message)
        n = sum(m["role"] == "assistant" for m in self.messages)
        metrics = {"chars": float(len(message["content"]))}
        done = n >= self.turns
        if done:
            metrics[f"{STOP_METRIC_PREFIX}{StopReason.COMPLETED}"] = 1.0
        self.messages.append({"role": "user", "content": "More."})
        return MessageStepResult(reward=float(n), episode_done=done,
                                 next_messages=list(self.messages), metrics=metrics)

    async def add_messages(self, messages):
        self.messages.extend(messages)
        return list(self.messages)

    def set_max_tool_calls(self, n):
        self.seams["max_tool_calls"] = n

    def set_parse_error_policy(self, policy):
        self.seams["parse_error_policy"] = (policy.max_consecutive, policy.terminal_reward)


class Recorder(RolloutHooks):
    """Records what every hook saw; `plan` says what to inject at a turn and how to answer a stop
    ("clear_once", or a reason to record instead)."""

    def __init__(self, plan):
        self.plan = dict(plan)
        self.events = []

    def _note(self, name, state, *extra):
        self.events.append((name, state.turn_index, state.observation_tokens, state.sampled_tokens,
                            state.num_length_truncations, len(state.transitions)) + extra)

    async def on_turn_begin(self, state):
        self._note("turn_begin", state)
        text = self.plan.get(("inject", state.turn_index))
        return [{"role": "user", "content": text}] if text else None

    async def on_stop_reason(self, reason, state):
        self._note("stop_reason", state, str(reason))
        answer = self.plan.get(("stop", str(reason)), reason)
        if answer == "clear_once":
            del self.plan[("stop", str(reason))]
            return None
        return answer

    async def on_grade(self, state):
        self._note("grade", state)

    async def on_artifacts(self, state):
        self._note("artifacts", state)


class OnlyGrade:
    """A duck-typed hooks object with all four methods, not a RolloutHooks subclass."""

    def __init__(self):
        self.events = []

    async def on_turn_begin(self, state):
        return None

    async def on_stop_reason(self, reason, state):
        self.events.append(("stop_reason", str(reason)))
        return reason

    async def on_grade(self, state):
        self.events.append(("grade", state.turn_index))

    async def on_artifacts(self, state):
        self.events.append(("artifacts", state.turn_index))
'''


def _module(ported: bool):
    name = "ported_runner_env" if ported else "cookbook_runner_env"
    module = pytypes.ModuleType(name)
    sys.modules[name] = module
    exec(compile(port_source(_SOURCE) if ported else _SOURCE, name, "exec"), module.__dict__)
    return module


def _respond(strategy: int, conversation: str) -> str:
    """Player 0: short clean answers; 1: longer ones; 2: an answer with no stop sequence (a
    structural parse failure); 3: clean, but the conversation mentions "cut" -> one word."""
    player = int(re.search(r"player (\d+)", conversation).group(1))
    if player == 2:
        return "no stop at all"
    if player == 1:
        return f"a longer answer with several words{STOP}"
    return f"ok{STOP}"


def _flatten(traj, data) -> dict:
    return {
        "stop_reason": None if traj.stop_reason is None else str(traj.stop_reason),
        "final_ob": _ints(traj.final_ob),
        "transitions": [
            {"ob": _ints(t.ob), "tokens": list(t.ac.tokens), "logprobs": list(t.ac.logprobs),
             "reward": float(t.reward), "episode_done": bool(t.episode_done),
             "metrics": dict(t.metrics), "logs": dict(t.logs)}
            for t in traj.transitions
        ],
        "data": [{"model_input": _ints(d.model_input),
                  **{k: _arr(v) for k, v in sorted(d.loss_fn_inputs.items())}} for d in data],
    }


def _run_both(player: int, *, turns: int = 3, limits: dict | None = None, plan: dict | None = None,
              parse_errors: dict | None = None, hooks: str = "recorder", env_policy: dict | None = None):
    require_cookbook()
    results = []
    for side, mod in ((Side("cookbook"), _module(False)), (Side("llm_gym"), _module(True))):
        chat = mod.ChatEnv(player, turns)
        env_kwargs = {} if env_policy is None else {"parse_error_policy": mod.ParseErrorPolicy(**env_policy)}
        env = mod.EnvFromMessageEnv(side.renderer, chat, **env_kwargs)
        recorder = {"recorder": lambda: mod.Recorder(plan or {}), "duck": mod.OnlyGrade,
                    "none": lambda: None}[hooks]()
        kwargs = {}
        if limits is not None:
            kwargs["limits"] = mod.RolloutLimits(**limits)
        if parse_errors is not None:
            kwargs["parse_errors"] = mod.ParseErrorPolicy(**parse_errors)
        policy = ScriptedPolicy(side, _respond)
        traj = asyncio.run(mod.run_rollout(policy, env, hooks=recorder, **kwargs))
        data = mod.trajectory_to_data(traj, 1.0)
        results.append({
            "trajectory": _flatten(traj, data),
            "events": [list(e) for e in getattr(recorder, "events", [])],
            "seams": dict(chat.seams),
        })
    expected, got = results
    diffs = _diff(expected, got)
    assert not diffs, f"{len(diffs)} differences:\n" + "\n".join(diffs[:25])
    return expected


def test_hooks_see_the_same_states_and_inject_the_same_messages():
    run = _run_both(0, plan={("inject", 1): "Also, be brief."})
    names = [e[0] for e in run["events"]]
    assert names == ["turn_begin"] * 3 + ["stop_reason", "grade", "artifacts"], names
    assert run["trajectory"]["stop_reason"] == "completed"
    # the injected message is in the second turn's observation on both sides
    assert len(run["trajectory"]["transitions"][1]["ob"]) > len(run["trajectory"]["transitions"][0]["ob"]) + 5


@pytest.mark.parametrize("answer", ["clear_once", "custom_done"])
def test_an_env_stop_cleared_or_renamed_by_a_hook(answer):
    run = _run_both(0, turns=2, plan={("stop", "completed"): answer})
    transitions = run["trajectory"]["transitions"]
    if answer == "clear_once":  # cleared: the episode went on to the next completed stop
        assert len(transitions) == 3 and transitions[1]["episode_done"] is False
        assert not any(k.startswith("stop/") for k in transitions[1]["metrics"])
    else:
        assert run["trajectory"]["stop_reason"] == "custom_done"
        assert "stop/custom_done" in transitions[-1]["metrics"]


def test_runner_stops_budgets_and_a_cleared_budget_stop():
    # player 0 samples 6 tokens a turn: after two turns 1 token is left -> the budget stop, which
    # the hook clears once (turn 3 is sampled without that budget); it fires again before turn 4
    run = _run_both(0, turns=5, limits={"max_sampled_tokens": 13},
                    plan={("stop", "max_sampled_tokens"): "clear_once"})
    assert run["trajectory"]["stop_reason"] == "max_sampled_tokens"
    assert len(run["trajectory"]["transitions"]) == 3
    assert [e[-1] for e in run["events"] if e[0] == "stop_reason"].count("max_sampled_tokens") == 2
    run = _run_both(1, turns=5, limits={"max_turns": 2})
    assert run["trajectory"]["stop_reason"] == "max_turns" and len(run["trajectory"]["transitions"]) == 2
    assert "grade" not in [e[0] for e in run["events"]]  # the env never saw the episode end


def test_a_stop_before_the_first_turn_gets_the_synthetic_transition():
    run = _run_both(0, limits={"max_trajectory_tokens": 3})
    (only,) = run["trajectory"]["transitions"]
    assert only["tokens"] == [] and only["reward"] == 0.0 and only["metrics"] == {"stop/max_tokens": 1.0}
    assert run["trajectory"]["data"] == []  # no training tokens
    run = _run_both(0, limits={"max_trajectory_tokens": 3}, plan={("stop", "max_tokens"): "renamed"})
    assert run["trajectory"]["stop_reason"] == "renamed"


@pytest.mark.parametrize("mask", [False, True])
def test_parse_error_policy_ends_a_structural_failure(mask):
    run = _run_both(2, parse_errors={"terminal_reward": -3.0, "mask_error_turns": mask,
                                     "max_consecutive": 2},
                    limits={"max_tool_calls": 4})
    assert run["seams"] == {"max_tool_calls": 4, "parse_error_policy": (2, -3.0)}
    (only,) = run["trajectory"]["transitions"]
    assert only["reward"] == -3.0 and only["logs"]["parse_failure_kind"] == "structural"
    assert ("parse_error_masked" in only["metrics"]) is mask


def test_parse_error_policy_given_to_the_env_directly_and_default_one_shot():
    run = _run_both(2, hooks="none", env_policy={"terminal_reward": -5.0})
    (only,) = run["trajectory"]["transitions"]
    assert only["reward"] == -5.0 and only["logs"]["parse_failure_kind"] == "structural"
    run = _run_both(2, hooks="duck")  # no policy: the one-shot failed_parse_reward
    (only,) = run["trajectory"]["transitions"]
    assert only["reward"] == -1.0 and only["metrics"] == {"parse_error": 1.0, "stop/parse_error": 1.0}
    assert run["events"] == [["stop_reason", "parse_error"], ["grade", 1], ["artifacts", 1]]


def test_rollout_strategy_from_config_matches():
    require_cookbook()
    theirs, ours = _module(False), _module(True)
    for value in (True, False):
        a, b = theirs.rollout_strategy_from_config(value), ours.rollout_strategy_from_config(value)
        assert type(a).__name__ == type(b).__name__
    for bad in (None, 1, "yes"):
        with pytest.raises(Exception) as ref:
            theirs.rollout_strategy_from_config(bad)
        with pytest.raises(Exception) as got:
            ours.rollout_strategy_from_config(bad)
        assert type(ref.value).__name__ == type(got.value).__name__ == "ConfigurationError"


# ---------------------------------------------------------------------------------------------
# Content helpers (renderers.base): the same results over generated strings
# ---------------------------------------------------------------------------------------------

_PIECES = ["<think>", "</think>", "<tool_call>", "</tool_call>", "plan", " ", "\n", "answer 42",
           '{"name": "add", "arguments": {"a": 1}}', '{"name": 3, "arguments": {}}', '{"name": "f"}',
           "[1, 2]", "{bad json", '{"name": "g", "arguments": {}, "id": 7}', "", "é✓"]


def _strings(n: int = 400) -> list[str]:
    rng = random.Random(0)
    return ["".join(rng.choice(_PIECES) for _ in range(rng.randint(0, 9))) for _ in range(n)]


def _plain(value):
    """Tool calls (pydantic models in the cookbook, dataclasses here) as comparable tuples."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if hasattr(value, "function"):
        return ("call", value.function.name, value.function.arguments, value.id)
    if hasattr(value, "raw_text"):
        return ("unparsed", value.raw_text, value.error)
    if hasattr(value, "value") and not isinstance(value, (str, int, float)):
        return str(value.value)
    return value


def test_content_helpers_match_the_cookbook(cookbook):
    from tinker_cookbook.renderers import base as ref

    from llm_gym.renderers import base as ours

    checked = 0
    for text in _strings():
        for name in ("parse_content_blocks", "parse_think_blocks", "has_thinking", "ensure_list"):
            assert _plain(getattr(ours, name)(text)) == _plain(getattr(ref, name)(text)), (name, text)
        got = ours.detect_unterminated_tool_block(text, "<tool_call>", "</tool_call>")
        assert _plain(got) == _plain(ref.detect_unterminated_tool_block(text, "<tool_call>", "</tool_call>"))
        parts = ref.parse_think_blocks(text) or ref.ensure_list(text)
        for sep in ("\n", ""):
            assert ours.format_content_as_string(parts, sep) == ref.format_content_as_string(parts, sep)
        assert ours.remove_thinking(parts) == ref.remove_thinking(parts)
        assert ours.has_thinking(parts) == ref.has_thinking(parts)
        parsed = ref.parse_content_blocks(text)
        unparsed = [c for c in (parsed[1] if parsed else []) if hasattr(c, "raw_text")]
        for termination in ("stop_sequence", "eos", "malformed"):
            message = {"role": "assistant", "content": text}
            if unparsed:
                message_ref = {**message, "unparsed_tool_calls": unparsed}
                message_ours = {**message, "unparsed_tool_calls": [
                    ours.UnparsedToolCall(raw_text=u.raw_text, error=u.error) for u in unparsed]}
            else:
                message_ref = message_ours = message
            assert _plain(ours.classify_parse_failure(message_ours, ours.ParseTermination(termination))) == _plain(
                ref.classify_parse_failure(message_ref, ref.ParseTermination(termination)))
        checked += 1
    assert checked == 400
    assert [m.value for m in ours.ParseFailureKind] == [m.value for m in ref.ParseFailureKind]
    assert ours.PARSE_FAILURE_DETAIL_MAX_CHARS == ref.PARSE_FAILURE_DETAIL_MAX_CHARS
    from llm_gym.exceptions import RendererError

    with pytest.raises(RendererError, match="Unknown content part type: image"):
        ours.format_content_as_string([{"type": "image", "image": "x.png"}])
