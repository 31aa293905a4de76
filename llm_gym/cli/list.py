"""`llm-gym list`: every registered llm-gym id with its family, turns and source package.

Reads the Gymnasium registry after `import llm_gym` (ids registered through the `llm_gym.envs`
entry points: the built-in catalog, the bridges whose library is installed, third-party catalogs).
Catalog ids get family and turns from their env card (importing only the catalog module); bridge
ids from the committed tables in `llm_gym.bridges`, so listing never imports a bridged library.
`--json` prints the rows as a JSON list; a bridge that is not installed is named at the end with
the command that installs it.
"""

from __future__ import annotations

import argparse
import json
import sys
from importlib import metadata
from typing import Any, Callable, Mapping, Sequence

__all__ = ["list_main", "registered_envs"]


def _distribution_finder() -> Callable[[str], str]:
    """A function from an import name to the distribution that ships it ("name==version").

    Known names are answered from what is already at hand: the bridges' tables, and the
    distributions that declare `llm_gym.envs` entry points (their entry points' modules). Only a
    module that neither names falls back to `importlib.metadata.packages_distributions()`, which
    reads every installed distribution's file list (seconds in a large venv): it runs at most once.
    """
    from llm_gym.bridges import BRIDGES
    from llm_gym.registration import ENTRY_POINT_GROUP

    dist_of: dict[str, str] = {b.module: b.distribution for b in BRIDGES.values()}
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.dist is not None:
            dist_of.setdefault(ep.module.split(".")[0], ep.dist.name)
    everything: Mapping[str, list[str]] | None = None
    found: dict[str, str] = {}

    def package_of(module: str) -> str:
        nonlocal everything
        top = module.split(".")[0]
        if top not in found:
            name = dist_of.get(top)
            if name is None:
                if everything is None:
                    everything = metadata.packages_distributions()
                name = (everything.get(top) or [top])[0]
            try:
                found[top] = f"{name}=={metadata.version(name)}"
            except metadata.PackageNotFoundError:
                found[top] = top
        return found[top]

    return package_of


def registered_envs() -> list[dict[str, Any]]:
    """One row per registered llm-gym id: id, family, turns ("single" / "multi" / "?"),
    package (the distribution the env comes from, with its version) and source."""
    import gymnasium as gym

    import llm_gym  # noqa: F401 - registers the ids
    from llm_gym.bridges import BRIDGES
    from llm_gym.registration import TEXT_ENV_ENTRY_POINT

    bridge_of = {env_id: b for b in BRIDGES.values() for env_id in b.entries}
    package_of = _distribution_finder()
    rows = []
    for env_id, spec in sorted(gym.registry.items()):
        if spec.entry_point != TEXT_ENV_ENTRY_POINT:
            continue
        source = str(spec.kwargs.get("source", ""))
        bridge = bridge_of.get(env_id)
        if bridge is not None:
            entry = bridge.entries[env_id]
            family, turns = bridge.name, entry.get("turns", "?")
            module = bridge.module
        else:
            family, turns = _card_facts(source)
            module = source.partition(":")[0]
        rows.append({"id": env_id, "family": family, "turns": turns,
                     "package": package_of(module), "source": source})
    return rows


def _card_facts(source: str) -> tuple[str, str]:
    try:
        from llm_gym.text_env import resolve_source

        card = resolve_source(source).card
        return card.family, "multi" if card.multi_turn else "single"
    except Exception:  # a third-party catalog whose module fails to import: still listed
        return "?", "?"


def list_main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="llm-gym list",
        description="List the registered llm-gym environment ids (family, turns, source package).",
    )
    parser.add_argument("pattern", nargs="?", default="", help="only ids containing this text")
    parser.add_argument("--json", action="store_true", help="print a JSON list of rows")
    args = parser.parse_args(list(argv or []))
    from llm_gym.bridges import BRIDGES

    rows = [r for r in registered_envs() if args.pattern.lower() in r["id"].lower()]
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    headers = ("id", "family", "turns", "package")
    widths = [max([len(h)] + [len(str(r[h])) for r in rows]) for h in headers]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip())
    for r in rows:
        print("  ".join(str(r[h]).ljust(w) for h, w in zip(headers, widths)).rstrip())
    print(f"\n{len(rows)} ids", file=sys.stderr)
    for bridge in BRIDGES.values():
        if not bridge.installed():
            print(
                f"not installed: {bridge.name} ({len(bridge.entries)} ids) -- "
                f"pip install 'llm-gym[{bridge.extra}]'",
                file=sys.stderr,
            )
    return 0
