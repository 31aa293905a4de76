"""One sandboxed run from spawn to reap: the part both backends share.

A backend turns a `Job` (code, stdin, files, argv, limits) into a `Launch`: the argv to spawn (its
launcher, see `launcher.py`), descriptors to pass, and how to kill everything the run started.
`Execution.run()` spawns it in a session of its own and drives one `select` loop over stdout,
stderr, stdin, the launcher's "ready" descriptor and a pidfd of the child: output beyond
`Limits.output_bytes` kills the run, the wall-clock deadline (`Limits.timeout_s` from "ready")
kills it, `cancel()` from any thread kills it. Whatever ends it, the loop reaps the child
(`wait4`, which also yields the CPU time), lets the backend end leftovers, and closes every
descriptor it opened: a finished `Execution` leaves no process, descriptor or directory behind.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field

from .identity import Identity
from .types import Limits, Result, SandboxError

__all__ = ["Execution", "Job", "Launch", "base_env", "memfd"]

_READ = 1 << 16
_DRAIN_S = 2.0  # after the main process is gone, how long leftover writers may hold a pipe open
_KILL_ESCALATE_S = 2.0  # after a kill, when to kill harder if the child is still there


def base_env(home: str, marker: str, extra: dict[str, str]) -> dict[str, str]:
    """The whole environment of a sandboxed process (nothing is inherited from the host)."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": home,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONUTF8": "1",
        "PYTHONHASHSEED": "0",  # set iteration order is the same on every run
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    env.update(extra)
    env["LLM_GYM_SANDBOX_RUN"] = marker
    return env


@dataclass
class Job:
    """What to run. `files` are relative paths in the private working directory."""

    code: bytes
    stdin: bytes | None
    files: dict[str, bytes]
    argv: list[str]
    env: dict[str, str]
    limits: Limits
    marker: str  # unique per run; in the environment of the run's processes
    identity: Identity | None = None


class Launch:
    """How one job is started and stopped; backends subclass it. `pass_fds` stay open in the
    child; `extra_fds` are read by the loop and handed to `on_extra`."""

    argv: list[str]
    pass_fds: tuple[int, ...] = ()
    cwd: str = "/"
    env: dict[str, str]
    popen_kwargs: dict
    extra_fds: tuple[int, ...] = ()
    signal_in_exit_code: bool = False  # the child reports "killed by N" as exit code 128 + N
    cpu_time_known: bool = True  # wait4 on the child covers the code's CPU time

    def after_spawn(self) -> None:
        """The child is running: close what only the child needed (write ends, memfds)."""

    def on_extra(self, fd: int, data: bytes) -> None:
        """Bytes read from one of `extra_fds` (b"" at EOF)."""

    def kill(self, pid: int, *, harder: bool = False) -> None:
        """SIGKILL everything of the run (called with the child not yet reaped)."""
        _killpg(pid)

    def after_exit(self, pid: int) -> None:
        """The main child has exited (still a zombie): end whatever it left running."""

    def close(self) -> None:
        """Release every resource; idempotent."""


def memfd(data: bytes, name: str = "llm-gym-sandbox") -> int:
    """An anonymous in-memory file holding `data`, positioned at its start (close-on-exec; pass it
    with `pass_fds`). Nothing on disk, nothing to clean up but the descriptor."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _close(fd: int | None) -> None:
    if fd is not None:
        try:
            os.close(fd)
        except OSError:
            pass


@dataclass
class _Stream:
    fd: int
    cap: int
    data: bytearray = field(default_factory=bytearray)
    truncated: bool = False
    open: bool = True


class Execution:
    """Runs one `Launch` to completion. `run()` once, from one thread; `cancel()` from any."""

    def __init__(self, backend_name: str, job: Job, launch_factory):
        self._name = backend_name
        self._job = job
        self._launch_factory = launch_factory
        self._lock = threading.Lock()
        self._launch: Launch | None = None
        self._proc: subprocess.Popen | None = None
        self._reaped = False
        self._kill_reason: str | None = None
        self._killed_at: float | None = None
        self._escalated = False

    # -- control, from any thread -------------------------------------------------------------

    def cancel(self, reason: str = "cancelled") -> None:
        self._kill(reason)

    def _kill(self, reason: str, *, harder: bool = False) -> None:
        with self._lock:
            if self._kill_reason is None:
                self._kill_reason = reason
                self._killed_at = time.monotonic()
            if self._proc is not None and not self._reaped and self._launch is not None:
                self._launch.kill(self._proc.pid, harder=harder)

    # -- the run ------------------------------------------------------------------------------

    def run(self) -> Result:
        job = self._job
        t0 = time.monotonic()
        ready_r, ready_w = os.pipe2(os.O_CLOEXEC)
        self._status, self._rusage = 0, None
        try:
            launch = self._launch_factory(job, ready_w)
            with self._lock:
                self._launch = launch
                if self._kill_reason is not None:
                    raise _Cancelled
            try:
                proc = subprocess.Popen(
                    launch.argv,
                    stdin=subprocess.PIPE if job.stdin else subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    pass_fds=tuple(launch.pass_fds) + (ready_w,),
                    cwd=launch.cwd,
                    env=launch.env,
                    start_new_session=True,
                    **launch.popen_kwargs,
                )
            except OSError as e:
                raise SandboxError(f"{self._name} sandbox could not start {launch.argv[0]!r}: {e}") from e
            with self._lock:
                self._proc = proc
            _close(ready_w)
            ready_w = None
            launch.after_spawn()
            if self._kill_reason is not None:  # cancelled while spawning
                self._kill(self._kill_reason)
            status, rusage, ready, out, err = self._loop(proc, launch, ready_r)
        except _Cancelled:
            return Result("", "", 137, False, "cancelled", wall_s=time.monotonic() - t0, sandbox=self._name)
        finally:
            _close(ready_w)
            _close(ready_r)
            launch = self._launch
            if self._proc is not None and not self._reaped:
                self._force_reap(self._proc, launch)
            if self._proc is not None:
                for f in (self._proc.stdin, self._proc.stdout, self._proc.stderr):
                    if f is not None:
                        try:
                            f.close()
                        except OSError:
                            pass
            if launch is not None:
                launch.close()
            if job.identity is not None:
                job.identity.release()
        wall = time.monotonic() - t0
        assert launch is not None  # the try above completed, so it launched
        code = os.waitstatus_to_exitcode(status)
        sig = -code if code < 0 else 0
        exit_status = 128 + sig if code < 0 else code
        if not sig and launch.signal_in_exit_code and 128 < code <= 128 + 64:
            sig = code - 128
        cpu = None
        if rusage is not None and launch.cpu_time_known:
            cpu = rusage.ru_utime + rusage.ru_stime
        killed_by = self._kill_reason
        if killed_by is None and not ready:
            raise SandboxError(
                f"{self._name} sandbox failed to start the code (exit {exit_status}): "
                + err.data.decode("utf-8", "replace").strip()[-2000:]
            )
        if killed_by is None and sig:
            if sig == signal.SIGXCPU or (
                sig == signal.SIGKILL and cpu is not None and cpu >= job.limits.cpu_s
            ):
                killed_by = "cpu_limit"
            else:
                try:
                    killed_by = f"signal:{signal.Signals(sig).name}"
                except ValueError:
                    killed_by = f"signal:{sig}"
        return Result(
            stdout=out.data.decode("utf-8", "replace"),
            stderr=err.data.decode("utf-8", "replace"),
            exit=exit_status,
            timed_out=killed_by == "timeout",
            killed_by=killed_by,
            wall_s=wall,
            cpu_s=cpu,
            stdout_truncated=out.truncated,
            stderr_truncated=err.truncated,
            sandbox=self._name,
        )

    def _loop(self, proc: subprocess.Popen, launch: Launch, ready_r: int):
        job = self._job
        limits = job.limits
        assert proc.stdout is not None and proc.stderr is not None  # both are pipes
        out = _Stream(proc.stdout.fileno(), limits.output_bytes)
        err = _Stream(proc.stderr.fileno(), limits.output_bytes)
        streams = {out.fd: out, err.fd: err}
        stdin_data = memoryview(job.stdin) if job.stdin else None
        stdin_fd = proc.stdin.fileno() if proc.stdin is not None else None
        sel = selectors.DefaultSelector()
        pidfd = None
        try:
            try:
                pidfd = os.pidfd_open(proc.pid)
            except (OSError, AttributeError):  # Linux < 5.3: poll with waitid(WNOWAIT)
                pidfd = None
            for fd in (out.fd, err.fd, ready_r, *launch.extra_fds):
                os.set_blocking(fd, False)
                sel.register(fd, selectors.EVENT_READ)
            if stdin_fd is not None:
                os.set_blocking(stdin_fd, False)
                sel.register(stdin_fd, selectors.EVENT_WRITE)
            if pidfd is not None:
                sel.register(pidfd, selectors.EVENT_READ)
            extra_open = set(launch.extra_fds)
            ready = False
            deadline = time.monotonic() + limits.setup_timeout_s
            exited_at = None
            while True:
                now = time.monotonic()
                if exited_at is None:
                    if self._kill_reason is None and now >= deadline:
                        self._kill("timeout")
                    elif (
                        self._killed_at is not None
                        and not self._escalated
                        and now - self._killed_at > _KILL_ESCALATE_S
                    ):
                        self._escalated = True
                        self._kill(self._kill_reason or "timeout", harder=True)
                    if pidfd is None and _exited(proc.pid):
                        self._on_exit(proc, launch)
                        exited_at = now
                if exited_at is not None and (
                    not any(s.open for s in streams.values()) or now - exited_at > _DRAIN_S
                ):
                    break
                if exited_at is not None or self._killed_at is not None:
                    wait = 0.05
                else:
                    wait = max(0.0, deadline - now)
                if pidfd is None:
                    wait = min(wait, 0.02)
                for key, _mask in sel.select(wait):
                    fd = key.fd
                    if pidfd is not None and fd == pidfd:
                        sel.unregister(pidfd)
                        self._on_exit(proc, launch)
                        exited_at = time.monotonic()
                    elif fd == stdin_fd:
                        # stdin is a pipe exactly when there is stdin data
                        assert stdin_fd is not None and stdin_data is not None and proc.stdin is not None
                        try:
                            n = os.write(stdin_fd, stdin_data[:_READ])
                            stdin_data = stdin_data[n:]
                        except BlockingIOError:
                            continue
                        except OSError:  # EPIPE: the code closed its stdin
                            stdin_data = stdin_data[:0]
                        if not stdin_data:
                            sel.unregister(stdin_fd)
                            proc.stdin.close()
                            stdin_fd = None
                    else:
                        data = _read(fd)
                        if data is None:
                            continue
                        if fd == ready_r:
                            if data and not ready:
                                ready = True
                                deadline = time.monotonic() + limits.timeout_s
                            elif not data:
                                sel.unregister(fd)
                        elif fd in streams:
                            s = streams[fd]
                            if not data:
                                sel.unregister(fd)
                                s.open = False
                            elif not s.truncated:
                                room = s.cap - len(s.data)
                                s.data += data[:room]
                                if len(data) > room:
                                    s.truncated = True
                                    self._kill("output_limit")
                        elif fd in extra_open:
                            launch.on_extra(fd, data)
                            if not data:
                                sel.unregister(fd)
                                extra_open.discard(fd)
            if not self._reaped:  # the drain ran out: something outside kept a pipe open
                self._force_reap(proc, launch)
            if not ready:  # written before the exit we saw, whatever order the events came in
                ready = bool(_read(ready_r))
            return self._status, self._rusage, ready, out, err
        finally:
            sel.close()
            _close(pidfd)

    def _on_exit(self, proc: subprocess.Popen, launch: Launch) -> None:
        # The child is a zombie: its pid (and process group id) cannot be reused yet, so the
        # backend can still end what it left behind by that id. Then reap it.
        launch.after_exit(proc.pid)
        self._reap(proc)

    def _reap(self, proc: subprocess.Popen) -> None:
        # Under the lock, so a concurrent cancel() never signals a pid that was just freed.
        with self._lock:
            try:
                _pid, status, rusage = os.wait4(proc.pid, 0)
            except ChildProcessError:  # someone else reaped it (should not happen)
                status, rusage = 0, None
            self._reaped = True
            proc.returncode = os.waitstatus_to_exitcode(status)  # so Popen never waits again
        self._status, self._rusage = status, rusage

    def _force_reap(self, proc: subprocess.Popen, launch: Launch | None) -> None:
        """Kill and reap the child no matter what (error paths, a child that kept its pipes)."""
        if self._reaped:
            return
        with self._lock:
            if self._kill_reason is None:
                self._kill_reason = "cancelled"
        if launch is not None:
            launch.kill(proc.pid, harder=True)
            launch.after_exit(proc.pid)
        else:
            _killpg(proc.pid)
        self._reap(proc)


class _Cancelled(Exception):
    pass


def _exited(pid: int) -> bool:
    """The child has exited (without reaping it)."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None


def _read(fd: int) -> bytes | None:
    """Up to 64 KiB; b"" at EOF; None when nothing is there after all."""
    try:
        return os.read(fd, _READ)
    except BlockingIOError:
        return None
    except OSError:
        return b""
