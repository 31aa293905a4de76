"""Bad input of every kind gets a clear error or a defined reward, and no group is lost when a
retry strategy is configured."""

from __future__ import annotations

import asyncio
import functools

import numpy as np
import pytest

from llm_gym.completers import TokenCompleter, TokensWithLogprobs
from llm_gym.model_input import ModelInput
from llm_gym.renderers import ChatMLRenderer
from llm_gym.rl import (
    Env,
    FailFast,
    MinViableGroup,
    ProblemEnv,
    ProblemGroupBuilder,
    RetryOnFailure,
    RolloutLimits,
    StepResult,
    do_group_rollout,
    do_single_rollout,
)
from llm_gym.tokenizers import ByteTokenizer, load_tokenizer

TOK = ByteTokenizer()
RENDERER = ChatMLRenderer(TOK)
IM_END = 260


class EchoNumberEnv(ProblemEnv):
    """Answer "7". Shared `state` lets a test script failures across the envs of a group."""

    def __init__(self, renderer, state: dict | None = None):
        super().__init__(renderer, grader_timeout_s=(state or {}).get("grader_timeout_s"))
        self.state = state if state is not None else {}
        # Which env's grader hangs is decided when the env is made, so a grader re-run (in the
        # bounded grader's worker process) hangs again, like a grader stuck on its input would.
        self.grader_hangs = self.state.get("grader_hangs", 0) > 0
        if self.grader_hangs:
            self.state["grader_hangs"] -= 1

    async def initial_observation(self):
        if self.state.get("init_failures", 0) > 0:
            self.state["init_failures"] -= 1
            raise ConnectionError("sandbox failed to start")
        return await super().initial_observation()

    def get_question(self):
        return "Say 7."

    def check_answer(self, sample_str):
        if self.grader_hangs:
            import time

            end = time.monotonic() + 30  # stuck on a pathological answer (pure Python)
            while time.monotonic() < end:
                pass
        return sample_str.strip() == "7"

    def check_format(self, sample_str):
        return sample_str.strip().isdigit()

    def get_reference_answer(self):
        return "7"


def _reward(action):
    return asyncio.run(EchoNumberEnv(RENDERER).step(action))


@pytest.mark.parametrize(
    "action,reward,correct",
    [
        ([], -0.1, 0.0),  # empty action: truncated, wrong
        ([99999, IM_END], -0.1, 0.0),  # out-of-vocabulary id: malformed
        ([-5, 55, IM_END], 0.9, 1.0),  # negative id dropped: right answer, but malformed
        ([0xFF, 0xFE, IM_END], -0.1, 0.0),  # invalid UTF-8 decodes to U+FFFD: wrong format
        ([55, 2.0, IM_END], 0.9, 1.0),  # a float in the action is not a token: malformed
        (np.array([55, IM_END]), 1.0, 1.0),  # numpy actions are fine
    ],
)
def test_bad_actions_get_defined_rewards(action, reward, correct):
    result = _reward(action)
    assert result.reward == pytest.approx(reward)
    assert result.metrics["correct"] == correct
    assert result.episode_done


def test_enormous_action_gets_a_defined_reward():
    result = _reward([55] * 2_000_000)  # no stop token: truncated
    assert result.reward == pytest.approx(-0.1)
    assert result.metrics == {"format": 0.0, "correct": 0.0}
    huge_then_stop = _reward([55] + [IM_END] + [56] * 1_000_000)
    assert huge_then_stop.reward == 1.0


class FlakyPolicy(TokenCompleter):
    """Raises on its first `failures` calls, then answers "7"."""

    def __init__(self, failures: int):
        self.failures = failures

    async def __call__(self, model_input, stop, *, max_tokens=None):
        if self.failures > 0:
            self.failures -= 1
            raise ConnectionResetError("sampler connection reset")
        return TokensWithLogprobs([55, IM_END], [-0.1, -0.2])


def _builder(state=None, n=4):
    return ProblemGroupBuilder(functools.partial(EchoNumberEnv, RENDERER, state), num_envs=n)


def test_policy_that_raises():
    with pytest.raises(ConnectionResetError):
        asyncio.run(do_group_rollout(_builder(), FlakyPolicy(1), FailFast()))
    group = asyncio.run(do_group_rollout(_builder(), FlakyPolicy(1), RetryOnFailure(max_retries=2)))
    assert len(group.trajectories_G) == 4 and group.get_total_rewards() == [1.0] * 4
    assert [e.error_type for e in group.rollout_errors] == ["ConnectionResetError"]


def test_env_that_raises():
    state = {"init_failures": 1}
    group = asyncio.run(do_group_rollout(_builder(state), FlakyPolicy(0), RetryOnFailure(max_retries=1)))
    assert len(group.trajectories_G) == 4
    assert [(e.error_type, e.error_message) for e in group.rollout_errors] == [
        ("ConnectionError", "sandbox failed to start")
    ]


def test_grader_that_hangs_with_a_retry_strategy_loses_no_group():
    # grader_timeout_s turns the hang into a defined reward for that rollout
    state = {"grader_hangs": 1, "grader_timeout_s": 0.2}
    group = asyncio.run(do_group_rollout(_builder(state), FlakyPolicy(0), RetryOnFailure()))
    assert len(group.trajectories_G) == 4
    assert sorted(group.get_total_rewards()) == pytest.approx([-0.1, 1.0, 1.0, 1.0])
    assert sum(t.transitions[0].metrics.get("grader_timeout", 0.0)
               for t in group.trajectories_G) == 1.0


class HangingStepEnv(Env):
    """An env whose (async) grader never answers on the first env made."""

    made = 0

    def __init__(self):
        HangingStepEnv.made += 1
        self.hangs = HangingStepEnv.made == 1

    async def initial_observation(self):
        return ModelInput.from_ints([1]), [0]

    async def step(self, action, *, extra=None):
        if self.hangs:
            await asyncio.Event().wait()
        return StepResult(1.0, True, ModelInput.empty(), [0])


def test_async_grader_that_hangs_ends_by_timeout_or_retry():
    traj = asyncio.run(do_single_rollout(FlakyPolicy(0), HangingStepEnv(), limits=RolloutLimits(timeout_s=0.2)))
    assert traj.stop_reason == "rollout_timeout"

    class B(ProblemGroupBuilder):
        pass

    HangingStepEnv.made = 0
    builder = B(HangingStepEnv, num_envs=3)
    strategy = MinViableGroup(3, max_retries=1, per_rollout_timeout=0.2)
    group = asyncio.run(do_group_rollout(builder, FlakyPolicy(0), strategy))
    assert group.get_total_rewards() == [1.0, 1.0, 1.0]
    assert [e.error_type for e in group.rollout_errors] == ["TimeoutError"]


class ListObservationEnv(Env):
    async def initial_observation(self):
        return [1, 2, 3], [0]  # forgot ModelInput.from_ints

    async def step(self, action, *, extra=None):
        raise AssertionError("unreachable")


class TupleStepEnv(Env):
    async def initial_observation(self):
        return ModelInput.from_ints([1]), [0]

    async def step(self, action, *, extra=None):
        return (1.0, True)


class ListPolicy(TokenCompleter):
    async def __call__(self, model_input, stop, *, max_tokens=None):
        return [55, IM_END]


def test_wrong_types_from_envs_and_policies_raise_type_errors():
    with pytest.raises(TypeError, match="ModelInput.from_ints"):
        asyncio.run(do_single_rollout(FlakyPolicy(0), ListObservationEnv()))
    with pytest.raises(TypeError, match="StepResult"):
        asyncio.run(do_single_rollout(FlakyPolicy(0), TupleStepEnv()))
    with pytest.raises(TypeError, match="TokensWithLogprobs"):
        asyncio.run(do_single_rollout(ListPolicy(), TupleStepEnv()))


def test_wrong_types_from_callers_raise():
    with pytest.raises(TypeError):
        ModelInput.from_ints("abc")
    with pytest.raises(ValueError):
        ModelInput.from_ints([3, -1])
    with pytest.raises(TypeError):
        ModelInput.from_ints([1.5])
    with pytest.raises(TypeError):
        TOK.encode([1, 2])
    with pytest.raises(TypeError):
        TOK.decode("abc")
    with pytest.raises(TypeError):
        TokensWithLogprobs(tokens="abc", maybe_logprobs=None)
    with pytest.raises(TypeError):
        RENDERER.parse_response("7<|im_end|>")
    with pytest.raises(TypeError):
        RENDERER.build_generation_prompt("Say 7.")
    with pytest.raises(TypeError):
        load_tokenizer(42)
    with pytest.raises(ValueError):
        RetryOnFailure(max_retries=-1)
    with pytest.raises(ValueError):
        MinViableGroup(min_successful=0)
    with pytest.raises(ValueError):
        MinViableGroup(min_successful=1, per_rollout_timeout=-2)
