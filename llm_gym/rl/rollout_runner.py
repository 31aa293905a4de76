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

`hooks=` (a `RolloutHooks`) calls into the loop as the cookbook's do: `on_turn_begin` may return
messages to inject (through the env's `inject_messages`, before the budget checks, so injected
tokens count), `on_stop_reason` sees every stop (env-reported or runner-imposed) and may keep,
rename or clear it (a cleared env stop un-terminates the transition and the episode goes on; a
cleared budget stop samples that turn without the exhausted budget), `on_grade` runs after an
env-ended episode and `on_artifacts` before every graceful return. A stop before any turn
completed gets a synthetic empty transition (reward 0) carrying the stop metric, as in the cookbook.

Deliberate differences from the cookbook:

- `rollout_timeout_seconds` is hard: a call that ignores cancellation is abandoned after
  `CANCEL_GRACE_S` rather than awaited (issue 8); a `TimeoutError` raised by the policy or env
  itself propagates like any error instead of being read as the rollout deadline.
- Wrong return types from the env or policy raise TypeError naming the culprit.
- The between-turns deadline check goes through `on_stop_reason` as in the cookbook, but a hook
  that clears it lifts the deadline for the rest of the episode (the cookbook's outer timeout
  would still cancel the next call that suspends).
- The deadline bounds each env/policy/hook call in the loop; `on_grade` / `on_artifacts` run
  after the loop, unbounded (the cookbook runs them inside its timeout scope except on the
  timeout path itself).
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast

from llm_gym.completers import StopCondition, TokenCompleter, TokensWithLogprobs
from llm_gym.model_input import ModelInput
from llm_gym.renderers.base import Message
from llm_gym.rl.rollout_limits import ParseErrorPolicy, RolloutLimits
from llm_gym.rl.rollout_strategy import _bounded
from llm_gym.rl.types import (
    STOP_METRIC_PREFIX,
    ActionExtra,
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

__all__ = [
    "RolloutHooks",
    "RolloutState",
    "SamplingTurnTimeoutError",
    "SupportsParseErrorPolicy",
    "SupportsToolCallLimit",
    "TRUNCATION_METRIC_KEY",
    "run_rollout",
    "stop_reason_from_metrics",
]

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


class SupportsToolCallLimit(Protocol):
    """An env that enforces `RolloutLimits.max_tool_calls` itself (tools run inside the env); the
    runner calls `set_max_tool_calls` once, at rollout start."""

    def set_max_tool_calls(self, max_tool_calls: int) -> None: ...


class SupportsParseErrorPolicy(Protocol):
    """An env that takes a `ParseErrorPolicy` (parsing happens inside the env); the runner calls
    `set_parse_error_policy` once, at rollout start."""

    def set_parse_error_policy(self, policy: ParseErrorPolicy) -> None: ...


@dataclass
class RolloutState:
    """What hooks see: policy calls completed (`turn_index`), the current observation's length,
    action tokens sampled so far, per-turn truncations continued past, seconds since the rollout
    started, and the transitions so far (a live list: read, do not mutate)."""

    turn_index: int
    observation_tokens: int
    sampled_tokens: int
    num_length_truncations: int
    elapsed_seconds: float
    transitions: list[Transition]


class RolloutHooks(Protocol):
    """Callbacks into `run_rollout`; every method has a no-op default, so subclass and override
    what you need (any object with these async methods works too)."""

    async def on_turn_begin(self, state: RolloutState) -> list[Message] | None:
        """Before each policy call: messages to inject (the env needs `inject_messages`, else
        TypeError), or None."""
        return None

    async def on_stop_reason(self, reason: str, state: RolloutState) -> str | None:
        """A stop is about to end the rollout: return `reason` to accept it, another string to
        record instead, or None to clear it and go on. Asked for the between-turns deadline check
        (clearing it lifts the deadline), not when a call is cut off by the deadline."""
        return reason

    async def on_grade(self, state: RolloutState) -> None:
        """Once, after the env ended the episode (its grading has run); not for runner stops."""
        return None

    async def on_artifacts(self, state: RolloutState) -> None:
        """Once, right before the trajectory is returned on any graceful path."""
        return None


def _check_observation(ob: object, where: str) -> ModelInput:
    if isinstance(ob, ModelInput):
        return ob
    if hasattr(ob, "to_ints") and hasattr(ob, "length"):
        return ModelInput.from_ints(cast(Any, ob).to_ints())  # a duck-typed ModelInput
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
    hooks: RolloutHooks | None = None,
    parse_errors: ParseErrorPolicy | None = None,
    config: "RolloutConfig | None" = None,
) -> Trajectory:
    """Run one episode to its end (or to a limit) and return its `Trajectory`.

    `config` (a `RolloutConfig`, e.g. `rollout_presets.agentic()`) supplies `limits` and
    `parse_errors` where those were not given; with neither, an env's own `rollout_limits`
    attribute (if it is a `RolloutLimits`) is used. `hooks` see the module docstring. The policy is
    called as `policy(ob, stop)`, with `max_tokens=` added only when a limit sets a per-call
    budget, so completers without that keyword work. Exceptions from the policy, env or hooks
    propagate (strategies decide what to do with them), as does `SamplingTurnTimeoutError`.
    """
    if config is not None:
        limits = limits if limits is not None else config.limits
        parse_errors = parse_errors if parse_errors is not None else config.parse_errors
    if limits is None:
        own = getattr(env, "rollout_limits", None)
        limits = own if isinstance(own, RolloutLimits) else _NO_LIMITS
    _push_seams(env, limits, parse_errors)
    return await _RolloutRun(policy, env, limits, _complete_hooks(hooks)).run()


_NO_LIMITS = RolloutLimits()  # immutable; one shared instance (built per episode, it cost ~15 us)

_HOOK_METHODS = ("on_turn_begin", "on_stop_reason", "on_grade", "on_artifacts")


class _DefaultsFor(RolloutHooks):
    """A duck-typed hooks object with some of the methods; the rest are the no-op defaults."""

    def __init__(self, hooks: object) -> None:
        for name in _HOOK_METHODS:
            if hasattr(hooks, name):
                setattr(self, name, getattr(hooks, name))


def _complete_hooks(hooks: object | None) -> RolloutHooks | None:
    if hooks is None or all(hasattr(hooks, name) for name in _HOOK_METHODS):
        return cast("RolloutHooks | None", hooks)  # None, or duck-typed with every hook method
    if not any(hasattr(hooks, name) for name in _HOOK_METHODS):
        raise TypeError(
            f"hooks must be a RolloutHooks (async methods {', '.join(_HOOK_METHODS)}), got "
            f"{type(hooks).__name__}"
        )
    return _DefaultsFor(hooks)


@dataclass
class _RolloutRun:
    """One rollout's state and control flow; single-use, like the env."""

    policy: TokenCompleter
    env: Env
    limits: RolloutLimits
    hooks: RolloutHooks | None
    transitions: list[Transition] = field(default_factory=list)
    turn_index: int = 0  # policy calls completed (not len(transitions): a synthetic one is no turn)
    sampled_tokens: int = 0
    truncations: int = 0  # turns cut at the per-turn cap ("length") that the env continued past
    ob: ModelInput = field(default_factory=ModelInput.empty)
    stop: StopCondition = field(default_factory=list)
    start: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        timeout = self.limits.rollout_timeout_seconds
        self.deadline = None if timeout is None else self.start + timeout

    async def run(self) -> Trajectory:
        try:
            return await self._loop()
        except _DeadlineReached:
            return await self._runner_stop(StopReason.ROLLOUT_TIMEOUT)

    # -- bounded calls -------------------------------------------------------------------------

    async def _bounded(self, awaitable):
        if self.deadline is None:
            return await awaitable
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            if asyncio.iscoroutine(awaitable):
                awaitable.close()
            raise _DeadlineReached
        try:
            # Not asyncio.wait_for: it waits for the cancelled call to unwind, however long that
            # takes; this gives it CANCEL_GRACE_S and then abandons it.
            return await _bounded(awaitable, remaining, "episode")
        except TimeoutError:
            if time.monotonic() >= self.deadline:
                raise _DeadlineReached from None
            raise

    async def _sample(self, max_tokens: int | None) -> TokensWithLogprobs:
        if max_tokens is None:
            call = self.policy(self.ob, self.stop)
        else:
            call = self.policy(self.ob, self.stop, max_tokens=max_tokens)
        turn_timeout = self.limits.sampling_turn_timeout_seconds
        if turn_timeout is not None:
            try:
                call = _bounded(call, turn_timeout, "sampling turn")
                return await self._bounded(call)
            except TimeoutError as exc:
                raise SamplingTurnTimeoutError(
                    f"a policy call exceeded sampling_turn_timeout_seconds={turn_timeout}"
                ) from exc
        return await self._bounded(call)

    # -- the loop ------------------------------------------------------------------------------

    def _state(self) -> RolloutState:
        return RolloutState(
            turn_index=self.turn_index,
            observation_tokens=self.ob.length,
            sampled_tokens=self.sampled_tokens,
            num_length_truncations=self.truncations,
            elapsed_seconds=time.monotonic() - self.start,
            transitions=self.transitions,
        )

    async def _resolve(self, reason: str) -> str | None:
        """A stop passed through `on_stop_reason`; None when a hook cleared it."""
        if self.hooks is None:
            return reason
        resolved = await self._bounded(self.hooks.on_stop_reason(str(reason), self._state()))
        return None if resolved is None else str(resolved)

    def _pre_turn_stop(self) -> str | None:
        if self.deadline is not None and time.monotonic() >= self.deadline:
            return StopReason.ROLLOUT_TIMEOUT
        if self.limits.max_turns is not None and self.turn_index >= self.limits.max_turns:
            return StopReason.MAX_TURNS
        return None

    def _budget_stop(self) -> str | None:
        # A remainder of <= 1 token cannot make a useful turn (cookbook rule); the trajectory
        # budget wins when both are exhausted.
        lim = self.limits
        if lim.max_trajectory_tokens is not None and lim.max_trajectory_tokens - self.ob.length <= 1:
            return StopReason.MAX_TOKENS
        if lim.max_sampled_tokens is not None and lim.max_sampled_tokens - self.sampled_tokens <= 1:
            return StopReason.MAX_SAMPLED_TOKENS
        return None

    def _per_call_budget(self) -> int | None:
        """Min over the limits that apply; exhausted cumulative terms (reachable only when a hook
        cleared their stop) are left out rather than passed as a useless cap."""
        lim = self.limits
        terms = [] if lim.max_turn_tokens is None else [lim.max_turn_tokens]
        for cap, used in ((lim.max_trajectory_tokens, self.ob.length),
                          (lim.max_sampled_tokens, self.sampled_tokens)):
            if cap is not None and cap - used > 1:
                terms.append(cap - used)
        return min(terms) if terms else None

    async def _loop(self) -> Trajectory:
        first = await self._bounded(self.env.initial_observation())
        if isinstance(first, InitialObservationOverflow):
            return await self._initial_overflow(first)
        try:
            ob, self.stop = first
        except (TypeError, ValueError):
            raise TypeError(
                f"{type(self.env).__name__}.initial_observation() must return (observation, "
                f"stop_condition) or InitialObservationOverflow, got {type(first).__name__}"
            ) from None
        self.ob = _check_observation(ob, f"{type(self.env).__name__}.initial_observation()")
        env_name = type(self.env).__name__
        while True:
            reason = self._pre_turn_stop()
            if reason == StopReason.ROLLOUT_TIMEOUT:
                # The between-turns deadline check asks the hooks too (unbounded: the deadline
                # is what they are asked about); one that clears it lifts the deadline.
                resolved = reason if self.hooks is None else await self.hooks.on_stop_reason(
                    str(reason), self._state())
                if resolved is not None:
                    return await self._runner_stop(str(resolved))
                self.deadline = None
                reason = self._pre_turn_stop()
            if reason is not None:
                resolved = await self._resolve(reason)
                if resolved is not None:
                    return await self._runner_stop(resolved)
            if self.hooks is not None:
                injected = await self._bounded(self.hooks.on_turn_begin(self._state()))
                if injected:
                    await self._inject(list(injected))
            reason = self._budget_stop()
            if reason is not None:
                resolved = await self._resolve(reason)
                if resolved is not None:
                    return await self._runner_stop(resolved)
            ac = await self._sample(self._per_call_budget())
            if not hasattr(ac, "tokens"):
                raise TypeError(f"the policy must return TokensWithLogprobs, got {type(ac).__name__}")
            if _step_takes_extra(type(self.env)):  # as the cookbook's loop does
                step = self.env.step(ac.tokens, extra=ActionExtra(stop_reason=ac.stop_reason))
            else:
                step = self.env.step(ac.tokens)
            result = await self._bounded(step)
            if not (hasattr(result, "reward") and hasattr(result, "episode_done")):
                raise TypeError(f"{env_name}.step() must return a StepResult, got {type(result).__name__}")
            transition = Transition(
                ob=self.ob,
                ac=ac,
                reward=float(result.reward),
                episode_done=bool(result.episode_done),
                metrics=dict(result.metrics),
                logs=dict(result.logs),
            )
            self.transitions.append(transition)
            self.turn_index += 1
            self.sampled_tokens += len(ac.tokens)
            if getattr(ac, "stop_reason", None) == "length" and not result.episode_done:
                self.truncations += 1
            if result.episode_done and result.next_observation is None:
                self.ob = ModelInput.empty()
            else:
                self.ob = _check_observation(result.next_observation, f"{env_name}.step()")
            self.stop = result.next_stop_condition
            if result.episode_done:
                env_reason = stop_reason_from_metrics(transition.metrics)
                if self.hooks is not None and env_reason is not None:
                    resolved = await self._resolve(env_reason)
                    if resolved is None:  # cleared: the episode goes on from the env's next ob
                        transition.episode_done = False
                        _strip_stop_metrics(transition)
                        continue
                    if resolved != env_reason:
                        _strip_stop_metrics(transition)
                        transition.metrics[f"{STOP_METRIC_PREFIX}{resolved}"] = 1.0
                        env_reason = resolved
                return await self._finish(env_reason, graded=True)

    async def _inject(self, messages: list[Message]) -> None:
        inject = getattr(self.env, "inject_messages", None)
        if inject is None:
            raise TypeError(
                "on_turn_begin returned messages to inject, but the environment "
                f"({type(self.env).__name__}) does not support message injection "
                "(no inject_messages method)"
            )
        ob, self.stop = await self._bounded(inject(messages))
        self.ob = _check_observation(ob, f"{type(self.env).__name__}.inject_messages()")

    # -- endings -------------------------------------------------------------------------------

    async def _finish(self, reason: str | None, *, graded: bool) -> Trajectory:
        if self.truncations and self.transitions:  # as the cookbook's rollout runner reports it
            self.transitions[-1].metrics[TRUNCATION_METRIC_KEY] = float(self.truncations)
        trajectory = Trajectory(self.transitions, self.ob, stop_reason=reason)
        if self.hooks is not None:
            state = self._state()
            if graded:
                await self.hooks.on_grade(state)
            await self.hooks.on_artifacts(state)
        return trajectory

    async def _initial_overflow(self, overflow: InitialObservationOverflow) -> Trajectory:
        # One synthetic transition carries the overflow reward and stop metric: no training
        # tokens, but its reward still counts in the group baseline (the cookbook's shape).
        transition = Transition(
            ob=ModelInput.empty(),
            ac=TokensWithLogprobs(tokens=[], maybe_logprobs=[]),
            reward=float(overflow.reward),
            episode_done=True,
            metrics=dict(overflow.metrics),
            logs=dict(overflow.logs),
        )
        self.transitions.append(transition)
        self.ob = ModelInput.empty()
        return await self._finish(stop_reason_from_metrics(transition.metrics), graded=False)

    async def _runner_stop(self, reason: str) -> Trajectory:
        """A stop the env did not see (budgets, max_turns, the deadline): the last transition is
        marked done with the stop metric; with none yet, a synthetic empty one (reward 0)."""
        metric = f"{STOP_METRIC_PREFIX}{reason}"
        if self.transitions:
            last = self.transitions[-1]
            metrics = {k: v for k, v in last.metrics.items() if not k.startswith(STOP_METRIC_PREFIX)}
            metrics[metric] = 1.0
            self.transitions[-1] = dataclasses.replace(last, episode_done=True, metrics=metrics)
        else:
            self.transitions.append(Transition(
                ob=ModelInput.empty(),
                ac=TokensWithLogprobs(tokens=[], maybe_logprobs=[]),
                reward=0.0,
                episode_done=True,
                metrics={metric: 1.0},
            ))
        return await self._finish(str(reason), graded=False)


def _strip_stop_metrics(transition: Transition) -> None:
    for key in [k for k in transition.metrics if k.startswith(STOP_METRIC_PREFIX)]:
        del transition.metrics[key]
