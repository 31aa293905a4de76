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
from typing import Sequence

from llm_gym.registration import registered_envs

__all__ = ["list_main"]


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
