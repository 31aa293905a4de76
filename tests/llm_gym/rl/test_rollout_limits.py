"""`rl.rollout_limits`, `rl.rollout_runner` and `rl.rollout_presets`: validation, the old
`RolloutLimits` names, the per-call sampling timeout and the env seams."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from llm_gym.completers import TokenCompleter, TokensWithLogprobs
from llm_gym.model_input import ModelInput
from llm_gym.rl import (
    Env,
    InitialObservationOverflow,
    ParseErrorPolicy,
    RolloutConfig,
    RolloutLimits,
    SamplingTurnTimeoutError,
    StepResult,
    TerminationRewardPolicy,
    run_rollout,
)
from llm_gym.rl import rollouts, types
from llm_gym.rl.rollout_presets import agentic, simple


class OneTurn(Env):
    def __init__(self):
        self.tool_cap = self.policy = None

    def set_max_tool_calls(self, n):
        self.tool_cap = n

    def set_parse_error_policy(self, policy):
        self.policy = policy

    async def initial_observation(self):
        return ModelInput.from_ints([1, 2]), [0]

    async def step(self, action, *, extra=None):
        return StepResult(1.0, True, ModelInput.empty(), [0], metrics={"stop/completed": 1.0})


class Echo(TokenCompleter):
    def __init__(self, delay=0.0):
        self.delay, self.seen = delay, []

    async def __call__(self, ob, stop, max_tokens=None):
        self.seen.append(max_tokens)
        await asyncio.sleep(self.delay)
        return TokensWithLogprobs([5], [-0.1])


def test_old_names_are_aliases():
    limits = RolloutLimits(timeout_s=3, max_tokens_per_turn=8)
    assert (limits.rollout_timeout_seconds, limits.max_turn_tokens) == (3, 8)
    assert (limits.timeout_s, limits.max_tokens_per_turn) == (3, 8)
    assert RolloutLimits(timeout_s=3) == RolloutLimits(rollout_timeout_seconds=3)
    assert dataclasses.replace(limits, max_turns=2).max_turn_tokens == 8
    with pytest.raises(ValueError, match="disagree"):
        RolloutLimits(timeout_s=3, rollout_timeout_seconds=4)
    assert rollouts.RolloutLimits is RolloutLimits  # still importable where trainers look


@pytest.mark.parametrize("kwargs", [{"max_sampled_tokens": 0}, {"max_tool_calls": -1},
                                    {"sampling_turn_timeout_seconds": 0}, {"max_turn_tokens": True}])
def test_limits_validate(kwargs):
    with pytest.raises(ValueError, match="positive value or None"):
        RolloutLimits(**kwargs)


def test_policies_validate():
    with pytest.raises(ValueError, match="non-negative"):
        ParseErrorPolicy(max_consecutive=-1)
    with pytest.raises(ValueError, match="details"):
        ParseErrorPolicy(retry_message_template="try again")
    with pytest.raises(ValueError, match="positive"):
        TerminationRewardPolicy(grader_timeout_seconds=0)
    with pytest.raises(ValueError, match="tool_execution"):
        RolloutConfig(tool_execution="async")
    assert simple() == RolloutConfig() and agentic().limits.max_turns == 10


def test_sampling_turn_timeout_raises():
    with pytest.raises(SamplingTurnTimeoutError, match="sampling_turn_timeout_seconds"):
        asyncio.run(run_rollout(Echo(delay=5), OneTurn(),
                                limits=RolloutLimits(sampling_turn_timeout_seconds=0.05)))


def test_seams_and_config_are_pushed_into_the_env():
    env = OneTurn()
    cfg = RolloutConfig(limits=RolloutLimits(max_tool_calls=4, max_turn_tokens=3),
                        parse_errors=ParseErrorPolicy(max_consecutive=1))
    policy = Echo()
    traj = asyncio.run(run_rollout(policy, env, config=cfg))
    assert env.tool_cap == 4 and env.policy.max_consecutive == 1
    assert policy.seen == [3] and traj.stop_reason == "completed"
    with pytest.raises(TypeError, match="hooks must be a RolloutHooks"):
        asyncio.run(run_rollout(Echo(), OneTurn(), hooks=object()))


def test_initial_observation_overflow_is_a_one_transition_trajectory():
    assert types.InitialObservationOverflow is InitialObservationOverflow

    class TooLong(OneTurn):
        async def initial_observation(self):
            return InitialObservationOverflow(-1.0, {"stop/max_tokens": 1.0}, {"why": "long"})

    traj = asyncio.run(run_rollout(Echo(), TooLong()))
    (tr,) = traj.transitions
    assert traj.stop_reason == "max_tokens" and tr.reward == -1.0 and tr.episode_done
    assert tr.ob.length == 0 and tr.ac.tokens == [] and tr.logs == {"why": "long"}
