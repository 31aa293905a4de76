"""Who sandboxed code runs as, and how everything that ran as it is found and ended afterwards.

As root, `RLIMIT_NPROC` is ignored, so every run gets a uid of its own: `lease()` takes the first
free uid of a reserved range (default 1,900,000,000 + 0..1023, override with
`LLM_GYM_SANDBOX_UIDS=START-END`), held by an `flock` on a root-only file for the run's lifetime --
so concurrent runs, in this process or another, never share a uid, and a crashed host frees its
leases. A uid of its own makes the process limit exact and cleanup complete: after a run, every
process of that uid is SIGKILLed at once by a `kill(-1)` sent as that uid (`kill_uid`: no fork can
slip past it), then rescanned and SIGKILLed through a pidfd (no pid-reuse race) until none is
left and, for the rlimit fallback, whatever it left in the world-writable directories is removed.
Not root, the code runs as the caller's own uid (`Identity.leased` is False) and the sweeps fall
back to a per-run marker in the environment. `command_prefix`/`popen_kwargs` turn an identity
into how to spawn as it (`setpriv` when present, which keeps `subprocess`'s fast vfork path).
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from dataclasses import dataclass, field

__all__ = [
    "WORLD_WRITABLE_DIRS",
    "Identity",
    "count_processes",
    "kill_processes",
    "kill_uid",
    "lease",
    "processes_of",
    "remove_files_of",
]

_DEFAULT_UID_START = 1_900_000_000
_DEFAULT_UID_COUNT = 1024
_LOCK_DIRS = ("/run/llm-gym-sandbox", "/var/lock/llm-gym-sandbox")
WORLD_WRITABLE_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/dev/mqueue")


@dataclass
class Identity:
    """The uid/gid one run executes as. `leased`: the uid belongs to this run alone (root hosts),
    so every process and file of that uid is the run's."""

    uid: int
    gid: int
    leased: bool
    _lock_fd: int | None = field(default=None, repr=False)

    def release(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing drops the flock
            self._lock_fd = None

    def command_prefix(self) -> list[str]:
        """An argv prefix that execs the rest as this identity ([] when no switch is needed or
        `setpriv` is absent -- then use `popen_kwargs`)."""
        if not self._switches():
            return []
        setpriv = _setpriv()
        if setpriv is None:
            return []
        return [setpriv, f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups", "--"]

    def popen_kwargs(self) -> dict:
        if not self._switches() or _setpriv() is not None:
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": []}

    def _switches(self) -> bool:
        return self.uid != os.geteuid() or self.gid != os.getegid()


def _setpriv() -> str | None:
    global _SETPRIV
    if _SETPRIV is _UNSET:
        _SETPRIV = shutil.which("setpriv", path="/usr/bin:/bin:/usr/sbin:/sbin")
    return _SETPRIV if isinstance(_SETPRIV, str) else None  # (set: a path or None)


_UNSET = object()
_SETPRIV: object = _UNSET


def uid_range() -> range:
    spec = os.environ.get("LLM_GYM_SANDBOX_UIDS", "")
    if not spec:
        return range(_DEFAULT_UID_START, _DEFAULT_UID_START + _DEFAULT_UID_COUNT)
    try:
        start_s, end_s = spec.split("-")
        start, end = int(start_s), int(end_s)
    except ValueError:
        raise ValueError(
            f"LLM_GYM_SANDBOX_UIDS={spec!r} is not START-END (e.g. 1900000000-1900001023)"
        ) from None
    if not 0 < start <= end < 2**31 - 1:
        raise ValueError(f"LLM_GYM_SANDBOX_UIDS={spec!r}: need 0 < START <= END < 2**31-1")
    return range(start, end + 1)


def _lock_dir() -> str:
    for d in _LOCK_DIRS:
        try:
            os.makedirs(d, mode=0o700, exist_ok=True)
            st = os.lstat(d)
        except OSError:
            continue
        # Only root may hold or squat leases: a sandbox must not be able to pre-create the dir.
        if stat.S_ISDIR(st.st_mode) and st.st_uid == 0 and not st.st_mode & 0o022:
            return d
    raise OSError(f"no root-only directory for uid leases among {_LOCK_DIRS}")


def lease(*, avoid_busy: bool = False) -> Identity:
    """An identity for one run: a uid of its own when root, else the caller's uid.

    `avoid_busy` (the rlimit fallback, which has no pid namespace) also skips uids that still own
    any process -- zombies of a killed run not yet reaped by the ancestor that adopted them count
    against the next run's process limit -- and kills what a host that died mid-run left behind
    under a uid nobody holds."""
    if os.geteuid() != 0:
        return Identity(os.geteuid(), os.getegid(), leased=False)
    uids = uid_range()
    directory = _lock_dir()
    busy: set[int] = set()
    if avoid_busy:
        lo, hi = uids.start, uids.stop
        busy = {uid for uid, _pid, _z in _all_processes() if lo <= uid < hi}
    # Lowest free uid first, so the lock files number the most runs ever held at once.
    for attempt in range(2):
        for uid in uids:
            fd = os.open(f"{directory}/{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (fcntl.LOCK_NB if attempt == 0 else 0))
            except OSError as e:
                os.close(fd)
                if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                    continue
                raise
            if uid in busy and attempt == 0:
                # Nobody holds it, yet it has processes: leftovers of a dead host, or zombies.
                kill_processes(lambda u, _uid=uid: u == _uid)
                os.close(fd)
                continue
            return Identity(uid, uid, leased=True, _lock_fd=fd)
    raise OSError("unreachable: blocking flock returned without a lease")


# ---------------------------------------------------------------------------------------------
# finding and ending processes


def _status_uid(pid: int | str) -> tuple[int, bool] | None:
    """(real uid, is_zombie) of a pid, or None when it is gone. /proc/PID/status is readable even
    for processes that made themselves non-dumpable (their /proc/PID turns root-owned)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            text = f.read(4096)
    except OSError:
        return None
    uid = None
    zombie = False
    for line in text.split(b"\n"):
        if line.startswith(b"State:"):
            zombie = b"Z" in line[6:9] or b"X" in line[6:9]
        elif line.startswith(b"Uid:"):
            uid = int(line.split()[1])
            break
    return None if uid is None else (uid, zombie)


def _all_processes():
    """(real uid, pid, is_zombie) of every process but this one."""
    me = os.getpid()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return
    for name in entries:
        if not name.isdigit() or int(name) == me:
            continue
        info = _status_uid(name)
        if info is not None:
            yield info[0], int(name), info[1]


def processes_of(match_uid, *, marker: bytes | None = None, zombies: bool = False) -> list[int]:
    """Live (non-zombie, unless `zombies`) pids other than this one whose real uid satisfies
    `match_uid(uid)`; with `marker`, only those whose initial environment contains it."""
    return _scan(match_uid, marker, zombies)[0]


def _scan(match_uid, marker: bytes | None, zombies: bool = False):
    """(`processes_of`'s pids, how many listed pids were gone before their status was read (or
    their environment, with `marker`), the pids of zombies whose uid matches)."""
    pids, vanished, dead = [], 0, set()
    me = os.getpid()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return pids, vanished, dead
    for name in entries:
        if not name.isdigit() or int(name) == me:
            continue
        info = _status_uid(name)
        if info is None:
            vanished += 1
            continue
        uid, zombie = info
        if not match_uid(uid):
            continue
        if zombie:
            dead.add(int(name))
            if not zombies:
                continue
        if marker is not None:
            has = _has_marker(name, marker)
            if not has:
                vanished += has is None
                continue
        pids.append(int(name))
    return pids, vanished, dead


def _has_marker(pid: int | str, marker: bytes) -> bool | None:
    """Whether the process's initial environment holds `marker`; None when it is gone."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return marker in f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    except OSError:  # EACCES: a non-dumpable process (which hides its environment)
        return False


def count_processes(uid: int) -> int:
    """Processes of `uid` as `RLIMIT_NPROC` counts them (zombies too), this one included."""
    me = 1 if os.getuid() == uid else 0
    return me + len(processes_of(lambda u: u == uid, zombies=True))


def _kill_pid(pid: int, match_uid, marker: bytes | None) -> None:
    try:
        pidfd = os.pidfd_open(pid)
    except (OSError, AttributeError):
        pidfd = None
    try:
        # Re-check after pinning the pid: if it was reused between the scan and pidfd_open, the
        # new process is what the pidfd (and /proc/PID) now refer to.
        if _matches(pid, match_uid, marker):
            if pidfd is not None:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _matches(pid: int, match_uid, marker: bytes | None) -> bool:
    info = _status_uid(pid)
    if info is None or info[1] or not match_uid(info[0]):
        return False
    return marker is None or bool(_has_marker(pid, marker))


def kill_processes(match_uid, *, marker: bytes | None = None, rounds: int = 200) -> int:
    """SIGKILL every live process matched as in `processes_of`, rescanning until none is left
    (a fork bomb keeps forking while it is being killed; its process limit bounds each round).
    Returns how many processes were killed. Their zombies are reaped by whichever ancestor adopts
    them -- `lease` does not hand out a uid while any remain, since zombies count in RLIMIT_NPROC."""
    killed: set[int] = set()
    zombies: set[int] = set()
    for i in range(rounds):
        pids, vanished, dead = _scan(match_uid, marker)
        new_dead, zombies = dead - zombies, zombies | dead
        if not pids:
            # Done, unless a listed process exited before its status was read (gone, or a new
            # zombie of the uid): it may have been one of ours that forked and exited, leaving
            # a child this listing never saw (a daemon's double fork did, ~1 run in 20 under load).
            if not vanished and not new_dead:
                break
            continue
        for pid in pids:
            _kill_pid(pid, match_uid, marker)
        if killed.issuperset(pids):
            # Only processes already SIGKILLed are left: they are still exiting (a loaded machine
            # can take milliseconds to tear one down). Back off briefly instead of spinning, so the
            # rounds cover that time (at most ~2 s in all) rather than ending with one still alive.
            time.sleep(min(0.001 * i, 0.01))
        killed.update(pids)
    return len(killed)


def kill_uid(ident: Identity, *, attempts: int = 3) -> bool:
    """SIGKILL every process of a leased uid at once: a short-lived process that switches to the
    uid calls `kill(-1, SIGKILL)`, which the kernel delivers to every process the uid may signal
    in one pass under the task list lock -- a fork racing it either completes first (and its
    child is signalled too) or is aborted. A /proc scan alone cannot promise that: a process
    listed, then gone after forking before its status is read, hands its uid to a child the scan
    never saw (a daemon's fork-and-exit did exactly that, ~1 run in 10 under load). The code can
    signal that killer too (it runs as the same uid), so it is retried while it dies by a signal;
    `kill_processes` runs after it in any case. Returns whether a killer ran to its end."""
    if not ident.leased:
        raise ValueError("kill_uid needs a leased uid: kill(-1) as the caller would hit the caller")
    argv = _killer_argv()
    prefix = ident.command_prefix()
    for _ in range(attempts):
        try:
            proc = subprocess.run(
                prefix + argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env={"PATH": "/usr/bin:/bin"},
                cwd="/",
                close_fds=True,
                timeout=10,
                **ident.popen_kwargs(),
            )
        except (OSError, subprocess.SubprocessError):
            continue
        if proc.returncode >= 0:  # procps exits 1 after kill(-1) even when it signalled: done
            return True
    return False


def _killer_argv() -> list[str]:
    global _KILLER
    if _KILLER is None:
        kill = shutil.which("kill", path="/usr/bin:/bin")
        if kill is not None:
            _KILLER = [kill, "-9", "-1"]  # the one spelling procps, util-linux and busybox share
        else:  # no procps: the interpreter (slower to start, always there)
            _KILLER = [sys.executable, "-S", "-I", "-c", "import os, signal; os.kill(-1, signal.SIGKILL)"]
    return _KILLER


_KILLER: list[str] | None = None


# ---------------------------------------------------------------------------------------------
# files


def remove_files_of(uid: int, dirs=WORLD_WRITABLE_DIRS) -> int:
    """Remove entries owned by `uid` directly under the world-writable directories (the only host
    places an unprivileged uid can create files). Returns how many were removed."""
    removed = 0
    for d in dirs:
        try:
            it = os.scandir(d)
        except OSError:
            continue
        with it:
            for entry in it:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if st.st_uid != uid:
                    continue
                try:
                    if stat.S_ISDIR(st.st_mode):
                        rmtree(entry.path)
                    else:
                        os.unlink(entry.path)
                    removed += 1
                except OSError:
                    pass
    return removed


def rmtree(path: str) -> None:
    """`shutil.rmtree` that also removes what the sandboxed code made unreadable (chmod 000)."""

    def onerror(func, p, exc_info):
        if isinstance(exc_info[1], FileNotFoundError):
            return
        try:
            os.chmod(os.path.dirname(p) or ".", 0o700)
            if os.path.isdir(p) and not os.path.islink(p):
                os.chmod(p, 0o700)
                shutil.rmtree(p, ignore_errors=True)
            elif func is not os.rmdir:
                os.unlink(p)
            else:
                os.rmdir(p)
        except OSError:
            pass

    shutil.rmtree(path, onerror=onerror)
