"""The sandbox's value types: `Limits` (what one run may use), `Result` (what it did) and the errors.

`Limits` is what a caller tunes: the wall-clock timeout and the kernel limits the launcher applies
inside the sandbox (`RLIMIT_CPU`, `RLIMIT_AS`, `RLIMIT_FSIZE`, `RLIMIT_NOFILE`, `RLIMIT_NPROC`) plus
the host-side caps (captured output per stream, size of the private `/tmp`). `Result` is what every
backend returns, so an environment's reward code never needs to know which backend ran: an exit
status in shell convention (a death by signal N reads as 128 + N), whether the wall-clock timeout
fired, and `killed_by` naming the limit that ended the run. Bad model code is never an exception
here -- it is a `Result`; `SandboxError` means the sandbox itself could not do its job.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = ["Limits", "Result", "SandboxError", "SandboxUnavailable", "SandboxWeakerWarning"]

_MiB = 1 << 20


class SandboxError(RuntimeError):
    """The sandbox could not run the code at all (the backend failed to start, it was closed...).

    Never raised for what the code itself does: a crash, a timeout or a limit is a `Result`."""


class SandboxUnavailable(SandboxError):
    """The requested backend cannot run on this machine; the message says why and what to install."""


class SandboxWeakerWarning(UserWarning):
    """Code is running under the rlimit fallback: no namespaces, so no network or filesystem
    isolation (see `Sandbox.describe()["isolation"]`). Issued once per process."""


@dataclass(frozen=True)
class Limits:
    """What one run may use. Every field is per run; `processes` and `memory_bytes` multiply
    (each process may map `memory_bytes`), so their product (8 GiB by default), plus the private
    tmpfs mounts, bounds a run's worst case -- lower them when many runs share a small machine.

    - `timeout_s`: wall-clock seconds from the moment the code starts (after the sandbox is set
      up); then every process of the run is killed (`killed_by="timeout"`).
    - `cpu_s`: CPU seconds per process (`RLIMIT_CPU`; SIGXCPU, then SIGKILL a second later).
    - `memory_bytes`: address space per process (`RLIMIT_AS`); Python raises `MemoryError`.
    - `file_bytes`: largest file a process may write (`RLIMIT_FSIZE`; Python gets `EFBIG`).
    - `open_files`: file descriptors per process (`RLIMIT_NOFILE`).
    - `processes`: processes and threads alive at once, the main one included (`RLIMIT_NPROC`,
      held under a uid of the run's own, so it works when the caller is root).
    - `output_bytes`: stdout and stderr are each kept up to this many bytes; one more byte and the
      run is killed (`killed_by="output_limit"`, `stdout_truncated`/`stderr_truncated`).
    - `tmp_bytes`: size of the private writable `/tmp` (bwrap backend: a tmpfs of this size).
    - `setup_timeout_s`: how long starting the sandbox and the interpreter may take on a loaded
      machine before the run counts as timed out.
    """

    timeout_s: float = 10.0
    cpu_s: int = 10
    memory_bytes: int = 512 * _MiB
    file_bytes: int = 16 * _MiB
    open_files: int = 64
    processes: int = 16
    output_bytes: int = 1 * _MiB
    tmp_bytes: int = 64 * _MiB
    setup_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"Limits.{f.name} must be a positive number, got {value!r}")
            if f.type in ("int", int) and not isinstance(value, int):
                raise ValueError(f"Limits.{f.name} must be an int, got {value!r}")
        if self.open_files < 8:
            raise ValueError(f"Limits.open_files={self.open_files} is too small for Python; use >= 8")
        if self.memory_bytes < 32 * _MiB:
            raise ValueError(
                f"Limits.memory_bytes={self.memory_bytes} is too small for Python to start; use >= 32 MiB"
            )


@dataclass(frozen=True)
class Result:
    """What one run did.

    - `stdout`, `stderr`: captured text (UTF-8, undecodable bytes replaced), at most
      `Limits.output_bytes` bytes each.
    - `exit`: exit status in shell convention: the code's exit code, or 128 + N when a signal N
      ended it (137 after a SIGKILL, which is how every kill by the sandbox ends).
    - `timed_out`: the wall-clock timeout fired.
    - `killed_by`: `None` when the program ended on its own; else why it was ended: `"timeout"`,
      `"output_limit"`, `"cpu_limit"`, `"cancelled"` (the caller cancelled or closed the sandbox),
      or `"signal:SIGSEGV"`-style for any other fatal signal. (`MemoryError` is an ordinary
      exception: exit 1, `killed_by=None`, the traceback in `stderr`.)
    - `wall_s`: seconds from start to the last process reaped; `cpu_s`: CPU seconds of the
      run's reaped processes where the backend can tell (rlimit), else `None` (bwrap).
    - `sandbox`: the backend that ran it (`"bwrap"` or `"rlimit"`).
    """

    stdout: str
    stderr: str
    exit: int
    timed_out: bool
    killed_by: str | None
    wall_s: float = 0.0
    cpu_s: float | None = None
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    sandbox: str = ""

    @property
    def ok(self) -> bool:
        """The program exited 0 on its own."""
        return self.exit == 0 and self.killed_by is None
