"""Multi-turn time to a solve-rate gain: ours vs TRL's `environment_factory`, from one start.

`multiturn_speed.py --model qwen3` compares seconds per step like for like; this script asks what a
user waits for: seconds of training until the policy solves more episodes than the start it began
from.

Both sides start from the same weights (`multiturn_speed.make_qwen3_start`: a tiny 2-layer Llama on
the offline Qwen3 tokenizer, warm-started `--warm-steps` on played episodes to call TRL's `act`
tool with a random guess), play the same game (ours: `llm/GuessNumber-act-v0`, GuessNumber under
TRL 1.16's tool-loop rules on the same tokenizer and template; TRL: `GRPOTrainer(environment_factory=...)`
with our `TextEnvironment`; both with `--env-kwargs`), with the same batch (`--groups` x
`--group-size` episodes a step, one optimizer step a batch), learning rate (`--lr`, default: what
`llm-gym train`'s fit gives this start), temperature 1, fp32, one torch thread each. Each side keeps
its own loss and schedule defaults (ours `importance_sampling` with a cosine lr over `--ours-steps`,
TRL `dapo` at a constant lr; neither with a KL term).

The game is the classic one, 1..5 in 8 guesses (`{"range_starts": 1, "max_number": 5}`): the knob
setting where a 1M-parameter policy gains within minutes. On 1..20, and on GuessNumber's defaults
(a range starting anywhere in 1..100), our trainer ran 150 and 30 steps from such starts without
moving its training solve rate (0.04-0.07 and 0.00-0.06 per 10 steps), so there was no gain to time.

Stages (`--stage`), so the trainers and the evaluations can run in separate processes:

- `start`: build the start and evaluate it;
- `ours` / `trl`: train, saving the weights every `--every` steps with the cumulative training
  seconds (wall and process CPU; evaluation, snapshot saving and setup excluded) up to then;
  ours stops after `--ours-steps`, TRL after `--trl-seconds` of training (or `--trl-steps`);
- `eval`: snapshots (`--eval-steps`: only those), on the same `--eval-problems` episodes: tasks of
  `--eval-split` drawn with the trainer's evaluation seed, sampled at `--eval-temperature` by a
  sampler seeded alike, at most `--eval-max-tokens` a turn: the same measure for both sides. The
  classic game's prompt is the same for every secret and its test split is one secret, so the
  solve rate is measured at temperature 1 over the train split's secrets (what a policy does, not
  what it memorised: it cannot tell the secrets apart before its first guess);
- `report`: the gain of each snapshot over the start (paired over the same episodes, mean and 95%
  interval), each side's time to the first snapshot whose interval excludes 0, and their ratio
  (a lower bound when TRL shows no gain in its budget).

    W=/tmp/ttg; B=benchmarks/multiturn_time_to_gain.py
    .venv/bin/python $B --work $W --stage start
    .venv/bin/python $B --work $W --stage ours --ours-steps 60 --every 5
    .venv/bin/python $B --work $W --stage trl --trl-seconds 1200 --every 5
    .venv/bin/python $B --work $W --stage eval
    .venv/bin/python $B --work $W --stage report

Writes `W/*.json` and `benchmarks/out/multiturn_time_to_gain.json` (the report).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import multiturn_speed as speed  # noqa: E402  (the start, the act env and TRL's tokenizer)

ENV_ID = speed.ENV_ID


def _speed_args(args) -> argparse.Namespace:
    """The knobs `multiturn_speed.act_env` reads."""
    return argparse.Namespace(max_turns=args.max_turns, trl_max_completion=args.trl_max_completion)


def _cfg(args, model: Path, **over: Any):
    from trainers.grpo import GRPOConfig

    start = args.work / "start"
    env_id, env_kwargs = speed.act_env(_speed_args(args), start)
    env_kwargs.update(args.env_kwargs)
    fields = dict(
        env=env_id, model=str(model), device="cpu", cpu_threads=1, sampler="hf",
        group_size=args.group_size, groups_per_batch=args.groups, max_tokens=args.trl_max_completion,
        temperature=1.0, steps=1, sft_steps=0, eval_problems=1, eval_every=0, save_every=0,
        output_dir=str(args.work / "runs"), run_name="ours", seed=args.seed, progress=False,
        env_kwargs=env_kwargs, micro_batch_size=args.micro_batch,
    )
    fields.update(over)
    return GRPOConfig(**fields)


# ------------------------------------------------------------------------------------------------
def evaluate(args, model_dir: Path) -> list[float]:
    """Per-episode outcomes (1 solved, 0 not) of `model_dir` on the fixed evaluation episodes:
    `--eval-problems` tasks of `--eval-split` drawn with the trainer's evaluation seed, sampled at
    `--eval-temperature` by a sampler seeded alike, so every snapshot plays the same tasks with the
    same random numbers."""
    from transformers import AutoModelForCausalLM

    from llm_gym.rl.outcome import episode_correct
    from trainers.grpo import trainer as T

    cfg = _cfg(args, model_dir, max_tokens=args.eval_max_tokens)
    model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True,
                                                 dtype=torch.float32).eval()
    tok, stop_ids = T.env_tokenizer_and_stops(cfg)
    pad_id = int(getattr(tok, "pad_token_id", None) or 0)
    builders = list(T.make_dataset(cfg, args.eval_split, args.eval_problems, 1, T.EVAL_SEED).get_batch(0))
    sampler = T.make_sampler(cfg, model, torch.device("cpu"), stop_ids, pad_id, args.eval_temperature,
                             T.EVAL_SEED, len(builders), multi_turn=True)
    with torch.no_grad():
        groups = T.rollout_groups(builders, sampler, T.rollout_limits(cfg, sampler))
    return [float(episode_correct(t)) for g in groups for t in g.trajectories_G]


def stage_start(args) -> None:
    start = args.work / "start"
    if not (start / "config.json").exists():
        speed.make_qwen3_start(start, args.work / "tokenizers", args.warm_steps, args.seed,
                               args.env_kwargs)
    from trainers.grpo import GRPOConfig
    from trainers.grpo.fit import fitted_rl_lr

    correct = evaluate(args, start)
    accuracy = statistics.fmean(correct)
    # The trainer's rule on this script's measure (the trainer reads greedy held-out accuracy).
    lr = fitted_rl_lr(GRPOConfig.lr, accuracy, multi_turn=True)
    _write(args.work / "start.json", {"accuracy": accuracy, "correct": correct, "fitted_lr": lr})
    print(f"start: solves {accuracy:.3f} of {len(correct)} evaluation episodes; fitted lr {lr:g}")


def _lr(args) -> float:
    return args.lr if args.lr is not None else json.loads((args.work / "start.json").read_text())["fitted_lr"]


def stage_ours(args) -> None:
    import trainers.grpo.trainer as trainer_mod

    cfg = _cfg(args, args.work / "start", steps=args.ours_steps, lr=_lr(args))
    torch.set_num_threads(1)
    # Snapshots: a training step's rollouts begin with the weights of the steps before it, and the
    # final evaluation's with the last step's; the seconds spent saving are taken off the step
    # they fall in (the trainer times the whole step).
    orig = trainer_mod.rollout_groups
    calls = {"train": 0}
    saved: dict[int, tuple[str, float, float]] = {}

    def rollout_groups(builders, policy, *a, **k):
        training = len(builders) == args.groups
        done = calls["train"]
        if (training and done and done % args.every == 0) or (not training and done == args.ours_steps):
            w0, c0 = time.perf_counter(), time.process_time()
            path = args.work / "ours" / f"step_{done}"
            policy.model.save_pretrained(path)
            saved[done] = (str(path), time.perf_counter() - w0, time.process_time() - c0)
        calls["train"] += training
        return orig(builders, policy, *a, **k)

    trainer_mod.rollout_groups = rollout_groups
    try:
        trainer_mod.train(cfg)
    finally:
        trainer_mod.rollout_groups = orig
    rows = [json.loads(x) for x in (cfg.run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if "step_seconds" in r]
    wall = cpu = 0.0
    snapshots = []
    for i, r in enumerate(steps, 1):
        _, save_wall, save_cpu = saved.get(i - 1, ("", 0.0, 0.0))  # saved at step i's start
        wall += r["step_seconds"] - save_wall
        cpu += r["step_cpu_seconds"] - save_cpu
        if i in saved:
            snapshots.append({"step": i, "wall": wall, "cpu": cpu, "model": saved[i][0]})
    _write(args.work / "ours.json", {"lr": cfg.lr, "loss": cfg.loss, "snapshots": snapshots,
                                      "train_reward": [r.get("reward") for r in steps]})


def stage_trl(args) -> None:
    from transformers import AutoModelForCausalLM, TrainerCallback
    from transformers.trainer_callback import PrinterCallback, ProgressCallback
    from trl import GRPOConfig, GRPOTrainer

    from llm_gym.adapters.trl import TextEnvironment, multi_turn_dataset

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    torch.set_num_threads(1)
    start = args.work / "start"
    tok = speed.qwen3_tool_tokenizer(args.work / "tokenizers")
    model = AutoModelForCausalLM.from_pretrained(start, dtype=torch.float32)
    rows = multi_turn_dataset(ENV_ID, args.groups * (args.trl_steps + 1), seed=args.seed,
                              **args.env_kwargs)
    out = args.work / "trl"
    snapshots: list[dict[str, Any]] = []
    rewards: list[float] = []
    clock = {"wall": 0.0, "cpu": 0.0, "t": (0.0, 0.0)}

    class Snapshots(TrainerCallback):
        def on_step_begin(self, a, state, control, **kw):
            clock["t"] = (time.perf_counter(), time.process_time())

        def on_step_end(self, a, state, control, **kw):
            w0, c0 = clock["t"]
            clock["wall"] += time.perf_counter() - w0
            clock["cpu"] += time.process_time() - c0
            step = state.global_step
            done = clock["wall"] >= args.trl_seconds or step >= args.trl_steps
            if step % args.every == 0 or done:
                path = out / f"step_{step}"
                kw["model"].save_pretrained(path)
                snapshots.append({"step": step, "wall": clock["wall"], "cpu": clock["cpu"],
                                  "model": str(path)})
                _write(args.work / "trl.json", {"lr": _lr(args), "loss": targs.loss_type,
                                                 "snapshots": snapshots, "train_reward": rewards})
            if done:
                control.should_training_stop = True

        def on_log(self, a, state, control, logs=None, **kw):
            if logs and "reward" in logs:
                rewards.append(float(logs["reward"]))

    targs = GRPOConfig(
        output_dir=str(out), use_cpu=True, report_to="none", save_strategy="no",
        bf16=False, fp16=False, gradient_checkpointing=False, seed=args.seed,
        per_device_train_batch_size=args.groups * args.group_size, gradient_accumulation_steps=1,
        steps_per_generation=1, num_generations=args.group_size,
        max_completion_length=args.trl_max_completion, max_tool_calling_iterations=args.max_turns - 1,
        max_steps=args.trl_steps, learning_rate=_lr(args), lr_scheduler_type="constant", beta=0.0,
        num_iterations=1, temperature=1.0, top_p=1.0, top_k=0,
        shuffle_dataset=False, logging_steps=1, dataloader_num_workers=0, disable_tqdm=True,
    )
    trainer = GRPOTrainer(model=model, args=targs, train_dataset=rows, processing_class=tok,
                          environment_factory=lambda: TextEnvironment(ENV_ID, **args.env_kwargs),
                          callbacks=[Snapshots()])
    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    trainer.train()
    _write(args.work / "trl.json", {"lr": _lr(args), "loss": targs.loss_type, "snapshots": snapshots,
                                     "train_reward": rewards})


def stage_eval(args) -> None:
    start = json.loads((args.work / "start.json").read_text())
    for side in args.sides:
        path = args.work / f"{side}.json"
        run = json.loads(path.read_text())
        for snap in run["snapshots"]:
            if "correct" in snap or (args.eval_steps and snap["step"] not in args.eval_steps):
                continue
            snap["correct"] = evaluate(args, Path(snap["model"]))
            snap["accuracy"] = statistics.fmean(snap["correct"])
            snap["gain"], snap["gain_ci95"] = _paired(snap["correct"], start["correct"])
            print(f"{side} step {snap['step']} ({snap['wall']:.0f} s): accuracy {snap['accuracy']:.3f}, "
                  f"gain {snap['gain']:+.3f} +- {snap['gain_ci95']:.3f}", flush=True)
            _write(path, run)


def _paired(after: list[float], before: list[float]) -> tuple[float, float]:
    d = [a - b for a, b in zip(after, before, strict=True)]
    mean = statistics.fmean(d)
    sd = statistics.stdev(d) if len(d) > 1 else 0.0
    return mean, 1.96 * sd / math.sqrt(len(d))


def stage_report(args) -> None:
    start = json.loads((args.work / "start.json").read_text())
    report: dict[str, Any] = {"start_accuracy": start["accuracy"], "eval_problems": len(start["correct"]),
                              "args": {k: str(v) for k, v in vars(args).items()}}
    print(f"start: solves {start['accuracy']:.3f} of {len(start['correct'])} evaluation episodes "
          f"(split {args.eval_split}, temperature {args.eval_temperature:g})\n")
    print("| side | lr | loss | step | train wall s | train CPU s | solve rate | gain over start |")
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    for side in ("ours", "trl"):
        run = json.loads((args.work / f"{side}.json").read_text())
        evaluated = [s for s in run["snapshots"] if "gain" in s]
        first = next((s for s in evaluated if s["gain"] - s["gain_ci95"] > 0), None)
        for s in evaluated:
            print(f"| {side} | {run['lr']:g} | {run['loss']} | {s['step']} | {s['wall']:.0f} | "
                  f"{s['cpu']:.0f} | {s['accuracy']:.3f} | {s['gain']:+.3f} +- {s['gain_ci95']:.3f} |")
        report[side] = {
            "lr": run["lr"], "loss": run["loss"],
            "snapshots": [{k: v for k, v in s.items() if k != "correct"} for s in evaluated],
            "time_to_gain_wall": first["wall"] if first else None,
            "time_to_gain_cpu": first["cpu"] if first else None,
            "trained_wall": evaluated[-1]["wall"] if evaluated else 0.0,
            "trained_steps": evaluated[-1]["step"] if evaluated else 0,
        }
    ours, trl = report["ours"], report["trl"]
    print()
    for side, r in (("ours", ours), ("trl", trl)):
        t = r["time_to_gain_wall"]
        print(f"{side}: " + (f"first gain at {t:.0f} s of training (wall)" if t is not None else
                             f"no gain whose interval excludes 0 in {r['trained_wall']:.0f} s "
                             f"({r['trained_steps']} steps)"))
    if ours["time_to_gain_wall"]:
        if trl["time_to_gain_wall"]:
            ratio, bound = trl["time_to_gain_wall"] / ours["time_to_gain_wall"], "="
        else:
            ratio, bound = trl["trained_wall"] / ours["time_to_gain_wall"], ">="
        report["ratio_trl_over_ours"] = ratio
        report["ratio_is_lower_bound"] = bound == ">="
        print(f"TRL / ours, wall time to a gain: {bound} {ratio:.2f}x")
    out = ROOT / "benchmarks" / "out" / "multiturn_time_to_gain.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    _write(out, report)
    print(f"\nwrote {out}")


def _write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--work", type=Path, required=True, help="where the start, snapshots and results go")
    ap.add_argument("--stage", choices=("start", "ours", "trl", "eval", "report"), required=True)
    ap.add_argument("--sides", nargs="+", default=["ours", "trl"], help="eval: whose snapshots")
    ap.add_argument("--eval-steps", nargs="*", type=int, default=[],
                    help="eval: only the snapshots of these steps (default: every one not yet evaluated)")
    ap.add_argument("--groups", type=int, default=4, help="problems per step")
    ap.add_argument("--group-size", type=int, default=4)
    ap.add_argument("--max-turns", type=int, default=8, help="GuessNumber's default: 8 guesses")
    ap.add_argument("--trl-max-completion", type=int, default=384,
                    help="the episode's completion budget (TRL's max_completion_length; ours: the act "
                         "env's, and the tokens a turn may sample)")
    ap.add_argument("--warm-steps", type=int, default=500)
    ap.add_argument("--micro-batch", type=int, default=4, help="ours: episodes per forward/backward")
    ap.add_argument("--lr", type=float, default=None,
                    help="both sides (default: what `llm-gym train` fits to the start)")
    ap.add_argument("--every", type=int, default=2, help="steps between snapshots")
    ap.add_argument("--ours-steps", type=int, default=20)
    ap.add_argument("--trl-steps", type=int, default=200)
    ap.add_argument("--trl-seconds", type=float, default=1500.0,
                    help="TRL stops after this much training wall time")
    ap.add_argument("--env-kwargs", type=json.loads, default={"range_starts": 1, "max_number": 5},
                    help="GuessNumber's knobs, both sides (JSON; default: the classic game, 1..5)")
    ap.add_argument("--eval-problems", type=int, default=400)
    ap.add_argument("--eval-split", default="train", help="see the module docstring")
    ap.add_argument("--eval-temperature", type=float, default=1.0)
    ap.add_argument("--eval-max-tokens", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    {"start": stage_start, "ours": stage_ours, "trl": stage_trl, "eval": stage_eval,
     "report": stage_report}[args.stage](args)


if __name__ == "__main__":
    main()
