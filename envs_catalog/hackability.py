"""The catalog's hackability numbers: the generated attack suite run on every native id.

`python -m envs_catalog.hackability` plays the attack suite of `llm_gym.checks.attacks` (replies
built from parts, each with its verdict by construction under the one answer policy) through
every native id's real episodes -- its gold scripted cases on `--seeds` tasks, at most
`--per-seed` replies per task -- and writes the counts to `envs_catalog/hackability.json`:
replies played, false credits, false denials, exploitable false credits, per attack family. The
suite is seeded, so the numbers are a pure function of the code (no float, no clock): a rerun on
any machine gives the same file. `envs_catalog.catalog` renders them as CATALOG.md's
hackability column; the test suite recomputes a sample of ids and compares.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from envs_catalog import ENV_SPECS

MEASURED_PATH = Path(__file__).with_name("hackability.json")
DEFAULT_SEEDS = 4
DEFAULT_PER_SEED = 200
# Sandboxed envs run a program per reply (~0.1 s): fewer replies per task.
SLOW_PER_SEED = {"envs_catalog.code.": 60, "envs_catalog.tools.": 120}


def _source_factory(spec: dict[str, Any]):
    from llm_gym import get_renderer, load_tokenizer
    from llm_gym.checks.common import _TEXT_ENV_OPTIONS

    from envs_catalog.catalog import load_source_class

    cls = load_source_class(spec)
    knobs = {k: v for k, v in spec.get("kwargs", {}).items() if k not in _TEXT_ENV_OPTIONS}
    renderer = get_renderer("chatml", load_tokenizer())
    return lambda case_knobs: cls(renderer=renderer, split="train", **{**knobs, **case_knobs})


def per_seed_for(spec: dict[str, Any], per_seed: int) -> int:
    return next((n for prefix, n in SLOW_PER_SEED.items() if spec["source"].startswith(prefix)), per_seed)


def measure(spec: dict[str, Any], seeds: int = DEFAULT_SEEDS, per_seed: int = DEFAULT_PER_SEED,
            records: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The audit of one native spec, as the JSON entry CATALOG.md renders; `records`, when given,
    receives every reply played (for `benchmarks/hackability_before_after.py replay`)."""
    from llm_gym.checks.attacks import audit_source

    from envs_catalog.catalog import load_source_class

    n = per_seed_for(spec, per_seed)
    report = audit_source(_source_factory(spec), list(range(seeds)), per_seed=n, env_label=spec["id"],
                          keep_records=records is not None)
    if records is not None:
        records.extend(report.records)
    summary = report.summary()
    card = load_source_class(spec).card
    return {
        "runs": summary["runs"], "false_credits": summary["false_credits"],
        "false_denials": summary["false_denials"], "exploitable_credits": summary["exploitable_credits"],
        "families": summary["families"], "skipped": summary["skipped"][:3], "seeds": seeds, "per_seed": n,
        "known_hackable": card.known_hackable,
    }


def load() -> dict[str, Any]:
    """The committed measurements (`{"ids": {id: entry}, ...}`), or an empty table."""
    if not MEASURED_PATH.exists():
        return {"ids": {}}
    return json.loads(MEASURED_PATH.read_text())


def cell(entry: dict[str, Any] | None) -> str:
    """An id's hackability as one table cell: false credits / false denials over the replies."""
    if not entry:
        return "not measured"
    if not entry["runs"]:
        return "no single-episode verdict (group reward)" if entry.get("skipped") else "not measured"
    def pct(k: int) -> str:
        return f"{100 * k / entry['runs']:.2f}%"
    text = f"{pct(entry['false_credits'])} / {pct(entry['false_denials'])} of {entry['runs']}"
    if entry["exploitable_credits"]:
        text += f", **{entry['exploitable_credits']} exploitable**"
    if entry.get("known_hackable"):
        text += " (known hackable)"
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m envs_catalog.hackability",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--ids", nargs="*", help="only these ids (default: every registered native id)")
    parser.add_argument("--seeds", type=int, default=DEFAULT_SEEDS)
    parser.add_argument("--per-seed", type=int, default=DEFAULT_PER_SEED)
    parser.add_argument("--records", default=None, help="also write every reply played to this JSONL file")
    args = parser.parse_args(argv)
    table = load()
    specs = [s for s in ENV_SPECS if s["id"].startswith("llm/") and (not args.ids or s["id"] in args.ids)]
    records: list[dict[str, Any]] | None = [] if args.records else None
    for spec in specs:
        entry = measure(spec, args.seeds, args.per_seed, records)
        if records is not None:
            with open(args.records, "a") as out:
                out.writelines(json.dumps(r) + "\n" for r in records)
            records.clear()
        table["ids"][spec["id"]] = entry
        print(f"{spec['id']}: {cell(entry)}", flush=True)
    table["ids"] = dict(sorted(table["ids"].items()))
    table["command"] = f"python -m envs_catalog.hackability --seeds {args.seeds} --per-seed {args.per_seed}"
    MEASURED_PATH.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
