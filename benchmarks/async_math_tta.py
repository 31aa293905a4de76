"""Asynchronous GRPO on Math-v0: time to a fixed held-out accuracy gain at `--max-staleness` 0, 1, 2.

Issue 24, item 4 (a): "no loss" on Math means the asynchronous loop reaches the same accuracy gain in no
more training time (and, read per step, with no less learning per sample). Per seed: the README's
default warm start (`llm-gym train`'s SFT on llm/Math-v0 with the tiny preset, `agentic_demos.sft_start`)
saved once, then `llm-gym train --model START --no-sft --max-staleness K` for the same steps and seed,
scored every `--eval-every` steps by the trainer's own evaluation (greedy, the same `--eval-problems`
held-out problems for every run). Reported per run: steps/s (steps 2-N), held-out accuracy at the start
and the end, and the training seconds (the sum of `step_seconds`, evaluations excluded) until the
held-out accuracy first reaches start + `--delta`, with the step it happened at.

    .venv/bin/python benchmarks/async_math_tta.py [--seeds 0 1 2 --steps 60 --staleness 0 1 2]
    .venv/bin/python benchmarks/async_math_tta.py --report

Rows go to benchmarks/results/async_math_tta.json as each run finishes.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import agentic_demos as A  # noqa: E402

RESULTS = A.ROOT / "benchmarks" / "results" / "async_math_tta.json"
DEMO = A.Demo(env="llm/Math-v0", knobs={}, flags=[], steps=60, sft_band=(0.35, 0.55))


def run(seed: int, k: int, start: Path, steps: int, eval_every: int, eval_problems: int, delta: float,
        runs: Path) -> dict:
    name = f"Math-seed{seed}-k{k}"
    cmd = [str(A.ROOT / ".venv" / "bin" / "llm-gym"), "train", "--env", "llm/Math-v0", "--seed", str(seed),
           "--model", str(start), "--no-sft", "--max-staleness", str(k), "--steps", str(steps),
           "--eval-every", str(eval_every), "--eval-problems", str(eval_problems), "--save-every", "0",
           "--output-dir", str(runs), "--run-name", name, "--overwrite", "--no-progress"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=A.ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[1:])} failed:\n{proc.stderr[-2000:]}")
    records = [json.loads(x) for x in (runs / name / "metrics.jsonl").read_text().splitlines() if x.strip()]
    trained = [r for r in records if "step_seconds" in r]
    evals = [(int(r["step"]), float(r["eval/accuracy"])) for r in records if "eval/accuracy" in r]
    start_acc = evals[0][1]
    seconds_at = {}
    clock = 0.0
    for r in trained:
        clock += r["step_seconds"]
        seconds_at[int(r["step"])] = clock
    reached = next(((s, seconds_at.get(s, 0.0)) for s, a in evals[1:] if a >= start_acc + delta), None)
    later = trained[1:]
    return {"seed": seed, "max_staleness": k, "steps": len(trained),
            "steps_per_s": round(len(later) / sum(r["step_seconds"] for r in later), 3),
            "start": start_acc, "end": evals[-1][1], "evals": evals,
            "reached_step": reached[0] if reached else None,
            "seconds_to_gain": round(reached[1], 1) if reached else None,
            "train_reward": [r.get("reward", 0.0) for r in trained], "command": " ".join(cmd[1:])}


def report(rows: list[dict], delta: float) -> str:
    lines = [f"| seed | K | steps/s (steps 2-N) | held-out start → end | training seconds to +{delta:.2f} "
             "(step) | vs K=0 |", "|---|---:|---:|---|---|---:|"]
    for r in sorted(rows, key=lambda r: (r["seed"], r["max_staleness"])):
        sync = next((x for x in rows if x["seed"] == r["seed"] and x["max_staleness"] == 0), None)
        t = r["seconds_to_gain"]
        ratio = (f"{sync['seconds_to_gain'] / t:.2f}x" if sync and t and sync["seconds_to_gain"] else "")
        when = f"{t:.1f} s (step {r['reached_step']})" if t else "not reached"
        lines.append(f"| {r['seed']} | {r['max_staleness']} | {r['steps_per_s']:.2f} | {r['start']:.3f} → "
                     f"{r['end']:.3f} | {when} | {ratio} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--staleness", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=DEMO.steps)
    parser.add_argument("--eval-every", type=int, default=5)
    parser.add_argument("--eval-problems", type=int, default=200)
    parser.add_argument("--delta", type=float, default=0.10, help="the accuracy gain timed")
    parser.add_argument("--work", default="/tmp/async_math_tta")
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--report", action="store_true", help="print the table of --out's rows and exit")
    args = parser.parse_args()
    out = Path(args.out)
    rows = json.loads(out.read_text()) if out.exists() else []
    if not args.report:
        work = Path(args.work)
        for seed in args.seeds:
            start = work / f"sft-seed{seed}"
            if not (start / "config.json").exists():
                print(f"[seed {seed}] SFT start:", A.sft_start(DEMO, seed, start, 800), flush=True)
            for k in args.staleness:
                row = run(seed, k, start, args.steps, args.eval_every, args.eval_problems, args.delta,
                          work / "runs")
                print(json.dumps({x: v for x, v in row.items() if x not in ("train_reward", "evals")}), flush=True)
                rows = [r for r in rows if (r["seed"], r["max_staleness"]) != (seed, k)]
                rows.append(row)
                out.write_text(json.dumps(rows, indent=1))
    print(report(rows, args.delta))


if __name__ == "__main__":
    main()
