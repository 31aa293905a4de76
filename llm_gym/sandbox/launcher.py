"""The few lines of Python that run first inside every sandbox, before the untrusted code.

Both backends start the same command, `python -S -s -c LAUNCHER FDS RLIMITS main.py ARGS...`. The
launcher reads the code from an inherited file descriptor (a memfd, so the code never touches the
host disk and no command-line length limit applies), applies the run's rlimits to itself (they are
inherited by everything it starts), sets `no_new_privs` when asked, signals "ready" on a second
descriptor -- which is how the host tells a sandbox that failed to start from code that failed,
and when the code's wall-clock time starts -- closes every descriptor but 0, 1 and 2, and executes
the code as `__main__` of a file called `main.py`. Tracebacks look like plain `python main.py`
ones: the launcher's own frame is dropped and the source lines are shown. Nothing here imports the
rest of `llm_gym`; the host side builds the argv (`launcher_command`, `rlimits_for`).
"""

from __future__ import annotations

from collections.abc import Sequence

from .types import Limits

__all__ = ["LAUNCHER", "launcher_command", "rlimits_for"]

CODE_FILENAME = "main.py"

# Runs as `-c`, so its frames carry the filename "<string>"; the excepthook below drops them. It
# imports nothing but `resource` at startup (json or linecache would pull in `re`: +8 ms a run);
# argv: FDS ("code_fd ready_fd no_new_privs"), RLIMITS ("NAME=soft:hard,..."), FILENAME, ARGS...
LAUNCHER = r"""
import os, sys, resource
code_fd, ready_fd, nnp = map(int, sys.argv[1].split())
chunks = []
while True:
    chunk = os.read(code_fd, 1 << 20)
    if not chunk:
        break
    chunks.append(chunk)
os.close(code_fd)
src_bytes = b"".join(chunks)
del chunks
if nnp:
    import ctypes
    if ctypes.CDLL(None, use_errno=True).prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
for item in sys.argv[2].split(","):
    name, limits = item.split("=")
    soft, hard = map(int, limits.split(":"))
    resource.setrlimit(getattr(resource, name), (soft, hard))
filename = sys.argv[3]
sys.argv = [filename] + sys.argv[4:]
os.write(ready_fd, b"R")
os.closerange(3, 1 << 16)

def _hook(t, v, tb, _orig=sys.excepthook, _src=src_bytes, _name=filename):
    while tb is not None and tb.tb_frame.f_code.co_filename == "<string>":
        tb = tb.tb_next
    if isinstance(v, BaseException):  # the printers read v.__traceback__, not tb
        v = v.with_traceback(tb)
    try:  # the pure-Python printer shows source lines from linecache (the C one reads files)
        import linecache, traceback
        text = _src.decode("utf-8")
        linecache.cache[_name] = (len(text), None, text.splitlines(True), _name)
        traceback.print_exception(t, v, tb)
    except BaseException:
        _orig(t, v, tb)

sys.excepthook = _hook
main = type(sys)("__main__")
main.__file__ = filename
main.__builtins__ = __builtins__
sys.modules["__main__"] = main
exec(compile(src_bytes, filename, "exec"), main.__dict__)
"""


def rlimits_for(limits: Limits, *, nproc: int) -> list[list]:
    """The `[name, soft, hard]` triples the launcher applies (`nproc` is computed by the backend:
    it depends on how the kernel counts processes for the run's uid)."""
    cpu = int(limits.cpu_s)
    return [
        ["RLIMIT_CORE", 0, 0],
        ["RLIMIT_CPU", cpu, cpu + 1],  # SIGXCPU at the soft limit, SIGKILL a second later
        ["RLIMIT_AS", limits.memory_bytes, limits.memory_bytes],
        ["RLIMIT_FSIZE", limits.file_bytes, limits.file_bytes],
        ["RLIMIT_NOFILE", limits.open_files, limits.open_files],
        ["RLIMIT_NPROC", nproc, nproc],
        ["RLIMIT_MSGQUEUE", 0, 0],
    ]


def launcher_command(
    python: str,
    *,
    code_fd: int,
    ready_fd: int,
    rlimits: list[list],
    argv: Sequence[str] = (),
    no_new_privs: bool = False,
) -> list[str]:
    """`[python, "-S", "-s", "-c", LAUNCHER, ...]`: no site-packages, no user site, stdlib only."""
    fds = f"{code_fd} {ready_fd} {int(no_new_privs)}"
    limits = ",".join(f"{name}={int(soft)}:{int(hard)}" for name, soft, hard in rlimits)
    return [python, "-S", "-s", "-c", LAUNCHER, fds, limits, CODE_FILENAME, *argv]
