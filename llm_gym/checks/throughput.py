"""The `throughput` row: random-policy episodes/s and steps/s within a short budget;
informational, it never fails on speed (only when an episode raises).
"""

from __future__ import annotations

import time

from llm_gym.checks.common import (
    _MAX_FUZZ_STEPS_PER_EPISODE,
    CheckRow,
    _make,
    _one_line,
    _random_action,
    _Target,
    _vocab_size,
)


def _check_throughput(target: _Target, budget_s: float = 0.5, max_episodes: int = 50) -> CheckRow:
    import numpy as np

    env = _make(target)
    rng = np.random.default_rng(1)
    vocab = _vocab_size(env)
    episodes = steps = 0
    start = time.perf_counter()
    try:
        while episodes < max_episodes and (episodes == 0 or time.perf_counter() - start < budget_s):
            env.reset(seed=int(rng.integers(0, 2**31)))
            for _ in range(_MAX_FUZZ_STEPS_PER_EPISODE):
                _, _, terminated, truncated, _ = env.step(_random_action(rng, vocab, "tokens"))
                steps += 1
                if terminated or truncated:
                    break
            episodes += 1
    except Exception as exc:
        return CheckRow("throughput", "fail", f"a random-policy episode raised {_one_line(exc)}")
    finally:
        env.close()
    elapsed = max(time.perf_counter() - start, 1e-9)
    data = {"episodes": episodes, "steps": steps, "seconds": round(elapsed, 4),
            "episodes_per_s": round(episodes / elapsed, 2), "steps_per_s": round(steps / elapsed, 2)}
    return CheckRow("throughput", "pass",
                    f"{data['episodes_per_s']:g} episodes/s, {data['steps_per_s']:g} steps/s "
                    f"(random policy, {episodes} episodes; informational)", data)
