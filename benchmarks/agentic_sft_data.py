"""Is more SFT ahead of GRPO because of more training or because of new demonstrations? (issue 23, item 6)

`benchmarks/agentic_demos.py` compares GRPO from an SFT start with a control, **more SFT for the same
seconds**, and that control learns from 512 *fresh* gold episodes (drawn with the seed plus 1000),
while the start was trained on 512 gold episodes of its own. This script separates the two things
the control gets. From the demos' saved starts and GRPO runs (`--work`, the `agentic_demos.py` work
folder), per demo and seed it trains further controls from the start, each for the same number of
SFT steps as the recorded control took in GRPO's seconds (a step budget, so the load of today's
machine does not change it), with the same batch size and learning rate, on one of these pools:

- `same`: exactly the start's own 512 gold episodes (rebuilt from its seed, as `sft_warm_start`
  drew them, validation tasks excluded): more epochs, no new demonstration;
- `fresh:N`: the first N of the recorded control's fresh gold episodes (`fresh:512` is that control);
- `same+N`: the start's own episodes plus the first N fresh ones.

Every policy (the start, its GRPO run, each control) plays `agentic_demos.evaluate`'s fixed 400
held-out episodes, greedy, so all differences are paired. As a check that `same` rebuilt the start's
pool, the start's mean SFT loss is reported on `same` and on `fresh:512` (a memorised pool has the
lower loss). The report gives GRPO - control per pool, pooled over seeds with a 95% interval as in
`agentic_demos.py`, and `docs/curves/agentic_sft_data.png` draws each demo's control gain against
the number of new demonstrations, with GRPO's gain beside it.

    .venv/bin/python benchmarks/agentic_sft_data.py --work /tmp/demos2 --demos guess_number \\
        --seeds 0 1 2 --pools same fresh:64
    .venv/bin/python benchmarks/agentic_sft_data.py --report

Rows go to benchmarks/results/agentic_sft_data.json (one per demo x seed x pool).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import agentic_demos as A  # noqa: E402

RESULTS = A.ROOT / "benchmarks" / "results" / "agentic_sft_data.json"
START_EPISODES = 512  # trainers.sft.DEFAULT_GOLD_EPISODES: every demo's start drew this many
START_VALIDATION = 64  # agentic_demos.sft_start's --eval-problems: the tasks its pool excluded


def _parse_pool(pool: str) -> tuple[bool, int]:
    """(keeps the start's own episodes, how many fresh ones)."""
    if pool == "same":
        return True, 0
    kind, _, n = pool.partition(":") if ":" in pool else pool.partition("+")
    if kind not in ("fresh", "same") or not n.isdigit() or (kind == "fresh" and int(n) < 1):
        raise SystemExit(f"--pools: {pool!r} is not 'same', 'fresh:N' (N >= 1) or 'same+N'")
    return kind == "same", int(n)


def pools(demo: A.Demo, seed: int, start: Path, fresh: int) -> tuple[Any, list, list[list]]:
    """(the control's config, the start's own gold examples, the examples of each of the first
    `fresh` fresh episodes)."""
    import numpy as np

    from trainers.grpo.fit import first_gold_case, run_env
    from trainers.sft import gold_task_keys, sft_examples_from_gold

    cfg = A._fitted(A._argv(demo, seed, "--model", str(start), "--no-progress", start=start))
    source = run_env(cfg).source("train")
    case = first_gold_case(source)
    if case is None or case.knobs:
        raise SystemExit(f"{demo.env}: its gold case plays on other knobs; the start's pool is not rebuilt here")
    # As `sft_warm_start(env_id=..., seed=seed)` drew the start's pool: its own generator, the
    # validation tasks (eval seed + 1) held out.
    held_out = gold_task_keys(source, START_VALIDATION, seed + 1, case)
    own = sft_examples_from_gold(source, START_EPISODES, np.random.default_rng(seed), case, held_out)
    # As the recorded control drew its fresh episodes: `sft_warm_start(seed=seed + 1000)`, no
    # validation, so nothing excluded. One episode a call on one generator draws the same episodes
    # as one call for all, and keeps them apart.
    rng = np.random.default_rng(seed + 1000)
    new = [sft_examples_from_gold(source, 1, rng, case) for _ in range(fresh)]
    return cfg, own, new


def mean_loss(model_dir: Path, examples: list, batch_size: int = 32) -> float:
    """`trainers.sft.sft_loss` of `model_dir` on `examples` in batches of `batch_size`, averaged over
    the examples (eval mode, no gradients): a comparison between pools, not an exact per-token mean."""
    import torch
    from transformers import AutoModelForCausalLM

    from trainers.sft import collate_supervised, sft_loss

    model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True, dtype=torch.float32).eval()
    pad_id = int(getattr(model.config, "pad_token_id", None) or 0)
    total = 0.0
    with torch.no_grad():
        for i in range(0, len(examples), batch_size):
            chunk = examples[i: i + batch_size]
            total += float(sft_loss(model, collate_supervised(chunk, pad_id, torch.device("cpu")))) * len(chunk)
    return total / len(examples)


def control(cfg: Any, start: Path, out: Path, examples: list, steps: int, seed: int,
            seconds: float | None = None) -> dict:
    """SFT from `start` on `examples` for `steps` steps, or for `seconds` of training (then `steps`
    is ignored); the demos' control's batch size and lr (`agentic_demos.sft_from`)."""
    return A.sft_from(cfg, start, out, seconds=seconds, max_steps=steps if seconds is None else 100_000,
                      examples=examples, seed=seed)


def run(name: str, seed: int, pool_names: list[str], args) -> list[dict]:
    demo = A.DEMOS[name]
    work = Path(args.work) / name
    start = work / f"sft-seed{seed}"
    recorded = [r for r in json.loads(A.RESULTS.read_text()) if (r["demo"], r["seed"]) == (name, seed)]
    if not recorded or not (start / "config.json").exists():
        raise SystemExit(f"{name} seed {seed}: needs its agentic_demos.py row and {start}")
    steps = int(recorded[0]["more_sft"]["steps"])
    grpo_dir = max((work / "runs" / f"{demo.env.split('/')[-1]}-seed{seed}" / "checkpoints").glob("step_*"),
                   key=lambda p: int(p.name.split("_")[1])) / "model"
    parsed = {p: _parse_pool(p) for p in pool_names}
    cfg, own, new = pools(demo, seed, start, max(n for _, n in parsed.values()))
    own_loss = mean_loss(start, own)
    fresh_loss = mean_loss(start, [x for episode in new for x in episode]) if new else None
    evals = {"start": A.evaluate(demo, start, args.eval_problems, start),
             "grpo": A.evaluate(demo, grpo_dir, args.eval_problems, start)}
    rows = []
    for pool, (keep_own, n) in parsed.items():
        examples = (own if keep_own else []) + [x for episode in new[:n] for x in episode]
        out = work / f"control-{pool.replace(':', '').replace('+', 'plus')}-seed{seed}"
        info = control(cfg, start, out, examples, steps, seed + 1000)
        ev = A.evaluate(demo, out, args.eval_problems, start)
        s, g, c = evals["start"]["correct"], evals["grpo"]["correct"], ev["correct"]
        row = {"demo": name, "seed": seed, "pool": pool, "new_episodes": n, "keeps_start_pool": keep_own,
               "examples": len(examples), "control": info, "recorded_control_steps": steps,
               "start_loss_on_own_pool": round(own_loss, 4),
               "start_loss_on_fresh": None if fresh_loss is None else round(fresh_loss, 4),
               "start": A._mean_ci(s), "grpo": A._mean_ci(g), "control_solved": A._mean_ci(c),
               "grpo_gain": A._mean_ci([b - a for a, b in zip(s, g)]),
               "control_gain": A._mean_ci([b - a for a, b in zip(s, c)]),
               "grpo_vs_control": A._mean_ci([b - a for a, b in zip(c, g)]),
               "recorded": {k: recorded[0]["correct"][k][0] for k in ("start", "grpo", "more_sft")},
               "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
        print(f"[{name} seed {seed} {pool}] start {row['start'][0]:.3f} grpo {row['grpo'][0]:.3f} "
              f"control {row['control_solved'][0]:.3f} ({info['steps']} steps, {info['train_seconds']} s; "
              f"start loss own {own_loss:.3f} fresh {fresh_loss})", flush=True)
        rows.append(row)
    return rows


def run_long(name: str, seed: int, extra: int, args) -> dict:
    """From a start trained further: the demo's start plus `extra` SFT steps on its own pool (kept
    as WORK/DEMO/sft-long{extra}-seed{seed}), then GRPO from it (the demo's flags and steps, the
    fitted defaults) and the control, more SFT on the same pool for GRPO's training seconds."""
    demo = A.DEMOS[name]
    work = Path(args.work) / name
    start = work / f"sft-seed{seed}"
    long = work / f"sft-long{extra}-seed{seed}"
    cfg, own, _ = pools(demo, seed, start, 0)
    if (long / "extension.json").exists():
        extension = json.loads((long / "extension.json").read_text())
    else:
        extension = control(cfg, start, long, own, extra, seed + 1000)
        (long / "extension.json").write_text(json.dumps(extension))
    g = A.grpo(demo, seed, long, work / f"runs-long{extra}", demo.steps)
    out = work / f"control-long{extra}-same-seed{seed}"
    info = control(cfg, long, out, own, 0, seed + 2000, seconds=g["train_seconds"])
    evals = {k: A.evaluate(demo, path, args.eval_problems, start)
             for k, path in (("first_start", start), ("start", long), ("grpo", g["model"]), ("control", out))}
    s, gr, c = evals["start"]["correct"], evals["grpo"]["correct"], evals["control"]["correct"]
    row = {"demo": name, "seed": seed, "pool": f"long{extra}:same", "new_episodes": 0, "keeps_start_pool": True,
           "examples": len(own), "start_extension": extension, "control": info,
           "grpo_train_seconds": g["train_seconds"], "grpo_command": g["command"],
           "grpo_train_correct": g["train_correct"],
           "first_start": A._mean_ci(evals["first_start"]["correct"]),
           "start": A._mean_ci(s), "grpo": A._mean_ci(gr), "control_solved": A._mean_ci(c),
           "grpo_gain": A._mean_ci([b - a for a, b in zip(s, gr)]),
           "control_gain": A._mean_ci([b - a for a, b in zip(s, c)]),
           "grpo_vs_control": A._mean_ci([b - a for a, b in zip(c, gr)]),
           "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    print(f"[{name} seed {seed} long{extra}] first start {row['first_start'][0]:.3f} long start "
          f"{row['start'][0]:.3f} grpo {row['grpo'][0]:.3f} control {row['control_solved'][0]:.3f} "
          f"(grpo {g['train_seconds']} s, control {info['steps']} steps)", flush=True)
    return row


def _pooled(rows: list[dict], key: str) -> tuple[float, float]:
    mean = sum(r[key][0] for r in rows) / len(rows)
    return mean, math.sqrt(sum(r[key][1] ** 2 for r in rows)) / len(rows)


def report(rows: list[dict]) -> str:
    lines = ["| demo | control's pool | seeds | SFT steps | start | GRPO | control | GRPO - start | "
             "control - start | GRPO - control |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name in A.DEMOS:
        pools_run = {r["pool"]: (r["pool"].startswith("long"), r["new_episodes"]) for r in rows if r["demo"] == name}
        for pool in sorted(pools_run, key=lambda p: (*pools_run[p], p)):
            rs = [r for r in rows if (r["demo"], r["pool"]) == (name, pool)]
            steps = "/".join(str(r["control"]["steps"]) for r in sorted(rs, key=lambda r: r["seed"]))
            f = "{:.3f}".format
            g = "{0[0]:+.3f} ± {0[1]:.3f}".format
            lines.append(f"| {name} | `{pool}` | {len(rs)} | {steps} | {f(_pooled(rs, 'start')[0])} | "
                         f"{f(_pooled(rs, 'grpo')[0])} | {f(_pooled(rs, 'control_solved')[0])} | "
                         f"{g(_pooled(rs, 'grpo_gain'))} | {g(_pooled(rs, 'control_gain'))} | "
                         f"{g(_pooled(rs, 'grpo_vs_control'))} |")
    return "\n".join(lines)


def plot(rows: list[dict]) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rows if not r["pool"].startswith("long")]  # from another start: a table row only
    names = [n for n in A.DEMOS if any(r["demo"] == n for r in rows)]
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.8), dpi=110, squeeze=False)
    for ax, name in zip(axes[0], names):
        rs = [r for r in rows if r["demo"] == name]
        for keep, style, label in ((True, "o-", "start's 512 + N new"), (False, "s--", "N new only")):
            pts = sorted({r["new_episodes"] for r in rs if r["keeps_start_pool"] == keep})
            if not pts:
                continue
            stats = [_pooled([r for r in rs if r["keeps_start_pool"] == keep and r["new_episodes"] == n],
                             "control_gain") for n in pts]
            ax.errorbar(pts, [m for m, _ in stats], yerr=[c for _, c in stats], fmt=style, capsize=3,
                        label=f"more SFT: {label}")
        grpo, ci = _pooled([r for r in rs if r["pool"] == rs[0]["pool"]], "grpo_gain")
        ax.axhline(grpo, color="C3", label="GRPO (same seconds)")
        ax.axhspan(grpo - ci, grpo + ci, color="C3", alpha=0.15)
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_xlim(-40, max(560, max(r["new_episodes"] for r in rs) + 40))
        ax.set(xlabel="new gold episodes in the control's pool", ylabel="held-out gain over the start",
               title=f"{A.DEMOS[name].env} ({len({r['seed'] for r in rs})} seeds)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    A.CURVES.mkdir(parents=True, exist_ok=True)
    path = A.CURVES / "agentic_sft_data.png"
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_long(name: str, rows: list[dict]) -> Path:
    """`--long-start` rows of one demo: each seed's GRPO training solve rate, and the three
    held-out numbers (longer start, GRPO, more SFT) with their intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4), dpi=110, gridspec_kw={"width_ratios": [3, 2]})
    for i, r in enumerate(rows):
        ys = r["grpo_train_correct"]
        smooth = [sum(ys[max(0, j - 4): j + 1]) / len(ys[max(0, j - 4): j + 1]) for j in range(len(ys))]
        left.plot(range(1, len(ys) + 1), smooth, color=f"C{i}", label=f"seed {r['seed']}")
    left.set(xlabel="GRPO step", ylabel="training batch solve rate (5-step mean)", ylim=(-0.02, 1.02),
             title=f"{A.DEMOS[name].env}: GRPO from the start + {rows[0]['start_extension']['steps']} SFT steps")
    left.grid(alpha=0.3)
    left.legend(fontsize=8)
    labels = [("start", "longer SFT start"), ("grpo", "+ GRPO"), ("control_solved", "+ more SFT\n(same seconds)")]
    width = 0.8 / len(rows)
    for i, r in enumerate(rows):
        xs = [j + (i - (len(rows) - 1) / 2) * width for j in range(len(labels))]
        right.bar(xs, [r[k][0] for k, _ in labels], width=width, yerr=[r[k][1] for k, _ in labels],
                  color=f"C{i}", capsize=2, label=f"seed {r['seed']}")
    right.set_xticks(range(len(labels)), [lab for _, lab in labels])
    right.set(ylabel="held-out solve rate (greedy, 400 episodes, 95% CI)", ylim=(0, 1.02), title="held-out")
    right.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    path = A.CURVES / f"agentic_{name}_{rows[0]['pool'].split(':')[0]}.png"
    fig.savefig(path)
    plt.close(fig)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--demos", nargs="+", default=["guess_number", "calculator", "selfplay_tictactoe"],
                        choices=list(A.DEMOS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--pools", nargs="+", default=["same"], help="same | fresh:N | same+N")
    parser.add_argument("--long-start", type=int, default=0, metavar="STEPS",
                        help="instead of --pools: train each start STEPS more SFT steps on its own pool, "
                             "then GRPO against more SFT from there")
    parser.add_argument("--eval-problems", type=int, default=400)
    parser.add_argument("--work", default="/tmp/agentic_demos")
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--report", action="store_true", help="print the table of --out's rows and exit")
    args = parser.parse_args()
    out = Path(args.out)
    if not args.report:
        for p in args.pools:
            _parse_pool(p)
        for name in args.demos:
            for seed in args.seeds:
                new_rows = ([run_long(name, seed, args.long_start, args)] if args.long_start
                            else run(name, seed, args.pools, args))
                rows = json.loads(out.read_text()) if out.exists() else []  # side-by-side invocations
                done = {(r["demo"], r["seed"], r["pool"]) for r in new_rows}
                rows = [r for r in rows if (r["demo"], r["seed"], r["pool"]) not in done] + new_rows
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_text(json.dumps(rows, indent=1))
    rows = json.loads(out.read_text()) if out.exists() else []
    if rows:
        print(report(rows))
        if not args.report:
            print(plot(rows))
            for name, pool in sorted({(r["demo"], r["pool"]) for r in rows if r["pool"].startswith("long")}):
                print(plot_long(name, sorted((r for r in rows if (r["demo"], r["pool"]) == (name, pool)),
                                             key=lambda r: r["seed"])))


if __name__ == "__main__":
    sys.exit(main())
