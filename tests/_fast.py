"""Which cases of a per-id sweep run in the fast suite (`make test`) and which only in `make test-all`.

`sampled(values, k)` keeps `k` of `values` in the fast suite — chosen by a stable hash of each
value's text, so the same ones every run and on every machine, spread over the sweep rather than its
first entries — and marks the rest `slow` (`make test-slow`, part of `make test-all` and CI). Every
value is still tested in CI; a newcomer's `make test` checks a representative sample.
"""

from __future__ import annotations

import zlib
from typing import Any, Iterable

import pytest

ParameterSet = type(pytest.param(None))  # what pytest.param returns


def sampled(values: Iterable[Any], k: int, *, label=str) -> list[Any]:
    """pytest params of `values` (plain values, tuples of several, or `pytest.param`s): `k` of them
    as they are, the others marked slow."""
    values = list(values)

    def bare(value: Any) -> Any:
        if isinstance(value, ParameterSet):
            return value.values[0] if len(value.values) == 1 else value.values
        return value

    ranked = sorted(range(len(values)), key=lambda i: zlib.crc32(label(bare(values[i])).encode()))
    fast = set(ranked[:k])
    out = []
    for i, value in enumerate(values):
        if i in fast:
            out.append(value)
        elif isinstance(value, ParameterSet):
            out.append(pytest.param(*value.values, marks=[*value.marks, pytest.mark.slow], id=value.id))
        else:
            out.append(pytest.param(*(value if isinstance(value, tuple) else (value,)),
                                    marks=pytest.mark.slow))
    return out
