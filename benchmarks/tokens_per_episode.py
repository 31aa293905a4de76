"""Tokens per episode under the `tiny` preset's byte tokenizer and the `tiny-bpe` preset's catalog BPE.

Each env's first gold scripted case (`trainers.grpo.fit.first_gold_case`: the episodes the SFT warm
start learns from) is played on the same tasks (`--seeds` seeds of `--split`, default the test
split, which the BPE's corpus never saw) once per tokenizer: the byte one is the env's default
(`ByteTokenizer` + ChatML renderer, what `llm-gym train --model tiny` trains on), the BPE one is
`gym.make(id, tokenizer=trainers.models.preset_env_tokenizer("tiny-bpe"))`'s (its chat template,
token for token the ChatML renderer's). Columns are means per episode: turns, all tokens (the last
observation plus the last action: the whole conversation the model reads), sampled tokens (the
actions, end-of-turn tokens included), sampled tokens per turn and per tool call (turns whose reply
holds a `<tool_call>` block; "-" when the case makes none). The episodes' text is asserted to be the
same under both tokenizers, so the rows differ only in how it is cut.

    .venv/bin/python benchmarks/tokens_per_episode.py [--seeds 50] [--split test]
        [--envs llm/GuessNumber-v0 llm/Calculator-v0]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DEFAULT_ENVS = ("llm/GuessNumber-v0", "llm/Calculator-v0")


@dataclass
class EpisodeCount:
    text: str  # the whole conversation, decoded (checked equal across tokenizers)
    turns: int
    total: int
    sampled: int
    tool_call_tokens: list[int]  # sampled tokens of each turn that makes a tool call


def count_episodes(env_id: str, tokenizer: Any, seeds: range, split: str) -> list[EpisodeCount]:
    """Play `env_id`'s first gold case on `seeds` with `tokenizer` (None: the byte default)."""
    import numpy as np

    import llm_gym  # noqa: F401  (registers the ids)
    from llm_gym.renderers.tools import TOOL_CALL_OPEN
    from llm_gym.scripted import aplay_scripted_episode
    from llm_gym.wrappers.source import env_source_for_id
    from trainers.grpo.fit import first_gold_case

    env = env_source_for_id(env_id, split, tokenizer=tokenizer)
    source = env.source
    case = first_gold_case(source)
    if case is None:
        raise SystemExit(f"{env_id} declares no gold scripted case to count")
    counts = []
    for seed in seeds:
        trajectory, replies = asyncio.run(
            aplay_scripted_episode(source, case, source.make_env(np.random.default_rng(seed))))
        last = trajectory.transitions[-1]
        ids = last.ob.to_ints() + list(last.ac.tokens)
        sampled = [len(t.ac.tokens) for t in trajectory.transitions]
        counts.append(EpisodeCount(
            text=env.tokenizer.decode(ids), turns=len(sampled), total=len(ids), sampled=sum(sampled),
            tool_call_tokens=[n for n, reply in zip(sampled, replies) if TOOL_CALL_OPEN in reply]))
    return counts


def row(env_id: str, name: str, counts: list[EpisodeCount]) -> dict[str, Any]:
    calls = [n for c in counts for n in c.tool_call_tokens]
    turns = sum(c.turns for c in counts)
    return {
        "env": env_id, "tokenizer": name, "episodes": len(counts),
        "turns": statistics.mean(c.turns for c in counts),
        "total": statistics.mean(c.total for c in counts),
        "sampled": statistics.mean(c.sampled for c in counts),
        "per_turn": sum(c.sampled for c in counts) / turns,
        "per_tool_call": statistics.mean(calls) if calls else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--split", default="test", choices=("train", "test"))
    parser.add_argument("--envs", nargs="+", default=list(DEFAULT_ENVS))
    args = parser.parse_args()

    from trainers.models import preset_env_tokenizer

    bpe = preset_env_tokenizer("tiny-bpe")
    seeds = range(args.seeds)
    rows = []
    for env_id in args.envs:
        byte_counts = count_episodes(env_id, None, seeds, args.split)
        bpe_counts = count_episodes(env_id, bpe, seeds, args.split)
        if [c.text for c in byte_counts] != [c.text for c in bpe_counts]:
            raise SystemExit(f"{env_id}: the episodes' text differs between the tokenizers")
        rows += [row(env_id, "byte (tiny)", byte_counts), row(env_id, "BPE (tiny-bpe)", bpe_counts)]

    def fmt(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f}"

    print(f"Gold episodes, {args.split} split, seeds 0..{args.seeds - 1}; means per episode.\n")
    print("| env | tokenizer | turns | all tokens | sampled tokens | sampled / turn | tokens / tool call |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['env']} | {r['tokenizer']} | {fmt(r['turns'])} | {fmt(r['total'])} | "
              f"{fmt(r['sampled'])} | {fmt(r['per_turn'])} | {fmt(r['per_tool_call'])} |")
    print()
    for byte_row, bpe_row in zip(rows[::2], rows[1::2]):
        print(f"{byte_row['env']}: BPE/byte = {bpe_row['total'] / byte_row['total']:.2f}x all tokens, "
              f"{bpe_row['sampled'] / byte_row['sampled']:.2f}x sampled tokens")


if __name__ == "__main__":
    main()
