"""Running episodes: `do_single_rollout` (one env, one policy) and `do_group_rollout` (a group
under a `RolloutStrategy`, then group rewards).

Per-rollout `RolloutLimits` (turns, trajectory tokens, wall-clock seconds) end a runaway episode
with a `Trajectory.stop_reason` instead of letting it hang; `cleanup()` of the group builder is
always awaited, also when rollouts fail or the group is skipped.
`do_group_rollout_and_filter_constant_reward` is the cookbook's caller-side wrapper: it turns a
dropped group (or, under an error-tolerant strategy, any group error) into `None`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import time
from dataclasses import dataclass

from llm_gym.completers import TokenCompleter
from llm_gym.exceptions import AllTrajectoriesFailedError
from llm_gym.model_input import ModelInput
from llm_gym.rl.rollout_strategy import FailFast, RolloutStrategy, _bounded
from llm_gym.rl.types import (
    Env,
    EnvGroupBuilder,
    StopReason,
    Trajectory,
    TrajectoryGroup,
    Transition,
    stop_reason_from_metrics,
)

logger = logging.getLogger(__name__)

STOP_MAX_TURNS = StopReason.MAX_TURNS
STOP_MAX_TOKENS = StopReason.MAX_TOKENS
STOP_TIMEOUT = StopReason.ROLLOUT_TIMEOUT
TRUNCATION_METRIC_KEY = "num_truncations_max_turn_tokens"
"""On the last transition: how many turns stopped at the per-turn token cap (sampler stop reason
"length") while the env went on (the cookbook's key; absent when there were none)."""


@dataclass(frozen=True)
class RolloutLimits:
    """Caps on one episode. `None` means no cap.

    - `max_turns`: policy calls per episode; stop reason "max_turns".
    - `max_trajectory_tokens`: observation + sampled tokens of the latest turn (the context the
      policy sees). The policy is asked for at most the room left (`max_tokens=`), and an
      observation that leaves no room ends the episode; stop reason "max_tokens".
    - `timeout_s`: wall-clock seconds for the whole episode (policy calls and env steps); stop
      reason "rollout_timeout". The unfinished turn is dropped; earlier transitions are kept.
    - `max_tokens_per_turn`: `max_tokens=` for every policy call.
    """

    max_turns: int | None = None
    max_trajectory_tokens: int | None = None
    timeout_s: float | None = None
    max_tokens_per_turn: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_turns", "max_trajectory_tokens", "timeout_s", "max_tokens_per_turn"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or value <= 0):
                raise ValueError(f"RolloutLimits.{name} must be positive or None, got {value!r}")


class _DeadlineReached(Exception):
    """The episode's own `timeout_s` ran out (as opposed to a TimeoutError raised by the policy
    or env, which propagates like any error)."""


def _check_observation(ob: object, where: str) -> ModelInput:
    if isinstance(ob, ModelInput):
        return ob
    if hasattr(ob, "to_ints") and hasattr(ob, "length"):
        return ModelInput.from_ints(ob.to_ints())  # a duck-typed ModelInput
    raise TypeError(
        f"{where} must return a ModelInput observation, got {type(ob).__name__}; "
        "wrap token ids with ModelInput.from_ints(tokens)"
    )


_TAKES_EXTRA: dict[type, bool] = {}


def _step_takes_extra(env_type: type) -> bool:
    """Whether `env_type.step` accepts `extra=` (every `Env` does; duck-typed envs written
    without it still work). Cached per class."""
    known = _TAKES_EXTRA.get(env_type)
    if known is None:
        try:
            params = inspect.signature(env_type.step).parameters
            known = "extra" in params or any(
                p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()
            )
        except (TypeError, ValueError):
            known = False
        if len(_TAKES_EXTRA) < 4096:
            _TAKES_EXTRA[env_type] = known
    return known


async def do_single_rollout(
    policy: TokenCompleter, env: Env, *, limits: RolloutLimits | None = None
) -> Trajectory:
    """Run one episode to its end (or to a limit) and return its `Trajectory`.

    The policy is called as `policy(ob, stop)` — with `max_tokens=` added only when a limit sets
    one, so cookbook-style completers without that keyword work. Exceptions from the policy or the
    env propagate (strategies decide what to do with them); so does a wrong return type, as a
    TypeError that names the culprit.
    """
    limits = limits or RolloutLimits()
    deadline = None if limits.timeout_s is None else time.monotonic() + limits.timeout_s

    async def bounded(awaitable):
        if deadline is None:
            return await awaitable
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            if asyncio.iscoroutine(awaitable):
                awaitable.close()
            raise _DeadlineReached
        try:
            # Not asyncio.wait_for: it waits for the cancelled call to unwind, however long that
            # takes; this gives it CANCEL_GRACE_S and then abandons it.
            return await _bounded(awaitable, remaining, "episode")
        except TimeoutError:
            if time.monotonic() >= deadline:
                raise _DeadlineReached from None
            raise

    transitions: list[Transition] = []
    truncations = 0  # turns cut at the per-turn token cap ("length") that the env continued past

    def finish(trajectory: Trajectory) -> Trajectory:
        if truncations and transitions:  # as the cookbook's rollout runner reports it
            transitions[-1].metrics[TRUNCATION_METRIC_KEY] = float(truncations)
        return trajectory

    try:
        first = await bounded(env.initial_observation())
    except _DeadlineReached:
        return Trajectory([], ModelInput.empty(), stop_reason=STOP_TIMEOUT)
    try:
        ob, stop = first
    except (TypeError, ValueError):
        raise TypeError(
            f"{type(env).__name__}.initial_observation() must return (observation, stop_condition), "
            f"got {type(first).__name__}"
        ) from None
    ob = _check_observation(ob, f"{type(env).__name__}.initial_observation()")
    while True:
        if limits.max_turns is not None and len(transitions) >= limits.max_turns:
            return finish(Trajectory(transitions, ob, stop_reason=STOP_MAX_TURNS))
        max_tokens = limits.max_tokens_per_turn
        if limits.max_trajectory_tokens is not None:
            room = limits.max_trajectory_tokens - ob.length
            if room <= 0:
                return finish(Trajectory(transitions, ob, stop_reason=STOP_MAX_TOKENS))
            max_tokens = room if max_tokens is None else min(max_tokens, room)
        try:
            if max_tokens is None:
                ac = await bounded(policy(ob, stop))
            else:
                ac = await bounded(policy(ob, stop, max_tokens=max_tokens))
            if not hasattr(ac, "tokens"):
                raise TypeError(
                    f"the policy must return TokensWithLogprobs, got {type(ac).__name__}"
                )
            if _step_takes_extra(type(env)):  # as the cookbook's loop does
                result = await bounded(env.step(ac.tokens, extra={"stop_reason": ac.stop_reason}))
            else:
                result = await bounded(env.step(ac.tokens))
        except _DeadlineReached:
            return finish(Trajectory(transitions, ob, stop_reason=STOP_TIMEOUT))
        if not (hasattr(result, "reward") and hasattr(result, "episode_done")):
            raise TypeError(f"{type(env).__name__}.step() must return a StepResult, got "
                            f"{type(result).__name__}")
        transitions.append(
            Transition(
                ob=ob,
                ac=ac,
                reward=float(result.reward),
                episode_done=bool(result.episode_done),
                metrics=dict(result.metrics),
                logs=dict(result.logs),
            )
        )
        if getattr(ac, "stop_reason", None) == "length" and not result.episode_done:
            truncations += 1
        if result.episode_done and result.next_observation is None:
            next_ob = ModelInput.empty()
        else:
            next_ob = _check_observation(result.next_observation, f"{type(env).__name__}.step()")
        if result.episode_done:
            return finish(Trajectory(transitions, next_ob,
                                     stop_reason=stop_reason_from_metrics(transitions[-1].metrics)))
        ob, stop = next_ob, result.next_stop_condition


async def do_group_rollout(
    env_group_builder: EnvGroupBuilder,
    policy: TokenCompleter,
    strategy: RolloutStrategy | None = None,
    *,
    limits: RolloutLimits | None = None,
) -> TrajectoryGroup:
    """Roll out a whole group and compute its group rewards.

    Returns the `TrajectoryGroup` (with any retried errors in `rollout_errors`). Errors propagate,
    as in the cookbook, under every strategy: a strategy that gave up (`RetryOnFailure`'s last
    failure, `MinViableGroup`'s `AllTrajectoriesFailedError`) or a failing `make_envs` /
    `compute_group_rewards`. `do_group_rollout_and_filter_constant_reward` turns those into a
    skipped group for strategies whose `catches_group_errors` is True.
    `env_group_builder.cleanup()` is awaited in every case.
    """
    strategy = strategy or FailFast()
    try:
        if limits is None:
            result = await strategy.execute(env_group_builder, policy)
        else:
            result = await strategy.execute(env_group_builder, policy, limits=limits)
        rewards_and_metrics = list(
            await env_group_builder.compute_group_rewards(result.trajectories, result.envs)
        )
        if len(rewards_and_metrics) != len(result.trajectories):
            raise ValueError(
                f"{type(env_group_builder).__name__}.compute_group_rewards returned "
                f"{len(rewards_and_metrics)} rewards for {len(result.trajectories)} trajectories"
            )
        final_rewards = [float(r) for r, _ in rewards_and_metrics]
        metrics = [dict(m) for _, m in rewards_and_metrics]
        return TrajectoryGroup(list(result.trajectories), final_rewards, metrics, list(result.errors))
    finally:
        await env_group_builder.cleanup()


async def do_group_rollout_and_filter_constant_reward(
    sampling_client: TokenCompleter,
    env_group_builder: EnvGroupBuilder,
    max_tokens: int | None,
    temperature: float | None,
    do_remove_constant_reward_groups: bool,
    enable_logging: bool = True,
    strategy: RolloutStrategy | None = None,
    *,
    limits: RolloutLimits | None = None,
) -> TrajectoryGroup | None:
    """`do_group_rollout`, with a group that cannot be used returned as `None` (the cookbook's
    signature and semantics).

    `None` when the strategy dropped the group (`AllTrajectoriesFailedError`, under any strategy),
    when any other error was raised under a strategy whose `catches_group_errors` is True (it is
    logged as a warning), or, with `do_remove_constant_reward_groups`, when every total reward is
    the same. Under `FailFast` other errors propagate.

    `sampling_client` is the policy: any `TokenCompleter` (ours has no Tinker client to wrap).
    `max_tokens`, when not None, caps every turn (`RolloutLimits.max_tokens_per_turn`, unless
    `limits` sets one). `temperature` is the completer's own setting (e.g. `HFSampler`'s) and
    `enable_logging` has no logtree to switch here: both are accepted for signature compatibility
    and otherwise unused.
    """
    strategy = strategy or FailFast()
    if max_tokens is not None:
        limits = limits or RolloutLimits()
        if limits.max_tokens_per_turn is None:
            limits = dataclasses.replace(limits, max_tokens_per_turn=max_tokens)
    try:
        group = await do_group_rollout(env_group_builder, sampling_client, strategy, limits=limits)
    except AllTrajectoriesFailedError as exc:
        logger.warning("%s", exc)
        return None
    except Exception as exc:
        if not strategy.catches_group_errors:
            raise
        logger.warning("rollout error (%s), skipping group %s: %s", type(exc).__name__,
                       env_group_builder.logging_tags(), exc)
        return None
    if do_remove_constant_reward_groups and len(set(group.get_total_rewards())) <= 1:
        return None
    return group
