"""Blend several RL datasets into one, by weight: the cookbook's `rl.interleaved`.

`InterleavedRLDatasetBuilder(sources=[...], weights=[...], groups_per_batch=8)` builds each source
`RLDatasetBuilder` (concurrently), then serves batches of `groups_per_batch` `EnvGroupBuilder`s in
which every slot was drawn from one source with probability proportional to its weight. A group
is never split across sources, so GRPO's within-group advantage centering is unaffected, and the
sources' own `logging_tags` give per-domain metrics. The whole schedule, which group of which
source fills which slot of which batch, is computed up front from `seed` alone, so `get_batch(i)`
is the same after a restart from a checkpoint. Within a source, groups are visited in the order
`dataset_utils.cycle_permutation(n_groups, f"{seed}:{source index}", cycle)`, a fresh order for
every pass over the source; the source of each slot is drawn with `random.Random(seed)`. Both are
the cookbook's (0.6), in its order, so the same seed gives the same schedule on both libraries
(tests/conformance/test_cookbook_misc.py). (Before cookbook 0.6 the within-source shuffles came
from the same RNG as the source draws: the same seed now gives a different schedule than then.)

The cookbook's class is a `chz` config; this one is a keyword-only dataclass with the same fields.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass

from llm_gym.rl.dataset_utils import cycle_permutation
from llm_gym.rl.types import EnvGroupBuilder, RLDataset, RLDatasetBuilder

__all__ = ["InterleavedRLDatasetBuilder"]

logger = logging.getLogger(__name__)


class _InterleavedRLDataset(RLDataset):
    """The dataset `InterleavedRLDatasetBuilder` returns; build it through the builder.

    A source's groups are addressed by a flat index over its batches (`batch * groups_in_batch_0
    + slot`); every batch but the last must hold as many groups as batch 0 (the last may be
    shorter). Only batch 0 and the last batch of each source are read at construction."""

    def __init__(
        self,
        sources: Sequence[RLDataset],
        weights: Sequence[float],
        groups_per_batch: int,
        total_batches: int | None = None,
        seed: int = 0,
    ) -> None:
        if len(sources) != len(weights):
            raise ValueError(
                f"sources and weights must have the same length, got {len(sources)} sources "
                f"and {len(weights)} weights"
            )
        if not sources:
            raise ValueError("At least one source is required")
        if any(w <= 0 for w in weights):
            raise ValueError(f"All weights must be positive, got {list(weights)}")
        if groups_per_batch < 1:
            raise ValueError(f"groups_per_batch must be >= 1, got {groups_per_batch}")
        self._sources = list(sources)
        self._groups_per_batch = groups_per_batch
        total = sum(weights)
        self._weights = [w / total for w in weights]
        self._batch_width: list[int] = []  # groups in each source's batch 0
        self._source_total_groups: list[int] = []  # groups in each source, all batches
        for i, source in enumerate(self._sources):
            if len(source) == 0:
                raise ValueError(f"Source {i} has 0 batches — all sources must be non-empty")
            width = len(source.get_batch(0))
            if width == 0:
                raise ValueError(
                    f"Source {i} returned 0 groups for batch 0 — all sources must produce at "
                    "least 1 group per batch"
                )
            last = width if len(source) == 1 else len(source.get_batch(len(source) - 1))
            self._batch_width.append(width)
            self._source_total_groups.append((len(source) - 1) * width + last)
        if total_batches is None:
            # Stop when the source that runs out first, in expectation, has been used once.
            total_batches = max(1, min(
                int(n / (w * groups_per_batch)) for n, w in zip(self._source_total_groups, self._weights)
            ))
            logger.info(f"InterleavedRLDataset: total_batches not set, using {total_batches}")
        self._total_batches = total_batches
        self._seed = seed
        self._schedule = self._make_schedule()

    def _make_schedule(self) -> list[list[tuple[int, int]]]:
        """(source, flat group index) for every slot of every batch."""
        rng = random.Random(self._seed)

        def order(src: int, cycle: int) -> Sequence[int]:
            return cycle_permutation(self._source_total_groups[src], f"{self._seed}:{src}", cycle)

        n_sources = len(self._sources)
        cycles = [0] * n_sources
        orders = [order(src, 0) for src in range(n_sources)]
        next_pos = [0] * n_sources
        schedule = []
        for _ in range(self._total_batches):
            batch = []
            for _ in range(self._groups_per_batch):
                src = rng.choices(range(n_sources), weights=self._weights, k=1)[0]
                if next_pos[src] >= self._source_total_groups[src]:  # a pass is over: next order
                    cycles[src] += 1
                    orders[src] = order(src, cycles[src])
                    next_pos[src] = 0
                batch.append((src, orders[src][next_pos[src]]))
                next_pos[src] += 1
            schedule.append(batch)
        return schedule

    def _group(self, src: int, flat: int) -> EnvGroupBuilder:
        width = self._batch_width[src]
        batch = self._sources[src].get_batch(flat // width)
        if flat % width >= len(batch):
            raise IndexError(
                f"Source {src} batch {flat // width} has {len(batch)} groups, expected {width} "
                "(based on batch 0). InterleavedRLDataset requires all batches except the last "
                "to have the same number of groups as batch 0."
            )
        return batch[flat % width]

    def get_batch(self, index: int) -> Sequence[EnvGroupBuilder]:
        """Exactly `groups_per_batch` builders, each from one source; the same for the same
        (seed, index)."""
        if not 0 <= index < self._total_batches:
            raise IndexError(f"Batch index {index} out of range (total_batches={self._total_batches})")
        return [self._group(src, flat) for src, flat in self._schedule[index]]

    def __len__(self) -> int:
        return self._total_batches


@dataclass(frozen=True, kw_only=True)
class InterleavedRLDatasetBuilder(RLDatasetBuilder):
    """Weighted blend of several `RLDatasetBuilder`s (see the module docstring).

    `await builder()` returns `(train, None)`: the sources' test datasets are dropped; set up
    evaluation separately."""

    sources: list[RLDatasetBuilder]
    """The datasets to blend; each is built once, concurrently."""
    weights: list[float]
    """Relative share of group slots per source, normalised to sum to 1; all must be positive."""
    groups_per_batch: int
    """`EnvGroupBuilder`s (problems) per batch; each source's builders keep their own group size."""
    total_batches: int | None = None
    """Batches in the blend (sources cycle, in a fresh order each pass); None: until the first
    source runs out."""
    seed: int = 0
    """Determines both the source of each slot and the order within each source."""

    async def __call__(self) -> tuple[RLDataset, RLDataset | None]:
        built = await asyncio.gather(*(source() for source in self.sources))
        train = [train for train, _test in built]
        return _InterleavedRLDataset(
            train, self.weights, self.groups_per_batch, self.total_batches, self.seed
        ), None
