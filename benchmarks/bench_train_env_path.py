"""The env side of the trainer's rollouts: the Gymnasium round trip against the source path.

Workload: one trainer step's worth of groups (`--groups` x `--group-size`, the trainer's default
16 x 16 = 256 episodes) of an env, rolled out with `do_group_rollout` under `asyncio.gather` as
`trainers.grpo` does, against an *instant* scripted policy, so everything measured is the env side:
`make_envs`, `initial_observation`, every `step`, group rewards and `cleanup`. The policy answers
"42" on `llm/Math-v0` and guesses "0" every turn on `llm/GuessNumber-v0` (below every range, an
invalid turn, so its episodes run to the turn limit: the multi-turn case, where the per-turn cost
adds up). Two paths, alternated
batch by batch in one process so that both see the same load:

- `gym`: `GymRLDataset(env_id)` -- `gym.make` envs (kept in `GymEnvGroupBuilder`'s env pool) driven
  through `GymEnvAdapter` (int64 arrays, `info` dicts and Gymnasium's wrappers every turn): the
  trainer's path before issue 22;
- `source`: `SourceRLDataset.from_id(env_id)` -- `source.make_env(rng)` episodes awaited directly:
  the trainer's path now.

Both give the same trajectories (checked on the first batch). Printed per env: ms per batch
(median of `--repeats`), us per env turn (reset or step), and the ratio gym / source.

Run: `.venv/bin/python benchmarks/bench_train_env_path.py [--repeats 10] [--env ID ...]`.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from llm_gym.completers import TokensWithLogprobs
from llm_gym.rl.rollouts import do_group_rollout
from llm_gym.wrappers.grouping import GymRLDataset
from llm_gym.wrappers.source import SourceRLDataset

ANSWERS = {"llm/Math-v0": "42", "llm/GuessNumber-v0": "0"}


class InstantPolicy:
    """Answers every prompt with the same tokens, at once."""

    def __init__(self, tokens: list[int]) -> None:
        self.tokens = tokens

    async def __call__(self, ob, stop, max_tokens=None):
        return TokensWithLogprobs(list(self.tokens), None)


async def _rollout(builders, policy):
    return await asyncio.gather(*[do_group_rollout(b, policy) for b in builders])


def _turns(groups) -> int:
    """Env calls of a batch: one reset per episode and one step per transition."""
    return sum(1 + len(t.transitions) for g in groups for t in g.trajectories_G)


def _key(groups) -> list:
    return [(tr.ob.to_ints(), tr.ac.tokens, tr.reward, tr.episode_done, sorted(tr.metrics.items()))
            for g in groups for t in g.trajectories_G for tr in t.transitions]


def bench(env_id: str, groups: int, group_size: int, repeats: int) -> dict[str, float]:
    new = SourceRLDataset.from_id(env_id, batch_size=groups, group_size=group_size, seed=0)
    old = GymRLDataset(env_id, batch_size=groups, group_size=group_size, seed=0)
    tok = new.tokenizer
    policy = InstantPolicy(list(tok.encode(ANSWERS.get(env_id, "42"))) + new.env.stop_token_ids()[:1])
    paths = {"gym": old, "source": new}
    # Warm-up (imports, task tables, prompt caches, the env pool's first fill) and the same-episodes check.
    first = {name: asyncio.run(_rollout(ds.get_batch(0), policy)) for name, ds in paths.items()}
    if _key(first["gym"]) != _key(first["source"]):
        raise SystemExit(f"{env_id}: the two paths gave different trajectories")
    turns = _turns(first["source"])
    times: dict[str, list[float]] = {name: [] for name in paths}
    for i in range(1, repeats + 1):
        for name, ds in paths.items():  # alternated: both see the same load
            builders = ds.get_batch(i)
            t0 = time.perf_counter()
            asyncio.run(_rollout(builders, policy))
            times[name].append(time.perf_counter() - t0)
    med = {name: statistics.median(ts) for name, ts in times.items()}
    return {"episodes": groups * group_size, "turns": turns, **med}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", nargs="+", default=list(ANSWERS))
    parser.add_argument("--groups", type=int, default=16)
    parser.add_argument("--group-size", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=10, help="batches per path")
    args = parser.parse_args()
    print(f"{args.groups} groups x {args.group_size} episodes per batch, median of {args.repeats} "
          "batches per path, instant scripted policy")
    print("| env | env turns/batch | gym path ms/batch | source path ms/batch | gym us/turn | "
          "source us/turn | gym / source |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for env_id in args.env:
        r = bench(env_id, args.groups, args.group_size, args.repeats)
        n = r["turns"]
        print(f"| {env_id} | {n} | {r['gym'] * 1e3:.1f} | {r['source'] * 1e3:.1f} | "
              f"{r['gym'] / n * 1e6:.1f} | {r['source'] / n * 1e6:.1f} | "
              f"{r['gym'] / r['source']:.2f}x |")


if __name__ == "__main__":
    main()
