"""Asynchronous GRPO on a tool env whose steps take real time: `llm/PythonTool-v0` in the sandbox.

Issue 24, item 4 (b). Per seed: one SFT warm start of the `tiny-bpe` preset on the env's gold episodes
(`agentic_demos.sft_start`: the model learns to call `python` with the task's program and answer what
it printed), then GRPO from it with `--max-staleness` 0, 1 and 2 (the same steps, seed and flags
otherwise). Every tool call runs the model's program in `llm_gym.sandbox` (bubblewrap here, ~50-100 ms
a run), so a step's rollouts wait on real sandboxes; with K > 0 those waits overlap training.

Reported per run: steps/s (steps / the sum of `step_seconds`, step 1 apart: it has nothing to overlap),
the training batches' solve rate and successful-tool-call rate per step (what each sample taught,
read as the mean over all steps and over the last third), and the end policy scored greedily on a fixed
held-out set (`--eval-problems` test-split episodes, the same for every run; paired against the start,
95% interval). "Equal learning per sample" is read from those: the same number of steps samples the same
number of episodes at every K.

    .venv/bin/python benchmarks/async_tool_workload.py [--seeds 0 1 2 --steps 30 --staleness 0 1 2]
    .venv/bin/python benchmarks/async_tool_workload.py --report

Rows go to benchmarks/results/async_tool_workload.json as each run finishes.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import agentic_demos as A  # noqa: E402

RESULTS = A.ROOT / "benchmarks" / "results" / "async_tool_workload.json"

DEMO = A.Demo(
    env="llm/PythonTool-v0", knobs={"scale": 1, "max_turns": 3, "max_tool_calls": 1},
    flags=["--group-size", "8", "--groups-per-batch", "4"], steps=30, sft_band=(0.35, 0.55),
    model="tiny-bpe", metrics=("used_tool",))


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def run(seed: int, staleness: list[int], steps: int, eval_problems: int, work: Path, sft_steps: int) -> list[dict]:
    start = work / f"sft-seed{seed}"
    if not (start / "config.json").exists():
        print(f"[seed {seed}] SFT start:", A.sft_start(DEMO, seed, start, sft_steps), flush=True)
    base = A.evaluate(DEMO, start, eval_problems, start)
    rows = []
    for k in staleness:
        t0 = time.monotonic()
        g = A.grpo(dataclasses.replace(DEMO, extra_grpo=["--max-staleness", str(k)]), seed, start,
                   work / f"runs-k{k}", steps)
        ev = A.evaluate(DEMO, g["model"], eval_problems, start)
        records = [json.loads(x) for x in (Path(g["model"]).parents[2] / "metrics.jsonl").read_text().splitlines()
                   if x.strip()]
        trained = [r for r in records if "step_seconds" in r]
        later = trained[1:]
        third = max(1, len(trained) // 3)
        row = {
            "seed": seed, "max_staleness": k, "steps": len(trained),
            "first_step_s": round(trained[0]["step_seconds"], 2),
            "steps_per_s": round(len(later) / sum(r["step_seconds"] for r in later), 4),
            "mean_step_s": round(_mean([r["step_seconds"] for r in later]), 3),
            "train_correct_mean": round(_mean(g["train_correct"]), 4),
            "train_correct_last_third": round(_mean(g["train_correct"][-third:]), 4),
            "train_used_tool_mean": round(_mean(g["train_used_tool"]), 4),
            "mean_staleness": round(_mean([r.get("async/staleness_mean", 0.0) for r in trained]), 3),
            "heldout_start": _mean(base["correct"]), "heldout_end": _mean(ev["correct"]),
            "heldout_gain": A._mean_ci([b - a for a, b in zip(base["correct"], ev["correct"])]),
            "heldout_used_tool_end": _mean(ev["used_tool"]),
            "train_correct": g["train_correct"], "command": g["command"],
            "wall_s": round(time.monotonic() - t0),
        }
        print(json.dumps({k2: v for k2, v in row.items() if k2 != "train_correct"}), flush=True)
        rows.append(row)
    return rows


def report(rows: list[dict]) -> str:
    lines = ["| seed | K | steps/s (steps 2-N) | vs K=0 | training solve rate: mean / last third | "
             "tool calls that ran | held-out start → end (gain ± 95%) |",
             "|---|---:|---:|---:|---|---:|---|"]
    for r in sorted(rows, key=lambda r: (r["seed"], r["max_staleness"])):
        sync = next((x for x in rows if x["seed"] == r["seed"] and x["max_staleness"] == 0), None)
        ratio = f"{r['steps_per_s'] / sync['steps_per_s']:.2f}x" if sync else ""
        gain, ci = r["heldout_gain"]
        lines.append(f"| {r['seed']} | {r['max_staleness']} | {r['steps_per_s']:.3f} | {ratio} | "
                     f"{r['train_correct_mean']:.3f} / {r['train_correct_last_third']:.3f} | "
                     f"{r['train_used_tool_mean']:.2f} | {r['heldout_start']:.3f} → {r['heldout_end']:.3f} "
                     f"({gain:+.3f} ± {ci:.3f}) |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--staleness", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=DEMO.steps)
    parser.add_argument("--eval-problems", type=int, default=200)
    parser.add_argument("--sft-steps", type=int, default=400, help="cap on the warm start's SFT steps")
    parser.add_argument("--work", default="/tmp/async_tool_workload")
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--report", action="store_true", help="print the table of --out's rows and exit")
    args = parser.parse_args()
    out = Path(args.out)
    rows = json.loads(out.read_text()) if out.exists() else []
    if not args.report:
        for seed in args.seeds:
            for row in run(seed, args.staleness, args.steps, args.eval_problems, Path(args.work), args.sft_steps):
                rows = [r for r in rows if (r["seed"], r["max_staleness"]) != (seed, row["max_staleness"])]
                rows.append(row)
                out.write_text(json.dumps(rows, indent=1))
    print(report(rows))


if __name__ == "__main__":
    main()
