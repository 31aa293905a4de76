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

`--time-to-accuracy` measures what a user waits for instead: training wall-clock seconds until
held-out accuracy first reaches start + 0.10 and start + 0.20 (`--deltas`), per seed. Seed s gets
its own warm-started checkpoint (SFT with seed s; `--checkpoint-dir` keeps it for reuse), shared by
both trainers, so both start from the same weights and the same accuracy; the trainers alternate
(ABBA over seeds) so load drift hits both alike. Every `--eval-every` optimizer steps the model
being trained is scored by the same evaluator (greedy, the same `--eval-problems` test problems);
evaluation time is excluded from the clock and the global RNG is restored after it (TRL samples
from it), so a probed run trains as an unprobed one. The clock counts every optimizer step
including the first (warm-up); setup before the first step is recorded separately. Also reported:
the accuracy gain per step (least-squares slope and (final - start) / steps), `uptime` before and
after every run, and each trainer's per-step diagnostics (gradient norm, clip fraction, ...).
`--ours-set FIELD=VALUE` / `--trl-set FIELD=VALUE` override a config field of one side
(ablations), `--trainers ours` runs one side only. The JSON is rewritten after every run.

    .venv/bin/python benchmarks/trainer_vs_trl.py --time-to-accuracy [--steps 45 --eval-every 3
        --seeds 4 --checkpoint-dir DIR --plot docs/curves/time_to_accuracy.png
        --tta-out benchmarks/results/time_to_accuracy.json]
    .venv/bin/python benchmarks/trainer_vs_trl.py --replot benchmarks/results/time_to_accuracy.json

`--gradient-check` answers "do the two losses compute the same thing?" without training: one
batch of real rollouts, then ours' and TRL's loss gradients on the same tokens and rewards
(cosine and norm ratio of the two gradient vectors, printed as JSON).
"""

from __future__ import annotations

import argparse
import dataclasses
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
# Per-step values each trainer logs that explain how much a step moved the policy.
OURS_DIAGNOSTICS = ("grad_norm", "clip_frac", "sampler_kl", "entropy", "datums", "trained_tokens",
                    "frac_mixed_groups")
TRL_DIAGNOSTICS = ("grad_norm", "clip_ratio/region_mean", "entropy", "frac_reward_zero_std",
                   "completions/mean_length")


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
        # Time spent inside a step's interval on work that is not training (the time-to-accuracy
        # mode's evaluations), per step index: subtracted from that step's wall and CPU time.
        self.excluded: dict[int, list[float]] = {}

    def exclude(self, wall: float, cpu: float) -> None:
        acc = self.excluded.setdefault(len(self.marks) - 1, [0.0, 0.0])
        acc[0] += wall
        acc[1] += cpu

    def train_seconds(self) -> float:
        """Wall seconds of training since the first step began, excluded time left out."""
        if not self.marks:
            return 0.0
        end = self.marks[-1][0] if self.closed else time.perf_counter()
        return end - self.marks[0][0] - sum(w for w, _ in self.excluded.values())

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
        out = []
        for i, (a, b) in enumerate(zip(self.marks, self.marks[1:])):
            w, c = self.excluded.get(i, (0.0, 0.0))
            out.append({"wall": b[0] - a[0] - w, "cpu": b[1] - a[1] - c})
        return out

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
                 clock_: StepClock, before_step: Callable[[int], None] | None = None) -> None:
        self.task_seeds, self.p, self.g, self.clock = task_seeds, prompts_per_step, group_size, clock_
        self.before_step = before_step

    def __len__(self) -> int:
        return len(self.task_seeds) // self.p

    def get_batch(self, index: int):
        from llm_gym import GymEnvGroupBuilder

        if self.before_step is not None:
            self.before_step(index)  # evaluation after `index` optimizer steps (excluded time)
        self.clock.begin_step()
        seeds = self.task_seeds[index * self.p:(index + 1) * self.p]
        return [GymEnvGroupBuilder(ENV_ID, self.g, s, split="train") for s in seeds]


def run_ours(args, start: Path, task_seeds: list[int], workdir: Path, seed: int,
             tag: str, probe: "AccuracyProbe | None" = None) -> tuple[torch.nn.Module, dict]:
    import trainers.grpo.trainer as trainer_mod
    from trainers.grpo import GRPOConfig
    from trainers.sampling.hf import HFSampler

    sc = StepClock()
    t_call = time.perf_counter()  # setup = this call until the first step begins
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
    if getattr(args, "ours_set", None):  # ablations: any GRPOConfig field, e.g. loss=cispo
        cfg = dataclasses.replace(cfg, **parse_overrides(args.ours_set))
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

    live: dict[str, torch.nn.Module] = {}  # the model being trained, seen in `forward_backward`
    orig_fb = saved["forward_backward"]

    def forward_backward(model, *a, **k):
        live["model"] = model
        return orig_fb(model, *a, **k)

    def before_step(index: int) -> None:
        if probe is not None and "model" in live:
            probe.check(index, live["model"], sc)

    try:
        for name, label in patched.items():
            setattr(trainer_mod, name, sc.wrap(label, forward_backward if name == "forward_backward"
                                               else saved[name]))
        trainer_mod.evaluate = evaluate
        HFSampler._generate = sc.wrap("generation (model)", saved_generate)
        torch.set_num_threads(args.threads)
        summary = trainer_mod.train(cfg, dataset=SeededDataset(task_seeds, args.prompts_per_step,
                                                               args.group_size, sc, before_step))
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
    result["setup_seconds"] = sc.marks[0][0] - t_call
    assert len(result["per_step"]) == args.steps, (len(result["per_step"]), args.steps)
    result["train_reward"] = [round(m["reward"], 4) for m in train_rows]
    result["diagnostics"] = {k: [m.get(k) for m in train_rows] for k in OURS_DIAGNOSTICS}
    result["train_correct"] = [round(m["correct"], 4) for m in train_rows]
    result["trained_tokens"] = [m.get("trained_tokens") for m in train_rows]
    result["rl_seconds_total"] = summary.get("rl_seconds")
    return model, result


# ------------------------------------------------------------------------------------------------
# TRL
# ------------------------------------------------------------------------------------------------
def run_trl(args, start: Path, task_seeds: list[int], workdir: Path, seed: int,
            tag: str, probe: "AccuracyProbe | None" = None) -> tuple[torch.nn.Module, dict]:
    from transformers import AutoTokenizer, TrainerCallback
    from transformers.trainer_callback import PrinterCallback, ProgressCallback
    from trl import GRPOConfig, GRPOTrainer

    from llm_gym.adapters.trl import EnvReward, grpo_dataset

    sc = StepClock()
    t_call = time.perf_counter()  # setup = this call until the first step begins
    batch = args.prompts_per_step * args.group_size
    rows = grpo_dataset(ENV_ID, len(task_seeds), split="train", seed=seed)
    assert rows["task_seed"] == task_seeds
    tok = AutoTokenizer.from_pretrained(str(start), local_files_only=True)
    model = load_model(start)
    reward = EnvReward(tokenizer=tok)
    targs_kw = dict(
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
    # ablations: any trl.GRPOConfig field, e.g. loss_type=grpo
    targs = GRPOConfig(**{**targs_kw, **parse_overrides(getattr(args, "trl_set", None) or [])})

    class Marks(TrainerCallback):
        def on_step_begin(self, a, state, control, **kw):
            if probe is not None:  # evaluation after `global_step` optimizer steps (excluded)
                probe.check(state.global_step, kw["model"], sc)
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
    result["setup_seconds"] = sc.marks[0][0] - t_call
    assert len(result["per_step"]) == args.steps, (len(result["per_step"]), args.steps)
    result["train_reward"] = [round(h["reward"], 4) for h in logs]
    result["train_correct"] = [round(h.get("env/correct", float("nan")), 4) for h in logs]
    result["diagnostics"] = {k: [h.get(k) for h in logs] for k in TRL_DIAGNOSTICS}
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


# ------------------------------------------------------------------------------------------------
# Time to accuracy (--time-to-accuracy)
# ------------------------------------------------------------------------------------------------
def parse_overrides(items: list[str]) -> dict[str, Any]:
    """`field=value` pairs (value parsed as JSON when it parses: numbers, true/false, null)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"override {item!r} is not field=value (e.g. clip_eps=0.28)")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


class AccuracyProbe:
    """Scores the model being trained with the shared evaluator after every `every` optimizer
    steps. The evaluation's wall and CPU time is excluded from the run's clock (so the curve's
    x-axis is training time only), the model's train/eval mode is restored, and so is the global
    torch RNG, from which TRL samples: a probed run trains exactly as an unprobed one."""

    def __init__(self, evaluator: Callable[[torch.nn.Module], float], every: int,
                 start_accuracy: float) -> None:
        self.evaluator, self.every = evaluator, every
        self.curve: list[dict[str, float]] = [
            {"step": 0, "train_seconds": 0.0, "accuracy": start_accuracy}]

    def _score(self, model: torch.nn.Module) -> tuple[float, float, float]:
        w, c = clock()
        was_training = model.training
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            model.eval()
            acc = self.evaluator(model)
        model.train(was_training)
        w2, c2 = clock()
        return acc, w2 - w, c2 - c

    def check(self, step: int, model: torch.nn.Module, sc: StepClock) -> None:
        if step == 0 or step % self.every:
            return
        t_train = sc.train_seconds()
        acc, wall, cpu = self._score(model)
        sc.exclude(wall, cpu)
        self.curve.append({"step": step, "train_seconds": t_train, "accuracy": acc,
                           "eval_seconds": wall})

    def final(self, step: int, model: torch.nn.Module, train_seconds: float) -> None:
        if self.curve[-1]["step"] == step:
            return
        acc, wall, _ = self._score(model)
        self.curve.append({"step": step, "train_seconds": train_seconds, "accuracy": acc,
                           "eval_seconds": wall})


def first_reaching(curve: list[dict[str, float]], target: float) -> dict[str, float] | None:
    """The first evaluation at or above `target` (None: never within the run)."""
    return next((pt for pt in curve[1:] if pt["accuracy"] >= target - 1e-9), None)


def curve_stats(curve: list[dict[str, float]], deltas: list[float]) -> dict[str, Any]:
    start = curve[0]["accuracy"]
    steps = np.array([p["step"] for p in curve], dtype=float)
    accs = np.array([p["accuracy"] for p in curve], dtype=float)
    slope = float(np.polyfit(steps, accs, 1)[0]) if len(curve) > 1 else float("nan")
    reach = {}
    for d in deltas:
        pt = first_reaching(curve, start + d)
        reach[f"+{d:.2f}"] = None if pt is None else {"step": pt["step"],
                                                     "seconds": pt["train_seconds"]}
    return {"start": start, "final": float(accs[-1]), "best": float(accs.max()),
            "gain_per_step_fit": slope,  # least-squares slope of accuracy over steps
            "gain_per_step_end": (float(accs[-1]) - start) / max(steps[-1], 1.0),
            "reach": reach}


def uptime() -> str:
    import subprocess

    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def summarise_tta(runs: list[dict], deltas: list[float], trainers: list[str]) -> dict[str, Any]:
    """Per trainer: how many runs reached each target, mean/median seconds and steps of those that
    did; per seed the TRL/ours ratio of seconds where both reached it."""
    out: dict[str, Any] = {}
    # the seed-averaged curves compare like with like: only seeds every trainer has finished
    paired = sorted(set.intersection(*[{r["seed"] for r in runs if r["trainer"] == t}
                                       for t in trainers])) if trainers else []
    out["paired_seeds"] = paired
    for name in trainers:
        rs = [r for r in runs if r["trainer"] == name]
        row: dict[str, Any] = {"runs": len(rs)}
        for d in deltas:
            k = f"+{d:.2f}"
            hit = [r["stats"]["reach"][k] for r in rs if r["stats"]["reach"][k] is not None]
            row[k] = {"reached": len(hit),
                      "mean_seconds": float(np.mean([h["seconds"] for h in hit])) if hit else None,
                      "median_seconds": float(np.median([h["seconds"] for h in hit])) if hit else None,
                      "mean_steps": float(np.mean([h["step"] for h in hit])) if hit else None}
        def mean(values: list[float]) -> float | None:
            return float(np.mean(values)) if values else None

        row["s_per_step_wall"] = mean([r["s_per_step_wall"] for r in rs])
        row["gain_per_step_fit"] = mean([r["stats"]["gain_per_step_fit"] for r in rs])
        row["gain_per_step_end"] = mean([r["stats"]["gain_per_step_end"] for r in rs])
        row["final_accuracy"] = mean([r["stats"]["final"] for r in rs])
        row["mean_curve"] = mean_curve([r for r in rs if r["seed"] in paired], deltas)
        # Fit-based estimate, robust to the eval-to-eval swings of greedy accuracy: steps to
        # +delta on the paired seeds' mean least-squares line, times the mean seconds per step.
        prs = [r for r in rs if r["seed"] in paired]
        slope = mean([r["stats"]["gain_per_step_fit"] for r in prs])
        sps = mean([r["train_seconds"] / max(r["curve"][-1]["step"], 1) for r in prs])
        row["fit_seconds_to"] = {f"+{d:.2f}": (d / slope * sps if slope and slope > 0 else None)
                                 for d in deltas}
        out[name] = row
    if {"ours", "trl"} <= set(trainers):
        ratios: dict[str, Any] = {}
        for d in deltas:
            k = f"+{d:.2f}"
            per_seed = {}
            for r in runs:
                if r["trainer"] != "ours":
                    continue
                t = next((x for x in runs if x["trainer"] == "trl" and x["seed"] == r["seed"]), None)
                a, b = r["stats"]["reach"][k], t["stats"]["reach"][k] if t else None
                if a is not None and b is not None:
                    per_seed[str(r["seed"])] = b["seconds"] / a["seconds"]
            vals = list(per_seed.values())
            t_mean, o_mean = out["trl"][k]["mean_seconds"], out["ours"][k]["mean_seconds"]
            ratios[k] = {"per_seed": per_seed,
                         "geomean": float(np.exp(np.mean(np.log(vals)))) if vals else None,
                         "ratio_of_means": t_mean / o_mean if t_mean and o_mean else None}
        out["trl_over_ours_seconds"] = ratios
        for d in deltas:  # the seed-averaged curves' crossings: less eval noise than any one run
            k = f"+{d:.2f}"
            a, b = out["ours"]["mean_curve"]["reach"][k], out["trl"]["mean_curve"]["reach"][k]
            ratios[k]["mean_curve"] = b["seconds"] / a["seconds"] if a and b else None
            fa, fb = out["ours"]["fit_seconds_to"][k], out["trl"]["fit_seconds_to"][k]
            ratios[k]["fit"] = fb / fa if fa and fb else None
    return out


def mean_curve(rs: list[dict], deltas: list[float]) -> dict[str, Any]:
    """Gain over start and training seconds averaged over runs at each evaluated step (the steps
    every run evaluated), and the first step where the mean gain reaches each delta."""
    if not rs:
        return {"points": [], "reach": {f"+{d:.2f}": None for d in deltas}}
    common = sorted(set.intersection(*[{p["step"] for p in r["curve"]} for r in rs]))
    points = []
    for step in common:
        pts = [next(p for p in r["curve"] if p["step"] == step) for r in rs]
        points.append({"step": step,
                       "train_seconds": float(np.mean([p["train_seconds"] for p in pts])),
                       "gain": float(np.mean([p["accuracy"] - r["curve"][0]["accuracy"]
                                              for p, r in zip(pts, rs)]))})
    reach = {}
    for d in deltas:
        pt = next((p for p in points[1:] if p["gain"] >= d - 1e-9), None)
        reach[f"+{d:.2f}"] = None if pt is None else {"step": pt["step"], "seconds": pt["train_seconds"]}
    return {"points": points, "reach": reach}


def plot_tta(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"ours": "tab:blue", "trl": "tab:orange"}
    labels = {"ours": "ours (llm-gym GRPO)", "trl": "TRL GRPOTrainer"}
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    seen: set[str] = set()
    seeds = sorted({r["seed"] for r in report["runs"]})
    styles = ["-", "--", ":", "-."]  # one line style per seed, one colour per trainer
    for r in report["runs"]:
        xs_t = [p["train_seconds"] for p in r["curve"]]
        xs_s = [p["step"] for p in r["curve"]]
        ys = [p["accuracy"] - r["curve"][0]["accuracy"] for p in r["curve"]]
        lab = None if r["trainer"] in seen else labels.get(r["trainer"], r["trainer"])
        seen.add(r["trainer"])
        for ax, xs in ((axes[0], xs_t), (axes[1], xs_s)):
            ax.plot(xs, ys, styles[seeds.index(r["seed"]) % len(styles)], marker="o", ms=2.5, lw=1.2,
                    alpha=0.8, color=colors.get(r["trainer"], "gray"),
                    label=lab if ax is axes[0] else None)
    for ax in axes:
        for d in report["deltas"]:
            ax.axhline(d, color="gray", lw=0.8, ls="--")
        ax.set_ylabel("held-out accuracy - start (greedy, same problems)")
        ax.grid(alpha=0.3)
    axes[0].set_xlabel("training wall-clock seconds (evaluations excluded)")
    axes[1].set_xlabel("optimizer step")
    axes[0].legend(loc="lower right")
    fig.suptitle(f"{ENV_ID}, tiny byte-level Llama + SFT warm start per seed; seeds {seeds}; "
                 f"{report['workload']['completions_per_step']} completions/step; line style = seed",
                 fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def print_tta(report: dict[str, Any]) -> None:
    s, deltas = report["summary"], report["deltas"]
    n_seeds = len({r["seed"] for r in report["runs"]})
    names = [n for n in ("ours", "trl") if n in s]
    head = {"ours": "ours", "trl": "TRL GRPOTrainer"}
    print()
    print(f"{n_seeds} seeds, {report['workload']['steps']} steps, eval every "
          f"{report['eval']['every']} steps on {report['eval']['problems']} held-out problems; "
          f"load {report['machine']['uptime_start']} -> {report['machine']['uptime_end']}")
    print()
    print("| | " + " | ".join(head[n] for n in names) + (" | TRL / ours |" if len(names) == 2 else " |"))
    print("|---|" + "---:|" * (len(names) + (len(names) == 2)))

    def cell(v, f="{:.1f}"):
        return "—" if v is None else f.format(v)

    for d in deltas:
        k = f"+{d:.2f}"
        vals = [f"{cell(s[n][k]['mean_seconds'])} s ({s[n][k]['reached']}/{s[n]['runs']} reached; "
                f"{cell(s[n][k]['mean_steps'], '{:.0f}')} steps)" for n in names]
        ratio = ""
        if len(names) == 2:
            r = s["trl_over_ours_seconds"][k]
            ratio = f" | **{cell(r['geomean'], '{:.2f}x')}** (per seed: " + ", ".join(
                f"{v:.2f}" for v in r["per_seed"].values()) + ")"
        print(f"| seconds to start {k} (mean of runs that reached it) | " + " | ".join(vals) + ratio + " |")
    for d in deltas:
        k = f"+{d:.2f}"
        vals = []
        for n in names:
            x = s[n]["mean_curve"]["reach"][k]
            vals.append("never" if x is None else f"{x['seconds']:.1f} s (step {x['step']})")
        ratio = ""
        if len(names) == 2:
            ratio = f" | {cell(s['trl_over_ours_seconds'][k].get('mean_curve'), '{:.2f}x')}"
        print(f"| seed-averaged curve (seeds {s['paired_seeds']}) reaches start {k} | "
              + " | ".join(vals) + ratio + " |")
    for d in deltas:
        k = f"+{d:.2f}"
        vals = [cell(s[n]["fit_seconds_to"][k]) + " s" for n in names]
        ratio = (f" | {cell(s['trl_over_ours_seconds'][k].get('fit'), '{:.2f}x')}"
                 if len(names) == 2 else "")
        print(f"| fitted line (mean slope x mean s/step, seeds {s['paired_seeds']}) reaches {k} | "
              + " | ".join(vals) + ratio + " |")
    rows = (("s/step, wall (steps 1+)", "s_per_step_wall", "{:.3f}"),
            ("accuracy gain per step (least-squares slope)", "gain_per_step_fit", "{:.4f}"),
            ("accuracy gain per step ((final - start) / steps)", "gain_per_step_end", "{:.4f}"),
            ("final held-out accuracy, mean", "final_accuracy", "{:.3f}"))
    for label, key, f in rows:
        vals = [cell(s[n][key], f) for n in names]
        extra = ""
        if len(names) == 2 and key == "s_per_step_wall":
            extra = f" | {s['trl'][key] / s['ours'][key]:.2f}x"
        elif len(names) == 2:
            extra = " | "
        print(f"| {label} | " + " | ".join(vals) + extra + " |")
    print()
    print("| seed | start | " + " | ".join(f"{head[n]}: s to " + ", ".join(f"+{d:.2f}" for d in deltas)
                                          + ", final" for n in names) + " |")
    print("|---|---:|" + "---:|" * len(names))
    for seed in sorted({r["seed"] for r in report["runs"]}):
        cells = []
        start = None
        for n in names:
            r = next((x for x in report["runs"] if x["trainer"] == n and x["seed"] == seed), None)
            if r is None:
                cells.append("—")
                continue
            start = r["stats"]["start"]
            reach = [r["stats"]["reach"][f"+{d:.2f}"] for d in deltas]
            cells.append(", ".join("never" if x is None else f"{x['seconds']:.1f} (step {x['step']})"
                                   for x in reach) + f", {r['stats']['final']:.3f}")
        print(f"| {seed} | {cell(start, '{:.3f}')} | " + " | ".join(cells) + " |")


def run_time_to_accuracy(args) -> None:
    """Per seed: one warm-started checkpoint shared by both trainers; the trainers alternate
    (ours first on even seed indices, TRL first on odd: ABBA), each probed every `--eval-every`
    steps by one evaluator; results are written after every run, so a cut-short series keeps
    what it finished."""
    from llm_gym.adapters._common import task_seeds as make_task_seeds

    deltas = list(args.deltas)
    trainers = [t for t in args.trainers.split(",") if t]
    if not trainers or set(trainers) - {"ours", "trl"}:
        raise SystemExit(f"--trainers {args.trainers!r}: use ours, trl or ours,trl")
    t_start = time.perf_counter()
    tmp = tempfile.TemporaryDirectory(prefix="tta_")
    workdir = Path(tmp.name)
    ckpt_root = args.checkpoint_dir or workdir / "checkpoints"
    evaluator = make_evaluator(args.eval_problems, args.max_tokens)
    report: dict[str, Any] = {
        "command": " ".join(["python", "benchmarks/trainer_vs_trl.py", *sys.argv[1:]]),
        "label": args.label,
        "machine": {"cpus": os.cpu_count(), "uptime_start": uptime(), "uptime_end": None,
                    "python": platform.python_version(), "torch": torch.__version__,
                    "torch_threads": args.threads, "platform": platform.platform()},
        "workload": {"env": ENV_ID, "steps": args.steps, "group_size": args.group_size,
                     "prompts_per_step": args.prompts_per_step,
                     "completions_per_step": args.group_size * args.prompts_per_step,
                     "max_completion_tokens": args.max_tokens, "lr": args.lr,
                     "keep_constant_groups": args.keep_constant_groups,
                     "ours_overrides": parse_overrides(args.ours_set or []),
                     "trl_overrides": parse_overrides(args.trl_set or [])},
        "eval": {"problems": args.eval_problems, "every": args.eval_every, "split": "test",
                 "decoding": "greedy", "seed": EVAL_SEED},
        "deltas": deltas, "trainers": trainers,
        "seeds_planned": list(range(args.seed, args.seed + args.seeds)),
        "checkpoints": {}, "runs": [], "summary": {}, "complete": False,
    }

    def write() -> None:
        report["machine"]["uptime_end"] = uptime()
        present = [t for t in trainers if any(r["trainer"] == t for r in report["runs"])]
        report["summary"] = summarise_tta(report["runs"], deltas, present)
        report["total_seconds"] = time.perf_counter() - t_start
        args.tta_out.parent.mkdir(parents=True, exist_ok=True)
        args.tta_out.write_text(json.dumps(report, indent=2, default=float))

    runners = {"ours": run_ours, "trl": run_trl}
    for i, seed in enumerate(range(args.seed, args.seed + args.seeds)):
        start = ckpt_root / f"seed{seed}"
        info: dict[str, Any] = {"reused": str(start)}
        if not (start / "config.json").is_file():
            start.mkdir(parents=True, exist_ok=True)
            info = make_start_checkpoint(start, seed, args.max_tokens, not args.no_progress)
        torch.set_num_threads(args.threads)
        acc_start = evaluator(load_model(start))
        report["checkpoints"][str(seed)] = {**info, "accuracy": acc_start}
        print(f"seed {seed}: start checkpoint {info}; held-out accuracy {acc_start:.3f}", flush=True)
        seeds = make_task_seeds(seed, args.steps * args.prompts_per_step)
        order = trainers if i % 2 == 0 else trainers[::-1]
        for name in order:
            load_before = uptime()
            probe = AccuracyProbe(evaluator, args.eval_every, acc_start)
            model, res = runners[name](args, start, seeds, workdir, seed, f"s{seed}", probe)
            torch.set_num_threads(args.threads)
            train_seconds = sum(st["wall"] for st in res["per_step"])
            probe.final(args.steps, model, train_seconds)
            res.pop("first_prompt_ids", None)
            run = {"trainer": name, "seed": seed, "uptime_before": load_before,
                   "uptime_after": uptime(), "train_seconds": train_seconds,
                   "s_per_step_wall": res["s_per_step_wall"], "s_per_step_cpu": res["s_per_step_cpu"],
                   "warmup_step_wall": res["warmup_step"]["wall"], "setup_seconds": res["setup_seconds"],
                   "curve": probe.curve, "stats": curve_stats(probe.curve, deltas),
                   "train_reward": res["train_reward"], "diagnostics": res.get("diagnostics", {}),
                   "per_step_wall": [round(st["wall"], 4) for st in res["per_step"]]}
            report["runs"].append(run)
            reach = ", ".join(
                f"{k}: " + ("never" if v is None else f"{v['seconds']:.1f} s (step {v['step']})")
                for k, v in run["stats"]["reach"].items())
            print(f"{name} seed {seed}: {res['s_per_step_wall']:.3f} s/step, final accuracy "
                  f"{run['stats']['final']:.3f}; {reach}; {load_before}", flush=True)
            del model
            write()
    report["complete"] = True
    write()
    print_tta(report)
    if args.plot:
        plot_tta(report, args.plot)
        print(f"plot: {args.plot}")
    print(f"wrote {args.tta_out} ({report['total_seconds']:.0f} s total)")
    tmp.cleanup()


def run_gradient_check(args) -> None:
    """One batch of real rollouts (ours: `HFSampler`, the env grades), then the gradient of ours'
    loss (`trainer.forward_backward`, the benchmark's config) and of TRL's
    (`GRPOTrainer._compute_loss`, loss_type="dapo", scale_rewards="group") on the *same* prompt
    and completion tokens and rewards: the two losses compute the same thing when the gradients'
    cosine is 1 and their norm ratio is 1 (ours keeping constant-reward groups) or TRL's token
    count over ours (ours dropping them, its default)."""
    import trainers.grpo.trainer as T
    from transformers import AutoTokenizer
    from trl import GRPOConfig as TRLConfig, GRPOTrainer
    from trl.trainer.utils import nanstd

    from llm_gym import GymEnvGroupBuilder
    from llm_gym.rl import assemble_training_data, compute_advantages
    from trainers._trl_compat import pad
    from llm_gym.adapters._common import task_seeds as make_task_seeds
    from llm_gym.adapters.trl import EnvReward, grpo_dataset
    from trainers.grpo import GRPOConfig

    tmp = tempfile.TemporaryDirectory(prefix="tvt_grad_")
    start = args.checkpoint or Path(tmp.name) / "start"
    if not (start / "config.json").is_file():
        start.mkdir(parents=True, exist_ok=True)
        make_start_checkpoint(start, args.seed, args.max_tokens, not args.no_progress)
    G, P = args.group_size, args.prompts_per_step

    def cfg_for(drop_constant: bool) -> GRPOConfig:
        return GRPOConfig(
            env=ENV_ID, env_kwargs={}, model=str(start), device="cpu", cpu_threads=args.threads,
            bf16=False, lora_r=0, sampler="hf", group_size=G, groups_per_batch=P,
            max_tokens=args.max_tokens, temperature=1.0, steps=1, lr=args.lr, loss="ppo",
            loss_reduction="token_mean", advantage_scale="group_std", clip_eps=0.2, kl_beta=0.0,
            micro_batch_size=G * P, remove_constant_reward_groups=drop_constant, sft_steps=0,
            eval_problems=1, eval_every=0, save_every=0, output_dir=tmp.name, seed=args.seed,
            progress=False)

    model = load_model(start)
    env_tok, stops = T.env_tokenizer_and_stops(cfg_for(True))
    pad_id = int(getattr(env_tok, "pad_token_id", None) or 0)
    accelerator = T.make_accelerator(cfg_for(True))
    # batch index 2 of the seed's task sequence (has constant-reward groups at seed 0)
    seeds = make_task_seeds(args.seed, 3 * P)[2 * P:]
    sampler = T.make_sampler(cfg_for(True), model, torch.device("cpu"), stops, pad_id, 1.0,
                             seed=args.seed + 7, max_batch_size=G * P)
    groups = T.rollout_groups([GymEnvGroupBuilder(ENV_ID, G, s, split="train") for s in seeds],
                              sampler)

    def flat_grad() -> torch.Tensor:
        return torch.cat([p.grad.flatten() if p.grad is not None else torch.zeros(p.numel())
                          for p in model.parameters()])

    def ours(drop_constant: bool) -> tuple[torch.Tensor, dict]:
        gs = [g for g in groups if len(set(g.get_total_rewards())) > 1] if drop_constant else groups
        data, _ = assemble_training_data(gs, compute_advantages(gs, "ppo", "group_std"))
        model.zero_grad(set_to_none=True)
        out = T.forward_backward(model, data, cfg_for(drop_constant), accelerator, pad_id)
        return flat_grad(), out

    g_keep, _ = ours(False)
    g_drop, out_drop = ours(True)

    tok = AutoTokenizer.from_pretrained(str(start), local_files_only=True)
    targs = TRLConfig(
        output_dir=str(Path(tmp.name) / "trl"), use_cpu=True, report_to="none", save_strategy="no",
        bf16=False, per_device_train_batch_size=G * P, num_generations=G,
        max_completion_length=args.max_tokens, max_steps=1, learning_rate=args.lr,
        lr_scheduler_type="constant", beta=0.0, epsilon=0.2, loss_type="dapo",
        scale_rewards="group", temperature=1.0, top_k=0, shuffle_dataset=False)
    trainer = GRPOTrainer(model=model, reward_funcs=EnvReward(tokenizer=tok), args=targs,
                          train_dataset=grpo_dataset(ENV_ID, P, split="train", seed=args.seed),
                          processing_class=tok)
    prompts = [torch.tensor(t.transitions[0].ob.to_ints()) for g in groups for t in g.trajectories_G]
    comps = [torch.tensor(list(t.transitions[0].ac.tokens)) for g in groups for t in g.trajectories_G]
    rewards = torch.tensor([r for g in groups for r in g.get_total_rewards()]).view(-1, G)
    adv = ((rewards - rewards.mean(1, keepdim=True)) / (nanstd(rewards, dim=1)[:, None] + 1e-4))
    pid = tok.pad_token_id or 0
    completion_mask = pad([torch.ones_like(c) for c in comps], 0)
    inputs = {"prompt_ids": pad(prompts, pid, padding_side="left"),
              "prompt_mask": pad([torch.ones_like(p) for p in prompts], 0, padding_side="left"),
              "completion_ids": pad(comps, pid), "completion_mask": completion_mask,
              "advantages": adv.flatten(), "num_items_in_batch": completion_mask.sum().float()}
    model.zero_grad(set_to_none=True)
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer.train(); one window here
    trainer._compute_loss(trainer.model, inputs).backward()
    g_trl = flat_grad()

    def compare(a: torch.Tensor, b: torch.Tensor) -> dict[str, float]:
        return {"cosine": float(torch.nn.functional.cosine_similarity(a.double(), b.double(), dim=0)),
                "norm_ratio": float(a.norm() / b.norm())}

    mixed = sum(len(set(g.get_total_rewards())) > 1 for g in groups)
    result = {
        "groups": len(groups), "mixed_groups": mixed,
        "tokens_all": int(completion_mask.sum()), "tokens_ours_default": out_drop["trained_tokens"],
        "ours_keep_constant_vs_trl": compare(g_keep, g_trl),
        "ours_default_vs_trl": compare(g_drop, g_trl),
        "norms": {"ours_keep": float(g_keep.norm()), "ours_default": float(g_drop.norm()),
                  "trl": float(g_trl.norm())},
        "ours_sampler_kl": out_drop["sampler_kl"], "ours_clip_frac": out_drop["clip_frac"],
    }
    print(json.dumps(result, indent=2))
    tmp.cleanup()


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
    tta = parser.add_argument_group(
        "time to accuracy", "--time-to-accuracy: wall-clock seconds until held-out accuracy first "
        "reaches start + each --deltas, per seed (one warm-started checkpoint per seed, shared by "
        "both trainers), trainers alternating ABBA")
    tta.add_argument("--time-to-accuracy", action="store_true", help="run this mode instead")
    tta.add_argument("--gradient-check", action="store_true",
                     help="one batch of rollouts: ours' and TRL's loss gradients on the same tokens "
                          "(cosine, norm ratio); trains nothing")
    tta.add_argument("--replot", type=Path, default=None, metavar="JSON",
                     help="recompute the summary of a time-to-accuracy JSON from its runs, print the "
                          "tables (and --plot); trains nothing")
    tta.add_argument("--seeds", type=int, default=4, help="seeds --seed .. --seed + N - 1")
    tta.add_argument("--eval-every", type=int, default=3, help="optimizer steps between evaluations")
    tta.add_argument("--deltas", type=float, nargs="+", default=[0.10, 0.20],
                     help="accuracy gains over the start to time")
    tta.add_argument("--trainers", default="ours,trl", help="ours,trl | ours | trl (ablations)")
    tta.add_argument("--ours-set", action="append", metavar="FIELD=VALUE",
                     help="override a trainers.grpo.GRPOConfig field of ours (repeatable)")
    tta.add_argument("--trl-set", action="append", metavar="FIELD=VALUE",
                     help="override a trl.GRPOConfig field of TRL's (repeatable)")
    tta.add_argument("--checkpoint-dir", type=Path, default=None,
                     help="keep/reuse the per-seed warm-started checkpoints here (DIR/seed<N>)")
    tta.add_argument("--label", default="baseline", help="name of this configuration in the JSON")
    tta.add_argument("--tta-out", type=Path,
                     default=ROOT / "benchmarks" / "results" / "time_to_accuracy.json")
    tta.add_argument("--plot", type=Path, default=None,
                     help="write the accuracy-vs-wall-clock figure here "
                          "(e.g. docs/curves/time_to_accuracy.png)")
    args = parser.parse_args()

    warnings.filterwarnings("ignore")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    torch.set_num_threads(args.threads)
    if args.replot is not None:
        report = json.loads(args.replot.read_text())
        # the summary is recomputed from the runs (a file from an older version of this script,
        # or one cut short, gets the current summary) and written back
        present = [t for t in ("ours", "trl") if any(r["trainer"] == t for r in report["runs"])]
        report["summary"] = summarise_tta(report["runs"], report["deltas"], present)
        args.replot.write_text(json.dumps(report, indent=2, default=float))
        print_tta(report)
        if args.plot:
            plot_tta(report, args.plot)
        return
    if args.gradient_check:
        run_gradient_check(args)
        return
    if args.time_to_accuracy:
        run_time_to_accuracy(args)
        return
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
    from llm_gym.adapters._common import task_seeds as make_task_seeds

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
