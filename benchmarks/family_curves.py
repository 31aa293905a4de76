"""Learning evidence per catalog family: one short `llm-gym train` run of the tiny model each.

For every family, one representative env at a small difficulty: held-out accuracy before and after
RL (the trainer's own greedy evaluation on the env's test split), the SFT warm start the CLI chose
(reference responses, gold scripted episodes, or none) and wall time. Writes
`docs/curves/FAMILY.png` (`llm-gym plot`'s figure) and `docs/curves/results.json`, and prints the
markdown table that README's "Learning evidence" section quotes.

    .venv/bin/python benchmarks/family_curves.py                    # every family, ~5 min each
    .venv/bin/python benchmarks/family_curves.py --families math,text

Runs go one after the other (2 CPU cores). Numbers depend on the machine's load; the table states
what was measured, when.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "curves"

# family -> (env id, env kwargs, extra train flags); small settings a ~1M-parameter byte model can move on
RUNS: dict[str, tuple[str, dict, list[str]]] = {
    "math": ("llm/Math-v0", {}, ["--steps", "60"]),
    "text": ("llm/ReverseText-v0", {"length": 2}, ["--steps", "40", "--max-tokens", "8"]),
    "puzzles": ("llm/Countdown-v0", {"num_numbers": 2, "max_number": 9, "min_target": 2, "max_target": 20},
                ["--steps", "40", "--max-tokens", "16"]),
    "games": ("llm/GuessNumber-v0", {"max_number": 8, "max_turns": 4},
              ["--steps", "30", "--max-tokens", "4", "--group-size", "8", "--groups-per-batch", "4"]),
    "tools": ("llm/Calculator-v0", {"digits": 1, "max_turns": 3, "max_tool_calls": 1},
              ["--steps", "40", "--max-tokens", "112", "--group-size", "8", "--groups-per-batch", "2",
               "--sft-batch-size", "8"]),
    "code": ("llm/CodeOutput-v0", {"length": 1, "max_output_lines": 2},
             ["--steps", "30", "--max-tokens", "16"]),
    "multiagent": ("llm/SelfPlayNim-v0", {"num_heaps": 2, "max_heap": 3},
                   ["--steps", "30", "--max-tokens", "6", "--group-size", "8", "--groups-per-batch", "4"]),
}


def run_family(family: str, run_root: Path, eval_problems: int, sft_steps: int) -> dict:
    env_id, knobs, flags = RUNS[family]
    cmd = [
        str(ROOT / ".venv" / "bin" / "llm-gym"), "train", "--env", env_id, "--env-kwargs", json.dumps(knobs),
        "--eval-problems", str(eval_problems), "--sft-steps", str(sft_steps), "--output-dir", str(run_root),
        "--run-name", family, "--overwrite", "--no-progress", *flags,
    ]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    wall = time.monotonic() - t0
    row = {"family": family, "env": env_id, "knobs": knobs, "command": " ".join(cmd[1:]),
           "wall_s": round(wall, 1), "returncode": proc.returncode}
    chose = [line for line in proc.stderr.splitlines() + proc.stdout.splitlines() if "SFT" in line][:3]
    row["sft_choice"] = chose
    summary_path = run_root / family / "summary.json"
    if proc.returncode != 0 or not summary_path.exists():
        row["error"] = (proc.stderr or proc.stdout)[-600:]
        return row
    summary = json.loads(summary_path.read_text())
    for key in ("eval_before_sft", "eval_before_rl", "eval_after_rl", "eval_after_rl_reward", "steps",
                "wall_seconds"):
        if key in summary:
            row[key] = summary[key]
    train = [json.loads(line) for line in (run_root / family / "metrics.jsonl").read_text().splitlines()
             if line.strip()]
    train = [r for r in train if "correct" in r]
    if train:  # training-batch accuracy (sampled at temperature 1), first vs last five steps
        row["train_correct_first5"] = sum(r["correct"] for r in train[:5]) / len(train[:5])
        row["train_correct_last5"] = sum(r["correct"] for r in train[-5:]) / len(train[-5:])
    from trainers.cli_train import plot_run

    OUT.mkdir(parents=True, exist_ok=True)
    plot_run(run_root / family, OUT / f"{family}.png")
    if any("env/used_tool" in r for r in train):
        row["tool_use_first5_last5"] = _plot_tool_use(train, OUT / f"{family}_tool_use.png", env_id)
    return row


def _plot_tool_use(train: list[dict], out: Path, env_id: str) -> list[float]:
    """Per RL step: share of episodes that made a successful tool call, that hit a malformed
    call, and that were correct (the env's own episode metrics, logged as env/<key>)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [r["step"] for r in train]
    fig, ax = plt.subplots(figsize=(7, 4), dpi=120)
    for key, label in (("env/used_tool", "episodes with a successful tool call"),
                       ("env/parse_error", "episodes ended by a malformed call"),
                       ("env/correct", "episodes with a correct answer")):
        ax.plot(steps, [r.get(key, 0.0) for r in train], label=label)
    ax.set(xlabel="RL step", ylabel="share of the step's episodes", ylim=(-0.02, 1.02),
           title=f"{env_id}: does the tiny model call the tool?")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    used = [r.get("env/used_tool", 0.0) for r in train]
    return [sum(used[:5]) / len(used[:5]), sum(used[-5:]) / len(used[-5:])]


def table(rows: list[dict]) -> str:
    def fmt(v):
        return "—" if v is None else f"{v:.2f}"

    lines = ["| family | env | held-out: before SFT | before RL | after RL | train correct: first 5 → last 5 steps | wall |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['family']} | `{r['env']}` | failed: see results.json | | | | {r['wall_s']:.0f} s |")
            continue
        lines.append(f"| {r['family']} | `{r['env']}` | {fmt(r.get('eval_before_sft'))} | "
                     f"{fmt(r.get('eval_before_rl'))} | {fmt(r.get('eval_after_rl'))} | "
                     f"{fmt(r.get('train_correct_first5'))} → {fmt(r.get('train_correct_last5'))} | {r['wall_s']:.0f} s |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", default=",".join(RUNS), help="comma-separated subset of " + ",".join(RUNS))
    parser.add_argument("--eval-problems", type=int, default=100)
    parser.add_argument("--sft-steps", type=int, default=300, help="cap on SFT steps (it stops at its band)")
    parser.add_argument("--run-root", default=str(ROOT / "runs" / "family_curves"))
    args = parser.parse_args(argv)
    families = [f.strip() for f in args.families.split(",") if f.strip()]
    unknown = [f for f in families if f not in RUNS]
    if unknown:
        parser.error(f"unknown families {unknown}; choose from {list(RUNS)}")
    run_root = Path(args.run_root)
    results_path = OUT / "results.json"
    for family in families:
        if (run_root / family).exists():
            shutil.rmtree(run_root / family)
        print(f"[{family}] {RUNS[family][0]} ...", flush=True)
        row = run_family(family, run_root, args.eval_problems, args.sft_steps)
        row["measured"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        row["eval_problems"], row["sft_steps_cap"] = args.eval_problems, args.sft_steps
        OUT.mkdir(parents=True, exist_ok=True)
        # re-read before writing: several invocations may run side by side on other families
        results = json.loads(results_path.read_text()) if results_path.exists() else {}
        results[family] = row
        results_path.write_text(json.dumps(results, indent=2))
        print(json.dumps({k: row.get(k) for k in ("eval_before_rl", "eval_after_rl", "wall_s", "error")}),
              flush=True)
    results = json.loads(results_path.read_text()) if results_path.exists() else {}
    print(table([results[f] for f in RUNS if f in results]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
