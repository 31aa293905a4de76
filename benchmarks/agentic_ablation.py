"""One GRPO setting changed at a time from the same warm start, scored like `agentic_demos.py`.

Per demo and seed: the demo's SFT start (built once, kept under `--work`), then for each variant a GRPO
run with the demo's flags plus the variant's, and the start and each end scored on the same 400 held-out
episodes (greedy, paired). Rows are appended to `--out` (JSON lines) as each variant finishes.

    .venv/bin/python benchmarks/agentic_ablation.py calculator 2 \\
        '{"fitted": [], "lr3e-4": ["--lr", "3e-4"], "kl0.1": ["--kl-beta", "0.1"]}'

A variant's flags are added to the demo's; `[]` is `llm-gym train`'s fitted defaults (their lr is fitted to the
start, `trainers.grpo.fit.fitted_rl_lr`).
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


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("demo", choices=sorted(A.DEMOS))
    parser.add_argument("seed", type=int)
    parser.add_argument("variants", help='JSON: {"label": ["--flag", "value", ...], ...}')
    parser.add_argument("--steps", type=int, default=None, help="GRPO steps (default: the demo's)")
    parser.add_argument("--eval-problems", type=int, default=400)
    parser.add_argument("--work", default="/tmp/agentic_ablation")
    parser.add_argument("--out", default="benchmarks/out/agentic_ablation.jsonl")
    args = parser.parse_args()
    demo = A.DEMOS[args.demo]
    work = Path(args.work) / args.demo
    start = work / f"sft-seed{args.seed}"
    if not (start / "config.json").exists():
        print("SFT start:", A.sft_start(demo, args.seed, start, demo.sft_steps or 400), flush=True)
    n = args.eval_problems
    base = A.evaluate(demo, start, n, start)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    for label, flags in json.loads(args.variants).items():
        t0 = time.monotonic()
        g = A.grpo(dataclasses.replace(demo, extra_grpo=flags), args.seed, start, work / f"runs-{label}",
                   args.steps or demo.steps)
        ev = A.evaluate(demo, g["model"], n, start)
        row = {"demo": args.demo, "label": label, "flags": flags, "seed": args.seed,
               "start": sum(base["correct"]) / n, "end": sum(ev["correct"]) / n,
               "gain": A._mean_ci([b - a for a, b in zip(base["correct"], ev["correct"])]),
               **{f"{m}_start": sum(base[m]) / n for m in demo.metrics},
               **{f"{m}_end": sum(ev[m]) / n for m in demo.metrics},
               "train_correct_first5": sum(g["train_correct"][:5]) / 5,
               "train_correct_last5": sum(g["train_correct"][-5:]) / 5,
               "train_seconds": g["train_seconds"], "wall_s": round(time.monotonic() - t0)}
        print(json.dumps(row), flush=True)
        with out.open("a") as f:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
