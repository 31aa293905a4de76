"""The `fuzz` row: random actions (in- and out-of-vocabulary ids, empty, very long, special
tokens) on fresh seeds; no step may raise, and every reward and every episode return must lie
inside the source's `reward_range`. `_run_fuzz` also records the longest observation, which the
`context` row reads. An env too slow to reset for every episode within half the time limit (a
generated game) is fuzzed on the episodes that fit, at least two, and the row says so.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from llm_gym.checks.common import (
    _MAX_FUZZ_STEPS_PER_EPISODE,
    CheckRow,
    _make,
    _one_line,
    _random_action,
    _Target,
    _vocab_size,
    _where,
)


_FUZZ_CYCLE = ("tokens", "oov", "empty", "long", "specials", "tokens", "oov", "tokens")


def _fuzz_kinds(n: int) -> list[str]:
    return [_FUZZ_CYCLE[i % len(_FUZZ_CYCLE)] for i in range(n)]



@dataclass
class _FuzzStats:
    crashes: list[str] = field(default_factory=list)
    out_of_range: list[str] = field(default_factory=list)
    steps: int = 0
    episodes: int = 0
    max_obs_tokens: int = 0
    max_obs_turn: int = 0
    cut_at_s: float | None = None  # the time budget that ended the fuzz early, if one did


def _run_fuzz(target: _Target, n_actions: int, seed: int = 0,
              budget_s: float | None = None) -> _FuzzStats:
    """Fuzz `n_actions` random actions over fresh episodes; past `budget_s` seconds no new
    episode starts once two have run."""
    import numpy as np

    stats = _FuzzStats()
    env = _make(target)
    lo, hi = env.source.reward_range
    vocab = _vocab_size(env)
    rng = np.random.default_rng(seed)
    kinds = _fuzz_kinds(n_actions)
    i = 0
    start = time.monotonic()
    try:
        while i < n_actions:
            if budget_s is not None and stats.episodes >= 2 and time.monotonic() - start > budget_s:
                stats.cut_at_s = budget_s
                break
            episode_seed = int(rng.integers(0, 2**31))
            try:
                obs, _ = env.reset(seed=episode_seed)
            except Exception as exc:
                stats.crashes.append(f"reset(seed={episode_seed}): {_one_line(exc)}{_where(exc)}")
                break
            stats.episodes += 1
            stats.max_obs_tokens = max(stats.max_obs_tokens, len(obs))
            total, turns = 0.0, 0
            while i < n_actions and turns < _MAX_FUZZ_STEPS_PER_EPISODE:
                kind = kinds[i]
                action = _random_action(rng, vocab, kind)
                i += 1
                turns += 1
                try:
                    obs, reward, terminated, truncated, _ = env.step(action)
                except Exception as exc:
                    stats.crashes.append(
                        f"step {turns} ({kind} action of {len(action)} ids, seed {episode_seed}): "
                        f"{_one_line(exc)}{_where(exc)}")
                    break
                stats.steps += 1
                if len(obs) > stats.max_obs_tokens:
                    stats.max_obs_tokens, stats.max_obs_turn = len(obs), turns
                reward = float(reward)
                total += reward
                if not (math.isfinite(reward) and lo - 1e-9 <= reward <= hi + 1e-9):
                    stats.out_of_range.append(
                        f"reward {reward} outside reward_range {(lo, hi)} (seed {episode_seed}, "
                        f"step {turns}, {kind} action)")
                if terminated or truncated:
                    if not lo - 1e-9 <= total <= hi + 1e-9:
                        stats.out_of_range.append(
                            f"episode return {total} outside reward_range {(lo, hi)} (seed "
                            f"{episode_seed}, {turns} steps)")
                    break
    finally:
        env.close()
    return stats


def _check_fuzz(stats: _FuzzStats, n_actions: int) -> CheckRow:
    data = {"actions": n_actions, "steps": stats.steps, "episodes": stats.episodes,
            "crashes": stats.crashes[:10], "out_of_range": stats.out_of_range[:10]}
    if stats.crashes:
        return CheckRow("fuzz", "fail", f"{len(stats.crashes)} crash(es): {stats.crashes[0]}", data)
    if stats.out_of_range:
        return CheckRow("fuzz", "fail", stats.out_of_range[0], data)
    cut = (f" (a slow env: cut at {stats.cut_at_s:.0f} s, {n_actions} planned)"
           if stats.cut_at_s is not None else "")
    return CheckRow("fuzz", "pass",
                    f"{stats.steps} random steps in {stats.episodes} episodes{cut} (incl. out-of-"
                    "vocabulary, empty, long, special tokens): 0 crashes, rewards in range", data)
