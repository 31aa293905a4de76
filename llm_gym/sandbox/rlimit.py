"""The fallback backend: a plain subprocess under the same rlimits and timeouts, no namespaces.

For machines where bwrap cannot create namespaces (many Docker containers). The code runs with the
same launcher, limits, output caps, wall-clock kill and cleanup, in a private temporary directory
(its cwd, `HOME` and `TMPDIR`) -- but it shares the host's network, filesystem view and process
table, which is why it is reported as weaker (`isolation` below, a `SandboxWeakerWarning` once).
As root it runs as a leased uid of its own (see `identity.py`) with `no_new_privs`: the process
limit holds, it cannot signal or read what only root may (the host process, `/root`,
`/etc/shadow`), and after the run every process of that uid is killed and everything it created in
the world-writable directories is removed. Not root, it runs as the caller -- it can then read the
caller's files and signal the caller's processes -- and leftovers are found by a per-run marker in
their environment, rescanning until a scan finds none and saw nothing of the uid exit mid-scan
(a daemon's fork-and-exit otherwise hid its child from the scan). That sweep is not atomic the way
the root path's `kill(-1)` is: code that hides its environment (non-dumpable) or forks and exits
without pause can outlast it -- use bwrap, or root, where that matters.
"""

from __future__ import annotations

import os
import tempfile

from .execution import Job, Launch, _close, _killpg, base_env, memfd
from .identity import count_processes, kill_processes, kill_uid, lease, remove_files_of, rmtree
from .interpreter import Interpreter
from .launcher import launcher_command, rlimits_for

__all__ = ["RlimitBackend"]

_TMP_PREFIX = "llm-gym-sandbox-"


class RlimitBackend:
    name = "rlimit"

    def __init__(self, interpreter: Interpreter):
        self.interpreter = interpreter
        root = os.geteuid() == 0
        self.isolation = {
            "network": False,
            "filesystem": False,  # the host's files, as far as the uid may read them
            "processes": root,  # as root: a uid of its own, which cannot signal the host
            "ipc": False,
            "uid": root,
        }

    def describe(self) -> dict:
        return {"weaker": "no namespaces: the code shares the host's network and filesystem view"}

    def launch(self, job: Job, ready_w: int) -> _RlimitLaunch:
        job.identity = lease(avoid_busy=True)
        return _RlimitLaunch(self, job, ready_w)


class _RlimitLaunch(Launch):
    def __init__(self, backend: RlimitBackend, job: Job, ready_w: int):
        ident = job.identity
        assert ident is not None  # leased by RlimitBackend.launch
        self._ident = ident
        self._marker = ("LLM_GYM_SANDBOX_RUN=" + job.marker).encode()
        self._code_fd: int | None = None
        self._closed = False
        self._swept = False
        self.tmpdir = tempfile.mkdtemp(prefix=_TMP_PREFIX)
        try:
            for name, data in job.files.items():
                path = os.path.join(self.tmpdir, name)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "wb") as f:
                    f.write(data)
            if ident.leased:
                for dirpath, dirnames, filenames in os.walk(self.tmpdir):
                    for n in [*dirnames, *filenames]:
                        os.chown(os.path.join(dirpath, n), ident.uid, ident.gid, follow_symlinks=False)
                os.chown(self.tmpdir, ident.uid, ident.gid)
            self._code_fd = memfd(job.code, "llm-gym-code")
            limits = job.limits
            if ident.leased:
                nproc = limits.processes
            else:  # counted over all of the caller's processes
                nproc = limits.processes + count_processes(ident.uid)
            prefix = ident.command_prefix()
            if prefix:
                prefix = prefix[:-1] + ["--no-new-privs", "--"]
            cmd = launcher_command(
                backend.interpreter.path,
                code_fd=self._code_fd,
                ready_fd=ready_w,
                rlimits=rlimits_for(limits, nproc=nproc),
                argv=job.argv,
                no_new_privs=not prefix,
            )
        except BaseException:
            self.close()
            raise
        self.argv = prefix + cmd
        self.popen_kwargs = ident.popen_kwargs()
        self.pass_fds = (self._code_fd,)
        self.cwd = self.tmpdir
        self.env = base_env(self.tmpdir, job.marker, job.env)

    def after_spawn(self) -> None:
        _close(self._code_fd)
        self._code_fd = None

    def _end_all(self) -> None:
        self._swept = True
        ident = self._ident
        if ident.leased:
            kill_uid(ident)  # atomic: no fork slips between a scan's listing and its kill
            kill_processes(lambda u, _uid=ident.uid: u == _uid)  # and wait until they are gone
        else:
            kill_processes(lambda u, _uid=ident.uid: u == _uid, marker=self._marker)

    def kill(self, pid: int, *, harder: bool = False) -> None:
        _killpg(pid)
        self._end_all()

    def after_exit(self, pid: int) -> None:
        _killpg(pid)  # the group outlives its leader; its id is not reused while the leader is a zombie
        self._end_all()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.after_spawn()
        if self._ident.leased:
            if not self._swept:  # after_exit normally did it; nothing of the uid is left since
                self._end_all()
            remove_files_of(self._ident.uid)
        rmtree(self.tmpdir)
