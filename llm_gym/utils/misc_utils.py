"""Small pure-Python helpers with the cookbook's names (`tinker_cookbook.utils.misc_utils`).

Env and reward code uses `safezip` (a `zip` that refuses sequences of different lengths) and the
list/dict helpers below; rollouts and trainers in `llm_gym.rl` may use them too.
"""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar, cast

logger = logging.getLogger(__name__)

T = TypeVar("T")

__all__ = [
    "all_same", "concat_lists", "dict_mean", "iteration_dir", "lookup_func", "not_none",
    "safezip", "split_list", "timed",
]

safezip = cast(type[zip], lambda *args, **kwargs: zip(*args, **kwargs, strict=True))
"""`zip(..., strict=True)`: raises `ValueError` when the iterables have different lengths."""


@contextmanager
def timed(key: str, metrics: dict[str, Any]) -> Iterator[None]:
    """Time the block and store the seconds in `metrics[f"time/{key}"]`."""
    logger.info("Starting %s", key)
    start = time.time()
    yield
    logger.info("%s took %.2f seconds", key, time.time() - start)
    metrics[f"time/{key}"] = time.time() - start


def dict_mean(list_of_dicts: list[dict[str, float | int | None]]) -> dict[str, float]:
    """Key-wise mean; a key missing from some dicts, or None in them, is averaged over the dicts
    that have a value for it, and a key that is None everywhere is left out."""
    values: dict[str, list[float | int]] = {}
    for d in list_of_dicts:
        for k, v in d.items():
            if v is not None:
                values.setdefault(k, []).append(v)
    return {k: float(sum(vs) / len(vs)) for k, vs in values.items()}


def all_same(xs: list[Any]) -> bool:
    """Whether every element equals the first (True for an empty list)."""
    return all(x == xs[0] for x in xs)


def lookup_func(path_to_func: str, default_module: str | None = None) -> Any:
    """The attribute named by "package.module:name", or by "name" in `default_module`."""
    colons = path_to_func.count(":")
    if colons == 0 and default_module is not None:
        module_name, func_name = default_module, path_to_func
    elif colons == 1:
        module_name, func_name = path_to_func.rsplit(":", 1)
    else:
        raise ValueError(
            f"Invalid path: {path_to_func!r}; use 'package.module:name' (or a bare name with default_module)"
        )
    return getattr(importlib.import_module(module_name), func_name)


def split_list(lst: Sequence[T], num_splits: int) -> list[list[T]]:
    """`num_splits` contiguous sublists whose lengths differ by at most one."""
    if num_splits <= 0:
        raise ValueError(f"num_splits must be positive, got {num_splits}")
    if num_splits > len(lst):
        raise ValueError(f"Cannot split list of length {len(lst)} into {num_splits} parts")
    # Float steps truncated, as numpy.linspace(0, n, k + 1).astype(int) (the cookbook's edges),
    # so a port splits work into exactly the same chunks.
    step = len(lst) / num_splits
    edges = [int(i * step) for i in range(num_splits)] + [len(lst)]
    return [list(lst[edges[i]: edges[i + 1]]) for i in range(num_splits)]


def concat_lists(list_of_lists: list[list[Any]]) -> list[Any]:
    """Flatten one level."""
    return [item for sublist in list_of_lists for item in sublist]


def not_none(x: T | None) -> T:
    """`x`, asserted not to be None (narrows the type)."""
    assert x is not None, f"{x=} must not be None"
    return x


def iteration_dir(log_path: str | Path | None, step: int) -> Path | None:
    """`log_path/iteration_NNNNNN` for a training step, or None without a log path."""
    if not log_path:
        return None
    return Path(log_path) / f"iteration_{step:06d}"
