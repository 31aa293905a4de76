"""Synchronous GRPO vs bounded-staleness GRPO (`max_staleness` 1 and 2) where env work takes time.

The workload: the tiny byte-level Llama given a short supervised warm-up on 1-digit addition
(`tests/_grpo_helpers.warm_start_model`, so groups have reward variance and steps train), then GRPO
on `llm/Math-v0` (`digits=1`) whose every env step first spends `--grader-ms` milliseconds in a
grader: `--grader awaited` (default) waits for it in an executor thread, as the catalog's sandboxes
and slow graders are awaited (other rollouts, and other batches in flight, run meanwhile);
`--grader blocking` calls it in the rollout's event loop, as a synchronous grader or tool does (the
loop is held, the GIL is not). With `max_staleness=0` that time adds to every step; with k > 0 up
to k next batches' rollouts (and their env time) run in the background thread while the step
trains (`trainers/grpo/async_rollouts.py`); a blocking grader overlaps only the training step.
Each setting trains the same number of steps from the same weights and seed, with no evaluation
during RL and no checkpoints; steps/s is steps / the sum of their `step_seconds` (step 1, which
also waits for the first batch with nothing to overlap, is reported apart as `first_step_s`).
Also printed: the mean time a step waited for its batch (`async/wait_seconds`), the mean sampling
time of a batch (`sample_seconds`, measured where the batch was sampled), the mean time of the
step's own work (`step_seconds` less the wait; in the synchronous loop, less the sampling) and the
mean training reward (off-policy steps train on older samples, so the curves differ). Only the
env's blocking time can overlap training for free: the sampler and the trainer of a tiny model are
mostly Python dispatch, which two threads share under the GIL.

    .venv/bin/python benchmarks/async_overlap.py [--steps 12 --grader awaited --grader-ms 100
        --group-size 8 --groups 8 --staleness 0 1 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


class _SlowGraderEnv:
    """An env whose every step first spends `seconds` in a grader: awaited in an executor thread,
    or (`blocking`) called in the event loop."""

    def __init__(self, env, seconds: float, blocking: bool) -> None:
        self.env, self.seconds, self.blocking = env, seconds, blocking

    async def initial_observation(self):
        return await self.env.initial_observation()

    async def step(self, action, *, extra=None):
        if self.blocking:
            time.sleep(self.seconds)
        else:
            await asyncio.get_running_loop().run_in_executor(_GRADERS, time.sleep, self.seconds)
        return await self.env.step(action, extra=extra)


# One pool for every rollout (as a sandbox pool would be): 64 graders at a time.
_GRADERS = ThreadPoolExecutor(max_workers=64, thread_name_prefix="grader")


class _SlowGraderBuilder:
    def __init__(self, builder, seconds: float, blocking: bool) -> None:
        self.builder, self.seconds, self.blocking = builder, seconds, blocking

    async def make_envs(self):
        return [_SlowGraderEnv(e, self.seconds, self.blocking) for e in await self.builder.make_envs()]

    async def compute_group_rewards(self, trajectory_group, env_group):
        return await self.builder.compute_group_rewards(trajectory_group, env_group)

    async def cleanup(self):
        await self.builder.cleanup()

    def logging_tags(self):
        return []


class SlowGraderDataset:
    """`dataset`'s groups, each env step taking `seconds` more."""

    def __init__(self, dataset, seconds: float, blocking: bool) -> None:
        self.dataset, self.seconds, self.blocking = dataset, seconds, blocking

    def __len__(self) -> int:
        return len(self.dataset)

    def get_batch(self, index: int):
        return [_SlowGraderBuilder(b, self.seconds, self.blocking) for b in self.dataset.get_batch(index)]


def run(model: str, out: Path, staleness: int, args: argparse.Namespace) -> dict:
    from llm_gym import GymRLDataset
    from tests._grpo_helpers import train_records
    from trainers.grpo.config import GRPOConfig
    from trainers.grpo.trainer import train

    cfg = GRPOConfig(model=model, env="llm/Math-v0", env_kwargs={"digits": 1}, sft_steps=0,
                     group_size=args.group_size, groups_per_batch=args.groups, max_tokens=4,
                     steps=args.steps, eval_every=0, eval_problems=8, save_every=0,
                     output_dir=str(out), run_name=f"k{staleness}", overwrite=True, progress=False,
                     seed=args.seed, max_staleness=staleness)
    dataset = SlowGraderDataset(GymRLDataset("llm/Math-v0", batch_size=args.groups,
                                             group_size=args.group_size, seed=args.seed, digits=1),
                                args.grader_ms / 1000, args.grader == "blocking")
    train(cfg, dataset=dataset)
    records = [train_records(cfg.run_dir)[s] for s in range(1, args.steps + 1)]
    later = records[1:]
    step_s = sum(r["step_seconds"] for r in later)
    return {
        "max_staleness": staleness,
        "steps_per_s": round(len(later) / step_s, 3),
        "first_step_s": round(records[0]["step_seconds"], 3),
        "mean_wait_s": round(sum(r.get("async/wait_seconds", 0.0) for r in later) / len(later), 3),
        "mean_sample_s": round(sum(r["sample_seconds"] for r in later) / len(later), 3),
        # the step's own work: all of it but the wait for its batch (sync: the sampling itself)
        "mean_train_s": round(sum(r["step_seconds"] - r.get("async/wait_seconds", r["sample_seconds"])
                                  for r in later) / len(later), 3),
        "mean_reward": round(sum(r["reward"] for r in records) / len(records), 4),
        "max_staleness_seen": max(r.get("async/staleness_max", 0.0) for r in records),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--grader-ms", type=float, default=100.0, help="grader time per env step")
    parser.add_argument("--grader", choices=["awaited", "blocking"], default="awaited")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--groups", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--staleness", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args()

    from tests._grpo_helpers import warm_start_model

    with tempfile.TemporaryDirectory() as tmp:
        model = warm_start_model(Path(tmp) / "warm")
        rows = [run(model, Path(tmp) / "runs", k, args) for k in args.staleness]
    print(f"llm/Math-v0 digits=1, tiny model, {args.groups}x{args.group_size} episodes/step, "
          f"{args.grader} grader of {args.grader_ms} ms per env step, {args.steps} steps")
    print("| max_staleness | steps/s | first step s | mean wait s | mean sample s | mean train s "
          "| mean reward |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['max_staleness']} | {r['steps_per_s']} | {r['first_step_s']} | "
              f"{r['mean_wait_s']} | {r['mean_sample_s']} | {r['mean_train_s']} | "
              f"{r['mean_reward']} |")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
