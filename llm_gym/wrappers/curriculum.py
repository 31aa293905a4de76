"""Curriculum learning over an env's difficulty knobs: `Curriculum`, `CurriculumTracker` and
`CurriculumRLDataset`.

A `Curriculum` is configuration: a ladder of values per knob (level i sets every knob to its i-th
value), thresholds on the running solve rate, the window that rate is measured over, and how many
episodes a level must see before it may change. `CurriculumTracker` is its state machine: fed one
batch's outcomes at a time (`update`), it moves one level up when the rate reaches `promote_above`
and one level down when it falls below `demote_below` -- no randomness, so the same outcomes in the
same order give the same levels. `CurriculumRLDataset` is the `RLDataset` a trainer consumes: one
`SourceRLDataset` per level (`llm_gym.wrappers.source`, so a batch at a fixed level has that
dataset's seeds and episodes), whose group builders report each episode's outcome
(`llm_gym.rl.outcome.episode_correct`, the one definition of solved) from `compute_group_rewards`,
which every group rollout calls, and tag each episode's last transition with `curriculum/...`
metrics, the per-episode metrics a trainer's step log averages. The level moves only when the next
batch is asked for, never inside a batch.
"""

from __future__ import annotations

import difflib
import warnings
from collections import deque
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from llm_gym.env_source import EnvSource
from llm_gym.rl.outcome import episode_correct
from llm_gym.rl.types import Env, Metrics, RLDataset, Trajectory
from llm_gym.text_env import load_tokenizer_and_renderer, resolve_source
from llm_gym.wrappers.grouping import (
    _SPLIT_STREAMS,
    DEFAULT_N_BATCHES,
    _check_batch_index,
    _check_dataset_args,
)
from llm_gym.wrappers.source import (
    EnvFromSource,
    SourceEnvGroupBuilder,
    SourceRLDataset,
    _registered_spec,
    env_source_for_id,
    is_source_id,
)

__all__ = ["Curriculum", "CurriculumEnvGroupBuilder", "CurriculumRLDataset", "CurriculumTracker", "int_ladder"]

METRIC_PREFIX = "curriculum/"


def int_ladder(first: int, last: int, step: int = 1) -> list[int]:
    """The integers `first, first + step, ..., last`, both ends included (a negative `step`
    counts down): a knob's ladder written as a range, e.g. `int_ladder(10, 100, 10)`."""
    for name, value in (("first", first), ("last", last), ("step", step)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"int_ladder: {name} must be an int, got {value!r}")
    if step == 0 or (last - first) * step < 0:
        raise ValueError(f"int_ladder({first}, {last}, {step}): step must be non-zero and lead "
                         f"from first to last")
    if (last - first) % step:
        reachable = first + (last - first) // step * step
        raise ValueError(f"int_ladder({first}, {last}, {step}): steps of {step} from {first} "
                         f"miss {last}; use last={reachable}")
    return list(range(first, last + (1 if step > 0 else -1), step))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class Curriculum:
    """Which knobs a curriculum steps, through which values, and when.

    The running solve rate is over the episodes played at the current level only (it starts
    afresh whenever the level changes). After each batch, once the level has seen `min_episodes`
    episodes: a rate >= `promote_above` moves one level up, a rate < `demote_below` one level
    down; never past either end of the ladder.
    """

    knobs: Mapping[str, Sequence[Any]]
    """Each knob's ladder, easiest value first: level i sets every knob to its i-th value, so the
    ladders have the same length (lists, tuples, `range`s or `int_ladder(first, last, step)`)."""
    promote_above: float = 0.8
    """Move up when the running solve rate is at least this; in (0, 1]."""
    demote_below: float = 0.3
    """Move down when the running solve rate is below this; in [0, promote_above) (0: never)."""
    window: int = 64
    """The running solve rate is the mean of the level's last `window` episodes (or, with `ema`,
    an exponential moving average of span `window`)."""
    ema: bool = False
    """Measure the rate as an exponential moving average (weight `1 - 2 / (window + 1)` per older
    episode, normalised over the level's episodes) instead of a mean over the last `window`."""
    min_episodes: int = 64
    """Episodes a level must see, since it was entered, before it may change (hysteresis)."""
    start_level: int = 0
    """The level of the first batch (an index into the ladders)."""

    def __post_init__(self) -> None:
        if not isinstance(self.knobs, Mapping) or not self.knobs:
            raise ValueError("Curriculum.knobs must map each knob to its ladder of values, e.g. "
                             f"{{'max_number': [10, 100, 1000]}}; got {self.knobs!r}")
        ladders: dict[str, tuple[Any, ...]] = {}
        for name, ladder in self.knobs.items():
            if not isinstance(name, str):
                raise TypeError(f"Curriculum.knobs: knob names must be strings, got {name!r}")
            if isinstance(ladder, (str, bytes)) or not isinstance(ladder, (Sequence, range)):
                raise TypeError(f"Curriculum.knobs[{name!r}] must be a list of values, easiest "
                                f"first, got {ladder!r}")
            if len(ladder) == 0:
                raise ValueError(f"Curriculum.knobs[{name!r}] is empty; give it at least one value")
            ladders[name] = tuple(ladder)
        lengths = {name: len(ladder) for name, ladder in ladders.items()}
        if len(set(lengths.values())) > 1:
            raise ValueError(f"Curriculum.knobs: every ladder needs one value per level, but their "
                             f"lengths differ: {lengths}")
        object.__setattr__(self, "knobs", ladders)
        if not _is_number(self.promote_above) or not 0 < self.promote_above <= 1:
            raise ValueError(f"Curriculum.promote_above must be in (0, 1], got {self.promote_above!r}")
        if not _is_number(self.demote_below) or not 0 <= self.demote_below < 1:
            raise ValueError(f"Curriculum.demote_below must be in [0, 1), got {self.demote_below!r}")
        if not self.demote_below < self.promote_above:
            raise ValueError(f"Curriculum thresholds out of order: demote_below ({self.demote_below}) "
                             f"must be below promote_above ({self.promote_above})")
        for name in ("window", "min_episodes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"Curriculum.{name} must be a positive int, got {value!r}")
        if not isinstance(self.ema, bool):
            raise TypeError(f"Curriculum.ema must be a bool, got {self.ema!r}")
        level = self.start_level
        if isinstance(level, bool) or not isinstance(level, int) or not 0 <= level < self.n_levels:
            raise ValueError(f"Curriculum.start_level must be a level in [0, {self.n_levels - 1}], "
                             f"got {level!r}")

    @property
    def n_levels(self) -> int:
        return len(next(iter(self.knobs.values())))

    def values(self, level: int) -> dict[str, Any]:
        """The knob values of `level`: `{knob: ladder[level]}`."""
        if not 0 <= level < self.n_levels:
            raise IndexError(f"level {level} is out of range for {self.n_levels} levels")
        return {name: ladder[level] for name, ladder in self.knobs.items()}


class CurriculumTracker:
    """A `Curriculum`'s state: the current `level` and the solve rate measured at it.

    `update(solved)` adds one batch's outcomes, in order, then decides once (see `Curriculum`);
    `state_dict()` / `load_state_dict()` export and restore the state (JSON-able), so a resumed
    run continues at the same level with the same window.
    """

    def __init__(self, curriculum: Curriculum) -> None:
        if not isinstance(curriculum, Curriculum):
            raise TypeError(f"curriculum must be a Curriculum, got {type(curriculum).__name__}")
        self.curriculum = curriculum
        self.level = curriculum.start_level
        self.episodes_at_level = 0
        self._recent: deque[float] = deque(maxlen=curriculum.window)
        self._ema_sum = 0.0  # sum of decay**age * outcome over the level's episodes
        self._ema_weight = 0.0  # sum of decay**age: dividing by it removes the start-up bias

    @property
    def knobs(self) -> dict[str, Any]:
        """The knob values of the current level."""
        return self.curriculum.values(self.level)

    @property
    def solve_rate(self) -> float | None:
        """The running solve rate at the current level; None before its first episode."""
        if self.curriculum.ema:
            return self._ema_sum / self._ema_weight if self._ema_weight else None
        return sum(self._recent) / len(self._recent) if self._recent else None

    def update(self, solved: Iterable[float]) -> int:
        """Add one batch's outcomes (1.0 solved, 0.0 not, as `episode_correct` gives them), then
        move at most one level; return the level the next batch is played at."""
        outcomes = [float(x) for x in solved]
        bad = [x for x in outcomes if not 0.0 <= x <= 1.0]
        if bad:
            raise ValueError(f"outcomes must be in [0, 1] (1.0 solved, 0.0 not), got {bad[0]!r}")
        decay = 1.0 - 2.0 / (self.curriculum.window + 1)
        for x in outcomes:
            self._recent.append(x)
            self._ema_sum = decay * self._ema_sum + x
            self._ema_weight = decay * self._ema_weight + 1.0
        self.episodes_at_level += len(outcomes)
        rate = self.solve_rate
        c = self.curriculum
        if rate is None or self.episodes_at_level < c.min_episodes:
            return self.level
        if rate >= c.promote_above and self.level < c.n_levels - 1:
            self._enter(self.level + 1)
        elif rate < c.demote_below and self.level > 0:
            self._enter(self.level - 1)
        return self.level

    def _enter(self, level: int) -> None:
        self.level = level
        self.episodes_at_level = 0
        self._recent.clear()
        self._ema_sum = self._ema_weight = 0.0

    def state_dict(self) -> dict[str, Any]:
        return {"level": self.level, "episodes_at_level": self.episodes_at_level,
                "recent": list(self._recent), "ema": [self._ema_sum, self._ema_weight]}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what `state_dict()` returned (for this curriculum, or one with as many levels)."""
        missing = {"level", "episodes_at_level", "recent", "ema"} - set(state)
        if missing:
            raise ValueError(f"not a CurriculumTracker state: it lacks {sorted(missing)}")
        level = state["level"]
        if isinstance(level, bool) or not isinstance(level, int) or not 0 <= level < self.curriculum.n_levels:
            raise ValueError(f"the saved level {level!r} is not one of this curriculum's "
                             f"{self.curriculum.n_levels} levels")
        recent = [float(x) for x in state["recent"]]
        if any(not 0.0 <= x <= 1.0 for x in recent):
            raise ValueError("the saved outcomes must be in [0, 1]")
        ema_sum, ema_weight = (float(x) for x in state["ema"])
        self.level = level
        self.episodes_at_level = int(state["episodes_at_level"])
        self._recent = deque(recent, maxlen=self.curriculum.window)
        self._ema_sum, self._ema_weight = ema_sum, ema_weight


class CurriculumEnvGroupBuilder(SourceEnvGroupBuilder):
    """A `SourceEnvGroupBuilder` for group `group_index` of curriculum batch `batch_index`, made at
    `level`. `compute_group_rewards` returns the source's group rewards, reports the episodes'
    outcomes to the dataset (into `outcomes`, the dataset's own dict, shared by reference; a
    pickled copy reports into its copy) and adds `metrics` (the batch's `curriculum/...` values)
    to each episode's last transition and to the group's metrics."""

    def __init__(self, source: EnvSource, group_size: int, seed: int | None, *,
                 turn_limit: int | None, env_id: str | None, level: int, batch_index: int,
                 group_index: int, metrics: Metrics,
                 outcomes: dict[tuple[int, int], list[float]]) -> None:
        super().__init__(source, group_size, seed, turn_limit=turn_limit, env_id=env_id)
        self.level = level
        self.batch_index = batch_index
        self.group_index = group_index
        self.metrics = metrics
        self._outcomes = outcomes

    async def compute_group_rewards(
        self, trajectory_group: list[Trajectory], env_group: Sequence[Env]
    ) -> list[tuple[float, Metrics]]:
        rewards = await super().compute_group_rewards(trajectory_group, env_group)
        # Keyed by position, so the order in which groups finish cannot change the levels; a group
        # rolled out again replaces its earlier outcomes.
        self._outcomes[(self.batch_index, self.group_index)] = [
            episode_correct(t) for t in trajectory_group]
        for trajectory in trajectory_group:
            if trajectory.transitions:  # what a trainer averages per episode (`env/...` in GRPO)
                trajectory.transitions[-1].metrics.update(self.metrics)
        return [(reward, {**metrics, **self.metrics}) for reward, metrics in rewards]

    def __repr__(self) -> str:
        return (f"CurriculumEnvGroupBuilder({self.env_id!r}, level={self.level}, "
                f"batch={self.batch_index}, group={self.group_index}, seed={self.seed})")


def _source_class(env: Any) -> tuple[type[EnvSource], str]:
    """The `EnvSource` subclass behind `env` (a registered llm-gym id or the class) and a name."""
    if isinstance(env, str):
        if not is_source_id(env):
            raise ValueError(f"{env!r} is not a registered llm-gym TextEnv id, so it has no "
                             "EnvSource whose knobs a curriculum could step; pass a catalog or "
                             "bridge id, or an EnvSource subclass")
        spec = _registered_spec(env)
        return resolve_source(spec.kwargs["source"]), spec.id
    if isinstance(env, type) and issubclass(env, EnvSource):
        return env, getattr(getattr(env, "card", None), "id", None) or env.__name__
    raise TypeError(f"env must be a registered llm-gym id or an EnvSource subclass, got {env!r}")


def _declared_knobs(cls: type[EnvSource]) -> list[str]:
    return sorted(getattr(getattr(cls, "card", None), "difficulty_knobs", None) or {})


def _unknown_knob_error(env_name: str, declared: list[str], unknown: list[str]) -> ValueError:
    if not declared:
        return ValueError(f"{env_name} declares no difficulty knobs (its card's difficulty_knobs "
                          f"is empty), so a curriculum over {unknown} has nothing to step; pick "
                          "an env with knobs (envs_catalog/CATALOG.md lists them)")
    close = difflib.get_close_matches(unknown[0], declared, n=1, cutoff=0.6)
    hint = f". Did you mean: {close[0]!r}?" if close else ""
    return ValueError(f"{env_name} has no knob {unknown[0]!r}; its knobs are {declared}{hint}")


class CurriculumRLDataset(RLDataset):
    """Batches of groups at the curriculum's current level, which moves with the solve rate.

    Args:
        env: a registered llm-gym id (`is_source_id`: every catalog and bridge id) or an
            `EnvSource` subclass.
        curriculum: the knobs' ladders and the rules that move the level.
        batch_size, group_size, seed, split, n_batches: as `SourceRLDataset.from_id`'s.
        **make_kwargs: the env's other options, fixed at every level (`env_source_for_id`'s; for a
            class: its knobs and `tokenizer`, `renderer`, `turn_limit`). A knob the curriculum
            steps may not be among them.

    Every level's source is built here, so a ladder value the env rejects fails now; all levels
    share the first level's tokenizer and renderer (`tokenizer`, `renderer`). `get_batch(i)`
    first folds the outcomes reported for batches before `i` into `tracker` (batch by batch, each
    in group order: one `CurriculumTracker.update` per batch), then returns
    `SourceRLDataset(level's env, ...).get_batch(i)`'s groups at the resulting level. Asking for
    the same `i` again gives the same groups; asking for an earlier batch than the last one is an
    error (the level has moved on). Each episode's last transition and the group's metrics carry
    `curriculum/level`, `curriculum/<knob>` (numeric knob values) and, once the level has seen an
    episode, `curriculum/solve_rate` (the running rate when the batch was made).

    Outcomes are reported by `compute_group_rewards` in the process that rolls the group out.
    Where that is another process (a process-pool rollout executor) or another rank (data
    parallelism: each rank sees its share of the groups), pass every group's outcomes to
    `observe(batch, group, solved)` on each copy of the dataset; reporting a group again replaces
    its outcomes, so also reporting the local groups is harmless. `state_dict()` holds the tracker
    and the outcomes not yet folded in: save it with a checkpoint and `load_state_dict` it on resume.
    """

    def __init__(self, env: str | type[EnvSource], curriculum: Curriculum, batch_size: int,
                 group_size: int, seed: int = 0, split: str = "train",
                 n_batches: int = DEFAULT_N_BATCHES, **make_kwargs: Any) -> None:
        _check_dataset_args(batch_size, group_size, n_batches, seed)
        if split not in _SPLIT_STREAMS:
            raise ValueError(f"split must be one of {sorted(_SPLIT_STREAMS)}, got {split!r}")
        if not isinstance(curriculum, Curriculum):
            raise TypeError(f"curriculum must be a Curriculum, got {type(curriculum).__name__}")
        source_cls, self.env_name = _source_class(env)
        declared = _declared_knobs(source_cls)
        both = sorted(set(curriculum.knobs) & set(make_kwargs))
        if both:
            raise ValueError(f"knob {both[0]!r} is set both by the curriculum and as an env option "
                             f"({make_kwargs[both[0]]!r}); drop one of them")
        # A bridge's card may list only its own options while each instance takes more (a
        # reasoning-gym dataset's config fields): an undeclared knob is unknown only if refused.
        undeclared = [name for name in curriculum.knobs if name not in declared]
        self.curriculum = curriculum
        self.tracker = CurriculumTracker(curriculum)
        self.split = split
        envs: list[EnvFromSource] = []
        for level in range(curriculum.n_levels):
            values = curriculum.values(level)
            shared = {} if not envs else {"tokenizer": envs[0].tokenizer, "renderer": envs[0].renderer}
            try:
                envs.append(self._build(env, source_cls, split, {**make_kwargs, **values, **shared}))
            except (ImportError, OSError):  # a missing dependency or file: not the ladder's fault
                raise
            except Exception as exc:  # noqa: BLE001 - sources check knobs as they like (asserts too)
                if undeclared and isinstance(exc, TypeError) and "unexpected keyword" in str(exc):
                    raise _unknown_knob_error(self.env_name, declared, undeclared) from exc
                setting = ", ".join(f"{k}={v!r}" for k, v in values.items())
                raise ValueError(f"{self.env_name} rejects curriculum level {level} ({setting}): "
                                 f"{exc}") from exc
        self._levels = [SourceRLDataset(e, batch_size, group_size, seed, n_batches) for e in envs]
        self.batch_size = batch_size
        self.group_size = group_size
        self.seed = seed
        self.n_batches = n_batches
        # (batch, group) -> the group's solved flags, reported and not yet folded into the tracker
        self._outcomes: dict[tuple[int, int], list[float]] = {}
        self._served: tuple[int, int, Metrics] | None = None  # last batch: index, level, metrics

    def _build(self, env: Any, source_cls: type[EnvSource], split: str,
               kwargs: dict[str, Any]) -> EnvFromSource:
        if isinstance(env, str):
            return env_source_for_id(env, split, **kwargs)
        tokenizer, renderer = load_tokenizer_and_renderer(kwargs.pop("tokenizer", None),
                                                          kwargs.pop("renderer", None))
        turn_limit = kwargs.pop("turn_limit", None)
        if turn_limit is not None and (
            isinstance(turn_limit, bool) or not isinstance(turn_limit, int) or turn_limit < 1
        ):
            raise ValueError(f"turn_limit must be a positive int or None, got {turn_limit!r}")
        source = source_cls(renderer=renderer, split=split, **kwargs)
        return EnvFromSource(self.env_name, source, tokenizer, turn_limit)

    @property
    def level(self) -> int:
        """The level the next new batch will be made at (before folding in pending outcomes)."""
        return self.tracker.level

    @property
    def tokenizer(self) -> Any:
        return self._levels[0].tokenizer

    @property
    def renderer(self) -> Any:
        return self._levels[0].renderer

    def env_at(self, level: int) -> EnvFromSource:
        """The env (source, tokenizer, turn limit) of `level`."""
        return self._levels[level].env

    def __len__(self) -> int:
        return self.n_batches

    def observe(self, batch_index: int, group_index: int, solved: Sequence[float]) -> None:
        """Report group `group_index` of batch `batch_index`'s outcomes (`episode_correct` of each
        episode, in order), replacing any reported before; folded in when a later batch is asked
        for. The groups of `get_batch` report theirs the same way (see the class docstring)."""
        for name, value in (("batch_index", batch_index), ("group_index", group_index)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a non-negative int, got {value!r}")
        outcomes = [float(x) for x in solved]
        if any(not 0.0 <= x <= 1.0 for x in outcomes):
            raise ValueError(f"outcomes must be in [0, 1] (1.0 solved, 0.0 not), got {outcomes}")
        self._outcomes[(batch_index, group_index)] = outcomes

    def _fold(self, before: int) -> None:
        """Feed the tracker the outcomes of batches before `before`, one update per batch."""
        keys = sorted(key for key in self._outcomes if key[0] < before)
        for batch in sorted({b for b, _ in keys}):
            self.tracker.update([x for key in keys if key[0] == batch
                                 for x in self._outcomes.pop(key)])

    def _metrics(self) -> Metrics:
        metrics: Metrics = {f"{METRIC_PREFIX}level": self.tracker.level}
        for name, value in self.tracker.knobs.items():
            if _is_number(value) or isinstance(value, bool):
                metrics[f"{METRIC_PREFIX}{name}"] = float(value) if isinstance(value, bool) else value
        rate = self.tracker.solve_rate
        if rate is not None:
            metrics[f"{METRIC_PREFIX}solve_rate"] = rate
        return metrics

    def get_batch(self, index: int) -> list[CurriculumEnvGroupBuilder]:
        index = _check_batch_index(index, self.n_batches)
        served = self._served
        if served is not None and index < served[0]:
            raise ValueError(f"batch {index} comes before batch {served[0]}, which this curriculum "
                             "has already served and moved its level for; ask for batches in order "
                             "(a resumed run: load_state_dict, then continue from its next batch)")
        if served is None or index > served[0]:
            if served is not None and not any(b == served[0] for b, _ in self._outcomes):
                warnings.warn(
                    "CurriculumRLDataset: no group of the previous batch reported its outcomes "
                    "before the next batch was asked for, so the level did not move on them. Groups "
                    "report from compute_group_rewards in the process that rolls them out; under a "
                    "process-pool rollout executor or data parallelism, pass the outcomes to "
                    "dataset.observe(batch, group, solved)", RuntimeWarning, stacklevel=2)
            self._fold(index)
            served = self._served = (index, self.tracker.level, self._metrics())
        _, level, metrics = served
        fixed = self._levels[level]
        env = fixed.env
        return [
            CurriculumEnvGroupBuilder(
                env.source, self.group_size, fixed.group_seed(index, j), turn_limit=env.turn_limit,
                env_id=env.env_id, level=level, batch_index=index, group_index=j,
                metrics=dict(metrics), outcomes=self._outcomes)
            for j in range(self.batch_size)
        ]

    def state_dict(self) -> dict[str, Any]:
        """The curriculum's state (JSON-able): the tracker's, the outcomes reported and not yet
        folded in, and the last batch served (its index, level and metrics)."""
        served = None
        if self._served is not None:
            index, level, metrics = self._served
            served = {"index": index, "level": level, "metrics": dict(metrics)}
        return {
            "knobs": sorted(self.curriculum.knobs),
            "tracker": self.tracker.state_dict(),
            "outcomes": [[b, g, list(v)] for (b, g), v in sorted(self._outcomes.items())],
            "served": served,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what `state_dict()` returned, so the next batch is made where the saved run's
        would have been (a dataset over the same env and curriculum)."""
        if sorted(state.get("knobs", ())) != sorted(self.curriculum.knobs):
            raise ValueError(f"this state is of a curriculum over {state.get('knobs')!r}, not over "
                             f"{sorted(self.curriculum.knobs)}")
        self.tracker.load_state_dict(state["tracker"])
        served = state.get("served")
        if served is not None and not 0 <= served["level"] < self.curriculum.n_levels:
            raise ValueError(f"the saved batch's level {served['level']!r} is not one of this "
                             f"curriculum's {self.curriculum.n_levels} levels")
        self._outcomes.clear()  # in place: builders already handed out report into this dict
        for batch, group, outcomes in state.get("outcomes", ()):
            self.observe(batch, group, outcomes)
        self._served = None if served is None else (
            int(served["index"]), int(served["level"]), dict(served["metrics"]))
