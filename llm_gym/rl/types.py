"""The seed API's types: episodes (`Env`), their records (`Transition`, `Trajectory`), groups of
episodes on one task (`EnvGroupBuilder`, `TrajectoryGroup`) and datasets of groups (`RLDataset`).

Names and semantics follow the Tinker cookbook's `tinker_cookbook.rl.types`, so environment code
written for the cookbook runs after switching its imports to `llm_gym`. Rollouts
(`llm_gym.rl.rollouts`) drive these objects; `llm_gym.rl.data_processing` turns the resulting
trajectory groups into training data.
"""

from __future__ import annotations

import logging

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Sequence, TypedDict

from llm_gym.completers import StopCondition, TokensWithLogprobs
from llm_gym.model_input import ModelInput

Action = list[int]
Observation = ModelInput
Logprobs = list[float]
Metrics = dict[str, float | int]
Logs = dict[str, Any]


class ActionExtra(TypedDict, total=False):
    """What the rollout loop tells `Env.step` about the action besides its tokens (the cookbook's
    `ActionExtra`): `stop_reason` is the sampler's ("stop" or "length"). A plain dict at run time."""

    stop_reason: str


class StopReason(StrEnum):
    """Why a trajectory ended (the cookbook's values). An env that knows records it as a one-hot
    metric `metrics["stop/<reason>"] = 1.0` on its final transition, and the rollout loop mirrors
    it onto `Trajectory.stop_reason`; rollout limits set the reason themselves."""

    COMPLETED = "completed"
    TOOL_STOPPED = "tool_stopped"
    MAX_TURNS = "max_turns"
    MAX_TOKENS = "max_tokens"
    MAX_SAMPLED_TOKENS = "max_sampled_tokens"
    MAX_TOOL_CALLS = "max_tool_calls"
    CONTEXT_OVERFLOW = "context_overflow"
    PARSE_ERROR = "parse_error"
    ROLLOUT_TIMEOUT = "rollout_timeout"


STOP_METRIC_PREFIX = "stop/"
"""Metric-key prefix of the one-hot stop-reason metrics (`stop/<reason>`)."""

PARSE_ERROR_MASKED_METRIC_KEY = "parse_error_masked"
"""One-hot metric marking a transition as a masked parse-error turn (the cookbook's name)."""


def stop_reason_from_metrics(metrics: Metrics) -> str | None:
    """The `<reason>` of the first `stop/<reason>` metric key, or None."""
    for key in metrics:
        if key.startswith(STOP_METRIC_PREFIX):
            return key[len(STOP_METRIC_PREFIX):]
    return None

__all__ = [
    "Action",
    "ActionExtra",
    "Env",
    "EnvGroupBuilder",
    "InitialObservationOverflow",
    "Logprobs",
    "Logs",
    "Metrics",
    "Observation",
    "RLDataset",
    "RLDatasetBuilder",
    "RolloutError",
    "PARSE_ERROR_MASKED_METRIC_KEY",
    "STOP_METRIC_PREFIX",
    "StepResult",
    "StopCondition",
    "StopReason",
    "Trajectory",
    "TrajectoryGroup",
    "Transition",
]


@dataclass
class StepResult:
    """What `Env.step` returns: the step's reward, whether the episode ended, and (if not) the next
    observation and stop condition. `metrics` are numbers to average; `logs` free-form records."""

    reward: float
    episode_done: bool
    next_observation: Observation
    next_stop_condition: StopCondition
    metrics: Metrics = field(default_factory=dict)
    logs: Logs = field(default_factory=dict)


@dataclass
class Transition:
    """One (observation, sampled action, reward) step of an episode."""

    ob: Observation
    ac: TokensWithLogprobs
    reward: float
    episode_done: bool
    metrics: Metrics = field(default_factory=dict)
    logs: Logs = field(default_factory=dict)


@dataclass(frozen=True)
class Trajectory:
    """A finished episode. `stop_reason` is the rollout limit that cut it short ("max_turns",
    "max_tokens", "rollout_timeout"), or, when the env ended it, the reason the env recorded as a
    `stop/<reason>` metric on its last transition (None when it recorded none)."""

    transitions: list[Transition]
    final_ob: Observation
    stop_reason: str | None = None


@dataclass(frozen=True)
class InitialObservationOverflow:
    """What `Env.initial_observation` may return instead of `(observation, stop_condition)` when
    the prompt alone is already over the env's token budget (the cookbook's sentinel).

    The rollout loop ends the episode at once: one synthetic transition (empty observation and
    action, `episode_done=True`) carrying `reward`, `metrics` and `logs`, with
    `Trajectory.stop_reason` read from the `stop/<reason>` metric (e.g. "max_tokens"). The
    transition yields no training tokens, but its reward counts toward the group's baseline, and
    one oversized prompt does not fail the group.
    """

    reward: float
    metrics: Metrics = field(default_factory=dict)
    logs: Logs = field(default_factory=dict)


@dataclass(frozen=True)
class RolloutError:
    """A rollout that raised, recorded on its group instead of being lost silently."""

    error_type: str
    error_message: str


class Env(ABC):
    """A single episode with one agent. Stateful and single-use: make a new one per episode.

    Contract: `initial_observation()` is awaited once, then `step(action)` until a `StepResult` has
    `episode_done=True`. An action is the list of sampled token ids. Bad model output (unparseable,
    out-of-vocabulary ids, empty, huge) must produce a defined reward, not an exception.
    """

    @abstractmethod
    async def initial_observation(
        self,
    ) -> tuple[Observation, StopCondition] | InitialObservationOverflow: ...

    @abstractmethod
    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult: ...


def release_env(env: Any) -> None:
    """Release what an episode holds (a tool's sandbox, in-flight tool runs) by calling the env's
    optional, synchronous `close()`: the cookbook's `Env` has none, so it is duck-typed, and an env
    without one holds nothing. Called by `TextEnv` when an episode is replaced or the env closed,
    by `GymEnvGroupBuilder.cleanup()` for its group and by `llm_gym.scripted`; safe to call twice.
    An error in `close()` is logged, not raised: cleanup must not mask the rollout's outcome."""
    close = getattr(env, "close", None)
    if not callable(close):
        return
    try:
        close()
    except Exception:  # noqa: BLE001 - a broken close must not break cleanup
        logging.getLogger(__name__).exception("releasing %s failed", type(env).__name__)


class EnvGroupBuilder(ABC):
    """Makes a group of envs that face the same task (or play each other).

    GRPO-style algorithms centre rewards within a group; `compute_group_rewards` sees the whole
    group's trajectories, which is how pairwise judges and self-play games assign rewards. It
    defaults to zero for everyone. `cleanup()` is called once after the group's rollouts, whether
    they succeeded or not. Builders must be picklable so rollouts can run in worker processes.
    """

    @abstractmethod
    async def make_envs(self) -> Sequence[Env]: ...

    async def compute_group_rewards(
        self, trajectory_group: list[Trajectory], env_group: Sequence[Env]
    ) -> list[tuple[float, Metrics]]:
        return [(0.0, {}) for _ in trajectory_group]

    async def cleanup(self) -> None:
        return None

    def logging_tags(self) -> list[str]:
        return []


@dataclass
class TrajectoryGroup:
    """The trajectories of one `EnvGroupBuilder`, with the group-level rewards and metrics."""

    trajectories_G: list[Trajectory]
    final_rewards_G: list[float]
    metrics_G: list[Metrics]
    rollout_errors: list[RolloutError] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not (len(self.trajectories_G) == len(self.final_rewards_G) == len(self.metrics_G)):
            raise ValueError(
                f"TrajectoryGroup: {len(self.trajectories_G)} trajectories, "
                f"{len(self.final_rewards_G)} final rewards and {len(self.metrics_G)} metrics "
                "must have the same length"
            )

    def get_total_rewards(self) -> list[float]:
        """Each trajectory's return: the sum of its step rewards plus its group reward."""
        return [
            sum(t.reward for t in traj.transitions) + final
            for traj, final in zip(self.trajectories_G, self.final_rewards_G)
        ]


class RLDataset(ABC):
    """Batches of `EnvGroupBuilder`s, indexed by step: `get_batch(i)` is deterministic."""

    @abstractmethod
    def get_batch(self, index: int) -> Sequence[EnvGroupBuilder]: ...

    @abstractmethod
    def __len__(self) -> int: ...


class RLDatasetBuilder(ABC):
    """Builds the (train, optional test) datasets: `train, test = await builder()`."""

    @abstractmethod
    async def __call__(self) -> tuple[RLDataset, RLDataset | None]: ...
