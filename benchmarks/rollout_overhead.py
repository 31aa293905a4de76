"""Rollout overhead of the grouping wrapper: what the trainer pays per step besides the model.

Workload: one trainer step's worth of `llm/Math-v0` groups, `--groups` x `--group-size`
(16 x 16 = 256 episodes), from `GymRLDataset(...).get_batch(i)`, rolled out with
`do_group_rollout` under `asyncio.gather` exactly as `trainers.grpo` does, against an *instant*
scripted policy (it answers "42<|im_end|>" without looking at the prompt), so everything measured
is env construction/reset/grading and async plumbing. Per step it reports:

- `make_envs`: `await builder.make_envs()` + `await builder.cleanup()` for every builder of a batch
  (no rollout), ms per batch;
- `rollout`: the whole `do_group_rollout` of a batch (make_envs, 256 reset + step, group rewards,
  cleanup), ms per batch.

Each batch index is used once (fresh seeds, as in training); the best and the median of
`--repeats` batches are printed. `--no-pool` turns off `GymEnvGroupBuilder`'s per-process env
pool (`GymEnvGroupBuilder.max_pooled_envs = 0`), so every episode is a fresh `gym.make`, which is
what the code did before the pool. Running both in one invocation (the default, `--mode both`)
alternates the two settings batch by batch, so their ratio is measured under the same load.

Run: `.venv/bin/python benchmarks/rollout_overhead.py [--mode both|pool|no-pool]`. The script also
runs against older checkouts (`PYTHONPATH=<export> python benchmarks/rollout_overhead.py
--mode no-pool`), where the pool switch does not exist.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import gymnasium as gym

import llm_gym
from llm_gym import GymRLDataset
from llm_gym.completers import TokensWithLogprobs
from llm_gym.rl.rollouts import do_group_rollout
from llm_gym.wrappers.grouping import GymEnvGroupBuilder


class InstantPolicy:
    """Answers every prompt with the same tokens, at once."""

    def __init__(self, tokens: list[int]) -> None:
        self.tokens = tokens
        self.calls = 0

    async def __call__(self, ob, stop, max_tokens=None):
        self.calls += 1
        return TokensWithLogprobs(list(self.tokens), None)


def _set_pool(enabled: bool, default: int | None) -> None:
    if hasattr(GymEnvGroupBuilder, "max_pooled_envs"):
        GymEnvGroupBuilder.max_pooled_envs = default if enabled else 0
    elif enabled:
        raise SystemExit("this checkout has no env pool (GymEnvGroupBuilder.max_pooled_envs)")


async def _make_envs_only(builders) -> None:
    for b in builders:
        await b.make_envs()
    for b in builders:
        await b.cleanup()


async def _rollout(builders, policy):
    return await asyncio.gather(*[do_group_rollout(b, policy) for b in builders])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=16)
    parser.add_argument("--group-size", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=30, help="batches per setting")
    parser.add_argument("--mode", choices=["both", "pool", "no-pool"], default="both")
    parser.add_argument("--no-pool", action="store_true", help="same as --mode no-pool")
    args = parser.parse_args()
    mode = "no-pool" if args.no_pool else args.mode
    settings = {"both": [True, False], "pool": [True], "no-pool": [False]}[mode]
    default_pool = getattr(GymEnvGroupBuilder, "max_pooled_envs", None)

    env = gym.make("llm/Math-v0")
    tok = env.unwrapped.tokenizer
    policy = InstantPolicy(tok.encode("42") + [tok.convert_tokens_to_ids("<|im_end|>")])
    env.close()
    dataset = GymRLDataset("llm/Math-v0", batch_size=args.groups, group_size=args.group_size,
                           seed=0)
    n_episodes = args.groups * args.group_size

    # Warm-up: imports, task tables, prompt caches of the first tasks, the pool's first fill.
    for enabled in settings:
        _set_pool(enabled, default_pool)
        asyncio.run(_rollout(dataset.get_batch(0), policy))

    times: dict[tuple[bool, str], list[float]] = {}
    index = 1
    for _ in range(args.repeats):
        for enabled in settings:
            _set_pool(enabled, default_pool)
            builders = dataset.get_batch(index)
            index += 1
            t0 = time.perf_counter()
            asyncio.run(_make_envs_only(builders))
            times.setdefault((enabled, "make_envs"), []).append(time.perf_counter() - t0)
            builders = dataset.get_batch(index)
            index += 1
            t0 = time.perf_counter()
            groups = asyncio.run(_rollout(builders, policy))
            times.setdefault((enabled, "rollout"), []).append(time.perf_counter() - t0)
            assert len(groups) == args.groups
            assert all(len(g.trajectories_G) == args.group_size for g in groups)

    print(f"llm-gym at {llm_gym.__file__}; {args.groups} groups x {args.group_size} = "
          f"{n_episodes} episodes per batch, {args.repeats} batches per setting")
    print("| setting | make_envs + cleanup, ms/batch (best / median) | full rollout, ms/batch "
          "(best / median) | rollout us/episode (median) |")
    print("|---|---:|---:|---:|")
    for enabled in settings:
        mk, ro = times[(enabled, "make_envs")], times[(enabled, "rollout")]
        name = "env pool (default)" if enabled else "no pool (gym.make per episode)"
        print(f"| {name} | {min(mk) * 1e3:.1f} / {statistics.median(mk) * 1e3:.1f} | "
              f"{min(ro) * 1e3:.1f} / {statistics.median(ro) * 1e3:.1f} | "
              f"{statistics.median(ro) / n_episodes * 1e6:.0f} |")
    if len(settings) == 2:
        for what in ("make_envs", "rollout"):
            ratio = statistics.median(times[(False, what)]) / statistics.median(times[(True, what)])
            print(f"{what}: no-pool / pool median = {ratio:.2f}x")


if __name__ == "__main__":
    main()
