"""Before/after false credits and false denials of the catalog, on the same generated replies.

Issue 36's table: the attack suite of today's code (`llm_gym.checks.attacks`) is exported once,
reply by reply with the verdict each was built to get, and then replayed against any version of
the code -- today's, and the commit before the answer contracts -- through the real seed-API
episodes (the gold case's replies up to the last turn, then the attack). Tasks are drawn from the
same seeds in both versions (the contracts changed no task draw), so the two columns score the
same replies on the same tasks.

    python benchmarks/hackability_before_after.py export --out replies.jsonl [--ids ...] [--seeds 3]
    git worktree add /tmp/before <commit>
    PYTHONPATH=/tmp/before python benchmarks/hackability_before_after.py replay replies.jsonl --out before.json
    python benchmarks/hackability_before_after.py replay replies.jsonl --out after.json
    python benchmarks/hackability_before_after.py table before.json after.json

`replay` uses only what both versions have (`envs_catalog.ENV_SPECS`, `llm_gym.scripted`,
renderers), so it runs on the old tree unchanged.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

SLACK = 1e-6
TEXT_ENV_OPTIONS = ("tokenizer", "renderer", "split", "turn_limit", "render_mode", "max_action_length")


def _make_source(spec: dict[str, Any], case_knobs: dict[str, Any]):
    from llm_gym import get_renderer, load_tokenizer

    module, _, name = spec["source"].partition(":")
    cls = getattr(importlib.import_module(module), name)
    knobs = {k: v for k, v in spec.get("kwargs", {}).items() if k not in TEXT_ENV_OPTIONS}
    return cls(renderer=get_renderer("chatml", load_tokenizer()), split="train", **{**knobs, **case_knobs})


def _specs(ids: list[str] | None) -> list[dict[str, Any]]:
    from envs_catalog import ENV_SPECS

    return [s for s in ENV_SPECS if s["id"].startswith("llm/") and (not ids or s["id"] in ids)]


def export(args: argparse.Namespace) -> None:
    from envs_catalog.hackability import per_seed_for
    from llm_gym.checks.attacks import audit_source

    with open(args.out, "w") as out:
        for spec in _specs(args.ids):
            report = audit_source(lambda knobs, spec=spec: _make_source(spec, knobs), list(range(args.seeds)),
                                  per_seed=per_seed_for(spec, args.per_seed), env_label=spec["id"],
                                  keep_records=True)
            for rec in report.records:
                out.write(json.dumps(rec) + "\n")
            print(f"{spec['id']}: {len(report.records)} replies", flush=True)


async def _play(source: Any, seed: int, replies: list[str], max_turns: int) -> float:
    import numpy as np

    from llm_gym.scripted import ScriptedCase, aplay_scripted_episode

    turn = [0]

    def reply(env: Any, observation: str) -> str:
        i = turn[0]
        turn[0] += 1
        return replies[i] if i < len(replies) else ""

    case = ScriptedCase("replay", "adversarial", reply, -1e9, 1e9, max_turns=max_turns)
    trajectory, _ = await aplay_scripted_episode(source, case, source.make_env(np.random.default_rng(seed)))
    return float(sum(t.reward for t in trajectory.transitions))


def replay(args: argparse.Namespace) -> None:
    records = [json.loads(line) for line in open(args.records)]
    specs = {s["id"]: s for s in _specs(None)}
    tally: dict[str, dict[str, dict[str, int]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(int)))
    sources: dict[str, Any] = {}
    golds: dict[tuple, float] = {}

    async def run() -> None:
        for rec in records:
            env_id = rec["env"]
            if env_id not in specs:
                tally[env_id]["(not registered)"]["runs"] += 1
                continue
            key = json.dumps([env_id, rec["knobs"]], sort_keys=True)
            if key not in sources:
                sources[key] = _make_source(specs[env_id], rec["knobs"])
            source = sources[key]
            gkey = (key, rec["seed"], tuple(rec["prefix"]), rec["gold_reply"])
            if gkey not in golds:
                golds[gkey] = await _play(source, rec["seed"], rec["prefix"] + [rec["gold_reply"]], 64)
            got = await _play(source, rec["seed"], rec["prefix"] + [rec["reply"]], 64)
            paid = got >= golds[gkey] - SLACK
            cell = tally[env_id][rec["family"]]
            cell["runs"] += 1
            if paid and not rec["credit"]:
                cell["false_credits"] += 1
                cell["exploitable_credits"] += int(rec["exploitable"])
            elif not paid and rec["credit"]:
                cell["false_denials"] += 1

    asyncio.run(run())
    Path(args.out).write_text(json.dumps(tally, indent=1, sort_keys=True) + "\n")
    print(f"{len(records)} replies replayed: {args.out}")


def _sum(per_family: dict[str, dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for cell in per_family.values():
        for k, v in cell.items():
            out[k] += v
    return out


def table(args: argparse.Namespace) -> None:
    before, after = json.loads(Path(args.before).read_text()), json.loads(Path(args.after).read_text())

    def fmt(c: dict[str, int]) -> str:
        runs = c.get("runs", 0)
        if not runs:
            return "-"
        return (f"{c.get('false_credits', 0)} ({100 * c.get('false_credits', 0) / runs:.1f}%) / "
                f"{c.get('false_denials', 0)} ({100 * c.get('false_denials', 0) / runs:.1f}%)"
                + (f", {c['exploitable_credits']} expl." if c.get("exploitable_credits") else ""))

    print("| id | replies | before: FC / FD | after: FC / FD |\n|---|---|---|---|")
    totals_b: dict[str, int] = defaultdict(int)
    totals_a: dict[str, int] = defaultdict(int)
    families_b: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    families_a: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for env_id in sorted(set(before) | set(after)):
        b, a = _sum(before.get(env_id, {})), _sum(after.get(env_id, {}))
        print(f"| `{env_id}` | {a.get('runs', b.get('runs', 0))} | {fmt(b)} | {fmt(a)} |")
        for k, v in b.items():
            totals_b[k] += v
        for k, v in a.items():
            totals_a[k] += v
        for fam, cell in before.get(env_id, {}).items():
            for k, v in cell.items():
                families_b[fam][k] += v
        for fam, cell in after.get(env_id, {}).items():
            for k, v in cell.items():
                families_a[fam][k] += v
    print(f"| **all** | {totals_a.get('runs', 0)} | {fmt(totals_b)} | {fmt(totals_a)} |\n")
    print("| attack family | replies | before: FC / FD | after: FC / FD |\n|---|---|---|---|")
    for fam in sorted(set(families_b) | set(families_a)):
        print(f"| {fam} | {families_a[fam].get('runs', 0)} | {fmt(families_b[fam])} | {fmt(families_a[fam])} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("export")
    p.add_argument("--out", required=True)
    p.add_argument("--ids", nargs="*")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--per-seed", type=int, default=200)
    p = sub.add_parser("replay")
    p.add_argument("records")
    p.add_argument("--out", required=True)
    p = sub.add_parser("table")
    p.add_argument("before")
    p.add_argument("after")
    args = parser.parse_args(argv)
    {"export": export, "replay": replay, "table": table}[args.cmd](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
