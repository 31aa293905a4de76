"""Runs the rows on one registered id: `check_env_id` resolves the id (with the user's kwargs),
builds and resets its env once, then runs each wanted check of `CHECK_NAMES` in order within
its time limit, turning an exception or a timeout into a failed row so that one check never
takes the others down. `validate_env_id` is the same resolution (and, with kwargs, one build)
alone, so a caller can refuse a bad id or bad kwargs before any check runs.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable, Sequence

from llm_gym.checks.adversarial import _check_adversarial
from llm_gym.checks.card import _check_card
from llm_gym.checks.check_env import _check_gym
from llm_gym.checks.common import (
    CHECK_NAMES,
    CheckRow,
    _CheckTimeout,
    _make,
    _one_line,
    _resolve_target,
    _time_limit,
    _UnknownId,
    _where,
)
from llm_gym.checks.context import _check_context
from llm_gym.checks.determinism import _check_determinism
from llm_gym.checks.fuzz import _check_fuzz, _FuzzStats, _run_fuzz
from llm_gym.checks.scripted import _check_scripted
from llm_gym.checks.split import _check_split
from llm_gym.checks.throughput import _check_throughput


def check_env_id(env_id: str, *, seeds: int = 3, fuzz: int = 48, split_seeds: int = 48,
                 only: Sequence[str] | None = None, timeout_s: float | None = 120.0,
                 env_kwargs: dict[str, Any] | None = None) -> list[CheckRow]:
    """Run the checks on `env_id` built with its registered kwargs updated by `env_kwargs`
    (knobs, tokenizer, renderer: JSON values), each check within `timeout_s` seconds, else a
    failed row; raises `ValueError` (one line) for an id that is not a registered llm-gym env."""
    try:
        target = _resolve_target(env_id, env_kwargs)
    except _UnknownId as exc:
        raise ValueError(str(exc)) from None
    wanted = set(only or CHECK_NAMES)
    rows: list[CheckRow] = []
    try:
        with _time_limit(timeout_s):
            env = _make(target)
            env.reset(seed=0)
    except _CheckTimeout as exc:
        return [CheckRow("build", "fail", f"gym.make({env_id!r}) / reset {exc}")]
    except Exception as exc:
        return [CheckRow("build", "fail", f"gym.make({env_id!r}) / reset raised "
                         f"{_one_line(exc)}{_where(exc)}")]
    source = env.source
    half_limit = (timeout_s or 120.0) / 2  # slow envs: rows sample less, and say so
    scripted_seeds = list(range(max(1, seeds)))
    determinism_seeds = [0, 1, 2, 3, 17, 123, 4242, 2**31 - 1][: max(8, seeds)]
    determinism_seeds += [1000 + i for i in range(len(determinism_seeds), seeds)]
    stats: _FuzzStats | None = None

    def guarded(name: str, fn: Callable[[], CheckRow]) -> None:
        if name not in wanted:
            return
        start = time.perf_counter()
        try:
            # The determinism check bounds its subprocesses itself.
            with _time_limit(None if name == "determinism" else timeout_s):
                row = fn()
        except _CheckTimeout as exc:
            row = CheckRow(name, "fail", f"the check {exc}")
        except Exception as exc:  # a check must not take the others down
            row = CheckRow(name, "fail", f"the check raised {_one_line(exc)}{_where(exc)}")
        row.seconds = time.perf_counter() - start
        rows.append(row)

    def fuzz_row() -> CheckRow:
        nonlocal stats
        stats = _run_fuzz(target, fuzz, budget_s=half_limit)
        return _check_fuzz(stats, fuzz)

    def context_row() -> CheckRow:
        nonlocal stats
        if stats is None:
            stats = _run_fuzz(target, fuzz, budget_s=half_limit / 2)
        return _check_context(stats, env, target, budget_s=half_limit / 2)

    try:
        guarded("check_env", lambda: _check_gym(target))
        guarded("determinism", lambda: _check_determinism(target, determinism_seeds,
                                                          timeout_s or 120.0, source))
        guarded("fuzz", fuzz_row)
        guarded("card", lambda: _check_card(target, env))
        guarded("scripted", lambda: _check_scripted(target, env, scripted_seeds))
        guarded("adversarial", lambda: _check_adversarial(target, env, scripted_seeds))
        guarded("split", lambda: _check_split(target, split_seeds, hard_stop_s=half_limit,
                                              source=source))
        guarded("context", context_row)
        guarded("throughput", lambda: _check_throughput(target))
    finally:
        env.close()
    return rows



def validate_env_id(env_id: str, env_kwargs: dict[str, Any] | None = None) -> None:
    """Raise `ValueError` (one line) when `env_id` is not a registered llm-gym env, or, with
    `env_kwargs`, when the env refuses them (an unknown knob, a bad value, a tokenizer not
    found): the env is built once and closed."""
    try:
        target = _resolve_target(env_id, env_kwargs)
    except _UnknownId as exc:
        raise ValueError(str(exc)) from None
    if env_kwargs:
        try:
            _make(target).close()
        except Exception as exc:
            raise ValueError(f"{target.env_id} with {json.dumps(env_kwargs)}: "
                             f"{_one_line(exc)}") from None
