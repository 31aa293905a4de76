"""`llm_gym.sandbox`: the only place that runs untrusted, model-written code.

`Sandbox().run(code, stdin=, files=, timeout=)` runs Python source as `main.py` in a fresh,
offline sandbox and returns a `Result(stdout, stderr, exit, timed_out, killed_by, ...)`;
`await sandbox.arun(...)` does it without blocking an event loop and `SandboxPool` runs many at a
bounded concurrency. The backend is bubblewrap (`bwrap.py`: new user/pid/net/ipc namespaces, a
read-only system, a private tmpfs) where the machine allows namespaces, else a weaker rlimit-only
subprocess (`rlimit.py`), reported as such. Both apply the same `Limits` (`types.py`: CPU, memory,
file size, open files, processes under a uid of the run's own, wall clock, output) through the
same launcher (`launcher.py`) and leave no process, descriptor or directory behind
(`execution.py`, `identity.py`). Importing this package starts nothing; the backend is chosen and
probed on first use.

    from llm_gym.sandbox import Sandbox
    with Sandbox() as sb:
        r = sb.run("print(sum(map(int, input().split())))", stdin="2 3")
        assert r.stdout == "5\\n" and r.ok
"""

from __future__ import annotations

from .pool import SandboxPool
from .sandbox import BACKENDS, Sandbox
from .types import (
    Limits,
    Result,
    SandboxError,
    SandboxUnavailable,
    SandboxWeakerWarning,
)

__all__ = [
    "BACKENDS",
    "Limits",
    "Result",
    "Sandbox",
    "SandboxError",
    "SandboxPool",
    "SandboxUnavailable",
    "SandboxWeakerWarning",
]
