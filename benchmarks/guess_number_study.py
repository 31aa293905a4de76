"""Does GRPO make a warm-started GuessNumber policy worse? (issue 23, item 1)

For each seed: one SFT warm start on GuessNumber's gold episodes (binary search), saved once; then
GRPO runs from that same policy, one per setting (`--settings`), each saved at the end. Every
policy -- the SFT start and each run's end -- is scored on one fixed evaluation set: `--eval-groups`
groups x `--eval-group-size` episodes sampled at temperature 1 (the training distribution, so the
number is the policy's expected solve rate, not one greedy game), on the train split's secrets with
a fixed seed, identical for every policy. The table prints the solve rate before and after with a
95% interval (normal approximation over the evaluation's groups, since episodes of one secret are
correlated), and the change after - before with its interval (paired: the same groups).

    .venv/bin/python benchmarks/guess_number_study.py --seeds 0 1 2 --steps 30
    .venv/bin/python benchmarks/guess_number_study.py --report      # the table of the rows so far

Results go to benchmarks/results/guess_number_study.json (one row per seed x setting).
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ENV = "llm/GuessNumber-v0"
# The classic game (secrets 1..8, range_starts=1), as in the report; its train split is 7
# secrets, so the fixed evaluation set repeats them (64 groups of 4 episodes).
KNOBS = {"max_number": 8, "max_turns": 4, "range_starts": 1}
EVAL_SEED = 4321  # the fixed evaluation set's tasks and sampling
# The run: 30 GRPO steps of 4 groups x 8 (the CLI's fitted defaults otherwise).
BASE_FLAGS = ["--group-size", "8", "--groups-per-batch", "4"]
SETTINGS: dict[str, list[str]] = {
    # The control: the same run with a learning rate too small to change the policy (lr must be
    # > 0), so its training curve shows what the task mix and sampling alone do to `correct`.
    "frozen": ["--lr", "1e-12"],
    "default": [],
    "lr3e-5": ["--lr", "3e-5"],
    "lr1e-3": ["--lr", "1e-3"],
    "seq_mean": ["--loss-reduction", "seq_mean"],
    "group_std": ["--advantage-scale", "group_std"],
    "kl0.05": ["--kl-beta", "0.05"],
    "batch8": ["--groups-per-batch", "8"],
    "turn_credit": ["--credit", "turn"],
}


def _train_argv(seed: int, extra: list[str]) -> list[str]:
    return ["--env", ENV, "--env-kwargs", json.dumps(KNOBS), "--seed", str(seed), *BASE_FLAGS, *extra]


def sft_start(seed: int, out: Path, sft_steps: int, band: tuple[float, float] | None = None) -> dict:
    """The SFT warm start `llm-gym train` would run for this seed (with `band` as its
    `--sft-target-band` when given), saved as a model directory."""
    import torch

    from trainers.cli_train import config_and_explicit
    from trainers.grpo.fit import fit_to_env
    from trainers.grpo.trainer import make_accelerator, run_sft
    from trainers.models import load_policy, resolve_model

    band_flags = ["--sft-target-band", str(band[0]), str(band[1])] if band else []
    cfg, explicit = config_and_explicit(_train_argv(seed, ["--sft-steps", str(sft_steps), *band_flags]))
    cfg.validate()
    fit_to_env(cfg, explicit)
    accelerator = make_accelerator(cfg)
    model, hf_tok = load_policy(resolve_model("tiny", seed=seed), dtype=torch.float32)
    info = run_sft(cfg, model, accelerator)
    model.save_pretrained(out)
    hf_tok.save_pretrained(out)
    return {k: info[k] for k in ("sft_steps_run", "sft_stopped_reason", "sft_val_accuracy")}


def _rollouts(model_dir: Path, groups: int, group_size: int, seed: int) -> tuple[Any, list]:
    """The env's tokenizer and `groups` x `group_size` episodes of `model_dir` at temperature 1 on
    train-split tasks drawn with `seed` (the same tasks for every policy)."""
    import torch

    from trainers.cli_train import config_and_explicit
    from trainers.grpo.fit import fit_to_env
    from trainers.grpo.trainer import (env_tokenizer_and_stops, make_dataset, make_sampler,
                                       rollout_groups, rollout_limits)
    from transformers import AutoModelForCausalLM

    cfg, explicit = config_and_explicit(_train_argv(0, ["--no-sft"]))
    cfg.validate()
    fit_to_env(cfg, explicit)
    model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True, dtype=torch.float32).eval()
    tok, stop_ids = env_tokenizer_and_stops(cfg)
    builders = list(make_dataset(cfg, "train", groups, group_size, seed).get_batch(0))
    sampler = make_sampler(cfg, model, torch.device("cpu"), stop_ids, 0, 1.0, seed, groups * group_size)
    with torch.no_grad():
        return tok, rollout_groups(builders, sampler, rollout_limits(cfg, sampler))


def evaluate(model_dir: Path, groups: int, group_size: int, seed: int = EVAL_SEED) -> dict:
    """Solve rate of `model_dir` on the fixed evaluation set (temperature 1)."""
    from llm_gym.rl.outcome import episode_correct

    _, out = _rollouts(model_dir, groups, group_size, seed)
    per_group = [sum(episode_correct(t) for t in g.trajectories_G) / len(g.trajectories_G) for g in out]
    return {"solve_rate": sum(per_group) / len(per_group), "per_group": per_group}


def feedback_following(model_dir: Path, groups: int = 32, group_size: int = 8) -> dict[str, float]:
    """How often `model_dir`'s next guess follows the feedback on its previous one (temperature 1,
    train split, the evaluation's seed): after "Higher." a larger number, after "Lower." a smaller
    one. A policy that ignores the feedback plays one fixed sequence (4, 6, 7, 8) whatever it hears."""
    import re

    tok, out = _rollouts(model_dir, groups, group_size, EVAL_SEED)
    counts = {"Higher.": [0, 0], "Lower.": [0, 0]}  # feedback -> [followed, next guess read]
    for group in out:
        for traj in group.trajectories_G:
            last = traj.transitions[-1]
            text = tok.decode(last.ob.to_ints() + list(last.ac.tokens), skip_special_tokens=True)
            turns = re.findall(r"(?m)^(assistant|user)\n(.*)$", text)  # (role, its first line)
            for (r1, prev), (r2, feedback), (r3, nxt) in zip(turns, turns[1:], turns[2:]):
                if (r1, r2, r3) == ("assistant", "user", "assistant") and feedback in counts \
                        and prev.strip().isdigit() and nxt.strip().isdigit():
                    counts[feedback][1] += 1
                    counts[feedback][0] += (int(nxt.strip()) > int(prev.strip())) == (feedback == "Higher.")
    return {f"follows {k}": v[0] / max(v[1], 1) for k, v in counts.items()} | {
        f"turns after {k}": v[1] for k, v in counts.items()}


def report(rows: list[dict]) -> str:
    """The markdown table of BENCHMARKS.md: per setting, the fixed-set change of each seed and
    pooled (mean over seeds, 95% interval from the seeds' intervals, independent seeds), and the
    training batches' correct rate against the `frozen` run of the same seeds and SFT start
    (steps 51-100, paired step by step: the same tasks, so the task mix cancels)."""
    def key(r: dict) -> tuple:
        return (r["setting"], r["steps"], tuple(r["sft_band"]) if r.get("sft_band") else None)

    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault(key(r), []).append(r)
    lines = ["| SFT band | setting | RL steps | before (mean of seeds) | change per seed | pooled change | "
             "training batches vs frozen, steps 51-100 | train correct first 5 -> last 5 |",
             "|---|---|---:|---:|---|---:|---:|---|"]
    for k, rs in sorted(groups.items(), key=lambda kv: (kv[0][2] or (0.0,), kv[0][1], kv[0][0])):
        changes = [r["change"][0] for r in rs]
        pooled = sum(changes) / len(changes)
        pooled_ci = math.sqrt(sum(r["change"][1] ** 2 for r in rs)) / len(rs)
        frozen = {r["seed"]: r for r in groups.get(("frozen", k[1], k[2]), [])}
        diffs = [a - b for r in rs if r["seed"] in frozen and "train_correct" in r
                 and "train_correct" in frozen[r["seed"]]
                 for a, b in zip(r["train_correct"][50:], frozen[r["seed"]]["train_correct"][50:])]
        paired = (f"{_mean_ci(diffs)[0]:+.3f} ± {_mean_ci(diffs)[1]:.3f}" if diffs and k[0] != "frozen"
                  else "-")
        first = sum(r["train_correct_first5"] for r in rs) / len(rs)
        last = sum(r["train_correct_last5"] for r in rs) / len(rs)
        before = sum(r["before"][0] for r in rs) / len(rs)
        band = f"{k[2][0]}-{k[2][1]}" if k[2] else "0.35-0.55 (default)"
        lines.append(f"| {band} | {k[0]} | {k[1]} | {before:.3f} | {', '.join(f'{c:+.3f}' for c in changes)} | "
                     f"{pooled:+.3f} ± {pooled_ci:.3f} | {paired} | {first:.2f} -> {last:.2f} |")
    return "\n".join(lines)


def _mean_ci(xs: list[float]) -> tuple[float, float]:
    n = len(xs)
    mean = sum(xs) / n
    var = sum((x - mean) ** 2 for x in xs) / max(n - 1, 1)
    return mean, 1.96 * math.sqrt(var / n)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--sft-steps", type=int, default=300)
    parser.add_argument("--sft-band", type=float, nargs=2, default=None, metavar=("LOW", "HIGH"),
                        help="the SFT start's --sft-target-band (default: the CLI's, 0.35 0.55); "
                             "rows record it as their `sft_band`")
    parser.add_argument("--eval-groups", type=int, default=64)
    parser.add_argument("--eval-group-size", type=int, default=4)
    parser.add_argument("--work", default="/tmp/guess_number_study")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "guess_number_study.json"))
    parser.add_argument("--report", action="store_true", help="print the table of --out's rows and exit")
    parser.add_argument("--feedback", metavar="MODEL_DIR", help="print how often MODEL_DIR's guesses "
                        "follow the Higher/Lower feedback, and exit")
    args = parser.parse_args()
    work = Path(args.work)
    out_path = Path(args.out)
    rows = json.loads(out_path.read_text()) if out_path.exists() else []
    if args.report:
        print(report(rows))
        return
    if args.feedback:
        print(json.dumps(feedback_following(Path(args.feedback)), indent=1))
        return
    band = tuple(args.sft_band) if args.sft_band else None
    done = {(r["seed"], r["setting"], r["steps"], tuple(r["sft_band"]) if r.get("sft_band") else None)
            for r in rows}
    for seed in args.seeds:
        start = work / (f"sft-seed{seed}" + (f"-band{band[0]}-{band[1]}" if band else ""))
        if not (start / "config.json").exists():
            sft = sft_start(seed, start, args.sft_steps, band)
            (start / "sft.json").write_text(json.dumps(sft))
        sft = json.loads((start / "sft.json").read_text())
        before = evaluate(start, args.eval_groups, args.eval_group_size)
        for setting in args.settings:
            if (seed, setting, args.steps, band) in done:
                continue
            run_dir = work / "runs"
            name = f"{setting}-seed{seed}" + (f"-band{band[0]}-{band[1]}" if band else "")
            cmd = [str(ROOT / ".venv" / "bin" / "llm-gym"), "train",
                   *_train_argv(seed, ["--model", str(start), "--no-sft", *SETTINGS[setting]]),
                   "--steps", str(args.steps), "--save-every", "0", "--eval-problems", "8",
                   "--eval-every", "0", "--output-dir", str(run_dir), "--run-name", name, "--overwrite",
                   "--no-progress"]
            t0 = time.monotonic()
            proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
            wall = time.monotonic() - t0
            if proc.returncode != 0:
                print(f"seed {seed} {setting}: failed\n{proc.stderr[-1500:]}", file=sys.stderr)
                continue
            final = max((run_dir / name / "checkpoints").glob("step_*"), key=lambda p: int(p.name.split("_")[1]))
            after = evaluate(final / "model", args.eval_groups, args.eval_group_size)
            metrics = [json.loads(x) for x in (run_dir / name / "metrics.jsonl").read_text().splitlines()
                       if x.strip()]
            train = [m["correct"] for m in metrics if "correct" in m]
            diff = [a - b for a, b in zip(after["per_group"], before["per_group"])]
            row = {"seed": seed, "setting": setting, "steps": args.steps, "flags": SETTINGS[setting],
                   "sft_band": list(band) if band else None,
                   "sft": sft, "before": _mean_ci(before["per_group"]), "after": _mean_ci(after["per_group"]),
                   "change": _mean_ci(diff), "train_correct_first5": sum(train[:5]) / max(len(train[:5]), 1),
                   "train_correct_last5": sum(train[-5:]) / max(len(train[-5:]), 1),
                   "train_correct": train,
                   "wall_s": round(wall, 1), "command": " ".join(cmd[1:])}
            rows.append(row)
            out_path.parent.mkdir(parents=True, exist_ok=True)
            out_path.write_text(json.dumps(rows, indent=1))
            print(f"seed {seed} {setting:12s} band {band} before {row['before'][0]:.3f}±{row['before'][1]:.3f} "
                  f"after {row['after'][0]:.3f}±{row['after'][1]:.3f} change {row['change'][0]:+.3f}"
                  f"±{row['change'][1]:.3f} train {row['train_correct_first5']:.2f}->"
                  f"{row['train_correct_last5']:.2f} ({wall:.0f}s)", flush=True)
            shutil.rmtree(run_dir / name, ignore_errors=True)


if __name__ == "__main__":
    main()
