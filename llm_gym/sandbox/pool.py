"""`SandboxPool`: many sandboxed runs at once, never more than `max_concurrency`.

Runs are processes, so the pool is a bounded thread pool whose threads each wait on one run (the
waiting costs no CPU: one `select` per run). `submit` returns a `concurrent.futures.Future`, `map`
keeps input order, `arun` awaits a run from asyncio without blocking the loop -- the shape the
rollout code expects of "expensive environment work goes through an Executor". Queued runs wait
their turn; `close()` drops the queued ones and kills the running ones, so closing a pool leaves no
process behind. A pool owns the `Sandbox` it made from keyword arguments, or shares one passed in.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor

from .execution import Execution
from .sandbox import Sandbox
from .types import Result, SandboxError

__all__ = ["SandboxPool"]


class SandboxPool:
    """`SandboxPool(max_concurrency=4, backend="auto", limits=...)` or `SandboxPool(sandbox, ...)`."""

    def __init__(
        self, sandbox: Sandbox | None = None, *, max_concurrency: int | None = None, **sandbox_kwargs
    ):
        if sandbox is not None and sandbox_kwargs:
            raise TypeError("pass either a Sandbox or Sandbox keyword arguments, not both")
        if max_concurrency is None:
            max_concurrency = os.cpu_count() or 1
        if not isinstance(max_concurrency, int) or max_concurrency < 1:
            raise ValueError(f"max_concurrency must be a positive int, got {max_concurrency!r}")
        self.sandbox = sandbox if sandbox is not None else Sandbox(**sandbox_kwargs)
        self._owns_sandbox = sandbox is None
        self.max_concurrency = max_concurrency
        self._executor = ThreadPoolExecutor(max_concurrency, thread_name_prefix="llm-gym-sandbox")
        self._lock = threading.Lock()
        self._inflight: set[Execution] = set()
        self._closed = False

    def _run(self, ex: Execution) -> Result:
        try:
            return self.sandbox._execute(ex)
        finally:
            with self._lock:
                self._inflight.discard(ex)

    def _submit(self, code, kwargs) -> tuple[Execution, Future]:
        if self._closed:
            raise SandboxError("this SandboxPool is closed")
        ex = self.sandbox._prepare(code, **kwargs)
        with self._lock:
            self._inflight.add(ex)
        try:
            fut = self._executor.submit(self._run, ex)
        except RuntimeError:  # shut down concurrently
            with self._lock:
                self._inflight.discard(ex)
            raise SandboxError("this SandboxPool is closed") from None
        return ex, fut

    def submit(self, code: str | bytes, **kwargs) -> Future:
        """Queue one run (same keyword arguments as `Sandbox.run`); a Future of its `Result`."""
        return self._submit(code, kwargs)[1]

    def run(self, code: str | bytes, **kwargs) -> Result:
        return self.submit(code, **kwargs).result()

    def map(self, codes: Iterable[str | bytes], **kwargs) -> list[Result]:
        """Run every code (at most `max_concurrency` at a time); results in input order."""
        futures = [self.submit(code, **kwargs) for code in codes]
        return [f.result() for f in futures]

    async def arun(self, code: str | bytes, **kwargs) -> Result:
        """Await one run without blocking the loop; cancelling the awaiting task kills the run."""
        import asyncio  # here, not at import: most users of the sandbox never await it

        if self.sandbox._backend is None:  # the first run probes the backends: not on the loop
            await asyncio.get_running_loop().run_in_executor(self._executor, self.sandbox._resolve)
        ex, fut = self._submit(code, kwargs)
        try:
            return await asyncio.shield(asyncio.wrap_future(fut))
        except asyncio.CancelledError:
            fut.cancel()
            ex.cancel()
            raise

    def close(self) -> None:
        """Drop queued runs, kill running ones, wait for the threads; idempotent."""
        with self._lock:
            self._closed = True
            inflight = list(self._inflight)
        for ex in inflight:
            ex.cancel()
        self._executor.shutdown(wait=True, cancel_futures=True)
        if self._owns_sandbox:
            self.sandbox.close()

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
