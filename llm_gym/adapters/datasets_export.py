"""Export an environment's tasks as a Hugging Face `datasets.Dataset` (for SFT or evaluation in
other stacks) — `export_dataset(...)` and the `llm-gym export` command.

One row per task: the prompt as chat messages (`prompt`) and as the env renderer's text
(`prompt_text`), the reference answer and a full reference response, an SFT-ready `messages`
column (prompt + reference response), and the metadata that rebuilds the episode (`env_id`,
`split`, `seed`, `index`, `task_seed`, `env_kwargs` as JSON). Task `i` is the task
`gym.make(env_id, split=split, **knobs).reset(seed=task_seed)` gives, with `task_seed` derived from
`(seed, i)`, so the same arguments give the same rows and every row can be re-graded by the env.
Train and test rows never share a task: the env's split keeps the two task sets disjoint.
Multi-turn envs export their opening prompt; their reference columns are empty (None).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Callable, Sequence

from llm_gym.adapters._common import dump_knobs, episode, require, task_seeds, text_env

__all__ = ["export_dataset", "write_dataset", "main"]

FORMATS = ("jsonl", "arrow")


def _messages(env: Any) -> list[dict[str, str]] | None:
    conversation: Callable[[], list[dict[str, Any]]] | None = getattr(env, "conversation", None)  # ProblemEnv's
    if not callable(conversation):
        return None
    return [{"role": m["role"], "content": m["content"]} for m in conversation()]


def _call(env: Any, name: str) -> str | None:
    fn = getattr(env, name, None)
    return str(fn()) if callable(fn) else None


def export_dataset(
    env_id: str, n: int, split: str = "train", seed: int = 0, **env_kwargs: Any
) -> Any:
    """`n` tasks of `env_id` (`split` "train" or "test") as a `datasets.Dataset`.

    `env_kwargs` are the env's difficulty knobs (and `tokenizer`/`renderer`, which change
    `prompt_text` only). Deterministic: the same arguments give the same rows.
    """
    datasets = require("datasets", "llm-gym export / export_dataset")
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be a non-negative int, got {n!r}")
    env_ = text_env(env_id, split=split, **env_kwargs)
    knobs = dump_knobs(env_kwargs)
    columns: dict[str, list[Any]] = {
        "prompt": [], "prompt_text": [], "reference_answer": [], "reference_response": [],
        "messages": [], "env_id": [], "split": [], "seed": [], "index": [], "task_seed": [],
        "env_kwargs": [], "multi_turn": [],
    }
    for index, task_seed in enumerate(task_seeds(seed, n)):
        env, _prompt, info = episode(env_, task_seed)
        prompt = _messages(env)
        reference_response = _call(env, "get_reference_response")
        columns["prompt"].append(prompt)
        columns["prompt_text"].append(info["text"])
        columns["reference_answer"].append(_call(env, "get_reference_answer"))
        columns["reference_response"].append(reference_response)
        columns["messages"].append(
            None if prompt is None or reference_response is None
            else prompt + [{"role": "assistant", "content": reference_response}]
        )
        columns["env_id"].append(env_id)
        columns["split"].append(split)
        columns["seed"].append(int(seed))
        columns["index"].append(index)
        columns["task_seed"].append(task_seed)
        columns["env_kwargs"].append(knobs)
        columns["multi_turn"].append(bool(env_.source.card.multi_turn))
    dataset = datasets.Dataset.from_dict(columns)
    dataset.info.description = (
        f"{n} {split} tasks of {env_id} exported by llm-gym (seed={seed}, knobs={knobs})"
    )
    return dataset


def write_dataset(dataset: Any, out: str, fmt: str = "jsonl") -> str:
    """Write `dataset` as JSON lines (one file) or Arrow (`save_to_disk`, a folder); return `out`."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
    parent = os.path.dirname(os.path.abspath(out))
    os.makedirs(parent, exist_ok=True)
    if fmt == "jsonl":
        dataset.to_json(out, lines=True, force_ascii=False)
    else:
        dataset.save_to_disk(out)
    return out


def _parse_knob(text: str) -> tuple[str, Any]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"--knob expects NAME=VALUE, got {text!r}")
    try:
        return name, json.loads(value)
    except json.JSONDecodeError:
        return name, value  # a bare string such as operators=+-


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="llm-gym export",
        description="Write an env's tasks as a dataset (prompt messages and text, reference "
        "answer/response, metadata) for SFT or evaluation in other stacks.",
    )
    parser.add_argument("env_id", help="a registered id, e.g. llm/Math-v0")
    parser.add_argument("--n", type=int, required=True, help="number of rows")
    parser.add_argument("--split", choices=("train", "test"), default="train")
    parser.add_argument("--out", required=True, help="output file (jsonl) or folder (arrow)")
    parser.add_argument("--seed", type=int, default=0, help="same seed, same rows (default 0)")
    parser.add_argument("--format", choices=FORMATS, default=None,
                        help="jsonl (default, or inferred from --out) or arrow (save_to_disk)")
    parser.add_argument("--knob", action="append", type=_parse_knob, default=[], metavar="NAME=VALUE",
                        help="a difficulty knob (JSON value), repeatable: --knob digits=3")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """`llm-gym export ENV_ID --n N --split train|test --out PATH [--seed S] [--format jsonl|arrow]`."""
    args = build_parser().parse_args(argv)
    fmt = args.format or ("jsonl" if args.out.endswith((".jsonl", ".json")) else
                          "arrow" if not os.path.splitext(args.out)[1] else "jsonl")
    try:
        dataset = export_dataset(args.env_id, args.n, args.split, args.seed, **dict(args.knob))
    except (ValueError, TypeError, ImportError) as exc:
        print(f"llm-gym export: error: {exc}", file=sys.stderr)
        return 2
    datasets = require("datasets", "llm-gym export")
    datasets.disable_progress_bars()
    write_dataset(dataset, args.out, fmt)
    print(f"wrote {len(dataset)} {args.split} rows of {args.env_id} to {args.out} ({fmt})")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
