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

`--sft-control` answers "does GRPO beat more SFT?" for the puzzles row (Countdown: many valid
expressions, SFT sees one witness per task). Per seed it repeats the CLI's SFT warm start exactly (same
seed, examples, order and validation checks, so it stops at the same step with the same held-out
accuracy), saves that policy, and *keeps training SFT* on the reference answers for
`--extra-sft-steps` more steps, measuring held-out accuracy (the trainer's own greedy test-split
evaluation) every `--test-every` steps, while GRPO runs from the saved policy in a subprocess
(`llm-gym train --model DIR --no-sft`, same seed and flags as the family's row; it retraces the
plain run step for step). Budgets compared: the same number of optimizer
steps as GRPO, the same number of trained sequences (steps x group size x groups per batch, divided
by the SFT batch size), and the same seconds of training compute. Writes `sft_vs_grpo` into
results.json and `docs/curves/FAMILY_sft_vs_grpo.png`.

    .venv/bin/python benchmarks/family_curves.py --sft-control --families puzzles --seeds 0 \
        --sft-steps 800 --extra-sft-steps 160 --test-every 40     # ~40 min at load ~12 on 2 cores

(Countdown's warm start needs `--sft-steps 800`: it reaches its band at step 340 with seed 0.)
"""

from __future__ import annotations

import argparse
import json
import os
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
    "games": ("llm/Nim-v0", {"num_heaps": 2, "max_heap": 4, "opponent": "random"},
              ["--steps", "30", "--max-tokens", "6", "--group-size", "8", "--groups-per-batch", "4"]),
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


class _EnoughSFT(Exception):
    """Raised from the SFT log hook once the control has trained its extra steps."""


def _fitted_config(argv: list[str]):
    """The `GRPOConfig` `llm-gym train ARGV` would run (flags parsed, defaults fitted to the env)."""
    from trainers.cli_train import config_and_explicit
    from trainers.grpo.fit import fit_to_env

    cfg, explicit = config_and_explicit(argv)
    cfg.validate()
    fit_to_env(cfg, explicit)
    cfg.validate(check_env=False)
    return cfg


def _metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]


def sft_vs_grpo(family: str, seed: int, run_root: Path, eval_problems: int, sft_steps: int,
                extra_sft_steps: int, test_every: int, store=None) -> dict:
    """One seed of the control (module docstring): more SFT vs GRPO from the same warm start.
    GRPO starts (a subprocess) as soon as the warm start is saved, alongside the extra SFT;
    `store(row)` is called with the partial row after every held-out check."""
    import torch

    from trainers.grpo import trainer as T
    from trainers.models import load_policy, resolve_model
    from trainers.sft import sft_warm_start

    env_id, knobs, flags = RUNS[family]
    common = ["--env", env_id, "--env-kwargs", json.dumps(knobs), "--eval-problems", str(eval_problems),
              "--seed", str(seed), *flags]
    cfg = _fitted_config([*common, "--sft-steps", str(sft_steps), "--no-progress"])
    # The trainer's own prelude (`trainers.grpo.trainer._train`), so SFT starts from the same weights.
    accelerator = T.make_accelerator(cfg)
    T.seed_everything(cfg.seed)
    _tok, stop_ids = T.env_tokenizer_and_stops(cfg)
    preset = Path(resolve_model("tiny", seed=cfg.seed))
    model, _ = load_policy(preset, device=accelerator.device, dtype=torch.float32)
    T.set_cpu_threads(cfg, model, accelerator)
    pad_id = int(getattr(_tok, "pad_token_id", None) or 0)

    def held_out() -> float:
        return T.evaluate(cfg, model, accelerator, stop_ids, pad_id)["accuracy"]

    band_low = float(cfg.sft_target_band[0])
    snapshot = run_root / f"{family}_sft_seed{seed}"
    state: dict = {"band_step": None, "last": None, "train_s": 0.0, "val": [], "curve": []}
    name = f"{family}_grpo_seed{seed}"
    cmd = [str(ROOT / ".venv" / "bin" / "llm-gym"), "train", *common, "--model", str(snapshot), "--no-sft",
           "--output-dir", str(run_root), "--run-name", name, "--overwrite", "--no-progress"]
    grpo: dict = {}

    def partial() -> dict:
        return {"seed": seed, "sft_steps_to_band": state["band_step"], "sft_val_history": state["val"],
                "more_sft": state["curve"], "grpo_command": " ".join(cmd[1:]), "partial": True}

    def at_band(step: int) -> None:
        state["band_step"] = step
        if snapshot.exists():
            shutil.rmtree(snapshot)
        shutil.copytree(preset, snapshot)  # tokenizer and template files; the weights are replaced
        model.save_pretrained(snapshot)
        run_root.mkdir(parents=True, exist_ok=True)
        grpo["log"] = open(run_root / f"{name}.log", "w")
        grpo["proc"] = subprocess.Popen(cmd, stdout=grpo["log"], stderr=subprocess.STDOUT, cwd=ROOT)
        state["curve"].append({"extra_steps": 0, "held_out": held_out(), "train_seconds": 0.0})
        if store:
            store(partial())

    def hook(event: dict) -> None:
        now = time.monotonic()
        step = event["sft/step"]
        if "sft/accuracy" in event:  # a validation check (every 20 steps), as in the CLI's run
            state["val"].append([step, event["sft/accuracy"]])
            if state["band_step"] is None and event["sft/accuracy"] >= band_low:
                at_band(step)  # where `llm-gym train` stops SFT and starts RL
            state["last"] = time.monotonic()  # the check's seconds are not SFT training time
            return
        if state["band_step"] is None:
            if step == cfg.sft_steps:  # the CLI would stop here too (max_steps), band or not
                at_band(step)
            state["last"] = time.monotonic()
            return
        if state["last"] is not None:
            state["train_s"] += now - state["last"]
        extra = step - state["band_step"]
        if extra > 0 and extra % test_every == 0:
            state["curve"].append({"extra_steps": extra, "held_out": held_out(),
                                   "train_seconds": round(state["train_s"], 1)})
            print(f"  [seed {seed}] more SFT +{extra} steps: held-out {state['curve'][-1]['held_out']:.2f}",
                  flush=True)
            if store:
                store(partial())
            if extra >= extra_sft_steps:
                raise _EnoughSFT
        state["last"] = time.monotonic()

    t0 = time.monotonic()
    try:
        # Same call as `trainers.grpo.trainer.run_sft`, except: no band stop (a low end of 1.0, so
        # the validation set is still held out and checked every 20 steps), the example count pinned
        # to what `max_steps=cfg.sft_steps` draws (same examples, same order), and the hook above.
        sft_warm_start(
            model, env_id=cfg.env, env_kwargs=cfg.env_kwargs, max_steps=cfg.sft_steps + extra_sft_steps,
            batch_size=cfg.sft_batch_size, lr=cfg.sft_lr, target_band=(1.0, 1.0),
            eval_max_tokens=cfg.max_tokens, seed=cfg.seed, device=accelerator.device,
            eval_problems=min(cfg.eval_problems, 128), num_examples=cfg.sft_steps * cfg.sft_batch_size,
            log_fn=hook)
    except _EnoughSFT:
        pass
    sft_wall = time.monotonic() - t0
    row = {**partial(), "sft_control_wall_s": round(sft_wall, 1)}
    row.pop("partial")

    # GRPO from the saved warm start: `llm-gym train` with the family's flags, SFT skipped.
    returncode = grpo["proc"].wait()
    grpo["log"].close()
    if returncode != 0:
        row["error"] = (run_root / f"{name}.log").read_text()[-600:]
        return row
    summary = json.loads((run_root / name / "summary.json").read_text())
    records = _metrics(run_root / name)
    clock, evals = 0.0, [{"rl_steps": 0, "held_out": summary["eval_before_rl"], "train_seconds": 0.0}]
    for r in records:
        if "step_seconds" in r:
            clock += r["step_seconds"]
        if r.get("eval/accuracy") is not None and r["step"] > 0:
            evals.append({"rl_steps": r["step"], "held_out": r["eval/accuracy"], "train_seconds": round(clock, 1)})
    evals = list({e["rl_steps"]: e for e in evals}.values())  # the final eval is logged once per step
    row["grpo"] = {"steps": cfg.steps, "held_out_before": summary["eval_before_rl"],
                   "held_out_after": summary["eval_after_rl"], "rl_seconds": round(summary["rl_seconds"], 1),
                   "train_seconds": round(clock, 1), "curve": evals}
    # More SFT at three budgets matched to the GRPO phase (the nearest measured point at or past it).
    sequences = cfg.steps * cfg.group_size * cfg.groups_per_batch
    budgets = {"same_optimizer_steps": ("extra_steps", cfg.steps),
               "same_sequences": ("extra_steps", -(-sequences // cfg.sft_batch_size)),
               "same_train_seconds": ("train_seconds", clock)}
    row["more_sft_at"] = {}
    for label, (key, need) in budgets.items():
        point = next((p for p in row["more_sft"] if p[key] >= need), None)
        row["more_sft_at"][label] = {"budget": round(need, 1), "unit": key,
                                     **({"measured_at": point} if point else {"not_reached": True})}
    return row


def _plot_control(family: str, rows: list[dict], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4), dpi=120)
    for i, row in enumerate(r for r in rows if "grpo" in r):
        color = f"C{i}"
        ax.plot([p["train_seconds"] for p in row["more_sft"]], [p["held_out"] for p in row["more_sft"]],
                "--o", color=color, ms=3, label=f"seed {row['seed']}: more SFT (reference answers)")
        ax.plot([p["train_seconds"] for p in row["grpo"]["curve"]], [p["held_out"] for p in row["grpo"]["curve"]],
                "-s", color=color, ms=4, label=f"seed {row['seed']}: GRPO ({row['grpo']['steps']} steps)")
    ax.set(xlabel="training seconds after the SFT warm start stopped (evaluations excluded)",
           ylabel="held-out accuracy (greedy, test split)", title=f"{RUNS[family][0]}: GRPO vs more SFT")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


def control_table(rows: list[dict]) -> str:
    lines = ["| seed | SFT steps to band | held-out at band | + GRPO | + more SFT: same steps | same sequences "
             "| same seconds |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        if "grpo" not in r:
            what = "unfinished" if r.get("partial") else "failed"
            lines.append(f"| {r['seed']} | {what}: see results.json | | | | | |")
            continue

        def at(label):
            m = r["more_sft_at"][label]
            if "measured_at" not in m:
                return f"not reached ({m['budget']:.0f} {m['unit']})"
            p = m["measured_at"]
            return f"{p['held_out']:.2f} (+{p['extra_steps']} steps, {p['train_seconds']:.0f} s)"

        lines.append(f"| {r['seed']} | {r['sft_steps_to_band']} | {r['more_sft'][0]['held_out']:.2f} | "
                     f"**{r['grpo']['held_out_after']:.2f}** ({r['grpo']['steps']} steps, "
                     f"{r['grpo']['train_seconds']:.0f} s) | "
                     f"{at('same_optimizer_steps')} | {at('same_sequences')} | {at('same_train_seconds')} |")
    return "\n".join(lines)


def table(rows: list[dict]) -> str:
    def fmt(v):
        return "—" if v is None else f"{v:.2f}"

    lines = ["| family | env | held-out: before SFT | before RL | after RL "
             "| train correct: first 5 → last 5 steps | wall |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['family']} | `{r['env']}` | failed: see results.json | | | | {r['wall_s']:.0f} s |")
            continue
        lines.append(f"| {r['family']} | `{r['env']}` | {fmt(r.get('eval_before_sft'))} | "
                     f"{fmt(r.get('eval_before_rl'))} | {fmt(r.get('eval_after_rl'))} | "
                     f"{fmt(r.get('train_correct_first5'))} → {fmt(r.get('train_correct_last5'))} | "
                     f"{r['wall_s']:.0f} s |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    global OUT
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", default=",".join(RUNS), help="comma-separated subset of " + ",".join(RUNS))
    parser.add_argument("--eval-problems", type=int, default=100)
    parser.add_argument("--sft-steps", type=int, default=300, help="cap on SFT steps (it stops at its band)")
    parser.add_argument("--run-root", default=str(ROOT / "runs" / "family_curves"))
    parser.add_argument("--out", default=str(OUT), help="where FAMILY.png and results.json go")
    parser.add_argument("--sft-control", action="store_true",
                        help="GRPO vs more SFT from the same warm start (see the module docstring)")
    parser.add_argument("--seeds", default="0", help="--sft-control: comma-separated seeds")
    parser.add_argument("--extra-sft-steps", type=int, default=160, help="--sft-control: most extra SFT steps")
    parser.add_argument("--test-every", type=int, default=40, help="--sft-control: held-out check interval")
    args = parser.parse_args(argv)
    OUT = Path(args.out)
    families = [f.strip() for f in args.families.split(",") if f.strip()]
    unknown = [f for f in families if f not in RUNS]
    if unknown:
        parser.error(f"unknown families {unknown}; choose from {list(RUNS)}")
    run_root = Path(args.run_root)
    results_path = OUT / "results.json"
    if args.sft_control:
        return control_main(args, families, run_root, results_path)
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
        if "sft_vs_grpo" in results.get(family, {}):  # the control (--sft-control) is kept
            row["sft_vs_grpo"] = results[family]["sft_vs_grpo"]
        results[family] = row
        results_path.write_text(json.dumps(results, indent=2))
        print(json.dumps({k: row.get(k) for k in ("eval_before_rl", "eval_after_rl", "wall_s", "error")}),
              flush=True)
    results = json.loads(results_path.read_text()) if results_path.exists() else {}
    print(table([results[f] for f in RUNS if f in results]))
    return 0


def control_main(args, families: list[str], run_root: Path, results_path: Path) -> int:
    seeds = [int(x) for x in args.seeds.split(",") if x.strip()]
    for family in families:
        def store(row: dict) -> list[dict]:
            """Merge `row` into results.json by seed, re-reading it first: other invocations (other
            seeds, other families) may be writing it side by side."""
            row["measured"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
            row["load_avg"] = [round(x, 2) for x in os.getloadavg()]
            OUT.mkdir(parents=True, exist_ok=True)
            results = json.loads(results_path.read_text()) if results_path.exists() else {}
            kept = results.get(family, {}).get("sft_vs_grpo", {}).get("seeds", [])
            merged = sorted([r for r in kept if r["seed"] != row["seed"]] + [row], key=lambda r: r["seed"])
            results.setdefault(family, {})["sft_vs_grpo"] = {
                "eval_problems": args.eval_problems, "sft_steps_cap": args.sft_steps,
                "extra_sft_steps": args.extra_sft_steps, "seeds": merged}
            results_path.write_text(json.dumps(results, indent=2))
            return merged

        for seed in seeds:
            print(f"[{family} seed {seed}] more SFT vs GRPO ...", flush=True)
            row = sft_vs_grpo(family, seed, run_root, args.eval_problems, args.sft_steps,
                              args.extra_sft_steps, args.test_every, store=store)
            merged = store(row)
            _plot_control(family, merged, OUT / f"{family}_sft_vs_grpo.png")
        print(control_table(merged))
    return 0


if __name__ == "__main__":
    sys.exit(main())
