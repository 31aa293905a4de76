"""Rollouts and strategies with real asyncio: multi-turn episodes, failures, retries, timeouts and
per-rollout limits."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from llm_gym.completers import TokenCompleter, TokensWithLogprobs
from llm_gym.model_input import ModelInput
from llm_gym.rl import (
    Env,
    EnvGroupBuilder,
    FailFast,
    MinViableGroup,
    RetryOnFailure,
    RolloutLimits,
    RolloutResult,
    RolloutStrategy,
    StepResult,
    do_group_rollout,
    do_group_rollout_and_filter_constant_reward,
    do_single_rollout,
)
from llm_gym.exceptions import AllTrajectoriesFailedError


def skip_or_group(builder, policy, strategy=None, **kw):
    """The caller-side wrapper with no constant-reward filter: None for a dropped group."""
    return asyncio.run(do_group_rollout_and_filter_constant_reward(
        policy, builder, None, None, False, strategy=strategy, **kw))

PROMPT = [1, 2, 3]


class ChatEnv(Env):
    """`turns` turns; each observation is the previous one + the action + one env token (100+turn),
    the prefix property of multi-turn chat. Reward per step: 0.1 * turn number. `mode` scripts
    misbehaviour: "ok", "raise" (step raises), "hang" (step never returns)."""

    def __init__(self, turns: int = 3, mode: str = "ok", log: list | None = None):
        self.turns, self.mode, self.log = turns, mode, log if log is not None else []
        self.turn = 0
        self.context = list(PROMPT)

    async def initial_observation(self):
        return ModelInput.from_ints(self.context), [0]

    async def step(self, action, *, extra=None):
        if self.mode == "raise":
            raise RuntimeError("env exploded")
        if self.mode == "hang":
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                self.log.append("cancelled")
                raise
        self.turn += 1
        self.context += list(action) + [100 + self.turn]
        done = self.turn >= self.turns
        return StepResult(
            reward=0.1 * self.turn,
            episode_done=done,
            next_observation=ModelInput.empty() if done else ModelInput.from_ints(self.context),
            next_stop_condition=[0],
            metrics={"turn": self.turn},
        )


@dataclass
class Builder(EnvGroupBuilder):
    """Makes `n` ChatEnvs. `plan[k]` gives the modes of the k-th make_envs() call's envs (later
    calls: all "ok"), so a test can make one slot fail once, or always."""

    n: int = 4
    turns: int = 2
    plan: list = field(default_factory=list)
    always: dict = field(default_factory=dict)  # slot -> mode on every call
    group_rewards: list | None = None
    make_envs_error: Exception | None = None
    make_calls: int = 0
    cleanups: int = 0
    log: list = field(default_factory=list)

    async def make_envs(self):
        if self.make_envs_error is not None:
            raise self.make_envs_error
        modes = self.plan[self.make_calls] if self.make_calls < len(self.plan) else ["ok"] * self.n
        self.make_calls += 1
        modes = [self.always.get(i, m) for i, m in enumerate(modes)]
        return [ChatEnv(self.turns, mode, self.log) for mode in modes]

    async def compute_group_rewards(self, trajectory_group, env_group):
        if self.group_rewards is None:
            return await super().compute_group_rewards(trajectory_group, env_group)
        return self.group_rewards

    async def cleanup(self):
        self.cleanups += 1

    def logging_tags(self):
        return ["test"]


class EchoPolicy(TokenCompleter):
    """Answers turn k (1-based, counted per observation length) with tokens [10k, 10k+1]."""

    def __init__(self, delay_s: float = 0.0):
        self.delay_s = delay_s
        self.seen: list[tuple[list[int], int | None]] = []

    async def __call__(self, model_input, stop, *, max_tokens=None):
        self.seen.append((model_input.to_ints(), max_tokens))
        await asyncio.sleep(self.delay_s)
        k = (model_input.length - len(PROMPT)) // 3 + 1
        return TokensWithLogprobs([10 * k, 10 * k + 1], [-0.5, -0.25])


def run(coro):
    return asyncio.run(coro)


def test_single_multi_turn_rollout():
    policy = EchoPolicy()
    traj = run(do_single_rollout(policy, ChatEnv(turns=3)))
    assert traj.stop_reason is None
    assert [t.ob.to_ints() for t in traj.transitions] == [
        [1, 2, 3],
        [1, 2, 3, 10, 11, 101],
        [1, 2, 3, 10, 11, 101, 20, 21, 102],
    ]
    assert [t.ac.tokens for t in traj.transitions] == [[10, 11], [20, 21], [30, 31]]
    assert [t.reward for t in traj.transitions] == pytest.approx([0.1, 0.2, 0.3])
    assert [t.episode_done for t in traj.transitions] == [False, False, True]
    assert traj.transitions[1].metrics == {"turn": 2}
    assert traj.final_ob == ModelInput.empty()
    assert [mt for _, mt in policy.seen] == [None, None, None]


def test_cookbook_style_policy_without_max_tokens_works():
    class CookbookPolicy(TokenCompleter):
        async def __call__(self, model_input, stop):  # the cookbook's signature
            return TokensWithLogprobs([7], [-1.0])

    traj = run(do_single_rollout(CookbookPolicy(), ChatEnv(turns=2)))
    assert [t.ac.tokens for t in traj.transitions] == [[7], [7]]


def test_group_rewards_are_added_to_returns():
    b = Builder(n=3, turns=1, group_rewards=[(1.0, {"rank": 0}), (0.0, {"rank": 1}), (-1.0, {"rank": 2})])
    group = run(do_group_rollout(b, EchoPolicy()))
    assert group.final_rewards_G == [1.0, 0.0, -1.0]
    assert group.metrics_G == [{"rank": 0}, {"rank": 1}, {"rank": 2}]
    assert group.get_total_rewards() == pytest.approx([1.1, 0.1, -0.9])
    assert b.cleanups == 1 and group.rollout_errors == []


def test_fail_fast_propagates_cancels_siblings_and_cleans_up():
    b = Builder(n=3, plan=[["hang", "raise", "hang"]])
    with pytest.raises(RuntimeError, match="env exploded"):
        run(do_group_rollout(b, EchoPolicy()))
    assert b.cleanups == 1
    assert b.log == ["cancelled", "cancelled"], "FailFast must cancel the rollouts still running"
    with pytest.raises(RuntimeError, match="env exploded"):
        run(do_group_rollout(Builder(n=2, plan=[["ok", "raise"]]), EchoPolicy(), FailFast()))


def test_retry_on_failure_recovers_a_rollout_that_fails_once():
    b = Builder(n=4, turns=2, plan=[["ok", "raise", "ok", "ok"]])
    group = run(do_group_rollout(b, EchoPolicy(), RetryOnFailure(max_retries=1)))
    assert group is not None
    assert len(group.trajectories_G) == 4
    assert all(len(t.transitions) == 2 and t.stop_reason is None for t in group.trajectories_G)
    assert [(e.error_type, e.error_message) for e in group.rollout_errors] == [("RuntimeError", "env exploded")]
    assert group.get_total_rewards() == pytest.approx([0.3] * 4)
    assert b.make_calls == 2 and b.cleanups == 1


def test_retry_on_failure_with_exhausted_budget_raises_and_the_wrapper_skips_the_group():
    # A retry runs on make_envs()[0] of a fresh group, which (always={0: "raise"}) fails again.
    b = Builder(n=3, always={0: "raise"})
    with pytest.raises(RuntimeError, match="env exploded"):  # the last failure itself, as the cookbook
        run(do_group_rollout(b, EchoPolicy(), RetryOnFailure(max_retries=2)))
    assert b.make_calls == 3 and b.cleanups == 1  # the first group + 2 retries
    b2 = Builder(n=3, always={0: "raise"})
    assert skip_or_group(b2, EchoPolicy(), RetryOnFailure(max_retries=2)) is None
    assert b2.make_calls == 3 and b2.cleanups == 1


def test_retry_on_failure_raises_the_failure_from_execute():
    b = Builder(n=2, always={1: "raise"})
    with pytest.raises(RuntimeError, match="env exploded"):
        run(RetryOnFailure(max_retries=0).execute(b, EchoPolicy()))


def test_retry_on_failure_stops_the_rest_once_the_budget_is_spent():
    b = Builder(n=3, plan=[["raise", "hang", "hang"]])
    assert skip_or_group(b, EchoPolicy(), RetryOnFailure(max_retries=0)) is None
    assert b.log == ["cancelled", "cancelled"]


def test_min_viable_group_keeps_the_survivors():
    # slot 2 fails at its first step, before any rollout finished: below the floor, so it is
    # retried on make_envs()[0] of a fresh group, which succeeds.
    b = Builder(n=4, always={2: "raise"})
    group = run(do_group_rollout(b, EchoPolicy(), MinViableGroup(min_successful=3)))
    assert len(group.trajectories_G) == 4 and b.make_calls == 2
    assert [e.error_type for e in group.rollout_errors] == ["RuntimeError"]
    # no retries: the survivors are kept as long as they reach the floor
    b2 = Builder(n=4, always={2: "raise"})
    group2 = run(do_group_rollout(b2, EchoPolicy(), MinViableGroup(min_successful=3, max_retries=0)))
    assert len(group2.trajectories_G) == 3 and len(group2.final_rewards_G) == 3
    assert len(group2.rollout_errors) == 1
    # below the floor: AllTrajectoriesFailedError, which the wrapper turns into a skipped group
    b3 = Builder(n=4, always={0: "raise", 2: "raise"})
    with pytest.raises(AllTrajectoriesFailedError, match="below the minimum viable group size 3"):
        run(do_group_rollout(b3, EchoPolicy(), MinViableGroup(min_successful=3, max_retries=0)))
    assert b3.cleanups == 1
    b4 = Builder(n=4, always={0: "raise", 2: "raise"})
    assert skip_or_group(b4, EchoPolicy(), MinViableGroup(min_successful=3, max_retries=0)) is None


def test_min_viable_group_defaults_match_the_cookbook():
    s = MinViableGroup()
    assert (s.min_successful, s.max_retries, s.per_rollout_timeout) == (None, 3, None)
    assert [s.floor(g) for g in (1, 4, 5, 8, 16)] == [1, 3, 4, 6, 12]
    assert MinViableGroup(min_successful=2).floor(16) == 2


class DelayedEnv(ChatEnv):
    """One turn; the step sleeps `delay` seconds, then behaves as `mode` ("ok" or "raise")."""

    def __init__(self, delay: float, mode: str = "ok", tag: float = 0.0):
        super().__init__(turns=1, mode="ok")
        self.delay, self.fails, self.tag = delay, mode == "raise", tag

    async def step(self, action, *, extra=None):
        await asyncio.sleep(self.delay)
        if self.fails:
            raise RuntimeError(f"failed after {self.delay}s")
        result = await super().step(action, extra=extra)
        return StepResult(result.reward + self.tag, result.episode_done, result.next_observation,
                          result.next_stop_condition, result.metrics)


@dataclass
class ScriptedBuilder(Builder):
    """make_envs() call k returns `groups[k]()` (the last one again after that)."""

    groups: list = field(default_factory=list)

    async def make_envs(self):
        self.make_calls += 1
        return self.groups[min(self.make_calls, len(self.groups)) - 1]()


def test_min_viable_group_retries_only_while_below_the_floor():
    fresh = lambda: [DelayedEnv(0.0)]  # noqa: E731
    # the failures come before the one success: below the floor, so each is retried
    b = ScriptedBuilder(groups=[lambda: [DelayedEnv(0.2), DelayedEnv(0.0, "raise"),
                                         DelayedEnv(0.0, "raise")], fresh])
    group = run(do_group_rollout(b, EchoPolicy(), MinViableGroup(min_successful=2, max_retries=3)))
    assert len(group.trajectories_G) == 3 and b.make_calls == 3
    # the failures come after the floor was met: recorded, not retried
    b2 = ScriptedBuilder(groups=[lambda: [DelayedEnv(0.0), DelayedEnv(0.1, "raise"),
                                          DelayedEnv(0.1, "raise")], fresh])
    group2 = run(do_group_rollout(b2, EchoPolicy(), MinViableGroup(min_successful=1, max_retries=3)))
    assert len(group2.trajectories_G) == 1 and b2.make_calls == 1
    assert [e.error_message for e in group2.rollout_errors] == ["failed after 0.1s"] * 2


def test_results_come_in_completion_order():
    def envs():
        return [DelayedEnv(0.2, tag=0.0), DelayedEnv(0.1, tag=1.0), DelayedEnv(0.0, tag=2.0)]

    for strategy in (RetryOnFailure(), MinViableGroup()):
        group = run(do_group_rollout(ScriptedBuilder(groups=[envs]), EchoPolicy(), strategy))
        assert [t.transitions[0].reward for t in group.trajectories_G] == pytest.approx([2.1, 1.1, 0.1])
    fail_fast = run(do_group_rollout(ScriptedBuilder(groups=[envs]), EchoPolicy(), FailFast()))
    assert [t.transitions[0].reward for t in fail_fast.trajectories_G] == pytest.approx([0.1, 1.1, 2.1])


def test_per_rollout_timeout_retries_a_hung_rollout():
    b = Builder(n=3, plan=[["ok", "ok", "hang"]])
    group = run(do_group_rollout(b, EchoPolicy(), RetryOnFailure(max_retries=1, per_rollout_timeout=0.3)))
    assert len(group.trajectories_G) == 3
    assert [e.error_type for e in group.rollout_errors] == ["TimeoutError"]
    assert b.log == ["cancelled"]


def test_group_level_errors():
    for strategy in (None, FailFast()):
        b = Builder(make_envs_error=OSError("sandbox down"))
        with pytest.raises(OSError, match="sandbox down"):
            run(do_group_rollout(b, EchoPolicy(), strategy))
        assert b.cleanups == 1
    for strategy in (RetryOnFailure(), MinViableGroup(1)):
        b = Builder(make_envs_error=OSError("sandbox down"))
        with pytest.raises(OSError, match="sandbox down"):  # after the retries, as the cookbook
            run(do_group_rollout(b, EchoPolicy(), strategy))
        assert b.cleanups == 1
        b2 = Builder(make_envs_error=OSError("sandbox down"))
        assert skip_or_group(b2, EchoPolicy(), strategy) is None
        assert b2.cleanups == 1
    with pytest.raises(OSError, match="sandbox down"):  # FailFast: the wrapper lets it propagate
        skip_or_group(Builder(make_envs_error=OSError("sandbox down")), EchoPolicy(), FailFast())


def test_grader_failure_propagates_and_is_skipped_by_the_wrapper():
    @dataclass
    class BadGrader(Builder):
        async def compute_group_rewards(self, trajectory_group, env_group):
            raise RuntimeError("grader down")

    for strategy in (FailFast(), RetryOnFailure(), MinViableGroup()):
        with pytest.raises(RuntimeError, match="grader down"):
            run(do_group_rollout(BadGrader(n=2), EchoPolicy(), strategy))
    assert skip_or_group(BadGrader(n=2), EchoPolicy(), RetryOnFailure()) is None
    with pytest.raises(RuntimeError, match="grader down"):
        skip_or_group(BadGrader(n=2), EchoPolicy(), FailFast())


def test_wrapper_filters_constant_reward_groups_and_caps_tokens():
    policy = EchoPolicy()
    kept = asyncio.run(do_group_rollout_and_filter_constant_reward(
        policy, Builder(n=2, turns=1), 5, 1.0, False))
    assert kept is not None and [mt for _, mt in policy.seen] == [5, 5]
    assert asyncio.run(do_group_rollout_and_filter_constant_reward(
        EchoPolicy(), Builder(n=2, turns=1), None, None, True)) is None
    varied = Builder(n=2, turns=1, group_rewards=[(0.0, {}), (1.0, {})])
    assert asyncio.run(do_group_rollout_and_filter_constant_reward(
        EchoPolicy(), varied, None, None, True)) is not None


def test_wrong_number_of_group_rewards_is_a_bug_never_skipped():
    b = Builder(n=2, turns=1, group_rewards=[(0.0, {})])
    with pytest.raises(ValueError, match="1 rewards for 2 trajectories"):
        run(do_group_rollout(b, EchoPolicy(), RetryOnFailure()))
    assert b.cleanups == 1


def test_cookbook_style_custom_strategy_without_limits():
    @dataclass(frozen=True)
    class Sequential(RolloutStrategy):
        async def execute(self, env_group_builder, policy):  # the cookbook's signature
            envs = await env_group_builder.make_envs()
            return RolloutResult([await do_single_rollout(policy, e) for e in envs], envs, [])

    group = run(do_group_rollout(Builder(n=2, turns=1), EchoPolicy(), Sequential()))
    assert len(group.trajectories_G) == 2


def test_limit_max_turns():
    traj = run(do_single_rollout(EchoPolicy(), ChatEnv(turns=5), limits=RolloutLimits(max_turns=2)))
    assert traj.stop_reason == "max_turns"
    assert len(traj.transitions) == 2
    assert traj.final_ob.to_ints() == [1, 2, 3, 10, 11, 101, 20, 21, 102]


def test_limit_max_trajectory_tokens():
    policy = EchoPolicy()
    # observations have 3, 6, 9 tokens; with a 10-token budget the third turn would have room for
    # 1 token only, which (as in the cookbook) cannot make a useful turn: the rollout stops there.
    traj = run(do_single_rollout(policy, ChatEnv(turns=5), limits=RolloutLimits(max_trajectory_tokens=10)))
    assert [mt for _, mt in policy.seen] == [7, 4]
    assert traj.stop_reason == "max_tokens"
    assert len(traj.transitions) == 2
    assert traj.final_ob.length == 9
    # the runner-imposed stop marks the last transition terminal with the one-hot metric
    assert traj.transitions[-1].episode_done and traj.transitions[-1].metrics["stop/max_tokens"] == 1.0
    policy2 = EchoPolicy()
    limits = RolloutLimits(max_trajectory_tokens=10, max_tokens_per_turn=5)
    run(do_single_rollout(policy2, ChatEnv(turns=1), limits=limits))
    assert policy2.seen[0][1] == 5


def test_limit_timeout_on_env_and_on_policy():
    traj = run(do_single_rollout(EchoPolicy(), ChatEnv(mode="hang"), limits=RolloutLimits(timeout_s=0.2)))
    assert traj.stop_reason == "rollout_timeout"
    # stopped before any turn completed: one synthetic empty transition, reward 0 (cookbook shape)
    (only,) = traj.transitions
    assert only.ac.tokens == [] and only.reward == 0.0 and only.metrics == {"stop/rollout_timeout": 1.0}
    slow = EchoPolicy(delay_s=0.15)
    traj2 = run(do_single_rollout(slow, ChatEnv(turns=50), limits=RolloutLimits(timeout_s=0.4)))
    assert traj2.stop_reason == "rollout_timeout"
    assert 1 <= len(traj2.transitions) < 50
    assert traj2.final_ob.to_ints()[: len(PROMPT)] == PROMPT


def test_a_timeout_error_raised_by_the_policy_is_an_error_not_a_limit():
    class FlakyClient(TokenCompleter):
        async def __call__(self, model_input, stop, *, max_tokens=None):
            raise TimeoutError("upstream sampler timed out")

    with pytest.raises(TimeoutError, match="upstream"):
        run(do_single_rollout(FlakyClient(), ChatEnv(), limits=RolloutLimits(timeout_s=60)))


def test_limits_validate():
    for kwargs in ({"max_turns": 0}, {"timeout_s": -1}, {"max_trajectory_tokens": 0}, {"max_turns": True}):
        with pytest.raises(ValueError, match="positive"):
            RolloutLimits(**kwargs)


def test_limits_pass_through_group_rollout_and_strategies():
    for strategy in (FailFast(), RetryOnFailure(), MinViableGroup(1)):
        group = run(do_group_rollout(Builder(n=2, turns=9), EchoPolicy(), strategy,
                                     limits=RolloutLimits(max_turns=1)))
        assert [t.stop_reason for t in group.trajectories_G] == ["max_turns", "max_turns"]


def test_cancelling_a_group_rollout_cancels_rollouts_and_cleans_up():
    b = Builder(n=2, plan=[["hang", "hang"]])

    async def main():
        task = asyncio.ensure_future(do_group_rollout(b, EchoPolicy(), RetryOnFailure()))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(main())
    assert b.log == ["cancelled", "cancelled"] and b.cleanups == 1


def test_step_gets_the_samplers_stop_reason_and_env_stop_metrics_become_the_stop_reason():
    seen = []

    class Recorder(ChatEnv):
        async def step(self, action, *, extra=None):
            seen.append(extra)
            result = await super().step(action)
            if result.episode_done:
                result.metrics["stop/parse_error"] = 1.0  # the env says why it ended
            return result

    class NoExtraEnv(ChatEnv):  # a duck-typed env whose step takes no `extra`
        async def step(self, action):
            return await super().step(action)

    traj = run(do_single_rollout(EchoPolicy(), Recorder(turns=2)))
    assert seen == [{"stop_reason": "stop"}, {"stop_reason": "stop"}]
    assert traj.stop_reason == "parse_error"
    assert run(do_single_rollout(EchoPolicy(), NoExtraEnv(turns=1))).stop_reason is None


def test_turns_truncated_at_the_token_cap_are_counted_on_the_last_transition():
    class Truncating(TokenCompleter):
        def __init__(self, stops):
            self.stops = list(stops)

        async def __call__(self, model_input, stop, *, max_tokens=None):
            return TokensWithLogprobs([5, 6], [-0.1, -0.1], stop_reason=self.stops.pop(0))

    traj = run(do_single_rollout(Truncating(["length", "stop", "length"]), ChatEnv(turns=3)))
    # the last "length" ended the episode, so only the first counts (the env went on after it)
    assert traj.transitions[-1].metrics["num_truncations_max_turn_tokens"] == 1.0
    assert all("num_truncations_max_turn_tokens" not in t.metrics for t in traj.transitions[:-1])
    plain = run(do_single_rollout(Truncating(["stop"] * 3), ChatEnv(turns=3)))
    assert all("num_truncations_max_turn_tokens" not in t.metrics for t in plain.transitions)
    capped = run(do_single_rollout(Truncating(["length"] * 3), ChatEnv(turns=5),
                                   limits=RolloutLimits(max_turns=3)))
    assert capped.stop_reason == "max_turns"
    assert capped.transitions[-1].metrics["num_truncations_max_turn_tokens"] == 3.0
