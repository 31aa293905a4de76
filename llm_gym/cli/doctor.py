"""`llm-gym doctor [--json]`: the command line of `llm_gym.doctor`.

It runs `llm_gym.doctor.diagnose()` and prints the report: a readable summary (core packages,
extras, torch and CUDA, the sandbox, registered ids per source, why any id is not registered,
what `[all]` installs that is missing here) or with `--json` the report itself. Exit status 0
when the report has no problems, else 1. Offline.
"""

from __future__ import annotations

import argparse
import json
import textwrap
from typing import Any, Sequence

from llm_gym.doctor import diagnose

__all__ = ["doctor_main"]


def _format(report: dict[str, Any]) -> str:
    lines = [f"llm-gym {report['llm_gym']} on Python {report['python']} ({report['executable']}); "
             + ", ".join(f"{k} {v or 'MISSING'}" for k, v in report["core"].items())]
    extras = report["extras"]
    if extras is not None:
        lines += ["", f"extras ([all] installs {', '.join(extras['all'])}):"]
        for extra, info in extras["extras"].items():
            lines.append(f"  [{extra}]" + ("" if info["in_all"] else " (not in [all])"))
            for pkg in info["packages"]:
                state = pkg["version"] or "not installed"
                if pkg["version"] and not pkg["ok"]:
                    state += f" (wants {pkg['wants']})"
                if pkg["optional"]:
                    state += f" (optional, not in [{extra}])"
                lines.append(f"    {pkg['name']:<20} {state}")
    if report["torch"] is not None:
        t = report["torch"]
        lines.append("")
        if t["installed"] and t["cuda_available"]:
            lines.append(f"torch {t['version']}: CUDA {t['cuda_version']} available, "
                         f"{t['device_count']} device(s): {', '.join(t['devices'])}")
        elif t["installed"]:
            lines.append(f"torch {t['version']}: CUDA not available (0 devices)")
        elif t["error"]:
            lines.append(f"torch: installed but fails to import ({t['error']})")
        else:
            lines.append("torch: not installed (pip install 'llm-gym[train]')")
    if report["sandbox"] is not None:
        s = report["sandbox"]
        found = f"found: {', '.join(s['bwrap'])}" if s["bwrap"] else "not found"
        lines.append(f"sandbox: bwrap binary {found}")
        if s["backend"] == "bwrap":
            lines.append(f"  namespaces work: backend bwrap, isolated ({s['detail']})")
        elif s["backend"]:
            lines.append(f"  namespaces do NOT work here: backend {s['backend']}, not isolated "
                         f"({s['detail']})")
        else:
            lines.append(f"  {s['detail']}")
    envs = report["envs"]
    width = max(map(len, envs["sources"]), default=0)
    lines += ["", "registered ids per source:"]
    for name, counts in envs["sources"].items():
        extra = f", {counts['unregistered']} not" if counts["unregistered"] else ""
        lines.append(f"  {name:<{width}}  {counts['registered']}{extra}")
    groups: dict[tuple[str, str, str | None, str], list[str]] = {}
    for row in envs["unregistered"]:
        key = (row["source"], row["reason"], row["extra"], row["fix"])
        groups.setdefault(key, []).append(row["id"])
    if groups:
        lines += ["", "not registered:"]
        for (source, reason, extra, fix), ids in groups.items():
            provided = f" (the package comes with [{extra}])" if extra else ""
            lines += textwrap.wrap(", ".join(ids), width=100, initial_indent="  ",
                                   subsequent_indent="  ", break_on_hyphens=False)
            lines += textwrap.wrap(f"{source}: {reason}{provided}; fix: {fix}", width=100,
                                   initial_indent="    ", subsequent_indent="      ")
    lines.append("")
    if report["problems"]:
        lines.append("missing from [all]:")
        lines += [f"  {p}" for p in report["problems"]]
    else:
        lines.append("everything [all] installs is present.")
    return "\n".join(lines)


def doctor_main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="llm-gym doctor",
        description="Say what is installed (extras, torch and CUDA, the sandbox), which env ids "
        "are registered per source and why any is not. Exit status 1 when something "
        "llm-gym[all] installs is missing. Offline.",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(list(argv or []))
    report = diagnose()
    print(json.dumps(report, indent=1) if args.json else _format(report))
    return 0 if report["ok"] else 1
