"""What bounded grading costs: Math-v0 reset+step with `ProblemEnv`'s default bounded grading
(`llm_gym.grading.bounded`) vs the same env grading inline with no bound, side by side in one
process, plus the per-call cost of `call_bounded` on a trivial grader.

    python benchmarks/grading_overhead.py [--n 5000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym

import llm_gym  # noqa: F401  (registers the catalog)
import llm_gym.rl.problem_env as problem_env
from llm_gym.grading.bounded import BoundedCall, acall_bounded, call_bounded


async def _inline(fn, *args, timeout_s, isolation, **kwargs):  # the unbounded counterpart
    return BoundedCall(True, fn(*args, **kwargs))


def _math_items_per_s(n: int) -> float:
    env = gym.make("llm/Math-v0")
    action = list(b"42") + [260]
    start = time.perf_counter()
    for i in range(n):
        env.reset(seed=i)
        env.step(action)
    return n / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    best = {"bounded": 0.0, "inline": 0.0}
    for _ in range(args.repeats):  # interleaved, so load hits both sides alike
        for mode in best:
            problem_env.acall_bounded = acall_bounded if mode == "bounded" else _inline
            best[mode] = max(best[mode], _math_items_per_s(args.n))
    problem_env.acall_bounded = acall_bounded
    calls = 100_000
    start = time.perf_counter()
    for _ in range(calls):
        call_bounded(divmod, 7, 2, timeout_s=10.0)
    per_call_us = (time.perf_counter() - start) / calls * 1e6
    print(f"Math-v0 reset+step, best of {args.repeats} x {args.n}: bounded {best['bounded']:.0f} "
          f"items/s, inline {best['inline']:.0f} items/s "
          f"({best['bounded'] / best['inline']:.2f}x); call_bounded overhead {per_call_us:.1f} us/call")


if __name__ == "__main__":
    main()
