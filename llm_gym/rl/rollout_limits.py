"""Per-rollout budgets and policies (the cookbook's `tinker_cookbook.rl.rollout_limits`).

`RolloutLimits` bounds one trajectory (turns, tokens, tool calls, seconds); `ParseErrorPolicy`
says how an env answers unparseable model output; `TerminationRewardPolicy` says how rewards
interact with the stop reason a trajectory ended with. This module only declares them: the
rollout loop (`llm_gym.rl.rollout_runner.run_rollout`, which `do_single_rollout` calls) enforces
`RolloutLimits`, message envs consume `ParseErrorPolicy` through `set_parse_error_policy`, and
`do_group_rollout(..., termination=...)` applies `TerminationRewardPolicy`. Every field defaults
to "unconfigured", so a default-constructed object changes nothing.

Check order in a turn (as in the cookbook): the whole-rollout deadline and `max_turns` before
sampling; then the cumulative token budgets (a remainder of <= 1 token ends the rollout,
`max_trajectory_tokens` winning over `max_sampled_tokens`); the policy is then asked for at most
min(`max_turn_tokens`, trajectory room, sampled room) tokens under `sampling_turn_timeout_seconds`.

Deliberate differences from the cookbook:

- Plain frozen dataclasses instead of `chz` classes (no extra dependency); fields, defaults and
  validation ("must be a positive value or None") are the cookbook's. Booleans are rejected where
  a number is expected.
- `RolloutLimits` also accepts llm-gym's earlier names as keyword aliases, kept so existing code
  runs unchanged: `timeout_s` = `rollout_timeout_seconds` and `max_tokens_per_turn` =
  `max_turn_tokens` (also readable as properties). Passing both names of one field with
  different values raises ValueError.
- `rollout_timeout_seconds` is a hard bound: a policy or env call that ignores cancellation is
  abandoned after a short grace (see `llm_gym.rl.rollout_strategy.CANCEL_GRACE_S`) instead of
  being awaited.
"""

from __future__ import annotations

from dataclasses import dataclass

from llm_gym.rl.types import StopReason

__all__ = [
    "DEFAULT_LIMIT_STOP_REASONS",
    "DEFAULT_RETRY_MESSAGE_TEMPLATE",
    "ParseErrorPolicy",
    "RolloutLimits",
    "TerminationRewardPolicy",
]


def _check_positive_or_none(owner: str, name: str, value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(
            f"{owner}.{name} must be a positive value or None (unlimited), got {value!r}"
        )


def _check_non_negative(owner: str, name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(f"{owner}.{name} must be non-negative, got {value!r}")


DEFAULT_RETRY_MESSAGE_TEMPLATE = "The previous message had a formatting issue.\nError: {details}"
"""Corrective user message injected after a recoverable (content) parse failure; `{details}` is
replaced with the parse error's detail (the cookbook's text)."""


@dataclass(frozen=True)
class ParseErrorPolicy:
    """How a rollout answers parse failures in the model's output.

    Structural failures (the response never produced its stop signal) end the episode with
    `StopReason.PARSE_ERROR` and `terminal_reward`; they are never retried. Content failures
    (clean framing, unparseable tool call) are retried up to `max_consecutive` times in a row with
    a corrective user message (`retry_message_template`), the error turn getting
    `-penalty_per_error`; one more ends the episode with `terminal_reward`. A clean turn resets
    the count. `mask_error_turns` marks error turns with `metrics["parse_error_masked"] = 1.0`,
    which `trajectory_to_data` excludes from the loss. With no policy (None) envs keep their
    one-shot semantics (`failed_parse_reward` / `terminate_on_parse_error`).
    """

    max_consecutive: int = 0
    retry_message_template: str = DEFAULT_RETRY_MESSAGE_TEMPLATE
    penalty_per_error: float = 0.0
    terminal_reward: float = 0.0
    mask_error_turns: bool = False

    def __post_init__(self) -> None:
        _check_non_negative("ParseErrorPolicy", "max_consecutive", self.max_consecutive)
        _check_non_negative("ParseErrorPolicy", "penalty_per_error", self.penalty_per_error)
        if "{details}" not in self.retry_message_template:
            raise ValueError(
                "ParseErrorPolicy.retry_message_template must contain the '{details}' placeholder, "
                f"got {self.retry_message_template!r}"
            )


_LIMIT_FIELDS = (
    "max_turns",
    "max_trajectory_tokens",
    "max_sampled_tokens",
    "max_tool_calls",
    "max_turn_tokens",
    "rollout_timeout_seconds",
    "sampling_turn_timeout_seconds",
)


@dataclass(frozen=True, init=False)
class RolloutLimits:
    """Budgets that bound one rollout. `None` (every default) means unlimited; each limit, when
    hit, ends the episode gracefully with its `StopReason` (except the per-call sampling timeout,
    which raises `SamplingTurnTimeoutError` so retrying strategies can retry).

    - `max_turns`: policy calls per rollout; "max_turns".
    - `max_trajectory_tokens`: observation + sampled tokens (the context the policy sees). The
      policy is asked for at most the room left; a room of <= 1 token ends the rollout with
      "max_tokens" (also an initial prompt already over it).
    - `max_sampled_tokens`: cumulative sampled tokens (observations do not count);
      "max_sampled_tokens".
    - `max_tool_calls`: pushed into the env at rollout start through `set_max_tool_calls` (tools
      run inside the env); "max_tool_calls". Ignored, with a warning, by envs without that method.
    - `max_turn_tokens` (alias `max_tokens_per_turn`): `max_tokens=` of every policy call. A turn
      cut there does not end the rollout by itself.
    - `rollout_timeout_seconds` (alias `timeout_s`): wall clock for the whole rollout;
      "rollout_timeout". The unfinished turn is dropped, earlier transitions are kept.
    - `sampling_turn_timeout_seconds`: wall clock for one policy call; raises.
    """

    max_turns: int | None = None
    max_trajectory_tokens: int | None = None
    max_sampled_tokens: int | None = None
    max_tool_calls: int | None = None
    max_turn_tokens: int | None = None
    rollout_timeout_seconds: float | None = None
    sampling_turn_timeout_seconds: float | None = None

    def __init__(
        self,
        *,
        max_turns: int | None = None,
        max_trajectory_tokens: int | None = None,
        max_sampled_tokens: int | None = None,
        max_tool_calls: int | None = None,
        max_turn_tokens: int | None = None,
        rollout_timeout_seconds: float | None = None,
        sampling_turn_timeout_seconds: float | None = None,
        timeout_s: float | None = None,
        max_tokens_per_turn: int | None = None,
    ) -> None:
        rollout_timeout_seconds = _merge_alias(
            "rollout_timeout_seconds", rollout_timeout_seconds, "timeout_s", timeout_s
        )
        max_turn_tokens = _merge_alias(
            "max_turn_tokens", max_turn_tokens, "max_tokens_per_turn", max_tokens_per_turn
        )
        values = dict(
            max_turns=max_turns,
            max_trajectory_tokens=max_trajectory_tokens,
            max_sampled_tokens=max_sampled_tokens,
            max_tool_calls=max_tool_calls,
            max_turn_tokens=max_turn_tokens,
            rollout_timeout_seconds=rollout_timeout_seconds,
            sampling_turn_timeout_seconds=sampling_turn_timeout_seconds,
        )
        for name, value in values.items():
            shown = {"rollout_timeout_seconds": "rollout_timeout_seconds (timeout_s)",
                     "max_turn_tokens": "max_turn_tokens (max_tokens_per_turn)"}.get(name, name)
            _check_positive_or_none("RolloutLimits", shown, value)
            object.__setattr__(self, name, value)

    @property
    def timeout_s(self) -> float | None:
        """Former name of `rollout_timeout_seconds`."""
        return self.rollout_timeout_seconds

    @property
    def max_tokens_per_turn(self) -> int | None:
        """Former name of `max_turn_tokens`."""
        return self.max_turn_tokens


def _merge_alias(name: str, value, alias: str, alias_value):
    if alias_value is None:
        return value
    if value is not None and value != alias_value:
        raise ValueError(
            f"RolloutLimits: {name}={value!r} and its alias {alias}={alias_value!r} disagree; "
            f"pass only {name}"
        )
    return alias_value


DEFAULT_LIMIT_STOP_REASONS: tuple[str, ...] = (
    StopReason.MAX_TOKENS,
    StopReason.MAX_SAMPLED_TOKENS,
    StopReason.MAX_TURNS,
    StopReason.MAX_TOOL_CALLS,
    StopReason.ROLLOUT_TIMEOUT,
)
"""The stop reasons that mean "a budget cut it off" rather than "it ended on its own terms"."""


@dataclass(frozen=True)
class TerminationRewardPolicy:
    """How rewards interact with a trajectory's stop reason, applied by `do_group_rollout`.

    - `zero_reward_on_limit`: grade normally, then clamp the total reward of a trajectory whose
      `stop_reason` is in `limit_stop_reasons` to `min(total, 0.0)` (by lowering its group
      reward; clamped members get `metrics["zero_reward_on_limit"] = 1.0`).
    - `skip_grading_on_timeout`: with `zero_reward_on_limit` and "rollout_timeout" in
      `limit_stop_reasons`, skip `compute_group_rewards` (every group reward 0.0) when every
      member of the group timed out.
    - `grader_timeout_seconds`: bound on `compute_group_rewards`; exceeding it raises
      TimeoutError (a group-level error).
    - `pass_all_messages_to_grader`: read by message envs whose grader sees messages (False: only
      the messages generated during the rollout).
    """

    zero_reward_on_limit: bool = False
    limit_stop_reasons: tuple[str, ...] = DEFAULT_LIMIT_STOP_REASONS
    skip_grading_on_timeout: bool = False
    grader_timeout_seconds: float | None = None
    pass_all_messages_to_grader: bool = False

    def __post_init__(self) -> None:
        _check_positive_or_none(
            "TerminationRewardPolicy", "grader_timeout_seconds", self.grader_timeout_seconds
        )
        object.__setattr__(self, "limit_stop_reasons", tuple(self.limit_stop_reasons))
