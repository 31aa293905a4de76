"""Which Python runs the sandboxed code: one the sandbox's unprivileged uid can actually execute.

By default that is the interpreter running the host (the base one behind a virtualenv, since the
sandbox gets the standard library only: `-S`, no site-packages). An interpreter installed in root's
home directory (pyenv under `/root`, mode 0700) cannot be read by any other uid, and a bind mount
does not help (bwrap resolves its sources as the unprivileged uid), so then the system `python3`
is used instead. `find_interpreter` tries the candidates by running each as a leased uid and caches
the answer per process; `Interpreter.prefix` is what the bwrap backend must bind read-only.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass

from .identity import lease
from .types import SandboxUnavailable

__all__ = ["Interpreter", "find_interpreter"]

_PROBE = (
    "import sys, json; print(json.dumps([sys.prefix, sys.base_prefix, '%d.%d.%d' % sys.version_info[:3]]))"
)
_cache: dict[str | None, Interpreter] = {}
_cache_lock = threading.Lock()


@dataclass(frozen=True)
class Interpreter:
    path: str  # absolute, symlinks resolved
    prefix: str  # sys.prefix of that interpreter (its standard library lives below it)
    version: str  # "3.11.7"


def _candidates(python: str | None) -> list[str]:
    if python is not None:
        found = shutil.which(python) if os.sep not in python else python
        if found is None:
            raise SandboxUnavailable(f"python={python!r} was not found on PATH; pass an absolute path")
        return [os.path.realpath(found)]
    out = [os.path.realpath(sys.executable)]
    system_path = "/usr/local/bin:/usr/bin:/bin"
    for name in (f"python{sys.version_info[0]}.{sys.version_info[1]}", "python3"):
        found = shutil.which(name, path=system_path)
        if found is not None:
            out.append(os.path.realpath(found))
    return list(dict.fromkeys(out))


def _run_probe(path: str, prefix_cmd: list[str], popen_kwargs: dict) -> tuple[str, str] | str:
    try:
        proc = subprocess.run(
            prefix_cmd + [path, "-S", "-s", "-c", _PROBE],
            capture_output=True,
            text=True,
            timeout=60,
            env={"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"},
            cwd="/",
            **popen_kwargs,
        )
    except (OSError, subprocess.SubprocessError) as e:
        return f"{path}: {e}"
    if proc.returncode != 0:
        return f"{path}: exit {proc.returncode}: {proc.stderr.strip()[-300:]}"
    prefix, _base, version = json.loads(proc.stdout)
    return os.path.realpath(prefix), version


def _probe(path: str) -> Interpreter | str:
    """Run `path` as this process, then as a leased uid: both must see the same installation.
    (An interpreter that cannot read its own prefix silently falls back to a compiled-in default
    such as /usr -- the system's standard library under another binary.)"""
    own = _run_probe(path, [], {})
    if isinstance(own, str):
        return own
    ident = lease()
    try:
        if not (ident.command_prefix() or ident.popen_kwargs()):
            return Interpreter(path=path, prefix=own[0], version=own[1])
        theirs = _run_probe(path, ident.command_prefix(), ident.popen_kwargs())
    finally:
        ident.release()
    if isinstance(theirs, str):
        return theirs
    if theirs != own:
        return (
            f"{path}: uid {ident.uid} cannot read its installation under {own[0]} (it fell back to "
            f"{theirs[0]}); a directory above it is not readable by other users"
        )
    return Interpreter(path=path, prefix=own[0], version=own[1])


def find_interpreter(python: str | None = None) -> Interpreter:
    """The first candidate the sandbox uid can run (cached). Raises `SandboxUnavailable` naming
    every candidate and why it failed."""
    with _cache_lock:
        if python in _cache:
            return _cache[python]
        failures = []
        for path in _candidates(python):
            got = _probe(path)
            if isinstance(got, Interpreter):
                _cache[python] = got
                return got
            failures.append(got)
        who = "an unprivileged uid" if os.geteuid() == 0 else "this user"
        raise SandboxUnavailable(
            f"no Python interpreter that {who} can run was found ({'; '.join(failures)}). Install a "
            "system python3 (apt-get install python3), or pass python=/path/to/python3 installed "
            "where other users can read it (not under a 0700 home directory)."
        )
