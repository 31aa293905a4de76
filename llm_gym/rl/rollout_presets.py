"""Rollout configuration presets (the cookbook's `tinker_cookbook.rl.rollout_presets`).

`RolloutConfig` bundles the per-rollout policies of `llm_gym.rl.rollout_limits` (`limits`,
`parse_errors`, `termination`) with the env's tool-execution mode, so a recipe configures rollout
behaviour with one value. `simple()` is the unconfigured behaviour; `agentic()` is the cookbook's
preset for multi-turn tool use (10 turns, 65536 trajectory tokens, 30 tool calls, 2 consecutive
parse-error retries, limit-stopped rewards clamped to <= 0, timed-out groups not graded, grading
bounded at 900 s, sequential tools). Consume a config with `run_rollout(policy, env,
config=cfg)` (limits and parse errors) and `do_group_rollout(..., termination=cfg.termination)`.

Deliberate differences from the cookbook: a frozen dataclass instead of a `chz` class, and no
`build_agent_tool_env` here to read `tool_execution` (llm-gym's tool envs take their own
settings); the field is carried and validated so configs round-trip.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from llm_gym.rl.rollout_limits import ParseErrorPolicy, RolloutLimits, TerminationRewardPolicy
from llm_gym.rl.rollout_strategy import FailFast, MinViableGroup, RolloutStrategy

__all__ = [
    "RolloutConfig",
    "ToolExecution",
    "agentic",
    "default_rollout_config_for_model",
    "default_rollout_strategy_for_model",
    "simple",
]

ToolExecution: TypeAlias = Literal["sequential", "parallel", "concurrent_safe"]
"""How an env runs one turn's tool calls: "parallel" (the default, all at once), "sequential"
(in the order requested; for tools sharing state) or "concurrent_safe" (reserved)."""

_TOOL_EXECUTIONS = ("sequential", "parallel", "concurrent_safe")


@dataclass(frozen=True)
class RolloutConfig:
    """All rollout policy knobs in one object; `RolloutConfig()` (== `simple()`) changes nothing.

    - `limits`: per-rollout budgets, enforced by the rollout loop (default: unlimited).
    - `parse_errors`: parse-failure handling pushed into the env (None: one-shot semantics).
    - `termination`: stop-reason-keyed reward semantics for `do_group_rollout` (None: untouched).
    - `tool_execution`: "parallel" (default), "sequential" or "concurrent_safe".
    """

    limits: RolloutLimits = field(default_factory=RolloutLimits)
    parse_errors: ParseErrorPolicy | None = None
    termination: TerminationRewardPolicy | None = None
    tool_execution: ToolExecution = "parallel"

    def __post_init__(self) -> None:
        if self.tool_execution not in _TOOL_EXECUTIONS:
            raise ValueError(
                f"RolloutConfig.tool_execution must be one of {_TOOL_EXECUTIONS}, "
                f"got {self.tool_execution!r}"
            )


def simple() -> RolloutConfig:
    """No budgets, one-shot parse failures, rewards untouched, parallel tools: the same as
    passing no configuration at all."""
    return RolloutConfig()


def agentic() -> RolloutConfig:
    """The cookbook's preset for multi-turn tool-use RL: budgets turn a long tail of looping
    rollouts into recorded stop reasons; content parse errors are retried twice with a corrective
    message; a limit-stopped trajectory never scores above 0 (grade, then clamp), timed-out groups
    skip grading and grading is bounded at 900 s; tools run in the order the model asked."""
    return RolloutConfig(
        limits=RolloutLimits(max_turns=10, max_trajectory_tokens=65536, max_tool_calls=30),
        parse_errors=ParseErrorPolicy(max_consecutive=2),
        termination=TerminationRewardPolicy(
            zero_reward_on_limit=True,
            skip_grading_on_timeout=True,
            grader_timeout_seconds=900,
        ),
        tool_execution="sequential",
    )


def _is_agentic_model(model_name: str) -> bool:
    return model_name.split(":", 1)[0].startswith("thinkingmachines/Inkling")


def default_rollout_config_for_model(model_name: str) -> RolloutConfig:
    """`agentic()` for the cookbook's tool-use models (`thinkingmachines/Inkling*`), else
    `simple()`."""
    return agentic() if _is_agentic_model(model_name) else simple()


def default_rollout_strategy_for_model(model_name: str) -> RolloutStrategy:
    """`MinViableGroup()` for the cookbook's tool-use models, else `FailFast()`."""
    return MinViableGroup() if _is_agentic_model(model_name) else FailFast()
