"""Shared by the sandbox tests: which backends run here, and finding a run's leftover processes.

Every run that a test checks for leftovers gets a unique token as `argv[1]`; the launcher's
command line carries it, so every process of the run -- forks included, and, seen from the host,
the processes inside a bwrap pid namespace -- shows it in `/proc/PID/cmdline`.
"""

from __future__ import annotations

import itertools
import os
import warnings

from llm_gym.sandbox import Sandbox, SandboxUnavailable, SandboxWeakerWarning

_tokens = itertools.count()


def available_backends() -> tuple[list[str], dict[str, str]]:
    ok, why = [], {}
    for name in ("bwrap", "rlimit"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SandboxWeakerWarning)
            try:
                Sandbox(name).describe()
                ok.append(name)
            except SandboxUnavailable as e:
                why[name] = str(e)
    return ok, why


BACKENDS, WHY_NOT = available_backends()
NO_BACKEND = "no sandbox backend can run here: " + "; ".join(f"{k}: {v}" for k, v in WHY_NOT.items())


def token() -> str:
    return f"llmgymtok{os.getpid()}x{next(_tokens)}x{os.urandom(4).hex()}"


def leftovers(tok: str) -> list[int]:
    """Live processes whose command line contains `tok`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                if tok.encode() in f.read():
                    found.append(int(name))
        except OSError:
            pass
    return found
