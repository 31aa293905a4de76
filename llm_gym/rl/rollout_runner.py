"""The single-rollout loop (the cookbook's `tinker_cookbook.rl.rollout_runner`).

`run_rollout(policy, env, limits=..., parse_errors=..., config=...)` drives one episode and
returns its `Trajectory`; `llm_gym.rl.rollouts.do_single_rollout` is this loop with only
`limits=`. It enforces `llm_gym.rl.rollout_limits.RolloutLimits` each turn (see that module for
the check order), pushes `max_tool_calls` and the `ParseErrorPolicy` into the env through its
`set_max_tool_calls` / `set_parse_error_policy` seams, turns an `InitialObservationOverflow` into
a one-transition trajectory, and counts per-turn truncations the env continued past in
`metrics["num_truncations_max_turn_tokens"]` on the last transition. A runner-imposed stop marks
the last transition `episode_done` and gives it the one-hot `stop/<reason>` metric, as the
cookbook does; the env is not stepped again, so it grades nothing.

Deliberate differences from the cookbook:

- `hooks=` (`RolloutHooks`: message injection, stop-reason overrides) is not implemented; passing
  hooks raises NotImplementedError.
- A runner-imposed stop before the first turn completed (the deadline passing in
  `initial_observation` or the first policy call, or a prompt with no room left) returns a
  trajectory with no transitions, where the cookbook synthesises an empty one with reward 0.
  (An `InitialObservationOverflow` does get the cookbook's synthetic transition.)
- `rollout_timeout_seconds` is hard: a call that ignores cancellation is abandoned after
  `CANCEL_GRACE_S` rather than awaited (issue 8); a `TimeoutError` raised by the policy or env
  itself propagates like any error instead of being read as the rollout deadline.
- Wrong return types from the env or policy raise TypeError naming the culprit.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import time
from typing import TYPE_CHECKING

from llm_gym.completers import TokenCompleter, TokensWithLogprobs
from llm_gym.model_input import ModelInput
from llm_gym.rl.rollout_limits import ParseErrorPolicy, RolloutLimits
from llm_gym.rl.rollout_strategy import _bounded
from llm_gym.rl.types import (
    STOP_METRIC_PREFIX,
    Env,
    InitialObservationOverflow,
    StopReason,
    Trajectory,
    Transition,
    stop_reason_from_metrics,
)

if TYPE_CHECKING:
    from llm_gym.rl.rollout_presets import RolloutConfig

logger = logging.getLogger(__name__)

__all__ = ["SamplingTurnTimeoutError", "TRUNCATION_METRIC_KEY", "run_rollout"]

TRUNCATION_METRIC_KEY = "num_truncations_max_turn_tokens"
"""On the last transition: how many turns stopped at the per-turn token cap (sampler stop reason
"length") while the env went on (the cookbook's key; absent when there were none)."""


class SamplingTurnTimeoutError(Exception):
    """One policy call exceeded `RolloutLimits.sampling_turn_timeout_seconds`. Raised (not a
    graceful stop) because there is no partial turn to keep; retrying strategies retry it. Not a
    TimeoutError subclass, as in the cookbook."""


class _DeadlineReached(Exception):
    """The rollout's own `rollout_timeout_seconds` ran out (as opposed to a TimeoutError raised
    by the policy or env, which propagates like any error)."""


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


def _push_seams(env: Env, limits: RolloutLimits, parse_errors: ParseErrorPolicy | None) -> None:
    if limits.max_tool_calls is not None:
        setter = getattr(env, "set_max_tool_calls", None)
        if setter is None:
            logger.warning(
                "RolloutLimits.max_tool_calls=%d is configured, but %s has no set_max_tool_calls "
                "method; the limit will not be enforced.", limits.max_tool_calls, type(env).__name__,
            )
        else:
            setter(limits.max_tool_calls)
    if parse_errors is not None:
        setter = getattr(env, "set_parse_error_policy", None)
        if setter is None:
            logger.warning(
                "A ParseErrorPolicy is configured, but %s has no set_parse_error_policy method; "
                "its one-shot parse-failure semantics apply.", type(env).__name__,
            )
        else:
            setter(parse_errors)


async def run_rollout(
    policy: TokenCompleter,
    env: Env,
    *,
    limits: RolloutLimits | None = None,
    hooks: object | None = None,
    parse_errors: ParseErrorPolicy | None = None,
    config: "RolloutConfig | None" = None,
) -> Trajectory:
    """Run one episode to its end (or to a limit) and return its `Trajectory`.

    `config` (a `RolloutConfig`, e.g. `rollout_presets.agentic()`) supplies `limits` and
    `parse_errors` where those were not given; with neither, an env's own `rollout_limits`
    attribute (if it is a `RolloutLimits`) is used. The policy is called as `policy(ob, stop)`,
    with `max_tokens=` added only when a limit sets a per-call budget, so completers without that
    keyword work. Exceptions from the policy or env propagate (strategies decide what to do with
    them), as does `SamplingTurnTimeoutError`.
    """
    if hooks is not None:
        raise NotImplementedError(
            "run_rollout(hooks=...) is not implemented in llm_gym; drive the env yourself or "
            "express the behaviour as RolloutLimits / ParseErrorPolicy"
        )
    if config is not None:
        limits = limits if limits is not None else config.limits
        parse_errors = parse_errors if parse_errors is not None else config.parse_errors
    if limits is None:
        own = getattr(env, "rollout_limits", None)
        limits = own if isinstance(own, RolloutLimits) else RolloutLimits()
    _push_seams(env, limits, parse_errors)

    timeout = limits.rollout_timeout_seconds
    deadline = None if timeout is None else time.monotonic() + timeout
    turn_timeout = limits.sampling_turn_timeout_seconds

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

    async def sample(ob, stop, max_tokens):
        call = policy(ob, stop) if max_tokens is None else policy(ob, stop, max_tokens=max_tokens)
        if turn_timeout is None:
            return await call
        try:
            return await _bounded(call, turn_timeout, "sampling turn")
        except TimeoutError as exc:
            raise SamplingTurnTimeoutError(
                f"a policy call exceeded sampling_turn_timeout_seconds={turn_timeout}"
            ) from exc

    transitions: list[Transition] = []
    truncations = 0  # turns cut at the per-turn token cap ("length") that the env continued past
    sampled_tokens = 0

    def finish(trajectory: Trajectory) -> Trajectory:
        if truncations and transitions:  # as the cookbook's rollout runner reports it
            transitions[-1].metrics[TRUNCATION_METRIC_KEY] = float(truncations)
        return trajectory

    def runner_stop(reason: str, final_ob: ModelInput) -> Trajectory:
        if transitions:
            last = transitions[-1]
            metrics = {k: v for k, v in last.metrics.items() if not k.startswith(STOP_METRIC_PREFIX)}
            metrics[f"{STOP_METRIC_PREFIX}{reason}"] = 1.0
            transitions[-1] = dataclasses.replace(last, episode_done=True, metrics=metrics)
        return finish(Trajectory(transitions, final_ob, stop_reason=str(reason)))

    try:
        first = await bounded(env.initial_observation())
    except _DeadlineReached:
        return Trajectory([], ModelInput.empty(), stop_reason=StopReason.ROLLOUT_TIMEOUT)
    if isinstance(first, InitialObservationOverflow):
        transition = Transition(
            ob=ModelInput.empty(),
            ac=TokensWithLogprobs(tokens=[], maybe_logprobs=[]),
            reward=float(first.reward),
            episode_done=True,
            metrics=dict(first.metrics),
            logs=dict(first.logs),
        )
        return Trajectory([transition], ModelInput.empty(),
                          stop_reason=stop_reason_from_metrics(transition.metrics))
    try:
        ob, stop = first
    except (TypeError, ValueError):
        raise TypeError(
            f"{type(env).__name__}.initial_observation() must return (observation, stop_condition) "
            f"or InitialObservationOverflow, got {type(first).__name__}"
        ) from None
    ob = _check_observation(ob, f"{type(env).__name__}.initial_observation()")
    while True:
        if deadline is not None and time.monotonic() >= deadline:
            return runner_stop(StopReason.ROLLOUT_TIMEOUT, ob)
        if limits.max_turns is not None and len(transitions) >= limits.max_turns:
            return runner_stop(StopReason.MAX_TURNS, ob)
        # Cumulative budgets: a remainder of <= 1 token cannot make a useful turn (cookbook rule);
        # the trajectory budget wins when both are exhausted.
        max_tokens = limits.max_turn_tokens
        if limits.max_trajectory_tokens is not None:
            room = limits.max_trajectory_tokens - ob.length
            if room <= 1:
                return runner_stop(StopReason.MAX_TOKENS, ob)
            max_tokens = room if max_tokens is None else min(max_tokens, room)
        if limits.max_sampled_tokens is not None:
            room = limits.max_sampled_tokens - sampled_tokens
            if room <= 1:
                return runner_stop(StopReason.MAX_SAMPLED_TOKENS, ob)
            max_tokens = room if max_tokens is None else min(max_tokens, room)
        try:
            ac = await bounded(sample(ob, stop, max_tokens))
            if not hasattr(ac, "tokens"):
                raise TypeError(
                    f"the policy must return TokensWithLogprobs, got {type(ac).__name__}"
                )
            if _step_takes_extra(type(env)):  # as the cookbook's loop does
                result = await bounded(env.step(ac.tokens, extra={"stop_reason": ac.stop_reason}))
            else:
                result = await bounded(env.step(ac.tokens))
        except _DeadlineReached:
            if not transitions:
                return Trajectory([], ob, stop_reason=StopReason.ROLLOUT_TIMEOUT)
            return runner_stop(StopReason.ROLLOUT_TIMEOUT, ob)
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
        sampled_tokens += len(ac.tokens)
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
