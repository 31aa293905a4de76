"""Composing `RLDataset`s over several passes: the cookbook's `rl.dataset_utils`.

`cycle_permutation(size, seed, cycle)` is the order in which pass number `cycle` over a dataset of
`size` items visits them. It is a pure function of its three arguments (no RNG state carried from
one pass to the next), so the order of any pass can be recomputed on its own: a run restarted from
a checkpoint at step `i` sees exactly the order the uninterrupted run would have seen. The same
arguments give the same permutation as the cookbook's (`random.Random(f"{seed}:{cycle}")` shuffles
`range(size)`), so a blend such as `InterleavedRLDatasetBuilder` draws the same schedule on both
libraries for the same seed.

`epoch_batch_index` maps a global step to a batch of an inner dataset, epoch by epoch, and
`EpochCycledRLDataset` repeats an `RLDataset` for `num_epochs` passes with it, optionally visiting
the inner batches in a fresh `cycle_permutation` each epoch (whole batches move; a batch keeps its
groups).
"""

from __future__ import annotations

import functools
import random
from collections.abc import Sequence

from llm_gym.rl.types import EnvGroupBuilder, RLDataset

__all__ = ["EpochCycledRLDataset", "cycle_permutation", "epoch_batch_index"]


@functools.lru_cache(maxsize=64)
def _permutation(size: int, key: str) -> tuple[int, ...]:
    order = list(range(size))
    random.Random(key).shuffle(order)
    return tuple(order)


def cycle_permutation(size: int, seed: int | str, cycle: int) -> Sequence[int]:
    """A permutation of `range(size)` for pass `cycle` over a dataset, determined by
    `(size, seed, cycle)` alone (an `int` seed and its `str` give the same permutation).

    The result is an immutable tuple, cached for the most recent arguments, so resolving one index
    per call costs no reshuffle."""
    if size < 0:
        raise ValueError(f"size must be >= 0, got {size}")
    return _permutation(size, f"{seed}:{cycle}")


def epoch_batch_index(index: int, num_batches: int, shuffle_seed: int | None = None) -> int:
    """The batch (in `range(num_batches)`) that global step `index` uses: epoch
    `index // num_batches` visits the batches in order, or in
    `cycle_permutation(num_batches, shuffle_seed, epoch)` order when `shuffle_seed` is set."""
    if num_batches < 1:
        raise ValueError(f"num_batches must be >= 1, got {num_batches}")
    epoch, position = divmod(index, num_batches)
    if shuffle_seed is None:
        return position
    return cycle_permutation(num_batches, shuffle_seed, epoch)[position]


class EpochCycledRLDataset(RLDataset):
    """`inner` repeated for `num_epochs` passes: `len(inner) * num_epochs` batches.

    Batch `i` is `inner.get_batch(epoch_batch_index(i, len(inner), shuffle_seed))`: without
    `shuffle_seed` every epoch replays `inner` in its own order (so `num_epochs=1` is `inner`
    itself); with it, each epoch visits the inner batches in a fresh, seeded order. `inner` must
    not be empty; `num_epochs` must be at least 1 (ValueError otherwise)."""

    def __init__(self, inner: RLDataset, num_epochs: int, shuffle_seed: int | None = None):
        if num_epochs < 1:
            raise ValueError(f"num_epochs must be >= 1, got {num_epochs}")
        self.inner = inner
        self.num_epochs = num_epochs
        self.shuffle_seed = shuffle_seed

    def get_batch(self, index: int) -> Sequence[EnvGroupBuilder]:
        if not 0 <= index < len(self):
            raise IndexError(f"Batch index {index} out of range (len={len(self)})")
        return self.inner.get_batch(epoch_batch_index(index, len(self.inner), self.shuffle_seed))

    def __len__(self) -> int:
        return len(self.inner) * self.num_epochs
