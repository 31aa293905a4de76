"""Multi-turn and tool-use RL that learns, measured against more SFT (issue 23, item 6).

Four demonstrations, each over several seeds. Per seed:

1. **SFT start**: `llm-gym train`'s own warm start on the env's gold episodes (`trainers.grpo.trainer.
   run_sft`, the demo's `--sft-target-band`), saved as a model directory.
2. **GRPO** from that start: `llm-gym train --model START --no-sft` with the demo's flags (a
   subprocess). Its training seconds are the sum of its logged `step_seconds` (evaluations excluded).
3. **The control, more SFT** from the same start for the same training seconds: the same SFT
   (`trainers.sft.sft_warm_start`, same batch size and learning rate) on fresh gold episodes (the seed
   plus 1000), with no band stop, stopped once its training time reaches GRPO's.
4. **Evaluation** of the three policies on one fixed held-out set: `--eval-problems` episodes of the
   env's test split drawn with the trainer's evaluation seed, played greedily (the trainer's
   `evaluate`, episode by episode, so the three policies face the same episodes and their
   differences are paired). "Solved" is `llm_gym.rl.outcome.episode_correct`; for tool envs the
   share of episodes with a successful tool call (the env's `used_tool` metric) is reported too.

The report gives, per demo, the solve rate of each policy, the gains GRPO - start and more SFT -
start, and GRPO - more SFT: per seed, and pooled over seeds with a 95% interval (the mean of the
per-seed paired differences; the interval's variance is the sum of the per-seed paired variances
over the number of seeds squared: evaluation noise, seeds independent). `docs/curves/agentic_<demo>.png`
draws each seed's training-batch solve rate per GRPO step and the three held-out numbers.

    .venv/bin/python benchmarks/agentic_demos.py --demos guess_number --seeds 0 1 2
    .venv/bin/python benchmarks/agentic_demos.py --report     # the table of the rows so far

Rows go to benchmarks/results/agentic_demos.json (one per demo x seed), written as each finishes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "agentic_demos.json"
CURVES = ROOT / "docs" / "curves"


@dataclass(frozen=True)
class Demo:
    env: str
    knobs: dict[str, Any]
    flags: list[str]  # `llm-gym train` flags shared by the warm start and GRPO
    steps: int
    sft_band: tuple[float, float]
    model: str = "tiny"
    sft_steps: int | None = None  # cap on the warm start's SFT steps (None: --sft-steps)
    metrics: tuple[str, ...] = ()  # episode metrics reported beside the solve rate
    note: str = ""
    extra_grpo: list[str] = field(default_factory=list)


DEMOS: dict[str, Demo] = {
    # Binary search over 8 numbers in 4 turns, each game in one of 150 shifted ranges ("from 46 to
    # 53"): 1,200 tasks, 120 of them held out.
    "guess_number": Demo(
        env="llm/GuessNumber-v0", knobs={"max_number": 8, "max_turns": 4, "range_starts": 150},
        flags=["--group-size", "8", "--groups-per-batch", "4"], steps=100, sft_band=(0.8, 0.95)),
    # Against a uniformly random opponent; seat and opponent drawn per game. Its warm start is
    # capped at 100 SFT steps: 400 (1,214 s here) left validation at 0.08, far below the band.
    "tictactoe": Demo(
        env="llm/TicTacToe-v0", knobs={"opponent": "random"},
        flags=["--group-size", "8", "--groups-per-batch", "4"], steps=60, sft_band=(0.35, 0.55),
        sft_steps=100),
    # 180 steps: at the lr fitted to its start (1e-4), 60 steps held the start without a gain.
    "calculator": Demo(
        env="llm/Calculator-v0", knobs={"digits": 1, "max_turns": 3, "max_tool_calls": 1},
        flags=["--group-size", "8", "--groups-per-batch", "4"], steps=180, sft_band=(0.35, 0.55),
        model="tiny-bpe", metrics=("used_tool",)),
    # Self-play tic-tac-toe: both seats of every training game are the policy (zero-sum group
    # rewards); evaluated as one seat against a uniformly random opponent on held-out games.
    "selfplay_tictactoe": Demo(
        env="llm/SelfPlayTicTacToe-v0", knobs={"opponent": "random"},
        flags=["--group-size", "8", "--groups-per-batch", "4"], steps=60, sft_band=(0.35, 0.55),
        sft_steps=100,
        note="trained in self-play (both seats the policy); evaluated against a random opponent"),
    # Tried first (seed 0: 0.220 -> 0.220 held-out after 60 steps); kept for its row.
    "selfplay_nim": Demo(
        env="llm/SelfPlayNim-v0", knobs={"num_heaps": 2, "max_heap": 3},
        flags=["--group-size", "8", "--groups-per-batch", "4"], steps=60, sft_band=(0.35, 0.55),
        note="trained in self-play (both seats the policy); evaluated against a random opponent"),
}


def _argv(demo: Demo, seed: int, *extra: str, start: Path | None = None) -> list[str]:
    """`llm-gym train` flags for `demo`; with `start` (a saved policy of a non-byte preset) the env
    reads that policy's tokenizer files, as the trainer gives a preset's env its tokenizer."""
    knobs = dict(demo.knobs)
    if start is not None and demo.model != "tiny":
        knobs["tokenizer"] = str(start)
    return ["--env", demo.env, "--env-kwargs", json.dumps(knobs), "--seed", str(seed), *demo.flags, *extra]


def _fitted(argv: list[str]):
    from trainers.cli_train import config_and_explicit
    from trainers.grpo.fit import fit_to_env

    cfg, explicit = config_and_explicit(argv)
    cfg.validate()
    fit_to_env(cfg, explicit)
    return cfg


def sft_start(demo: Demo, seed: int, out: Path, sft_steps: int) -> dict:
    """The warm start `llm-gym train` runs for this demo and seed, saved to `out`."""
    import torch

    from trainers.grpo import trainer as T
    from trainers.models import load_policy, resolve_model

    band = [str(x) for x in demo.sft_band]
    # 64 validation episodes per check (the CLI: min(eval_problems, 128)): multi-turn checks are slow.
    cfg = _fitted(_argv(demo, seed, "--model", demo.model, "--sft-steps", str(sft_steps),
                        "--sft-target-band", *band, "--eval-problems", "64", "--no-progress"))
    accelerator = T.make_accelerator(cfg)
    T.seed_everything(cfg.seed)
    preset = Path(resolve_model(demo.model, seed=cfg.seed))
    model, _ = load_policy(preset, device=accelerator.device, dtype=torch.float32)
    T.set_cpu_threads(cfg, model, accelerator)
    info = T.run_sft(cfg, model, accelerator)
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(preset, out)  # tokenizer and template files; the weights are replaced
    model.save_pretrained(out)
    return {k: info[k] for k in ("sft_steps_run", "sft_stopped_reason", "sft_val_accuracy", "sft_seconds")}


class _Budget(Exception):
    """Raised from the SFT log hook once the control has trained for its seconds."""


def more_sft(demo: Demo, seed: int, start: Path, out: Path, seconds: float) -> dict:
    """The control: SFT from `start` on fresh gold episodes until `seconds` of training."""
    cfg = _fitted(_argv(demo, seed, "--model", str(start), "--no-progress", start=start))
    return sft_from(cfg, start, out, seconds=seconds, env_id=cfg.env, env_kwargs=cfg.env_kwargs,
                    eval_every=10**9, eval_problems=1, eval_max_tokens=cfg.max_tokens, seed=seed + 1000)


def sft_from(cfg: Any, start: Path, out: Path, seconds: float | None = None, max_steps: int = 100_000,
             **source: Any) -> dict:
    """`trainers.sft.sft_warm_start` from the policy at `start` (`cfg`'s SFT batch size and lr, no band
    stop) on `source` (its example arguments and seed), for `max_steps` steps or until `seconds` of
    training; saved to `out`. Training seconds run from the first step's end (a check before
    training is not training time)."""
    import torch

    from trainers.grpo import trainer as T
    from trainers.models import load_policy
    from trainers.sft import sft_warm_start

    accelerator = T.make_accelerator(cfg)
    T.seed_everything(cfg.seed)
    model, _ = load_policy(start, device=accelerator.device, dtype=torch.float32)
    T.set_cpu_threads(cfg, model, accelerator)
    state = {"train_s": 0.0, "last": None, "steps": 0}

    def hook(event: dict) -> None:
        now = time.monotonic()
        if "sft/accuracy" in event:  # the check before training: not training time
            state["last"] = now
            return
        if state["last"] is not None:
            state["train_s"] += now - state["last"]
        state["steps"] = event["sft/step"]
        state["last"] = time.monotonic()
        if seconds is not None and state["train_s"] >= seconds:
            raise _Budget

    try:
        sft_warm_start(model, max_steps=max_steps, batch_size=cfg.sft_batch_size, lr=cfg.sft_lr,
                       target_band=None, device=accelerator.device, log_fn=hook, **source)
    except _Budget:
        pass
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(start, out)
    model.save_pretrained(out)
    return {"steps": state["steps"], "train_seconds": round(state["train_s"], 1)}


def grpo(demo: Demo, seed: int, start: Path, run_root: Path, steps: int) -> dict:
    name = f"{demo.env.split('/')[-1]}-seed{seed}"
    cmd = [str(ROOT / ".venv" / "bin" / "llm-gym"), "train",
           *_argv(demo, seed, "--model", str(start), "--no-sft", *demo.extra_grpo, start=start),
           "--steps", str(steps), "--save-every", "0", "--eval-every", "0",
           "--output-dir", str(run_root), "--run-name", name, "--overwrite", "--no-progress"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[1:])} failed:\n{proc.stderr[-2000:]}")
    run = run_root / name
    records = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]
    trained = [r for r in records if "step_seconds" in r]
    final = max((run / "checkpoints").glob("step_*"), key=lambda p: int(p.name.split("_")[1]))
    return {"command": " ".join(cmd[1:]), "model": final / "model",
            "train_seconds": round(sum(r["step_seconds"] for r in trained), 1),
            "train_correct": [r.get("correct", 0.0) for r in trained],
            **{f"train_{m}": [r.get(f"env/{m}", 0.0) for r in trained] for m in demo.metrics}}


def evaluate(demo: Demo, model_dir: Path, problems: int, start: Path) -> dict:
    """Per-episode outcomes of `model_dir` (trained from `start`) on the fixed held-out set
    (greedy, the trainer's evaluation episodes)."""
    import torch
    from transformers import AutoModelForCausalLM

    from llm_gym.rl.outcome import episode_correct
    from trainers.grpo import trainer as T

    cfg = _fitted(_argv(demo, 0, "--model", str(model_dir), "--no-sft", "--no-progress", start=start))
    model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True,
                                                 dtype=torch.float32).eval()
    tok, stop_ids = T.env_tokenizer_and_stops(cfg)
    pad_id = int(getattr(tok, "pad_token_id", None) or 0)
    builders = list(T.make_dataset(cfg, "test", problems, 1, T.EVAL_SEED).get_batch(0))
    sampler = T.make_sampler(cfg, model, torch.device("cpu"), stop_ids, pad_id, 0.0, T.EVAL_SEED,
                             len(builders), multi_turn=not T.single_turn_env(cfg.env))
    with torch.no_grad():
        groups = T.rollout_groups(builders, sampler, T.rollout_limits(cfg, sampler))
    out: dict[str, Any] = {"correct": [float(episode_correct(t)) for g in groups for t in g.trajectories_G],
                           "distinct_episodes": len(set(T.eval_task_keys(builders, groups)))}
    for m in demo.metrics:
        out[m] = [max((float(tr.metrics.get(m, 0.0)) for tr in t.transitions), default=0.0)
                  for g in groups for t in g.trajectories_G]
    return out


def _mean_ci(xs: list[float]) -> tuple[float, float]:
    n = len(xs)
    mean = sum(xs) / n
    var = sum((x - mean) ** 2 for x in xs) / max(n - 1, 1)
    return mean, 1.96 * math.sqrt(var / n)


def run_seed(name: str, seed: int, args) -> dict:
    demo = DEMOS[name]
    work = Path(args.work) / name
    start = work / f"sft-seed{seed}"
    t0 = time.monotonic()
    if args.reuse_starts and (start / "config.json").exists():
        info = start / "sft.json"
        sft = json.loads(info.read_text()) if info.exists() else {"reused_start": str(start)}
    else:
        sft = sft_start(demo, seed, start, demo.sft_steps or args.sft_steps)
        (start / "sft.json").write_text(json.dumps(sft))
    print(f"[{name} seed {seed}] SFT start: {sft}", flush=True)
    steps = args.steps or demo.steps
    g = grpo(demo, seed, start, work / "runs", steps)
    print(f"[{name} seed {seed}] GRPO: {steps} steps, {g['train_seconds']} s", flush=True)
    control = more_sft(demo, seed, start, work / f"more-sft-seed{seed}", g["train_seconds"])
    print(f"[{name} seed {seed}] more SFT: {control}", flush=True)
    evals = {label: evaluate(demo, path, args.eval_problems, start)
             for label, path in (("start", start), ("grpo", g["model"]),
                                 ("more_sft", work / f"more-sft-seed{seed}"))}
    row: dict[str, Any] = {
        "demo": name, "seed": seed, "env": demo.env, "knobs": demo.knobs, "model": demo.model,
        "sft_band": list(demo.sft_band), "sft": sft, "grpo_steps": steps,
        "grpo_command": g["command"], "grpo_train_seconds": g["train_seconds"],
        "more_sft": control, "eval_problems": args.eval_problems,
        "distinct_episodes": evals["start"]["distinct_episodes"],
        "train_correct": g["train_correct"],
        "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load_avg": [round(x, 2) for x in os.getloadavg()], "wall_s": round(time.monotonic() - t0, 1)}
    for m in ("correct", *demo.metrics):
        row[m] = {label: _mean_ci(e[m]) for label, e in evals.items()}
        s, gr, c = (evals[k][m] for k in ("start", "grpo", "more_sft"))
        row[m]["grpo_gain"] = _mean_ci([b - a for a, b in zip(s, gr)])
        row[m]["more_sft_gain"] = _mean_ci([b - a for a, b in zip(s, c)])
        row[m]["grpo_vs_more_sft"] = _mean_ci([b - a for a, b in zip(c, gr)])
        if m != "correct":
            row[f"train_{m}"] = g[f"train_{m}"]
    return row


def _pooled(rows: list[dict], metric: str, key: str) -> tuple[float, float]:
    mean = sum(r[metric][key][0] for r in rows) / len(rows)
    ci = math.sqrt(sum(r[metric][key][1] ** 2 for r in rows)) / len(rows)
    return mean, ci


def report(rows: list[dict]) -> str:
    lines = ["| demo | metric | seeds | start | GRPO | more SFT (same seconds) | GRPO - start | "
             "more SFT - start | GRPO - more SFT |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name in DEMOS:
        rs = [r for r in rows if r["demo"] == name]
        if not rs:
            continue
        for m in ("correct", *DEMOS[name].metrics):
            def cell(key: str, signed: bool = False) -> str:
                mean, ci = _pooled(rs, m, key)
                return f"{mean:+.3f} ± {ci:.3f}" if signed else f"{mean:.3f}"
            lines.append(f"| {name} (`{DEMOS[name].env}`) | {'solved' if m == 'correct' else m} | {len(rs)} | "
                         f"{cell('start')} | {cell('grpo')} | {cell('more_sft')} | {cell('grpo_gain', True)} | "
                         f"{cell('more_sft_gain', True)} | {cell('grpo_vs_more_sft', True)} |")
    return "\n".join(lines)


def plot(name: str, rows: list[dict]) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    demo = DEMOS[name]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4), dpi=110, gridspec_kw={"width_ratios": [3, 2]})
    for i, r in enumerate(rows):
        ys = r["train_correct"]
        k = 5  # moving average over 5 steps: one step's batch is 4 groups
        smooth = [sum(ys[max(0, j - k + 1): j + 1]) / len(ys[max(0, j - k + 1): j + 1]) for j in range(len(ys))]
        left.plot(range(1, len(ys) + 1), smooth, color=f"C{i}", label=f"seed {r['seed']}")
    left.set(xlabel="GRPO step", ylabel="training batch solve rate (5-step mean)", ylim=(-0.02, 1.02),
             title=f"{demo.env}: GRPO from the SFT start")
    left.grid(alpha=0.3)
    left.legend(fontsize=8)
    labels = [("start", "SFT start"), ("grpo", "+ GRPO"), ("more_sft", "+ more SFT\n(same seconds)")]
    width = 0.8 / max(len(rows), 1)
    for i, r in enumerate(rows):
        xs = [j + (i - (len(rows) - 1) / 2) * width for j in range(len(labels))]
        means = [r["correct"][k][0] for k, _ in labels]
        errs = [r["correct"][k][1] for k, _ in labels]
        right.bar(xs, means, width=width, yerr=errs, color=f"C{i}", capsize=2, label=f"seed {r['seed']}")
    right.set_xticks(range(len(labels)), [lab for _, lab in labels])
    right.set(ylabel=f"held-out solve rate (greedy, {rows[0]['eval_problems']} episodes, 95% CI)",
              ylim=(0, 1.02), title="held-out")
    right.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    CURVES.mkdir(parents=True, exist_ok=True)
    path = CURVES / f"agentic_{name}.png"
    fig.savefig(path)
    plt.close(fig)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--demos", nargs="+", default=list(DEMOS), choices=list(DEMOS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--sft-steps", type=int, default=400, help="cap on the warm start's SFT steps")
    parser.add_argument("--eval-problems", type=int, default=400)
    parser.add_argument("--steps", type=int, default=0, help="GRPO steps (0: each demo's own)")
    parser.add_argument("--work", default="/tmp/agentic_demos")
    parser.add_argument("--reuse-starts", action="store_true",
                        help="use a seed's SFT start already under --work (WORK/DEMO/sft-seedN)")
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--report", action="store_true", help="print the table of --out's rows and exit")
    args = parser.parse_args()
    out = Path(args.out)
    rows = json.loads(out.read_text()) if out.exists() else []
    if not args.report:
        for name in args.demos:
            for seed in args.seeds:
                row = run_seed(name, seed, args)
                rows = json.loads(out.read_text()) if out.exists() else []  # side-by-side invocations
                rows = [r for r in rows if (r["demo"], r["seed"]) != (name, seed)] + [row]
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_text(json.dumps(rows, indent=1))
                c = row["correct"]
                print(f"[{name} seed {seed}] start {c['start'][0]:.3f} grpo {c['grpo'][0]:.3f} "
                      f"more_sft {c['more_sft'][0]:.3f} (distinct {row['distinct_episodes']}, "
                      f"{row['wall_s']:.0f} s)", flush=True)
            plot(name, sorted((r for r in rows if r["demo"] == name), key=lambda r: r["seed"]))
    print(report(rows))


if __name__ == "__main__":
    sys.exit(main())
