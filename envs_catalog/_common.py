"""Shared helpers for catalog families: knob validation, the train/test split rule and child seeds.

Multi-turn families build their observations with `llm_gym.renderers.continuation.Continuation`,
which keeps the prefix property for every renderer (it is an `llm_gym` concept, not a catalog one).
"""

from __future__ import annotations

import zlib
from typing import Any, Sequence

import numpy as np

TEST_SPLIT_MODULUS = 10  # 1 task in 10 (by hash) is held out for split="test"


def hash_key(key: str) -> int:
    """A stable 32-bit hash of `key` (CRC-32; Python's `hash` is salted per process)."""
    return zlib.crc32(key.encode("utf-8"))


def split_of(key: str) -> str:
    """"test" for about one key in ten, else "train"; a pure function of `key` (CRC-32), so
    the two splits are disjoint and stable across processes and Python versions."""
    return "test" if hash_key(key) % TEST_SPLIT_MODULUS == 0 else "train"


def child_seed(rng: np.random.Generator) -> int:
    """A seed for an episode's own generator, drawn from the source's `rng` (so episodes are
    reproducible from the seed the user passed to `reset`)."""
    return int(rng.integers(0, 2**63 - 1))


def check_int(name: str, value: Any, low: int, high: int) -> int:
    """`value` as an int in [low, high], else a ValueError/TypeError naming knob and range."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer in [{low}, {high}], got {value!r}")
    if not low <= int(value) <= high:
        raise ValueError(f"{name} must be in [{low}, {high}], got {value!r}")
    return int(value)


def check_float(name: str, value: Any, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise TypeError(f"{name} must be a number in [{low}, {high}], got {value!r}")
    if not low <= float(value) <= high:
        raise ValueError(f"{name} must be in [{low}, {high}], got {value!r}")
    return float(value)


def check_choice(name: str, value: Any, choices: Sequence[Any]) -> Any:
    """`value` if it is one of `choices` (same type too: True is not 1), else a ValueError."""
    if not any(type(value) is type(c) and value == c for c in choices):
        raise ValueError(f"{name} must be one of {list(choices)!r}, got {value!r}")
    return value
