"""Our GRPO trainer vs TRL's `GRPOTrainer` on one workload: seconds per step and held-out accuracy.

Both trainers start from the *same* checkpoint: the tiny byte-level Llama preset given one short SFT
warm start (`trainers.sft.sft_warm_start`, stopped by validation accuracy) and saved to a temp dir.
Both then train on `llm/Math-v0` (default knobs) with the same task sequence (TRL reads
`grpo_dataset` rows in order, ours reads `GymEnvGroupBuilder`s on the same task seeds), the same
group size, prompts per step, max completion tokens, learning rate (constant, AdamW, no weight
decay, grad-norm clip 1.0), temperature 1.0, fp32, no gradient checkpointing, no KL (beta 0), one
optimisation pass per batch, and the same objective: the token-level clipped ratio (PPO/GRPO, eps
0.2) with group-std-scaled advantages, averaged over the batch's completion tokens (TRL
`loss_type="dapo"`, `scale_rewards="group"`; ours `loss="ppo"`, `loss_reduction="token_mean"`,
`advantage_scale="group_std"`). Each trained model is then scored by one evaluator
(`trainers.sft.make_accuracy_eval`: greedy, `split="test"`, the same problems for every model).

Timing: wall and process-CPU seconds of every step; step 0 (warm-up: allocator growth, accelerate
and dataloader setup) is reported separately and excluded from the mean. Phases inside each step
are timed by wrapping the functions each trainer calls (ours: rollouts, `HFSampler._generate`,
the training forward, forward/backward; TRL: `_generate_and_score_completions`,
`_generate_single_turn`, `_calculate_rewards`, `_get_per_token_logps_and_entropies`,
`training_step`), so the table says where each side spends its step. The CPU-time ratio is the
steadier one on a machine shared with other jobs (with 1 torch thread, CPU time is the work done).
Each trainer runs `--repeats` times in ABBA order (ours, TRL, TRL, ours, ...), run r with seed + r
(its own task sequence, shared by both trainers), so a drift in machine load cancels out of the
ratio and the accuracy is an average over seeds. Runs are deterministic per seed.

    .venv/bin/python benchmarks/trainer_vs_trl.py [--steps 30 --group-size 16 --prompts-per-step 16
        --max-tokens 8 --threads 1 --repeats 2 --eval-problems 500]

Writes `benchmarks/out/trainer_vs_trl.json` and prints markdown tables (results and the per-phase
split of a step). See BENCHMARKS.md, "Trainer vs TRL".
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import platform
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from llm_gym.rl import RLDataset  # noqa: E402

ENV_ID = "llm/Math-v0"
EVAL_SEED = 1234


# ------------------------------------------------------------------------------------------------
# Timing
# ------------------------------------------------------------------------------------------------
def clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


class StepClock:
    """Marks at the start of every step (and one at the end of the last); phase sums recorded
    only from step 1 on (step 0 is warm-up)."""

    def __init__(self) -> None:
        self.marks: list[tuple[float, float]] = []
        self.phases: dict[str, list[float]] = {}  # name -> [wall, cpu]
        self.recording: bool | None = False
        self.closed = False
        self.threads_seen: set[int] = set()

    def begin_step(self) -> None:
        if self.closed:
            raise RuntimeError("a step began after the run's end mark")
        self.marks.append(clock())
        self.threads_seen.add(torch.get_num_threads())
        self.recording = len(self.marks) >= 2  # from step 1 on

    def end(self) -> None:
        if self.marks and self.recording is not None:
            self.marks.append(clock())
        self.recording = None  # closed: later calls (final eval) are not recorded
        self.closed = True

    def wrap(self, name: str, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def timed(*args, **kwargs):
            if not self.recording:
                return fn(*args, **kwargs)
            w, c = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                w2, c2 = clock()
                acc = self.phases.setdefault(name, [0.0, 0.0])
                acc[0] += w2 - w
                acc[1] += c2 - c
        return timed

    def steps(self) -> list[dict[str, float]]:
        return [{"wall": b[0] - a[0], "cpu": b[1] - a[1]} for a, b in zip(self.marks, self.marks[1:])]

    def summary(self) -> dict[str, Any]:
        steps = self.steps()
        timed = steps[1:]  # step 0 is warm-up
        n = max(len(timed), 1)
        return {
            "steps_timed": len(timed),
            "warmup_step": steps[0] if steps else None,
            "s_per_step_wall": sum(s["wall"] for s in timed) / n,
            "s_per_step_cpu": sum(s["cpu"] for s in timed) / n,
            "median_step_wall": float(np.median([s["wall"] for s in timed])) if timed else None,
            "phases_per_step": {k: {"wall": v[0] / n, "cpu": v[1] / n} for k, v in self.phases.items()},
            "per_step": steps,
            "torch_threads": sorted(self.threads_seen),
        }


# ------------------------------------------------------------------------------------------------
# The shared starting checkpoint and the shared evaluator
# ------------------------------------------------------------------------------------------------
def make_start_checkpoint(path: Path, seed: int, max_tokens: int, progress: bool) -> dict[str, Any]:
    """Tiny preset + SFT warm start (validation-stopped), saved with `save_pretrained`."""
    from tqdm.auto import tqdm

    from trainers.models import build_tiny_model
    from trainers.sft import sft_warm_start

    model, tok = build_tiny_model(seed=seed)
    bar = tqdm(total=400, desc="SFT warm start", disable=not progress, dynamic_ncols=True)

    def log(m: dict) -> None:
        if "sft/loss" in m:
            bar.update(1)
            bar.set_postfix(loss=f"{m['sft/loss']:.3f}")
        elif "sft/accuracy" in m:
            bar.set_postfix(val_acc=f"{m['sft/accuracy']:.2f}")

    result = sft_warm_start(model, env_id=ENV_ID, max_steps=400, target_band=(0.35, 0.55),
                            eval_max_tokens=max_tokens, seed=seed, log_fn=log)
    bar.close()
    model.eval()
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return {"sft_steps": result.steps, "sft_stopped": result.stopped_reason,
            "sft_val_accuracy": result.accuracy, "sft_seconds": round(result.seconds, 1)}


def make_evaluator(n_problems: int, max_tokens: int) -> Callable[[torch.nn.Module], float]:
    from trainers.sft import make_accuracy_eval, source_for_env

    return make_accuracy_eval(source_for_env(ENV_ID, "test"), num_problems=n_problems,
                              seed=EVAL_SEED, max_tokens=max_tokens)


def load_model(path: Path) -> torch.nn.Module:
    from trainers.models import load_policy

    return load_policy(str(path), device="cpu", dtype=torch.float32)[0]


# ------------------------------------------------------------------------------------------------
# Ours
# ------------------------------------------------------------------------------------------------
class SeededDataset(RLDataset):
    """`RLDataset` over fixed task seeds, `prompts_per_step` per batch, in order (the same tasks TRL
    reads from `grpo_dataset`); marks the step clock at every `get_batch` (the start of a step)."""

    def __init__(self, task_seeds: list[int], prompts_per_step: int, group_size: int,
                 clock_: StepClock) -> None:
        self.task_seeds, self.p, self.g, self.clock = task_seeds, prompts_per_step, group_size, clock_

    def __len__(self) -> int:
        return len(self.task_seeds) // self.p

    def get_batch(self, index: int):
        from llm_gym import GymEnvGroupBuilder

        self.clock.begin_step()
        seeds = self.task_seeds[index * self.p:(index + 1) * self.p]
        return [GymEnvGroupBuilder(ENV_ID, self.g, s, split="train") for s in seeds]


def run_ours(args, start: Path, task_seeds: list[int], workdir: Path, seed: int,
             tag: str) -> tuple[torch.nn.Module, dict]:
    import trainers.grpo.trainer as trainer_mod
    from trainers.grpo import GRPOConfig
    from trainers.sampler import HFSampler

    sc = StepClock()
    cfg = GRPOConfig(
        env=ENV_ID, env_kwargs={}, model=str(start), device="cpu", cpu_threads=args.threads,
        bf16=False, lora_r=0, sampler="hf",
        group_size=args.group_size, groups_per_batch=args.prompts_per_step,
        max_tokens=args.max_tokens, temperature=1.0, steps=args.steps, lr=args.lr,
        lr_schedule="constant", warmup_steps=0, weight_decay=0.0, max_grad_norm=1.0,
        loss="ppo", loss_reduction="token_mean", advantage_scale="group_std", clip_eps=0.2,
        clip_eps_high=None,
        kl_beta=0.0, micro_batch_size=args.prompts_per_step * args.group_size,
        remove_constant_reward_groups=not args.keep_constant_groups,
        sft_steps=0, eval_problems=1,  # the shared evaluator below scores the model
        eval_every=0, save_every=0,  # no evaluation or checkpoint inside the timed steps
        output_dir=str(workdir), run_name=f"ours-{tag}", seed=seed, progress=not args.no_progress,
    )
    # Instrument the functions `train` looks up in its module (and the sampler's generation).
    patched = {
        "rollout_groups": "rollout (generate + env grading)",
        "forward_backward": "forward + backward",
        "token_logprobs": "training forward",
        "compute_advantages": "advantages + datums",
        "assemble_training_data": "advantages + datums",
    }
    saved = {name: getattr(trainer_mod, name) for name in (*patched, "evaluate")}
    saved_generate = HFSampler._generate
    orig_evaluate = saved["evaluate"]

    def evaluate(*a, **k):
        if len(sc.marks) == args.steps:  # the evaluation after RL: the last step has ended
            sc.end()
        return orig_evaluate(*a, **k)

    try:
        for name, label in patched.items():
            setattr(trainer_mod, name, sc.wrap(label, saved[name]))
        trainer_mod.evaluate = evaluate
        HFSampler._generate = sc.wrap("generation (model)", saved_generate)
        torch.set_num_threads(args.threads)
        summary = trainer_mod.train(cfg, dataset=SeededDataset(task_seeds, args.prompts_per_step,
                                                               args.group_size, sc))
    finally:
        for name, fn in saved.items():
            setattr(trainer_mod, name, fn)
        HFSampler._generate = saved_generate
    metrics = [json.loads(line) for line in (cfg.run_dir / "metrics.jsonl").read_text().splitlines()]
    train_rows = [m for m in metrics if "reward" in m]
    model = load_model(start)
    ckpt = cfg.run_dir / "checkpoints" / f"step_{args.steps:06d}" / "model_state.pt"
    model.load_state_dict(torch.load(ckpt, map_location="cpu", weights_only=True))
    result = sc.summary()
    assert len(result["per_step"]) == args.steps, (len(result["per_step"]), args.steps)
    result["train_reward"] = [round(m["reward"], 4) for m in train_rows]
    result["train_correct"] = [round(m["correct"], 4) for m in train_rows]
    result["trained_tokens"] = [m.get("trained_tokens") for m in train_rows]
    result["rl_seconds_total"] = summary.get("rl_seconds")
    return model, result


# ------------------------------------------------------------------------------------------------
# TRL
# ------------------------------------------------------------------------------------------------
def run_trl(args, start: Path, task_seeds: list[int], workdir: Path, seed: int,
            tag: str) -> tuple[torch.nn.Module, dict]:
    from transformers import AutoTokenizer, TrainerCallback
    from transformers.trainer_callback import PrinterCallback, ProgressCallback
    from trl import GRPOConfig, GRPOTrainer

    from trainers.adapters.trl import EnvReward, grpo_dataset

    sc = StepClock()
    batch = args.prompts_per_step * args.group_size
    rows = grpo_dataset(ENV_ID, len(task_seeds), split="train", seed=seed)
    assert rows["task_seed"] == task_seeds
    tok = AutoTokenizer.from_pretrained(str(start), local_files_only=True)
    model = load_model(start)
    reward = EnvReward(tokenizer=tok)
    targs = GRPOConfig(
        output_dir=str(workdir / f"trl-{tag}"), use_cpu=True, report_to="none", save_strategy="no",
        bf16=False, fp16=False, gradient_checkpointing=False, seed=seed,
        per_device_train_batch_size=batch, gradient_accumulation_steps=1, steps_per_generation=1,
        num_generations=args.group_size, max_completion_length=args.max_tokens,
        max_steps=args.steps, learning_rate=args.lr, lr_scheduler_type="constant", warmup_steps=0,
        weight_decay=0.0, max_grad_norm=1.0, optim="adamw_torch",
        beta=0.0, num_iterations=1, epsilon=0.2, loss_type="dapo", scale_rewards="group",
        temperature=1.0, top_p=1.0, top_k=0, shuffle_dataset=False, logging_steps=1,
        dataloader_num_workers=0, disable_tqdm=args.no_progress,
    )

    class Marks(TrainerCallback):
        def on_step_begin(self, a, state, control, **kw):
            sc.begin_step()

        def on_train_end(self, a, state, control, **kw):
            sc.end()

    class QuietProgress(ProgressCallback):
        def on_log(self, *a, **kw):  # keep the bar, skip printing every step's log dict
            pass

    trainer = GRPOTrainer(model=model, reward_funcs=reward, args=targs, train_dataset=rows,
                          processing_class=tok, callbacks=[Marks()])
    if args.no_progress:
        trainer.remove_callback(PrinterCallback)  # no per-step log dicts either
    else:
        trainer.remove_callback(ProgressCallback)
        trainer.add_callback(QuietProgress())
    first_prompt: list[list[int]] = []
    gen = trainer._generate_single_turn

    def generate_single_turn(prompt_ids, *a, **k):
        if not first_prompt:
            first_prompt.append(list(prompt_ids[0]))
        return gen(prompt_ids, *a, **k)

    # Instance attributes shadow the methods, so the trainer's own `self.x(...)` calls are timed.
    trainer._generate_single_turn = sc.wrap("generation (model)", generate_single_turn)
    for name, label in (("_generate_and_score_completions", "rollout (generate + env grading)"),
                        ("_calculate_rewards", "reward"),
                        ("_get_per_token_logps_and_entropies", "training forward"),
                        ("training_step", "rollout + forward + backward")):
        setattr(trainer, name, sc.wrap(label, getattr(trainer, name)))
    torch.set_num_threads(args.threads)
    trainer.train()
    logs = [h for h in trainer.state.log_history if "reward" in h]
    result = sc.summary()
    assert len(result["per_step"]) == args.steps, (len(result["per_step"]), args.steps)
    result["train_reward"] = [round(h["reward"], 4) for h in logs]
    result["train_correct"] = [round(h.get("env/correct", float("nan")), 4) for h in logs]
    result["first_prompt_ids"] = first_prompt[0] if first_prompt else None
    trained = trainer.model
    trained.eval()
    return trained, result


# ------------------------------------------------------------------------------------------------
# Report
# ------------------------------------------------------------------------------------------------
def wilson(p: float, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return (0.0, 1.0)
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (c - h, c + h)


def phase_rows(ours: dict, trl: dict) -> list[tuple[str, float, float]]:
    """(phase, ours s/step, TRL s/step) by wall clock, disjoint phases that sum to the step."""
    def get(r: dict, name: str) -> float:
        return r["phases_per_step"].get(name, {"wall": 0.0})["wall"]

    o_roll, o_gen, o_fb, o_fwd = (get(ours, "rollout (generate + env grading)"),
                                  get(ours, "generation (model)"), get(ours, "forward + backward"),
                                  get(ours, "training forward"))
    o_adv = get(ours, "advantages + datums")
    t_roll, t_gen, t_rew = (get(trl, "rollout (generate + env grading)"),
                            get(trl, "generation (model)"), get(trl, "reward"))
    t_ts, t_fwd = get(trl, "rollout + forward + backward"), get(trl, "training forward")
    o_step, t_step = ours["s_per_step_wall"], trl["s_per_step_wall"]
    return [
        ("generation (model forward passes)", o_gen, t_gen),
        ("rollout rest: env grading / reward, tokenize, decode", o_roll - o_gen, t_roll - t_gen),
        ("  of which reward function (TRL)", float("nan"), t_rew),
        ("advantages + training data", o_adv, 0.0),
        ("training forward (logprobs)", o_fwd, t_fwd),
        ("loss + backward + collate", o_fb - o_fwd, t_ts - t_roll - t_fwd),
        ("optimizer step, clipping, logging, other", o_step - o_roll - o_adv - o_fb, t_step - t_ts),
        ("**total per step**", o_step, t_step),
    ]


def fmt(x: float) -> str:
    return "—" if x != x else f"{x:.3f}"



def aggregate(runs: list[dict]) -> dict[str, Any]:
    """Pool the timed steps of every run of one trainer; average phases and accuracy."""
    timed = [s for r in runs for s in r["per_step"][1:]]
    n = max(len(timed), 1)
    phases: dict[str, dict[str, float]] = {}
    for r in runs:
        for k, v in r["phases_per_step"].items():
            acc = phases.setdefault(k, {"wall": 0.0, "cpu": 0.0})
            acc["wall"] += v["wall"] * r["steps_timed"] / n
            acc["cpu"] += v["cpu"] * r["steps_timed"] / n
    return {
        "s_per_step_wall": sum(s["wall"] for s in timed) / n,
        "s_per_step_cpu": sum(s["cpu"] for s in timed) / n,
        "median_step_wall": float(np.median([s["wall"] for s in timed])),
        "warmup_step_wall": float(np.mean([r["per_step"][0]["wall"] for r in runs])),
        "phases_per_step": phases,
        "accuracy": float(np.mean([r["accuracy"] for r in runs])),
        "accuracy_runs": [r["accuracy"] for r in runs],
        "train_reward_last5": float(np.mean([np.mean(r["train_reward"][-5:]) for r in runs])),
        "steps_timed": len(timed),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30, help="RL optimizer steps per run")
    parser.add_argument("--group-size", type=int, default=16, help="completions per prompt (G)")
    parser.add_argument("--prompts-per-step", type=int, default=16, help="prompts per step")
    parser.add_argument("--max-tokens", type=int, default=8, help="max completion tokens")
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads for both")
    parser.add_argument("--eval-problems", type=int, default=500, help="held-out problems (greedy)")
    parser.add_argument("--repeats", type=int, default=2,
                        help="runs per trainer, in ABBA order (ours, TRL, TRL, ours, ...), run r "
                             "with seed + r: load drift cancels and accuracy is averaged")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep-constant-groups", action="store_true",
                        help="ours trains on zero-advantage groups too (TRL's token count in the "
                             "loss normaliser); by default ours skips them (our default)")
    parser.add_argument("--checkpoint", type=Path, default=None,
                        help="reuse this warm-started checkpoint dir (made there if missing)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out" / "trainer_vs_trl.json")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args()

    warnings.filterwarnings("ignore")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    torch.set_num_threads(args.threads)
    t_start = time.perf_counter()
    load_start = os.getloadavg()
    tmp = tempfile.TemporaryDirectory(prefix="trainer_vs_trl_")
    workdir = Path(tmp.name)

    # 1. One starting checkpoint for both.
    start = args.checkpoint or workdir / "start"
    sft_info: dict[str, Any] = {"reused": str(start)}
    if not (start / "config.json").is_file():
        start.mkdir(parents=True, exist_ok=True)
        sft_info = make_start_checkpoint(start, args.seed, args.max_tokens, not args.no_progress)
    evaluator = make_evaluator(args.eval_problems, args.max_tokens)
    torch.set_num_threads(args.threads)
    acc_start = evaluator(load_model(start))
    print(f"start checkpoint: {sft_info}; held-out accuracy {acc_start:.3f} "
          f"({args.eval_problems} problems)", flush=True)

    # 2. Train both, ABBA order, same thread setting; run r of each trainer sees the same tasks
    #    (grpo_dataset's seeds for seed + r, prompts_per_step per step, in order).
    from trainers.adapters._common import task_seeds as make_task_seeds

    runners = {"ours": run_ours, "trl": run_trl}
    runs: dict[str, list[dict]] = {"ours": [], "trl": []}
    order: list[str] = []
    for r in range(args.repeats):
        seed = args.seed + r
        seeds = make_task_seeds(seed, args.steps * args.prompts_per_step)
        for name in (("ours", "trl") if r % 2 == 0 else ("trl", "ours")):
            order.append(name)
            print(f"--- run {len(order)}: {name}, seed {seed}, {args.steps} steps", flush=True)
            model, res = runners[name](args, start, seeds, workdir, seed, str(r))
            torch.set_num_threads(args.threads)
            res["accuracy"] = evaluator(model)
            res["seed"] = seed
            runs[name].append(res)
            print(f"{name}: {res['s_per_step_wall']:.3f} s/step wall, {res['s_per_step_cpu']:.3f} "
                  f"CPU-s/step, held-out accuracy {res['accuracy']:.3f}", flush=True)
            del model

    # The prompt TRL generated from must be the env's own observation for that task.
    import gymnasium as gym

    first_seed = make_task_seeds(args.seed, 1)[0]
    obs, _ = gym.make(ENV_ID, split="train").reset(seed=first_seed)
    same_prompt = runs["trl"][0]["first_prompt_ids"] == [int(t) for t in obs]
    for res in runs["trl"]:
        res.pop("first_prompt_ids", None)

    ours, trl = aggregate(runs["ours"]), aggregate(runs["trl"])
    n = args.eval_problems
    report = {
        "command": " ".join(["python", "benchmarks/trainer_vs_trl.py", *sys.argv[1:]]),
        "machine": {"cpus": os.cpu_count(), "loadavg_start": load_start, "loadavg_end": os.getloadavg(),
                    "python": platform.python_version(), "torch": torch.__version__,
                    "torch_threads": args.threads, "platform": platform.platform()},
        "workload": {"env": ENV_ID, "model": "tiny preset (1.08M params) + SFT warm start",
                     "steps": args.steps, "group_size": args.group_size,
                     "prompts_per_step": args.prompts_per_step,
                     "completions_per_step": args.group_size * args.prompts_per_step,
                     "max_completion_tokens": args.max_tokens, "lr": args.lr, "temperature": 1.0,
                     "repeats": args.repeats, "order": order,
                     "keep_constant_groups": args.keep_constant_groups,
                     "same_task_sequence": True, "trl_prompt_equals_env_observation": same_prompt},
        "start": {**sft_info, "accuracy": acc_start},
        "eval": {"problems": n, "split": "test", "decoding": "greedy", "seed": EVAL_SEED},
        "ours": ours, "trl": trl, "runs": runs,
        "speedup_wall": trl["s_per_step_wall"] / ours["s_per_step_wall"],
        "speedup_cpu": trl["s_per_step_cpu"] / ours["s_per_step_cpu"],
        "phases_wall": [{"phase": a, "ours": b, "trl": c} for a, b, c in phase_rows(ours, trl)],
        "total_seconds": time.perf_counter() - t_start,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, default=float))

    m = args.repeats * n  # problems behind each mean accuracy
    lo_o, hi_o = wilson(ours["accuracy"], m)
    lo_t, hi_t = wilson(trl["accuracy"], m)
    print()
    print(f"{args.repeats} x {args.steps} steps per trainer (order {' '.join(order)}), "
          f"G={args.group_size} x {args.prompts_per_step} prompts = "
          f"{args.group_size * args.prompts_per_step} completions/step, <= {args.max_tokens} tokens, "
          f"torch threads {args.threads}, load avg {load_start[0]:.2f} -> {os.getloadavg()[0]:.2f}; "
          f"TRL prompt == env observation: {same_prompt}")
    print()
    print("| | ours | TRL GRPOTrainer | TRL / ours |")
    print("|---|---:|---:|---:|")
    print(f"| s/step, wall (mean of {ours['steps_timed']} steps, first of each run excluded) | "
          f"{ours['s_per_step_wall']:.3f} | {trl['s_per_step_wall']:.3f} | "
          f"**{report['speedup_wall']:.2f}x** |")
    print(f"| CPU-s/step (process time) | {ours['s_per_step_cpu']:.3f} | {trl['s_per_step_cpu']:.3f} | "
          f"{report['speedup_cpu']:.2f}x |")
    print(f"| median s/step, wall | {ours['median_step_wall']:.3f} | {trl['median_step_wall']:.3f} | "
          f"{trl['median_step_wall'] / ours['median_step_wall']:.2f}x |")
    print(f"| first step of a run (warm-up), wall | {ours['warmup_step_wall']:.3f} | "
          f"{trl['warmup_step_wall']:.3f} | |")
    runs_o = ", ".join(f"{a:.3f}" for a in ours["accuracy_runs"])
    runs_t = ", ".join(f"{a:.3f}" for a in trl["accuracy_runs"])
    print(f"| held-out accuracy after {args.steps} steps (start {acc_start:.3f}); runs | "
          f"{ours['accuracy']:.3f} ({runs_o}) | {trl['accuracy']:.3f} ({runs_t}) | |")
    print(f"| 95% interval of the mean ({m} graded answers) | [{lo_o:.3f}, {hi_o:.3f}] | "
          f"[{lo_t:.3f}, {hi_t:.3f}] | |")
    print(f"| mean train reward, last 5 steps | {ours['train_reward_last5']:.3f} | "
          f"{trl['train_reward_last5']:.3f} | |")
    print()
    print("| phase (wall s/step) | ours | TRL |")
    print("|---|---:|---:|")
    for a, b, c in phase_rows(ours, trl):
        print(f"| {a} | {fmt(b)} | {fmt(c)} |")
    faster = report["speedup_wall"] >= 2.0
    not_worse = hi_o >= lo_t  # intervals overlap or ours is higher: not measurably worse
    print(f"\ngoal (>= 2x faster per step at equal or better accuracy): "
          f"{'met' if faster and not_worse else 'NOT met'} (speed {report['speedup_wall']:.2f}x, "
          f"accuracy {'not measurably worse' if not_worse else 'worse'}); wrote {args.out} "
          f"({report['total_seconds']:.0f} s total)")
    tmp.cleanup()


if __name__ == "__main__":
    main()
