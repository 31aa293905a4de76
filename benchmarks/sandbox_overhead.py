"""What a sandboxed run costs: per-run wall time of each backend (and each bwrap binary found) vs
a plain `python -c pass` subprocess of the same interpreter, and runs/s through `SandboxPool` vs
plain subprocesses on a thread pool of the same size -- ratios side by side, interleaved rounds
(best round kept) so machine load hits every side alike.

    python benchmarks/sandbox_overhead.py [--n 40] [--rounds 3] [--concurrency 2] [--pool-n 80]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

from llm_gym.sandbox import (
    Sandbox,
    SandboxPool,
    SandboxUnavailable,
    SandboxWeakerWarning,
)
from llm_gym.sandbox.bwrap import find_bwrap

CODE = "pass"


def _plain(python: str) -> None:
    subprocess.run([python, "-c", CODE], check=True, stdin=subprocess.DEVNULL, capture_output=True)


def _per_run_ms(fn, n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def _runs_per_s(submit_all, n: int) -> float:
    t = time.perf_counter()
    submit_all(n)
    return n / (time.perf_counter() - t)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=40, help="sequential runs per side per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--pool-n", type=int, default=80, help="runs per side per round, pooled")
    args = parser.parse_args()

    sides: dict[str, Sandbox] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SandboxWeakerWarning)
        for binary in find_bwrap():
            try:
                box = Sandbox("bwrap", bwrap=binary)
                sides[f"bwrap {box.describe()['bwrap'].split(' (')[0]}"] = box
            except SandboxUnavailable as e:
                print(f"skip {binary}: {e}")
        try:
            box = Sandbox("rlimit")
            box.describe()
            sides["rlimit"] = box
        except SandboxUnavailable as e:
            print(f"skip rlimit: {e}")
    if not sides:
        raise SystemExit("no sandbox backend runs here")
    python = next(iter(sides.values())).describe()["python"].split(" (")[0]
    for box in sides.values():  # warm-up: probes, page cache
        box.run(CODE)

    seq = {"plain": float("inf"), **{k: float("inf") for k in sides}}
    pooled = {"plain": 0.0, **{k: 0.0 for k in sides}}
    for _ in range(args.rounds):
        seq["plain"] = min(seq["plain"], _per_run_ms(lambda: _plain(python), args.n))
        for name, box in sides.items():
            seq[name] = min(seq[name], _per_run_ms(lambda b=box: b.run(CODE), args.n))
        with ThreadPoolExecutor(args.concurrency) as ex:
            pooled["plain"] = max(
                pooled["plain"],
                _runs_per_s(lambda n: list(ex.map(lambda _: _plain(python), range(n))), args.pool_n),
            )
        for name, box in sides.items():
            with SandboxPool(box, max_concurrency=args.concurrency) as pool:
                pooled[name] = max(
                    pooled[name], _runs_per_s(lambda n, p=pool: p.map([CODE] * n), args.pool_n)
                )

    cpus = os.cpu_count()
    print(f"interpreter {python}; {cpus} CPUs; code {CODE!r}; best of {args.rounds} rounds")
    print(
        f"{'side':<22}{'ms/run (median)':>16}{'vs plain':>10}{'overhead ms':>13}"
        f"{f'runs/s @{args.concurrency}':>14}{'vs plain':>10}"
    )
    for name in seq:
        print(
            f"{name:<22}{seq[name]:>16.1f}{seq[name] / seq['plain']:>9.2f}x"
            f"{seq[name] - seq['plain']:>13.1f}{pooled[name]:>14.1f}{pooled[name] / pooled['plain']:>9.2f}x"
        )


if __name__ == "__main__":
    main()
