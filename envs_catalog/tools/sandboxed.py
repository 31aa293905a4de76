"""`SandboxedTool`: a tool whose runs go through a `llm_gym.sandbox.Sandbox` owned by one episode.

The sandbox is created on the first call (building envs starts nothing; the backend probe is cached
per process), and `close()` — called when the episode is released (`llm_gym.rl.types.release_env`:
the group's cleanup, the next reset) — kills any run still going. A call after it gets
`CLOSED_REPLY` instead of a new run. `python_tool.py` and `sql.py` build their tools on it.
"""

from __future__ import annotations

from typing import Any, Callable

from llm_gym.tools import FunctionTool

CLOSED_REPLY = "Error: this episode is over; its sandbox is closed"


class SandboxedTool(FunctionTool):
    """`fn` is the tool function (its signature and docstring give the schema); it gets its
    sandbox from `self.sandbox()` and should return `CLOSED_REPLY` when `self.closed`."""

    def __init__(self, fn: Callable[..., Any], backend: str = "auto") -> None:
        self.backend = backend
        self._sandbox: Any = None
        self._closed = False
        super().__init__(fn)

    @property
    def closed(self) -> bool:
        return self._closed

    def sandbox(self) -> Any:
        if self._sandbox is None:
            from llm_gym.sandbox import Sandbox  # here: importing the catalog must stay light

            self._sandbox = Sandbox(self.backend)
        return self._sandbox

    def close(self) -> None:
        self._closed = True
        if self._sandbox is not None:
            self._sandbox.close()
