"""What every check shares: the row a check returns (`CheckRow`), the checked target (`_Target`: a
registered id's source and kwargs, updated by the user's) and how to build its env (`_make`),
the per-check time limit (`_time_limit`, raising `_CheckTimeout`), the fuzz action generator
(`_random_action`), the one-line error formatting the rows use, and the names and constants
the check modules agree on (`CHECK_NAMES`, the TextEnv options that are not difficulty knobs,
the fixed replies). Nothing here runs a check; `llm_gym.checks.runner` puts the rows together.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import traceback
from dataclasses import dataclass, field
from typing import Any


CHECK_NAMES = (
    "check_env", "determinism", "fuzz", "card", "scripted", "adversarial", "split", "context",
    "throughput",
)
# TextEnv's own options: everything else in a spec's kwargs is a difficulty knob of the source.
_TEXT_ENV_OPTIONS = ("tokenizer", "renderer", "split", "turn_limit", "render_mode",
                     "max_action_length")
_FIXED_REPLIES = ("1", "Answer: 42", "hello", "0", "A", "yes", "3", "B")
_MAX_FUZZ_STEPS_PER_EPISODE = 16


@dataclass
class CheckRow:
    name: str
    status: str  # "pass" | "fail" | "skip"
    detail: str
    data: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "detail": self.detail,
                "seconds": round(self.seconds, 3), "data": self.data}


class _UnknownId(Exception):
    pass


class _CheckTimeout(BaseException):
    """Raised inside a check that ran past its time limit (a BaseException, so an env's
    `except Exception:` does not swallow it)."""


@contextlib.contextmanager
def _time_limit(seconds: float | None):
    """Interrupt the body after `seconds` (SIGALRM; a no-op off the main thread or without it)."""
    if (not seconds or seconds <= 0 or not hasattr(signal, "setitimer")
            or threading.current_thread() is not threading.main_thread()):
        yield
        return

    def on_alarm(signum, frame):
        raise _CheckTimeout(f"ran past its time limit of {seconds:g} s (--timeout)")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)



@dataclass
class _Target:
    env_id: str
    source: str
    registered: dict[str, Any]  # the spec's kwargs (TextEnv options and knobs)
    overrides: dict[str, Any] = field(default_factory=dict)  # --kwargs / --kwarg

    @property
    def kwargs(self) -> dict[str, Any]:
        """What the checked env is built with: the spec's kwargs, then the user's."""
        return {**self.registered, **self.overrides}

    @property
    def knobs(self) -> dict[str, Any]:
        return {k: v for k, v in self.kwargs.items() if k not in _TEXT_ENV_OPTIONS}


def _resolve_target(env_id: str, overrides: dict[str, Any] | None = None) -> _Target:
    import gymnasium as gym

    import llm_gym  # noqa: F401 - registers the catalogs
    from llm_gym.registration import TEXT_ENV_ENTRY_POINT, close_env_ids

    module, sep, bare_id = env_id.rpartition(":")
    if sep:  # "package.module:llm/Name-v0" imports the module first, as gym.make does
        import importlib

        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise _UnknownId(f"{env_id!r}: cannot import module {module!r} ({exc})") from None
        env_id = bare_id
    spec = gym.registry.get(env_id)
    if spec is None:
        matches = close_env_ids(env_id)
        hint = f" Did you mean {', '.join(repr(m) for m in matches)}?" if matches else ""
        raise _UnknownId(f"unknown env id {env_id!r}.{hint} (`llm-gym list` shows the ids)")
    if spec.entry_point != TEXT_ENV_ENTRY_POINT:
        raise _UnknownId(
            f"{env_id!r} is not an llm-gym env (its entry point is {spec.entry_point!r}, not "
            f"{TEXT_ENV_ENTRY_POINT!r}); `llm-gym list` shows the llm-gym ids"
        )
    kwargs = dict(spec.kwargs)
    source = str(kwargs.pop("source"))
    overrides = dict(overrides or {})
    if "source" in overrides:
        raise _UnknownId("--kwargs cannot replace 'source' (check another id instead)")
    return _Target(env_id, source, kwargs, overrides)


def _make(target: _Target, **overrides: Any):
    from llm_gym.text_env import TextEnv

    return TextEnv(target.source, **{**target.kwargs, **overrides})


def _one_line(exc: BaseException) -> str:
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= 300 else text[:297] + "..."


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    last = frames[-1]
    return f" (at {os.path.basename(last.filename)}:{last.lineno})"


def _vocab_size(env) -> int:
    return int(env.unwrapped.vocab_size)


def _random_action(rng, vocab: int, kind: str) -> list[int]:
    """One fuzz action: "tokens" (1-40 random in-vocabulary ids), "oov" (some ids negative or
    past the vocabulary), "empty", "long" (2,000-6,000 ids) or "specials" (the top ids of the
    vocabulary, where special tokens live, and invalid UTF-8 lead bytes)."""
    if kind == "empty":
        return []
    if kind == "long":
        n = int(rng.integers(2_000, 6_000))
        return rng.integers(0, vocab, size=n).tolist()
    n = int(rng.integers(1, 41))
    if kind == "specials":
        pool = [i for i in (0xFF, 0xC3, 0xE2, 0x80) if i < vocab] + list(range(max(0, vocab - 8), vocab))
        return [int(pool[i]) for i in rng.integers(0, len(pool), size=n).tolist()]
    ids = rng.integers(0, vocab, size=n).tolist()
    if kind == "oov":
        for i in rng.choice(n, size=max(1, n // 4), replace=False).tolist():
            ids[i] = int(rng.choice([-1, -(2**31), vocab, vocab + 7, 2**40]))
    return ids
