"""`llm-gym check ENV_ID ...|--all`: the command line of `llm_gym.checks`.

It only parses flags, calls `llm_gym.checks.check_env_id` per id and prints: a table per id
(one row per check: name, pass / fail / skip, detail) and a summary line, or with `--json`
`{"ok": bool, "results": [{"env_id", "kwargs", "ok", "seconds", "checks": [{"name", "status",
"detail", "seconds", "data"}]}]}` and nothing else on stdout (everything else written to stdout
meanwhile, by this process, a bridged library or a child process, goes to stderr).
`--kwargs JSON` / `--kwarg KEY=VALUE` build the checked envs with other knobs, tokenizer or
renderer; every id is resolved (and built with them) before any check runs. Exit status: 0 when
no row failed ("skip" rows do not fail), 1 when one did, 2 for a usage error, an unknown id (one
line, with "Did you mean") or kwargs the env refuses (one line). Torch-free.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from typing import Any, Sequence

from llm_gym.checks import CHECK_NAMES, CheckRow, check_env_id, validate_env_id

__all__ = ["build_parser", "check_main"]


def _table(env_id: str, rows: list[CheckRow], seconds: float,
           env_kwargs: dict[str, Any] | None = None) -> str:
    width = max(len(r.name) for r in rows)
    failed = sum(r.status == "fail" for r in rows)
    with_kwargs = f"  (kwargs {json.dumps(env_kwargs)})" if env_kwargs else ""
    lines = [f"{env_id}{with_kwargs}  ({seconds:.1f} s)"]
    for r in rows:
        lines.append(f"  {r.name:<{width}}  {r.status:<4}  {r.detail}")
    lines.append(f"  => {'FAIL' if failed else 'ok'}"
                 + (f" ({failed} check(s) failed)" if failed else ""))
    return "\n".join(lines)


def _all_ids() -> list[str]:
    from llm_gym.registration import registered_envs

    return [row["id"] for row in registered_envs()]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="llm-gym check",
        description="Check registered llm-gym envs: check_env, seeding across processes, "
        "random-token fuzz, card, scripted cases, train/test split, context bound, throughput.",
    )
    parser.add_argument("env_ids", nargs="*", metavar="ENV_ID", help="ids to check (llm/Name-v0)")
    parser.add_argument("--all", action="store_true", help="check every registered llm-gym id")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--seeds", type=int, default=3,
                        help="seeds per scripted case, split and renderer (default 3; the "
                        "determinism check uses at least 8)")
    parser.add_argument("--fuzz", type=int, default=48,
                        help="random actions in the fuzz episodes (default 48)")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds one check may take before it fails (default 120)")
    parser.add_argument("--only", default="",
                        help=f"comma-separated subset of the checks: {','.join(CHECK_NAMES)}")
    parser.add_argument("--kwargs", default=None, metavar="JSON",
                        help="env kwargs as a JSON object (knobs, tokenizer, renderer), e.g. "
                        "'{\"digits\": 3}'")
    parser.add_argument("--kwarg", action="append", default=[], metavar="KEY=VALUE",
                        help="one env kwarg (VALUE is read as JSON, else as a string); "
                        "repeatable, applied after --kwargs")
    return parser


def _parse_env_kwargs(text: str | None, pairs: Sequence[str]) -> dict[str, Any]:
    """--kwargs JSON, then each --kwarg KEY=VALUE; `ValueError` (one line) when malformed."""
    kwargs: dict[str, Any] = {}
    if text is not None:
        try:
            kwargs = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"--kwargs {text!r} is not JSON ({exc.msg} at character "
                             f"{exc.pos}); pass an object, e.g. '{{\"digits\": 3}}'") from None
        if not isinstance(kwargs, dict):
            raise ValueError(f"--kwargs must be a JSON object {{\"knob\": value}}, got "
                             f"{type(kwargs).__name__} {text!r}")
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--kwarg {pair!r} is not KEY=VALUE (e.g. --kwarg digits=3)")
        try:
            kwargs[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            kwargs[key.strip()] = value  # a bare string: --kwarg renderer=role_colon
    return kwargs


def check_main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.seeds < 1 or args.fuzz < 1:
        print("llm-gym check: --seeds and --fuzz must be at least 1", file=sys.stderr)
        return 2
    only = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = [name for name in only if name not in CHECK_NAMES]
    if unknown:
        print(f"llm-gym check: unknown check {unknown[0]!r} in --only; the checks are "
              f"{', '.join(CHECK_NAMES)}", file=sys.stderr)
        return 2
    if args.all and args.env_ids:
        print("llm-gym check: give ENV_IDs or --all, not both", file=sys.stderr)
        return 2
    env_ids = _all_ids() if args.all else list(args.env_ids)
    if not env_ids:
        print("llm-gym check: name an ENV_ID (e.g. llm/Math-v0) or pass --all", file=sys.stderr)
        return 2
    try:
        env_kwargs = _parse_env_kwargs(args.kwargs, args.kwarg)
    except ValueError as exc:
        print(f"llm-gym check: {exc}", file=sys.stderr)
        return 2
    for env_id in env_ids:  # every id is resolved (and built with the kwargs) before any check
        try:
            validate_env_id(env_id, env_kwargs)
        except ValueError as exc:  # an unknown id; an unknown knob, a bad value, a tokenizer
            print(f"llm-gym check: {exc}", file=sys.stderr)
            return 2
    results = []
    with _stdout_to_stderr() if args.json else contextlib.nullcontext():
        _run_checks(args, env_ids, only, env_kwargs, results)
    all_ok = all(r["ok"] for r in results)
    if args.json:
        print(json.dumps({"ok": all_ok, "results": results}, indent=1))
    elif len(results) > 1:
        failed = [r["env_id"] for r in results if not r["ok"]]
        print(f"\n{len(results) - len(failed)}/{len(results)} ids passed"
              + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 0 if all_ok else 1


@contextlib.contextmanager
def _stdout_to_stderr():
    """Send everything written to stdout -- by this process, a bridged library's progress dots,
    a child process -- to stderr, so that `--json` prints nothing but its JSON on stdout."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _run_checks(args: argparse.Namespace, env_ids: list[str], only: list[str],
                env_kwargs: dict[str, Any], results: list[dict[str, Any]]) -> None:
    for env_id in env_ids:
        start = time.perf_counter()
        rows = check_env_id(env_id, seeds=args.seeds, fuzz=args.fuzz, only=only or None,
                            timeout_s=args.timeout, env_kwargs=env_kwargs)
        seconds = time.perf_counter() - start
        ok = not any(r.status == "fail" for r in rows)
        results.append({"env_id": env_id, "kwargs": env_kwargs, "ok": ok,
                         "seconds": round(seconds, 3), "checks": [r.as_dict() for r in rows]})
        if not args.json:
            print(_table(env_id, rows, seconds, env_kwargs), flush=True)
