"""Grading model-written Python in `llm_gym.sandbox` so that the code cannot forge its own pass.

The catalog's code envs (`humaneval.py`, `pyfunc.py`, `bugfix.py`) hand a `CodeTask` and the
program read from the model's reply to `grade()`; it runs one sandboxed program and returns a
`Verdict` (which tests passed, and why the others did not). The sandbox program is built here and
has two processes:

- the **judge** (the sandbox's `main.py`) never executes model code. It first makes itself
  non-dumpable (`prctl(PR_SET_DUMPABLE, 0)`: no other process of the sandbox, all of which run as
  the same unprivileged uid without capabilities, may ptrace it or open its `/proc/PID/{mem,fd,
  environ}`), ignores the signals that would interrupt it, then starts
- the **worker**: a fresh interpreter (`python -I -S`, stdin/stdout/stderr on `/dev/null`) that
  receives the task's prompt and the program over a pipe, runs the prompt (its imports and
  helpers) and then the program, each compiled as a module of its own into the one namespace of
  module `solution` -- so any valid module is a program: a `from __future__` import, a module
  docstring, a shebang or an encoding line may open it --, and then answers calls: `(args,
  kwargs)` in, the return value or the name of the raised exception out, over a second pipe.
  Which program runs is decided on the host, by the env's answer contract
  (`envs_catalog.code.contract.SolutionAnswer`): what is graded is the program that was read.

The judge runs the *trusted* tests -- HumanEval's `check(candidate)` statements, or PyFunc's list
of inputs -- with `candidate` bound to a proxy that forwards each call to the worker. Values cross
the pipes as tagged JSON (`_WIRE`: None, bool, int, float, str, bytes, complex, list, tuple, dict,
set, frozenset) and are rebuilt from plain data, so a return value with a forged `__eq__`, a
subclass or a monkeypatched builtin does not survive the trip: what the test compares is a plain
builtin value. The worker never sees the tests, the expected outputs or the judge's code; no test
file exists on disk (the sandbox reads `main.py` from a memfd, closed before the worker exists).
Each test statement has a wall-clock budget; a worker that runs past it, exits (`sys.exit`,
`os._exit`, a crash) or breaks the protocol is killed, that test fails, and a fresh worker serves
the next one. A timeout or a dead worker inside a test is recorded by the judge itself, so a test
that swallows exceptions cannot turn it into a pass, and a candidate's `StopIteration` is not
re-raised as one (it could end a `map` early and make `all(...)` true). The judge seeds `random`
before the tests (HumanEval/32, 38, 50, 53 draw random inputs), so grading is deterministic.

The verdict reaches the host as one stdout line authenticated with an HMAC-SHA256 under a 32-byte
key drawn per run on the host and embedded only in the judge's code. Assume the worker reaches
the sandbox's stdout anyway (bwrap's pid 1 holds it, and the sandbox's uid may ptrace that
process), reads the judge's line off the pipe, kills or stops the judge: without the key it can
only suppress or corrupt a verdict, never produce one that verifies. (This rests on the kernel's
ptrace rule that a non-dumpable process is off limits to a tracer without CAP_SYS_PTRACE in its
user namespace; tests/envs_catalog/code/test_code_envs.py probes it on every backend.) The host
accepts a run only when it ended on its own with exit status 0 and carries exactly one verified
verdict; anything else scores as no tests passed (`Verdict.status` says why). For PyFunc the
judge does not even compare: it reports the raw return values and the host compares them with
expected outputs computed by the trusted reference, which never enter the sandbox.

Runs go through one `SandboxPool` per process and backend (`shared_pool`, bounded by
`$LLM_GYM_CODE_CONCURRENCY` or the CPU count); each run is a fresh sandbox that is gone when `grade`
returns (cancelling the awaiting task kills it), so an episode holds nothing to release.
Weaker fallback: under the `rlimit` backend run by a non-root user the sandbox shares the caller's
uid, and the worker could read the host's own memory -- `Verdict.sandbox` (an env metric) says
which backend graded.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import math
import os
import secrets
import threading
import warnings
from dataclasses import dataclass, field
from typing import Any

from llm_gym.sandbox import Limits, Result, SandboxPool, SandboxWeakerWarning

__all__ = [
    "CodeTask",
    "Verdict",
    "close_shared_pools",
    "decode_value",
    "encode_value",
    "grade",
    "grade_sync",
    "shared_pool",
    "strict_equal",
]

VERDICT_MARK = "LLMGYM-JUDGE "
MAX_CODE_CHARS = 100_000  # the envs cap responses lower (their max_chars knob)
_MAX_MESSAGE_BYTES = 1 << 20  # one worker answer
_MAX_VALUE_BYTES = 64 << 10  # one PyFunc return value reported to the host
_STARTUP_SLACK_S = 3.0  # sandbox wall clock beyond the judge's own budget (startup, reporting)

# Tagged JSON shared by the judge, the worker and the host (the sandbox has the stdlib only, so
# it is source text). encode: the sending side (untrusted in the worker: whatever it sends is only
# data); decode: rebuilds plain builtin values and rejects anything else.
_WIRE = r'''
def wire_encode(obj, _depth=0):
    if _depth > 100:
        raise ValueError("value nested too deeply")
    if obj is None or obj is True or obj is False:
        return obj
    if isinstance(obj, bool):
        return bool(obj)
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return float(obj)
    if isinstance(obj, str):
        return str(obj)
    d = _depth + 1
    if isinstance(obj, list):
        return [wire_encode(x, d) for x in obj]
    if isinstance(obj, tuple):
        return {"t": [wire_encode(x, d) for x in obj]}
    if isinstance(obj, dict):
        return {"d": [[wire_encode(k, d), wire_encode(v, d)] for k, v in obj.items()]}
    if isinstance(obj, frozenset):
        return {"f": [wire_encode(x, d) for x in obj]}
    if isinstance(obj, set):
        return {"s": [wire_encode(x, d) for x in obj]}
    if isinstance(obj, (bytes, bytearray)):
        return {"b": bytes(obj).hex()}
    if isinstance(obj, complex):
        return {"c": [float(obj.real), float(obj.imag)]}
    raise TypeError("cannot pass a value of type " + type(obj).__name__)


def wire_decode(tree, _depth=0):
    if _depth > 100:
        raise ValueError("value nested too deeply")
    kind = type(tree)
    if tree is None or kind is bool or kind is int or kind is float or kind is str:
        return tree
    d = _depth + 1
    if kind is list:
        return [wire_decode(x, d) for x in tree]
    if kind is dict and len(tree) == 1:
        tag, val = next(iter(tree.items()))
        if tag == "b" and type(val) is str:
            return bytes.fromhex(val)
        if type(val) is not list:
            raise ValueError("bad value")
        if tag == "t":
            return tuple(wire_decode(x, d) for x in val)
        if tag == "s":
            return set(wire_decode(x, d) for x in val)
        if tag == "f":
            return frozenset(wire_decode(x, d) for x in val)
        if tag == "c" and len(val) == 2 and all(type(x) in (int, float) for x in val):
            return complex(val[0], val[1])
        if tag == "d":
            out = {}
            for pair in val:
                if type(pair) is not list or len(pair) != 2:
                    raise ValueError("bad dict item")
                out[wire_decode(pair[0], d)] = wire_decode(pair[1], d)
            return out
    raise ValueError("bad value")
'''

# The worker: runs the model's code and answers calls. Everything here is as untrusted as the
# code it runs (the code can rewrite any of it); the judge relies on none of it.
_WORKER = r'''
import os, sys, json, types
_REQ, _RESP = int(sys.argv[1]), int(sys.argv[2])

def _read(n):
    buf = b""
    while len(buf) < n:
        chunk = os.read(_REQ, n - len(buf))
        if not chunk:
            os._exit(0)
        buf += chunk
    return buf

def _recv():
    return json.loads(_read(int.from_bytes(_read(8), "big")))

def _send(obj):
    data = json.dumps(obj).encode("utf-8", "surrogatepass")
    data = len(data).to_bytes(8, "big") + data
    while data:
        data = data[os.write(_RESP, data):]
''' + _WIRE + r'''
def _why(e):
    line = getattr(e, "lineno", None)
    return (type(e).__name__ + ": " + str(getattr(e, "msg", e))[:200]
            + ("" if line is None else " (line %s)" % line))

msg = _recv()
try:
    # Two compilations: the program is a module of its own, so a `from __future__` import at
    # its top is still its first statement.
    prompt = compile(msg["prompt"], "prompt.py", "exec")
    program = compile(msg["code"], "solution.py", "exec")
except BaseException as e:
    _send({"load": "syntax_error", "detail": _why(e)})
    os._exit(0)
mod = types.ModuleType("solution")
mod.__file__ = "solution.py"
sys.modules["solution"] = mod
try:
    exec(prompt, mod.__dict__)
    exec(program, mod.__dict__)
except BaseException as e:
    _send({"load": "exception", "detail": _why(e)})
    os._exit(0)
fn = mod.__dict__.get(msg["entry"])
if not callable(fn):
    _send({"load": "no_function", "detail": "no callable %r" % msg["entry"]})
    os._exit(0)
del msg
_send({"load": "ok"})
while True:
    req = _recv()
    try:
        out = {"ok": wire_encode(fn(*wire_decode(req["a"]), **wire_decode(req["k"])))}
    except BaseException as e:
        out = {"raise": type(e).__name__}
    try:
        _send(out)
    except BaseException as e:
        _send({"raise": type(e).__name__})
'''

# The judge (the sandbox's main.py). __KEY__ and __SPEC__ are filled in per run.
_JUDGE = r'''
import os, sys
try:
    import ctypes
    _libc = ctypes.CDLL(None, use_errno=True)
    if _libc.prctl(4, 0, 0, 0, 0) != 0 or _libc.prctl(3, 0, 0, 0, 0) != 0:  # PR_SET/GET_DUMPABLE
        os._exit(70)
except Exception:
    os._exit(70)
import signal
for _name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGPIPE",
              "SIGALRM", "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGVTALRM", "SIGPROF", "SIGWINCH",
              "SIGXFSZ"):
    try:
        signal.signal(getattr(signal, _name), signal.SIG_IGN)
    except (AttributeError, OSError, ValueError):
        pass
import base64, builtins, hmac, io, json, random, select, subprocess, time
_KEY = bytes.fromhex("__KEY__")
SPEC = json.loads(base64.b64decode("__SPEC__"))
''' + _WIRE + r'''
_START = time.monotonic()
_END = _START + SPEC["budget_s"]
_MAX_MSG = SPEC["max_message"]
_RAISABLE = {n: getattr(builtins, n) for n in (
    "ArithmeticError", "AssertionError", "AttributeError", "EOFError", "IndexError", "KeyError",
    "LookupError", "MemoryError", "NameError", "NotImplementedError", "OverflowError",
    "RecursionError", "RuntimeError", "TypeError", "UnboundLocalError", "UnicodeError",
    "ValueError", "ZeroDivisionError")}


class _Gone(BaseException):
    """The worker timed out, exited or broke the protocol (a BaseException: tests that catch
    Exception do not swallow it, and the judge records the reason anyway)."""


class Worker:
    def __init__(self):
        req_r, self.w = os.pipe()
        self.r, resp_w = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", SPEC["worker"], str(req_r), str(resp_w)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                pass_fds=(req_r, resp_w), close_fds=True, start_new_session=True,
                env={"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONUTF8": "1",
                     "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1",
                     "HOME": os.environ.get("HOME", "/tmp")})
        finally:
            os.close(req_r)
            os.close(resp_w)
        os.set_blocking(self.w, False)
        self.buf = b""

    def _wait(self, fd, write, deadline):
        left = deadline - time.monotonic()
        if left <= 0:
            raise _Gone("timeout")
        r, w, _ = select.select([] if write else [fd], [fd] if write else [], [], left)
        if not (r or w):
            raise _Gone("timeout")

    def call(self, obj, deadline):
        data = json.dumps(obj).encode("utf-8", "surrogatepass")
        data = len(data).to_bytes(8, "big") + data
        while data:
            self._wait(self.w, True, deadline)
            try:
                data = data[os.write(self.w, data):]
            except BlockingIOError:
                continue
            except OSError:
                raise _Gone("exit")
        need = None
        while True:
            if need is None and len(self.buf) >= 8:
                need = int.from_bytes(self.buf[:8], "big")
                if need > _MAX_MSG:
                    raise _Gone("answer_too_big")
            if need is not None and len(self.buf) >= 8 + need:
                payload, self.buf = self.buf[8:8 + need], self.buf[8 + need:]
                try:
                    return json.loads(payload)
                except (ValueError, RecursionError):
                    raise _Gone("protocol")
            self._wait(self.r, False, deadline)
            try:
                chunk = os.read(self.r, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                raise _Gone("exit")
            self.buf += chunk

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            self.proc.kill()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except Exception:
            pass
        for fd in (self.w, self.r):
            try:
                os.close(fd)
            except OSError:
                pass


_state = {"worker": None, "why": None, "deadline": _END, "load": None, "first_load": None,
          "spawns": 0, "dead": False}


def _clip(value, n=200):
    return value[:n] if type(value) is str else ""


def _start_worker():
    """A loaded worker, or None with the load report saying why. A failed load is final (the
    same code would fail the same way): every later test fails with the load's status."""
    deadline = min(time.monotonic() + SPEC["test_timeout_s"], _END)
    _state["spawns"] += 1
    report, w = None, None
    try:
        w = Worker()
        rep = w.call({"prompt": SPEC["prompt"], "code": SPEC["code"], "entry": SPEC["entry"]},
                     deadline)
        rep = rep if type(rep) is dict else {}
        status = rep.get("load")
        if status not in ("ok", "syntax_error", "exception", "no_function"):
            status = "protocol"
        report = {"load": status, "detail": _clip(rep.get("detail"))}
    except OSError as e:
        report = {"load": "spawn_failed", "detail": str(e)[:200]}
    except _Gone as e:
        report = {"load": "load_timeout" if e.args[0] == "timeout" else "exit", "detail": e.args[0]}
    _state["load"] = report
    if _state["first_load"] is None:
        _state["first_load"] = report
    if report["load"] == "ok":
        return w
    if w is not None:
        w.kill()
    _state["dead"] = True
    return None


def _drop_worker():
    w, _state["worker"] = _state["worker"], None
    if w is not None:
        w.kill()


def _call(args, kwargs):
    """One call of the candidate: its answer (a dict), or _Gone with the reason recorded."""
    if _state["why"] is not None:
        raise _Gone(_state["why"])
    w = _state["worker"]
    if w is None:
        _state["why"] = "no_worker"
        raise _Gone("no_worker")
    try:
        rep = w.call({"a": args, "k": kwargs}, _state["deadline"])
    except _Gone as e:
        _state["why"] = e.args[0]
        _drop_worker()
        raise
    if type(rep) is not dict or not ("ok" in rep or "raise" in rep):
        _state["why"] = "protocol"
        _drop_worker()
        raise _Gone("protocol")
    return rep


def candidate(*args, **kwargs):
    try:
        request = (wire_encode(list(args)), wire_encode(kwargs))
    except (TypeError, ValueError, RecursionError):
        _state["why"] = "unencodable_arguments"
        raise _Gone("unencodable_arguments")
    rep = _call(*request)
    if "raise" in rep:
        cls = _RAISABLE.get(rep["raise"]) if type(rep["raise"]) is str else None
        raise (cls or RuntimeError)("the candidate raised " + _clip(rep["raise"], 60))
    try:
        return wire_decode(rep["ok"])
    except (TypeError, ValueError, RecursionError):
        _state["why"] = "bad_value"
        raise _Gone("bad_value")


def _begin_test():
    """Start one test's clock (and a worker if none is alive); the reason it cannot run, or None."""
    _state["why"] = None
    _state["deadline"] = min(time.monotonic() + SPEC["test_timeout_s"], _END)
    if _state["worker"] is None and not _state["dead"]:
        if time.monotonic() >= _END:
            return "timeout"
        _state["worker"] = _start_worker()
    if _state["worker"] is None:
        return _state["load"]["load"] if _state["load"] else "no_worker"
    return None


_outcomes = {}


def _statement_begin(i):
    failed = _begin_test()
    if failed is not None:
        _state["why"] = failed
        raise _Gone(failed)


def _statement_end(i, exc):
    why = _state["why"]
    if why is None and exc is not None:
        why = "assertion" if isinstance(exc, AssertionError) else type(exc).__name__
    _outcomes[i] = [why is None, why or ""]


def _run_check():
    """HumanEval: the test module's check(candidate), its statements wrapped by the host so that
    each one reports through _statement_begin/_statement_end (in check's own scope)."""
    ns = {"__name__": "__check__"}
    random.seed(0)
    exec(compile(SPEC["prompt"], "prompt.py", "exec"), ns)
    ns[SPEC["entry"]] = candidate
    ns["__llmgym_begin"] = _statement_begin
    ns["__llmgym_end"] = _statement_end
    exec(compile(SPEC["check"], "check.py", "exec"), ns)
    try:
        ns["check"](candidate)
    except BaseException:
        pass  # every statement records itself; one that never ran is "not_run"
    return [_outcomes.get(i, [False, "not_run"]) for i in range(SPEC["num_statements"])]


def _run_cases():
    """PyFunc: call the candidate on each case; report the raw return values (the host compares)."""
    results = []
    for args in SPEC["cases"]:
        failed = _begin_test()
        if failed is not None:
            results.append([False, failed])
            continue
        try:
            rep = _call(args, {"d": []})
        except _Gone as e:
            results.append([False, e.args[0]])
            continue
        if "raise" in rep:
            results.append([False, "raised " + _clip(rep["raise"], 60)])
            continue
        value = json.dumps(rep["ok"])
        if len(value) > SPEC["max_value"]:
            results.append([False, "value_too_big"])
        else:
            results.append([True, value])
    return results


_real_stdout = os.dup(1)
sys.stdout = sys.stderr = io.StringIO()  # the trusted tests may print; the verdict has fd 1 alone
try:
    results = _run_check() if SPEC["mode"] == "check" else _run_cases()
    error = None
except BaseException as e:
    results, error = [], type(e).__name__ + ": " + str(e)[:300]
_drop_worker()
verdict = {"results": results, "load": _state["first_load"], "spawns": _state["spawns"],
           "error": error, "elapsed_s": round(time.monotonic() - _START, 3)}
payload = json.dumps(verdict, separators=(",", ":"), ensure_ascii=True)
mac = hmac.new(_KEY, payload.encode(), "sha256").hexdigest()
line = ("\n" + "__MARK__" + mac + " " + payload + "\n").encode()
while line:
    line = line[os.write(_real_stdout, line):]
os._exit(0)
'''.replace("__MARK__", VERDICT_MARK)

_wire_ns: dict[str, Any] = {}
exec(compile(_WIRE, "envs_catalog/code/harness.py:_WIRE", "exec"), _wire_ns)  # our own source
encode_value = _wire_ns["wire_encode"]
_wire_decode = _wire_ns["wire_decode"]


def decode_value(tree: Any) -> Any:
    """The plain value a wire tree stands for; ValueError for anything malformed."""
    try:
        return _wire_decode(tree)
    except (TypeError, ValueError, RecursionError) as e:
        raise ValueError(f"malformed value: {e}") from None


def strict_equal(got: Any, want: Any, *, rel_tol: float = 1e-9, abs_tol: float = 1e-9) -> bool:
    """Equality that also compares types (True is not 1, (1,) is not [1]); floats within tolerance,
    NaN equal to NaN."""
    if type(got) is not type(want):
        return False
    if isinstance(want, float):
        if math.isnan(want):
            return math.isnan(got)
        return math.isclose(got, want, rel_tol=rel_tol, abs_tol=abs_tol)
    if isinstance(want, (list, tuple)):
        return len(got) == len(want) and all(
            strict_equal(g, w, rel_tol=rel_tol, abs_tol=abs_tol) for g, w in zip(got, want)
        )
    if isinstance(want, dict):
        return got.keys() == want.keys() and all(
            strict_equal(got[k], want[k], rel_tol=rel_tol, abs_tol=abs_tol) for k in want
        )
    return got == want


@dataclass(frozen=True)
class CodeTask:
    """What a code env asks of the model, as the harness needs it.

    - `prompt`: Python source the candidate may rely on (signature, docstring, helpers,
      imports); the worker runs it before the candidate's program, in the same namespace. In
      `check` mode it also runs in the judge, so the tests can call its helpers (the trusted
      ones: a candidate that redefines a helper changes only its own copy).
    - `entry_point`: the function the tests call.
    - Either `check` -- a test module defining `check(candidate)` as `wrap_check` rewrote it,
      with `kinds[i]` ("test" or "setup") for its i-th statement --
    - or `cases`: wire-encoded argument lists; the judge reports each return value and the host
      compares it with `expected` (plain values, which never enter the sandbox) by `strict_equal`.
    """

    prompt: str
    entry_point: str
    check: str = ""
    kinds: tuple[str, ...] = ()
    cases: tuple[Any, ...] = ()
    expected: tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        if bool(self.check) == bool(self.cases):
            raise ValueError("a CodeTask has either a check or cases (not both, not neither)")
        if self.check and not self.kinds:
            raise ValueError("a check needs its statement kinds (see wrap_check)")
        if self.cases and len(self.cases) != len(self.expected):
            raise ValueError("cases and expected must have the same length")

    @property
    def num_tests(self) -> int:
        """Cases, or "test" statements (a check without any counts as one test)."""
        if self.cases:
            return len(self.cases)
        return max(1, self.kinds.count("test"))


@dataclass
class Verdict:
    """What one grading run found.

    `status`: "ran" (the code loaded and the tests ran: see `passed`), "syntax_error",
    "load_error" (an exception, `sys.exit` or no callable entry point while defining it),
    "timeout" (loading, or the whole run, ran out of time), or a harness-level failure:
    "no_verdict" (no authenticated verdict: the judge was killed, or its line was tampered
    with), "output_limit", "sandbox_error". `passed` of `num_tests` tests passed;
    `all_passed` also needs every setup statement to succeed. `timeouts` counts tests that ran
    out of time, `reasons` says why each test failed ("" when it passed). `sandbox` is the
    backend that ran it.
    """

    status: str
    passed: int
    num_tests: int
    all_passed: bool
    timeouts: int = 0
    sandbox: str = ""
    detail: str = ""
    reasons: list[str] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def fraction(self) -> float:
        return self.passed / self.num_tests if self.num_tests else 0.0


def _limits(budget_s: float) -> Limits:
    return Limits(
        timeout_s=budget_s + _STARTUP_SLACK_S,
        cpu_s=int(math.ceil(budget_s)) + 2,
        memory_bytes=512 << 20,  # per process: with `processes`, a run's worst case is 5 GiB
        processes=10,
        output_bytes=4 << 20,
        tmp_bytes=16 << 20,
        file_bytes=8 << 20,
    )


def build_judge(task: CodeTask, code: str, *, test_timeout_s: float, budget_s: float,
                key: bytes) -> str:
    """The sandbox program (the judge) for one grading run; `key` authenticates its verdict."""
    spec = {
        "mode": "check" if task.check else "cases",
        "prompt": task.prompt,
        "entry": task.entry_point,
        "check": task.check,
        "num_statements": len(task.kinds),
        "cases": list(task.cases),
        "code": code,
        "worker": _WORKER,
        "test_timeout_s": float(test_timeout_s),
        "budget_s": float(budget_s),
        "max_message": _MAX_MESSAGE_BYTES,
        "max_value": _MAX_VALUE_BYTES,
    }
    blob = base64.b64encode(json.dumps(spec, ensure_ascii=True).encode()).decode()
    return _JUDGE.replace("__KEY__", key.hex()).replace("__SPEC__", blob)


def read_verdict(result: Result, key: bytes) -> dict | None:
    """The judge's verdict if `result` ended on its own with status 0 and carries exactly one
    distinct verdict that verifies under `key`; else None."""
    if result.exit != 0 or result.killed_by is not None or result.timed_out:
        return None
    found = set()
    for line in result.stdout.splitlines():
        at = line.find(VERDICT_MARK)
        if at < 0:
            continue
        mac, _, payload = line[at + len(VERDICT_MARK):].partition(" ")
        good = hmac.new(key, payload.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()
        if hmac.compare_digest(mac.encode("ascii", "replace"), good.encode()):
            found.add(payload)
    if len(found) != 1:
        return None
    try:
        verdict = json.loads(found.pop())
    except ValueError:
        return None
    return verdict if isinstance(verdict, dict) else None


def _load_status(load: Any) -> tuple[str | None, str]:
    if not isinstance(load, dict):
        return None, ""
    return load.get("load"), str(load.get("detail") or "")


def interpret(task: CodeTask, result: Result, key: bytes) -> Verdict:
    """A finished sandbox run as a `Verdict` (the host's side of the protocol)."""
    n = task.num_tests
    base = {"sandbox": result.sandbox, "wall_s": result.wall_s}
    verdict = read_verdict(result, key)
    if verdict is None:
        status = {True: "timeout"}.get(result.timed_out) or (
            "output_limit" if result.killed_by == "output_limit" else "no_verdict")
        return Verdict(status, 0, n, False, timeouts=n if status == "timeout" else 0,
                       detail=f"exit {result.exit}, killed_by {result.killed_by}", **base)
    if verdict.get("error"):
        return Verdict("sandbox_error", 0, n, False, detail=str(verdict["error"])[:300], **base)
    load, detail = _load_status(verdict.get("load"))
    if load != "ok":
        status = {"syntax_error": "syntax_error", "load_timeout": "timeout", None: "timeout"}.get(
            load, "load_error")
        return Verdict(status, 0, n, False, timeouts=n if status == "timeout" else 0,
                       detail=detail or str(load), **base)
    results = verdict.get("results")
    expected_len = len(task.cases) if task.cases else len(task.kinds)
    if not isinstance(results, list) or len(results) != expected_len or not all(
        isinstance(r, list) and len(r) == 2 for r in results
    ):
        return Verdict("no_verdict", 0, n, False, detail="malformed results", **base)
    passed = timeouts = 0
    reasons: list[str] = []
    all_ok = True
    if task.cases:
        for (ok, value), want in zip(results, task.expected):
            good = False
            if ok is True and isinstance(value, str):
                try:
                    good = strict_equal(decode_value(json.loads(value)), want)
                except (ValueError, RecursionError):
                    good = False
                reasons.append("" if good else "wrong_answer")
            else:
                reasons.append(str(value))
                timeouts += value == "timeout"
            passed += good
            all_ok &= good
    else:
        for kind, (ok, why) in zip(task.kinds, results):
            ok = ok is True
            all_ok &= ok
            timeouts += why == "timeout"
            if kind == "test":
                passed += ok
                reasons.append("" if ok else str(why))
            elif not ok:
                reasons.append(f"setup: {why}")
        if "test" not in task.kinds:  # a check without asserts is one test: it ran cleanly
            passed = int(all_ok)
    return Verdict("ran", passed, n, all_ok and passed == n, timeouts=timeouts,
                   reasons=reasons, **base)


# -- the shared pools ------------------------------------------------------------------------------

_pools: dict[tuple[int, str], SandboxPool] = {}
_pools_lock = threading.Lock()


def _concurrency() -> int:
    raw = os.environ.get("LLM_GYM_CODE_CONCURRENCY")
    if not raw:
        return os.cpu_count() or 1
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"LLM_GYM_CODE_CONCURRENCY must be a positive int, got {raw!r}")
    return value


def shared_pool(backend: str = "auto") -> SandboxPool:
    """This process's pool for `backend`, made on first use (a forked child makes its own).
    At most `$LLM_GYM_CODE_CONCURRENCY` (default: the CPU count) gradings run at once."""
    key = (os.getpid(), backend)
    pool = _pools.get(key)
    if pool is None:
        with _pools_lock:
            pool = _pools.get(key)
            if pool is None:
                pool = _pools[key] = SandboxPool(max_concurrency=_concurrency(), backend=backend)
    return pool


def close_shared_pools() -> None:
    """Kill running gradings and close this process's pools (the next grading makes new ones)."""
    with _pools_lock:
        pools = [_pools.pop(k) for k in [k for k in _pools if k[0] == os.getpid()]]
    for pool in pools:
        pool.close()


def _prepare(task: CodeTask, code: str, test_timeout_s: float, budget_s: float):
    if not isinstance(code, str):
        raise TypeError(f"code must be a str, got {type(code).__name__}")
    if len(code) > MAX_CODE_CHARS:
        raise ValueError(f"code of {len(code)} characters is over MAX_CODE_CHARS={MAX_CODE_CHARS}")
    for name, value in (("test_timeout_s", test_timeout_s), ("budget_s", budget_s)):
        if not (isinstance(value, (int, float)) and 0 < value < 3600):
            raise ValueError(f"{name} must be a number of seconds in (0, 3600), got {value!r}")
    key = secrets.token_bytes(32)
    judge = build_judge(task, code, test_timeout_s=test_timeout_s, budget_s=budget_s, key=key)
    return key, judge, _limits(budget_s)


async def grade(
    task: CodeTask,
    code: str,
    *,
    test_timeout_s: float = 3.0,
    budget_s: float = 10.0,
    pool: SandboxPool | None = None,
    backend: str = "auto",
) -> Verdict:
    """Run the program `code` (a module, run after `task.prompt` in the same namespace) against
    `task`'s tests in one sandbox (see the module docstring).

    `test_timeout_s` bounds each test (and loading the code), `budget_s` the whole run. Never
    raises for what the code does; `SandboxError` only when no sandbox can start. Cancelling the
    awaiting task kills the run."""
    key, judge, limits = _prepare(task, code, test_timeout_s, budget_s)
    pool = pool or shared_pool(backend)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SandboxWeakerWarning)  # reported as Verdict.sandbox
        result = await pool.arun(judge, limits=limits)
    return interpret(task, result, key)


def grade_sync(
    task: CodeTask,
    code: str,
    *,
    test_timeout_s: float = 3.0,
    budget_s: float = 10.0,
    pool: SandboxPool | None = None,
    backend: str = "auto",
) -> Verdict:
    """`grade` for synchronous callers (blocks until the run is done)."""
    key, judge, limits = _prepare(task, code, test_timeout_s, budget_s)
    pool = pool or shared_pool(backend)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SandboxWeakerWarning)
        result = pool.run(judge, limits=limits)
    return interpret(task, result, key)


def wrap_check(test_source: str, entry_point: str) -> tuple[str, tuple[str, ...]]:
    """A HumanEval-style test module -> (the module with `check` rewritten, statement kinds).

    Each top-level statement of `check(candidate)`'s body is wrapped as
    `try: begin(i); <statement>; end(i, None) except BaseException as e: end(i, e)`, so the
    statements still run in order in check's own scope (locals, closures and comprehensions
    behave as in the original) and each reports pass or fail on its own: that is what partial
    credit counts. A statement is a "test" when it contains an `assert` and mentions the
    candidate (a loop of asserts is one test), else "setup" (imports, variables, `print`).
    Raises ValueError when the module has no single `def check(candidate)`."""
    import ast

    tree = ast.parse(test_source)
    checks = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"]
    if len(checks) != 1 or len(checks[0].args.args) != 1:
        raise ValueError("the test module must define exactly one check(candidate)")
    check = checks[0]
    param = check.args.args[0].arg
    kinds: list[str] = []
    body: list[ast.stmt] = []
    for i, node in enumerate(check.body):
        names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        asserts = any(isinstance(n, ast.Assert) for n in ast.walk(node))
        kinds.append("test" if asserts and (param in names or entry_point in names) else "setup")
        wrapper = ast.parse(
            f"try:\n    __llmgym_begin({i})\n    pass\n    __llmgym_end({i}, None)\n"
            f"except BaseException as __llmgym_e:\n    __llmgym_end({i}, __llmgym_e)\n"
        ).body[0]
        assert isinstance(wrapper, ast.Try)
        wrapper.body[1] = node
        body.append(wrapper)
    check.body = body
    return ast.unparse(ast.fix_missing_locations(tree)), tuple(kinds)
