"""Env workers on Ray (`trainers.rollout_workers`) against in-process rollouts (issue 24, item 3).

Two measurements, each the median over `--repeats` rollouts of one batch of groups after one
warm-up batch (the pool is started once per setting; its start-up time is reported apart):

1. **Overhead per episode** on `llm/Math-v0` (the trainer's `RunEnv.dataset`, `--groups` groups of
   `--group-size`) with a scripted, deterministic policy that costs nothing: wall milliseconds per
   episode in-process, and with 1 and 2 workers. What the workers add is the actor round trips
   (ship the builder, make_envs, initial_observation, step, cleanup) and pickling.
2. **Throughput on a slow env**: each episode is one step that blocks for `--step-ms` milliseconds
   (`time.sleep`, as a synchronous grader or a subprocess wait does). In-process, a blocking step
   holds the one event loop, so episodes run one after another; each worker has its own loop, so
   N workers run N steps at a time. Episodes per second in-process and with 1 and 2 workers.

    .venv/bin/python benchmarks/ray_workers.py            # both, printed as a table
    .venv/bin/python benchmarks/ray_workers.py --tokenizer DIR   # Math-v0 on an HF tokenizer

With an HF tokenizer the builder is large (a Qwen3 vocabulary: ~8 MB pickled); the pool sends
each `EnvSource` to a worker once, so this measures what that leaves per episode.

The machine's cores are shared with the sampler and the trainer in real use; here nothing samples,
so the numbers isolate the env side.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
import zlib
from typing import Any, Sequence

from llm_gym.completers import TokenCompleter, TokensWithLogprobs
from llm_gym.model_input import ModelInput
from llm_gym.rl.rollouts import do_group_rollout_and_filter_constant_reward
from llm_gym.rl.types import Env, EnvGroupBuilder, StepResult


class HashPolicy(TokenCompleter):
    """A number drawn from the observation's hash, then the first single-token stop."""

    async def __call__(self, model_input: ModelInput, stop: Any, *, max_tokens: int | None = None
                       ) -> TokensWithLogprobs:
        rng = random.Random(zlib.crc32(repr(model_input.to_ints()).encode()))
        tokens = list(str(rng.randint(0, 20)).encode()) + [s for s in stop if isinstance(s, int)][:1]
        return TokensWithLogprobs(tokens, [0.0] * len(tokens))


class SlowStepEnv(Env):
    """One step that blocks its event loop for `step_s` seconds, reward 1."""

    def __init__(self, step_s: float) -> None:
        self.step_s = step_s

    async def initial_observation(self):
        return ModelInput.from_ints([49, 50]), [10]

    async def step(self, action, *, extra=None) -> StepResult:
        time.sleep(self.step_s)
        return StepResult(1.0, True, ModelInput.empty(), [10])


class SlowStepBuilder(EnvGroupBuilder):
    def __init__(self, group_size: int, step_s: float) -> None:
        self.group_size = group_size
        self.step_s = step_s

    async def make_envs(self) -> Sequence[Env]:
        return [SlowStepEnv(self.step_s) for _ in range(self.group_size)]


def roll(builders: Sequence[EnvGroupBuilder]) -> int:
    """Roll the groups out concurrently, as the trainer does; returns the episodes rolled out."""
    async def main():
        return await asyncio.gather(*[
            do_group_rollout_and_filter_constant_reward(HashPolicy(), b, None, None, False)
            for b in builders])

    groups = asyncio.run(main())
    return sum(len(g.trajectories_G) for g in groups if g is not None)


def timed(make_builders, wrap, repeats: int) -> tuple[float, int]:
    """Median seconds per batch over `repeats` (after a warm-up batch), and episodes per batch."""
    roll(wrap(make_builders(0)))
    times, episodes = [], 0
    for i in range(repeats):
        builders = wrap(make_builders(i + 1))
        t0 = time.perf_counter()
        episodes = roll(builders)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), episodes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--step-ms", type=float, default=50.0)
    parser.add_argument("--slow-groups", type=int, default=4)
    parser.add_argument("--slow-group-size", type=int, default=4)
    parser.add_argument("--tokenizer", default=None,
                        help="Math-v0's tokenizer (a name or directory; default: the byte tokenizer)")
    args = parser.parse_args()

    import ray

    from trainers.grpo.fit import RunEnv
    from trainers.rollout_workers import RayRolloutWorkers

    env_kwargs = {} if args.tokenizer is None else {"tokenizer": args.tokenizer}
    dataset = RunEnv("llm/Math-v0", env_kwargs).dataset("train", args.groups, args.group_size, 0)

    def math_batch(i: int):
        return dataset.get_batch(i)

    def slow_batch(i: int):
        return [SlowStepBuilder(args.slow_group_size, args.step_ms / 1000) for _ in range(args.slow_groups)]

    t0 = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    print(f"ray.init: {time.perf_counter() - t0:.1f} s")
    rows = []
    for workers in (0, 1, 2):
        if workers == 0:
            pool, wrap, start_s = None, list, 0.0
        else:
            t0 = time.perf_counter()
            pool = RayRolloutWorkers(workers)
            start_s = time.perf_counter() - t0
            wrap = pool.wrap
        try:
            math_s, math_eps = timed(math_batch, wrap, args.repeats)
            slow_s, slow_eps = timed(slow_batch, wrap, args.repeats)
        finally:
            if pool is not None:
                pool.close()
        rows.append((workers, start_s, 1000 * math_s / math_eps, slow_eps / slow_s))
    ray.shutdown()

    print(f"Math-v0 (tokenizer {args.tokenizer or 'byte'}): {args.groups} groups x {args.group_size}, "
          f"scripted policy; slow env: "
          f"{args.slow_groups} groups x {args.slow_group_size}, one {args.step_ms:g} ms blocking step; "
          f"median of {args.repeats} batches")
    print(f"{'workers':>8} {'pool start s':>13} {'Math-v0 ms/episode':>19} {'slow env episodes/s':>20}")
    for workers, start_s, ms_per_ep, eps_per_s in rows:
        label = "in-proc" if workers == 0 else str(workers)
        print(f"{label:>8} {start_s:>13.1f} {ms_per_ep:>19.2f} {eps_per_s:>20.1f}")


if __name__ == "__main__":
    main()
