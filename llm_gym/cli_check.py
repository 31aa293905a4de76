"""`llm-gym check ENV_ID ...`: does a registered environment keep the promises an env must keep?

One row per check, for any id registered with `llm_gym.text_env:TextEnv` (the built-in catalog,
bridges, a third-party package's `llm_gym.envs` entry point, or an id registered in-process with
`llm_gym.register_env`):

- `check_env`: Gymnasium's `check_env` on `env.unwrapped`, with zero warnings;
- `determinism`: two fresh subprocesses (different hash seeds) play, per seed, whole episodes
  from `reset(seed=s)` on the Gymnasium face: a fixed reply sequence and each gold scripted case
  (at most two); the observations, actions, rewards and end flags must agree, and differ across
  seeds (a game that opens the same way for every seed shows its task in how it answers a real
  player, so the first observation alone is never the test);
- `fuzz`: random actions (in- and out-of-vocabulary ids, empty, very long): no exception, every
  reward and every episode return inside the source's `reward_range`;
- `card`: every `EnvCard` field filled in, the id matching, documented knobs = constructor knobs,
  `reward_range` ordered, `example_episode` well-formed chat messages;
- `scripted`: the source's `scripted_cases()` (`llm_gym.scripted.ScriptedCase`) score inside their
  declared ranges on several seeds, both splits and both built-in renderers (at least one gold case);
- `split`: the task key of seeds 0, 1, ... on split="train" and split="test" (48 seeds, up to
  1,000 while a 3 s budget lasts): the source's `task_key(env)` when it declares one, else the
  seed-API episode's whole readable state (its attributes, generators by their state) plus the
  first observation. A key in both splits fails; a permutation test says how many a single pool
  would have shared (from the repeats within each split, for the whole key or the one attribute
  that carries the split), which is the row's evidence; a state the check cannot read (a
  closure) is a "skip" that says so;
- `adversarial`: the generic adversarial audit (`llm_gym.checks.adversarial`) built from the
  gold cases on several seeds: a second answer in five wordings after or before the gold one
  gets no full credit, the gold one with worked steps, a true check or bold markup keeps it,
  and replies built from the prompt alone (empty, one word, filler, the prompt echoed) never
  score the gold's return; what applies follows the card's `answer_form`;
- `context`: the longest observation of the fuzz episodes, in tokens, against the source's declared
  bound (a `max_context_tokens` attribute), reported either way;
- `throughput`: random-policy episodes/s and steps/s (informational, never fails on speed).

`--kwargs JSON` / `--kwarg KEY=VALUE` build the checked env with other knobs, tokenizer or
renderer (every id is built with them before any check runs). Exit status: 0 when no row failed
("skip" rows do not fail), 1 when one did, 2 for a usage error, an unknown id (one line, with "Did
you mean") or kwargs the env refuses (one line). `--json` prints `{"ok": bool, "results":
[{"env_id", "kwargs", "ok", "seconds", "checks": [{"name", "status", "detail", "seconds",
"data"}]}]}`. Torch-free.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import inspect
import json
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

__all__ = ["build_parser", "CHECK_NAMES", "CheckRow", "check_env_id", "check_main"]

CHECK_NAMES = (
    "check_env", "determinism", "fuzz", "card", "scripted", "adversarial", "split", "context",
    "throughput",
)
# TextEnv's own options: everything else in a spec's kwargs is a difficulty knob of the source.
_TEXT_ENV_OPTIONS = ("tokenizer", "renderer", "split", "turn_limit", "render_mode",
                     "max_action_length")
_RENDERERS = ("chatml", "role_colon")
_FIXED_REPLIES = ("1", "Answer: 42", "hello", "0", "A", "yes", "3", "B")
_MAX_FUZZ_STEPS_PER_EPISODE = 16
_DOCS_HINT = "see docs/writing-an-env.md"


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


# --------------------------------------------------------------------------------------------
# building what the checks need


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


_FUZZ_CYCLE = ("tokens", "oov", "empty", "long", "specials", "tokens", "oov", "tokens")


def _fuzz_kinds(n: int) -> list[str]:
    return [_FUZZ_CYCLE[i % len(_FUZZ_CYCLE)] for i in range(n)]


# --------------------------------------------------------------------------------------------
# the checks


def _check_gym(target: _Target) -> CheckRow:
    import gymnasium as gym
    from gymnasium.utils.env_checker import check_env

    # Through the registry (check_env wants env.spec), with the user's kwargs.
    env = gym.make(target.env_id, **target.overrides)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check_env(env.unwrapped)
    except Exception as exc:
        return CheckRow("check_env", "fail", f"check_env raised {_one_line(exc)}{_where(exc)}")
    finally:
        env.close()
    messages = [f"{w.category.__name__}: {w.message}" for w in caught]
    if messages:
        return CheckRow("check_env", "fail", f"{len(messages)} warning(s): {messages[0]}",
                        {"warnings": messages})
    return CheckRow("check_env", "pass", "gymnasium check_env: no warnings")


def _episode_digest(env, seed: int, policy: Callable[[Any, str], list[int]],
                    max_turns: int) -> tuple[str, str]:
    """(digest of the first observation, digest of the whole episode: every observation, reward
    and end flag) of `policy(seed-API env, observation text) -> action tokens` from reset(seed)."""
    digest = hashlib.sha256()
    obs, info = env.reset(seed=seed)
    first = hashlib.sha256(json.dumps([int(t) for t in obs]).encode()).hexdigest()[:16]
    digest.update(b"reset" + first.encode())
    decode = env.unwrapped.tokenizer.decode
    for _ in range(max_turns):
        action = policy(env.unwrapped.current_env, decode([int(t) for t in obs]))
        obs, reward, terminated, truncated, _ = env.step(action)
        # The action too: a scripted player that reads a hidden task shows it in its moves.
        digest.update(json.dumps([int(t) for t in action], separators=(",", ":")).encode())
        digest.update(json.dumps([int(t) for t in obs], separators=(",", ":")).encode())
        digest.update(repr((round(float(reward), 9), bool(terminated), bool(truncated))).encode())
        if terminated or truncated:
            break
    return first, digest.hexdigest()[:16]


def _digests(source: str, kwargs: dict[str, Any], seeds: Sequence[int]) -> dict[str, Any]:
    """Per seed, the digests of whole episodes (run in each subprocess): a fixed reply sequence,
    then each gold scripted case (at most two) played on the Gymnasium face — a game that opens
    the same way for every seed differs in how it answers a real player."""
    from llm_gym.scripted import ScriptedCase, reply_tokens
    from llm_gym.text_env import TextEnv

    env = TextEnv(source, **kwargs)
    renderer = env.unwrapped.renderer
    fixed = [reply_tokens(renderer, text) for text in _FIXED_REPLIES]
    plays: list[tuple[str, Any, Callable[[Any, str], list[int]], int]] = []
    turn = iter(range(10**9))
    plays.append(("fixed replies", env, lambda _e, _t: fixed[next(turn) % len(fixed)],
                  len(fixed)))
    try:
        cases = [c for c in env.unwrapped.source.scripted_cases()
                 if isinstance(c, ScriptedCase) and c.kind == "gold"][:2]
    except Exception:  # the scripted row reports it
        cases = []
    for case in cases:
        case_env = TextEnv(source, **{**kwargs, **case.knobs}) if case.knobs else env
        r = case_env.unwrapped.renderer

        def policy(seed_env, text, case=case, case_env=case_env, r=r):
            return reply_tokens(r, case.reply(seed_env, text), case_env.unwrapped.stop_condition)

        plays.append((f"gold case {case.name!r}", case_env, policy, case.max_turns))
    out: dict[str, Any] = {"plays": [name for name, *_ in plays], "first": {}, "episodes": {}}
    # One throwaway round first: a fresh process's first episode pays lazy imports (sympy for a
    # symbolic grader), which a grader's time bound could count against the reply.
    for seed in [*seeds[:1], *seeds]:
        turn = iter(range(10**9))  # the fixed replies restart each episode
        parts = []
        for name, play_env, policy, max_turns in plays:
            try:
                first, whole = _episode_digest(play_env, seed, policy, max_turns)
            except Exception as exc:  # reported by the scripted / fuzz rows; a digest here
                first, whole = "", f"raised {type(exc).__name__}"
            if name == "fixed replies":
                out["first"][str(seed)] = first
            parts.append(whole)
        out["episodes"][str(seed)] = parts
    return out


def _digest_child() -> None:  # entry of the determinism subprocesses
    payload = json.loads(sys.argv[1])
    warnings.simplefilter("ignore")
    out = _digests(payload["source"], payload["kwargs"], payload["seeds"])
    sys.stdout.write("\n" + json.dumps(out) + "\n")


def _check_determinism(target: _Target, seeds: Sequence[int], timeout_s: float = 120.0) -> CheckRow:
    try:
        payload = json.dumps({"source": target.source, "kwargs": target.kwargs,
                              "seeds": list(seeds)})
    except TypeError as exc:  # a tokenizer object passed to check_env_id: no way to a child
        return CheckRow("determinism", "skip", f"warning: cannot rebuild the env in a subprocess: "
                        f"its kwargs are not JSON ({exc}); pass names (tokenizer='...')")
    code = "from llm_gym.cli_check import _digest_child; _digest_child()"
    env = dict(os.environ)
    # The child imports the source the way this process does (a test module, a checkout).
    env["PYTHONPATH"] = os.pathsep.join([p or os.getcwd() for p in sys.path])
    env["OMP_NUM_THREADS"] = env.get("OMP_NUM_THREADS", "1")
    # Two processes with different hash seeds: set iteration order must not leak into a task.
    procs = [subprocess.Popen([sys.executable, "-c", code, payload], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True,
                              env={**env, "PYTHONHASHSEED": str(hash_seed)})
             for hash_seed in (1, 2)]
    results = []
    try:
        for proc in procs:
            try:
                out, err = proc.communicate(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                return CheckRow("determinism", "fail", f"a subprocess ran past {timeout_s:.0f} s")
            if proc.returncode != 0:
                lines = err.strip().splitlines() or ["(no output)"]
                errors = [ln for ln in lines if re.match(r"[\w.]+(Error|Exception|Interrupt)\b", ln)]
                last = (errors or lines)[-1]
                return CheckRow("determinism", "fail",
                                f"the subprocess failed (exit {proc.returncode}): {last}")
            results.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for proc in procs:  # no child outlives the check
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    first, second = results
    plays = first["plays"]
    episodes_1, episodes_2 = first["episodes"], second["episodes"]
    data = {"seeds": list(seeds), "plays": plays, "digests": [episodes_1, episodes_2]}
    differing = [(s, plays[i]) for s in episodes_1 for i, (a, b) in
                 enumerate(zip(episodes_1[s], episodes_2.get(s, []))) if a != b]
    if differing or first["first"] != second["first"]:
        seed, play = differing[0] if differing else (
            next(s for s in first["first"] if first["first"][s] != second["first"].get(s)), "reset")
        total = sum(len(v) for v in episodes_1.values())
        return CheckRow(
            "determinism", "fail",
            f"two processes disagree on {len(differing)} of {total} episodes, e.g. seed {seed} "
            f"({play}): draw all randomness from make_env's rng", data)
    distinct = len({json.dumps(v) for v in episodes_1.values()})
    distinct_first = len(set(first["first"].values()))
    data.update(distinct_episodes=distinct, distinct_first_observations=distinct_first)
    if distinct < 2:
        return CheckRow(
            "determinism", "fail",
            f"all {len(episodes_1)} seeds gave the same episodes ({', '.join(plays)}): the task "
            "does not depend on the seed", data)
    how = (f"the first observation is the same for every seed, so whole episodes were compared "
           f"({', '.join(plays)})" if distinct_first == 1 else
           f"{distinct_first} distinct first observations; whole episodes compared "
           f"({', '.join(plays)})")
    return CheckRow("determinism", "pass",
                    f"{len(episodes_1)} seeds agree across 2 processes; {distinct} distinct "
                    f"episodes; {how}", data)


@dataclass
class _FuzzStats:
    crashes: list[str] = field(default_factory=list)
    out_of_range: list[str] = field(default_factory=list)
    steps: int = 0
    episodes: int = 0
    max_obs_tokens: int = 0
    max_obs_turn: int = 0


def _run_fuzz(target: _Target, n_actions: int, seed: int = 0) -> _FuzzStats:
    import numpy as np

    stats = _FuzzStats()
    env = _make(target)
    lo, hi = env.unwrapped.source.reward_range
    vocab = _vocab_size(env)
    rng = np.random.default_rng(seed)
    kinds = _fuzz_kinds(n_actions)
    i = 0
    try:
        while i < n_actions:
            episode_seed = int(rng.integers(0, 2**31))
            try:
                obs, _ = env.reset(seed=episode_seed)
            except Exception as exc:
                stats.crashes.append(f"reset(seed={episode_seed}): {_one_line(exc)}{_where(exc)}")
                break
            stats.episodes += 1
            stats.max_obs_tokens = max(stats.max_obs_tokens, len(obs))
            total, turns = 0.0, 0
            while i < n_actions and turns < _MAX_FUZZ_STEPS_PER_EPISODE:
                kind = kinds[i]
                action = _random_action(rng, vocab, kind)
                i += 1
                turns += 1
                try:
                    obs, reward, terminated, truncated, _ = env.step(action)
                except Exception as exc:
                    stats.crashes.append(
                        f"step {turns} ({kind} action of {len(action)} ids, seed {episode_seed}): "
                        f"{_one_line(exc)}{_where(exc)}")
                    break
                stats.steps += 1
                if len(obs) > stats.max_obs_tokens:
                    stats.max_obs_tokens, stats.max_obs_turn = len(obs), turns
                reward = float(reward)
                total += reward
                if not (math.isfinite(reward) and lo - 1e-9 <= reward <= hi + 1e-9):
                    stats.out_of_range.append(
                        f"reward {reward} outside reward_range {(lo, hi)} (seed {episode_seed}, "
                        f"step {turns}, {kind} action)")
                if terminated or truncated:
                    if not lo - 1e-9 <= total <= hi + 1e-9:
                        stats.out_of_range.append(
                            f"episode return {total} outside reward_range {(lo, hi)} (seed "
                            f"{episode_seed}, {turns} steps)")
                    break
    finally:
        env.close()
    return stats


def _check_fuzz(stats: _FuzzStats, n_actions: int) -> CheckRow:
    data = {"actions": n_actions, "steps": stats.steps, "episodes": stats.episodes,
            "crashes": stats.crashes[:10], "out_of_range": stats.out_of_range[:10]}
    if stats.crashes:
        return CheckRow("fuzz", "fail", f"{len(stats.crashes)} crash(es): {stats.crashes[0]}", data)
    if stats.out_of_range:
        return CheckRow("fuzz", "fail", stats.out_of_range[0], data)
    return CheckRow("fuzz", "pass",
                    f"{stats.steps} random steps in {stats.episodes} episodes (incl. out-of-"
                    "vocabulary, empty, long, special tokens): 0 crashes, rewards in range", data)


def _constructor_knobs(source_cls: type, registered: dict[str, Any]) -> set[str]:
    """Knobs the constructor takes: the keyword parameters with defaults of the nearest
    `__init__` in the class's MRO (options a base class takes through `**knobs` are the base's
    to document; parameters without a default are wiring the spec supplies, like a bridge's
    dataset name), the keys of a `DEFAULTS` dict (the catalog's convention:
    `own = {k: knobs.pop(k, v) for k, v in DEFAULTS.items()}`) on the class or its module, and the
    knobs the spec registers (minus that wiring)."""
    knobs: set[str] = set()
    required: set[str] = set()
    for klass in source_cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        if klass.__name__ != "EnvSource":
            try:
                params = list(inspect.signature(init).parameters.values())
            except (TypeError, ValueError):
                params = []
            for p in params:
                if p.kind not in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) or p.name in (
                        "self", "renderer", "split"):
                    continue
                (required if p.default is p.empty else knobs).add(p.name)
        break
    knobs |= {k for k in registered if k not in required}
    defaults = getattr(source_cls, "DEFAULTS", None)
    if not isinstance(defaults, dict):
        defaults = getattr(sys.modules.get(source_cls.__module__), "DEFAULTS", None)
    if isinstance(defaults, dict):
        knobs |= {str(k) for k in defaults}
    return knobs


class _Probe:
    """A knob value no validator accepts (so constructing with it only tells whether the name is
    known)."""

    def __repr__(self) -> str:
        return "<probe>"


def _accepts_knob(source_cls: type, renderer: Any, knob: str) -> bool:
    try:
        source_cls(renderer=renderer, **{knob: _Probe()})
    except TypeError as exc:
        return f"unexpected keyword argument {knob!r}" not in str(exc)
    except Exception:
        return True
    return True


_ROLES = {"system", "user", "assistant", "tool"}


def _card_problems(env_id: str, source: Any, target: _Target) -> list[str]:
    from llm_gym.env_source import EnvCard

    card = getattr(source, "card", None)
    if not isinstance(card, EnvCard):
        return [f"{type(source).__name__}.card is {type(card).__name__}, not an EnvCard"]
    problems: list[str] = []
    if card.id != env_id:
        problems.append(f"card.id {card.id!r} != the registered id {env_id!r}")
    if not re.fullmatch(r"[\w.\-]+/[\w.\-]+", card.id or "") or (
            card.id.startswith("llm/") and not re.fullmatch(r"llm/[\w.\-]+-v\d+", card.id)):
        problems.append(f"card.id {card.id!r} is not 'namespace/Name-vN'")
    for name in ("family", "description", "reward_meaning", "data_source", "license"):
        value = getattr(card, name)
        if not isinstance(value, str) or not value.strip():
            problems.append(f"card.{name} is empty")
    if isinstance(card.description, str) and 0 < len(card.description.strip()) <= 50:
        problems.append("card.description is not a paragraph (50 characters or fewer)")
    if not isinstance(card.multi_turn, bool):
        problems.append(f"card.multi_turn must be a bool, got {card.multi_turn!r}")
    try:
        lo, hi = (float(x) for x in card.reward_range)
        if not lo < hi:  # NaN fails too; infinite bounds are allowed (a wrapped env's unknown range)
            problems.append(f"card.reward_range {card.reward_range!r} is not (low, high), low < high")
    except Exception:
        problems.append(f"card.reward_range {card.reward_range!r} is not a pair of numbers")
    try:
        slo, shi = (float(x) for x in source.reward_range)
        if not slo <= shi:
            problems.append(f"the source's reward_range {source.reward_range!r} is not ordered")
    except Exception:
        problems.append(f"the source's reward_range {getattr(source, 'reward_range', None)!r} "
                        "is not a pair of numbers")
    knob_docs = card.difficulty_knobs
    if not isinstance(knob_docs, dict):
        problems.append("card.difficulty_knobs must be a dict {knob: 'what it does (default X)'}")
        knob_docs = {}
    for knob, doc in knob_docs.items():
        if not isinstance(doc, str) or not doc.strip():
            problems.append(f"card.difficulty_knobs[{knob!r}] has no description")
    # Knobs documented = knobs the constructor takes.
    cls = type(source)
    documented = set(knob_docs)
    accepted = _constructor_knobs(
        cls, {k: v for k, v in target.registered.items() if k not in _TEXT_ENV_OPTIONS})
    undocumented = sorted(accepted - documented)
    if undocumented:
        problems.append(f"constructor knobs missing from card.difficulty_knobs: {undocumented}")
    refused = sorted(k for k in documented - accepted
                     if not _accepts_knob(cls, source.renderer, k))
    if refused:
        problems.append(f"card.difficulty_knobs documents knobs the constructor refuses: {refused}")
    # The example episode: well-formed chat messages, user first, assistant last.
    episode = card.example_episode
    if not isinstance(episode, list) or not episode:
        problems.append("card.example_episode is empty (a real short episode as chat messages)")
    else:
        bad = [i for i, m in enumerate(episode)
               if not isinstance(m, dict) or m.get("role") not in _ROLES
               or not isinstance(m.get("content"), str) or not m["content"].strip()]
        if bad:
            problems.append(f"card.example_episode[{bad[0]}] is not a {{'role', 'content'}} message "
                            f"with a role in {sorted(_ROLES)} and non-empty text")
        else:
            roles = [m["role"] for m in episode if m["role"] != "system"]
            if not roles or roles[0] != "user" or roles[-1] != "assistant":
                problems.append("card.example_episode must start with a user turn and end with an "
                                f"assistant turn, got roles {roles}")
            elif isinstance(card.multi_turn, bool) and card.multi_turn != (roles.count("assistant") > 1):
                problems.append(
                    f"card.multi_turn is {card.multi_turn} but example_episode has "
                    f"{roles.count('assistant')} assistant turn(s): show a "
                    f"{'multi' if card.multi_turn else 'single'}-turn episode")
    return problems


def _check_card(target: _Target, env) -> CheckRow:
    source = env.unwrapped.source
    try:
        problems = _card_problems(target.env_id, source, target)
    except Exception as exc:
        return CheckRow("card", "fail", f"reading the card raised {_one_line(exc)}{_where(exc)}")
    if problems:
        return CheckRow("card", "fail", f"{problems[0]}" + (
            f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""), {"problems": problems})
    return CheckRow("card", "pass", "all fields filled in; knobs match the constructor",
                    {"knobs": sorted(source.card.difficulty_knobs)})


def _check_scripted(target: _Target, env, seeds: Sequence[int]) -> CheckRow:
    from llm_gym.renderers import get_renderer
    from llm_gym.scripted import ScriptedCase, run_scripted_case

    source = env.unwrapped.source
    cls = type(source)
    how = (f"declare them: {cls.__name__}.scripted_cases() returning "
           "llm_gym.scripted.ScriptedCase(name, 'gold', reply, low, high) for the reference "
           f"answer or a solver, plus adversarial ones ({_DOCS_HINT})")
    try:
        cases = list(source.scripted_cases())
    except Exception as exc:
        return CheckRow("scripted", "fail", f"scripted_cases() raised {_one_line(exc)}{_where(exc)}")
    not_cases = [c for c in cases if not isinstance(c, ScriptedCase)]
    if not_cases:
        return CheckRow("scripted", "fail", f"scripted_cases() returned a "
                        f"{type(not_cases[0]).__name__}, not a llm_gym.scripted.ScriptedCase")
    gold = [c for c in cases if c.kind == "gold"]
    if not gold and (reason := source.no_gold_reason()):
        return CheckRow("scripted", "skip", f"no gold case can exist: {reason}"
                        + (f" ({len(cases)} adversarial cases not run alone)" if cases else ""),
                        {"cases": len(cases)})
    if not gold:
        detail = "no scripted cases" if not cases else f"{len(cases)} cases but no gold case"
        return CheckRow("scripted", "fail", f"{detail}: {how}", {"cases": len(cases)})
    tokenizer = env.unwrapped.tokenizer
    failures: list[str] = []
    runs = 0
    for renderer_name in _RENDERERS:
        renderer = get_renderer(renderer_name, tokenizer)
        for split in ("train", "test"):
            for case in cases:
                try:
                    case_src = cls(renderer=renderer, split=split,
                                   **{**target.knobs, **case.knobs})
                except Exception as exc:
                    failures.append(f"{case.name!r} ({renderer_name}, {split}): building the "
                                    f"source raised {_one_line(exc)}")
                    continue
                for seed in seeds:
                    runs += 1
                    try:
                        outcome = run_scripted_case(case_src, case, seed)
                    except Exception as exc:
                        failures.append(f"{case.name!r} ({renderer_name}, {split}, seed {seed}) "
                                        f"raised {_one_line(exc)}{_where(exc)}")
                        continue
                    if not outcome.ok:
                        failures.append(
                            f"{case.kind} case {case.name!r} scored {outcome.episode_return:g}, "
                            f"declared [{case.low:g}, {case.high:g}] ({renderer_name}, {split}, "
                            f"seed {seed})")
    data = {"cases": len(cases), "gold": len(gold), "runs": runs, "failures": failures[:20]}
    if failures:
        return CheckRow("scripted", "fail",
                        f"{len(failures)}/{runs} runs off: {failures[0]}", data)
    return CheckRow("scripted", "pass",
                    f"{len(cases)} cases ({len(gold)} gold) x {len(seeds)} seeds x 2 splits x "
                    f"{len(_RENDERERS)} renderers score as declared", data)


def _check_adversarial(target: _Target, env, seeds: Sequence[int]) -> CheckRow:
    from llm_gym.checks.adversarial import audit_source

    source = env.unwrapped.source
    cls, renderer = type(source), source.renderer
    form = getattr(source.card, "answer_form", "one answer")
    report = audit_source(lambda knobs: cls(renderer=renderer, split="train",
                                            **{**target.knobs, **knobs}),
                          list(seeds), answer_form=form)
    data = {"answer_form": form, "runs": report.runs, "false_credits": report.false_credits,
            "false_denials": report.false_denials,
            "findings": [str(f) for f in report.findings[:20]], "skipped": report.skipped[:5]}
    if report.findings:
        return CheckRow("adversarial", "fail", f"{report.false_credits} false credits, "
                        f"{report.false_denials} false denials in {report.runs} runs: "
                        f"{report.findings[0]}", data)
    if not report.runs:
        return CheckRow("adversarial", "skip", "no gold case could be played: "
                        + ("; ".join(report.skipped[:2]) or "none declared"), data)
    return CheckRow("adversarial", "pass", f"{report.runs} replies ({form}): no false credit, "
                    "no false denial", data)


def _derived(value: Any) -> bool:
    """Objects every episode holds that say nothing about its task: the renderer, a tokenizer,
    the prompt-keeping continuation, cached prompts (the first observation is keyed apart)."""
    from llm_gym.model_input import ModelInput
    from llm_gym.renderers.base import Renderer
    from llm_gym.renderers.continuation import Continuation

    if isinstance(value, (Renderer, Continuation, ModelInput)):
        return True
    return callable(getattr(value, "encode", None)) and callable(getattr(value, "decode", None))


def _state_of(value: Any, opaque: list[str], path: str = "env", depth: int = 0,
              stack: tuple[int, ...] = (), memo: dict[int, Any] | None = None) -> Any:
    """A JSON-able, process-independent picture of an episode's state (sets sorted, generators by
    their state, plain objects by their attributes, no addresses); what cannot be read (a
    function, a C object) is named in `opaque`. `memo` maps the id of a large immutable container
    (a word list every episode shares) to `(container, picture)`: read once per split."""
    import dataclasses
    import enum
    import random as _random

    import numpy as np

    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if isinstance(value, np.generic):
        return _state_of(value.item(), opaque, path, depth, stack)
    if isinstance(value, np.ndarray):
        return [str(value.dtype), list(value.shape), value.ravel().tolist()]
    if id(value) in stack:  # a cycle: the object is pictured where it was first met
        return f"<{type(value).__name__}>"
    if depth > 8:
        opaque.append(f"{path} (nested deeper than 8)")
        return f"<{type(value).__name__}>"
    stack = (*stack, id(value))

    def sub(v: Any, where: str) -> Any:
        return _state_of(v, opaque, where, depth + 1, stack, memo)

    if isinstance(value, (tuple, frozenset)) and memo is not None and len(value) > 32:
        hit = memo.get(id(value))
        if hit is not None and hit[0] is value:
            return hit[1]
        # Its digest stands for it: the picture of every episode that shares it stays small.
        picture = "#" + _digest_of(_state_of(value, opaque, path, depth, stack[:-1], None))
        memo[id(value)] = (value, picture)  # holding the container keeps its id unique
        return picture
    if isinstance(value, (list, tuple)):
        return [sub(v, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, (set, frozenset)):
        items = [sub(v, f"{path}{{}}") for v in value]
        if all(isinstance(v, str) for v in items):
            return sorted(items)
        return sorted(items, key=json.dumps)
    if isinstance(value, dict):
        return sorted(([sub(k, path), sub(v, f"{path}[{k!r}]")] for k, v in value.items()),
                      key=json.dumps)
    if isinstance(value, _random.Random):
        return ["Random", hashlib.sha256(repr(value.getstate()).encode()).hexdigest()]
    if isinstance(value, np.random.Generator):
        return ["Generator", sub(value.bit_generator.state, path)]
    if _derived(value):
        return f"<{type(value).__name__}>"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [type(value).__name__, {f.name: sub(getattr(value, f.name, None), f"{path}.{f.name}")
                                       for f in dataclasses.fields(value)}]
    attrs = getattr(value, "__dict__", None)
    slots = [n for k in type(value).__mro__ for n in k.__dict__.get("__slots__", ())
             if isinstance(n, str) and not n.startswith("__")]
    if attrs is None and slots and not callable(value):
        attrs = {n: getattr(value, n, None) for n in slots}
    if isinstance(attrs, dict) and not callable(value):
        return [type(value).__name__, {str(k): sub(v, f"{path}.{k}") for k, v in attrs.items()}]
    opaque.append(f"{path} ({type(value).__name__})")
    return f"<{type(value).__name__}>"


def _digest_of(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, separators=(",", ":")).encode()).hexdigest()[:16]


def _declared_task_key(source: Any, env: Any) -> Any:
    """A canonical task key the source declares (`source.task_key(env)`), else None."""
    fn = getattr(source, "task_key", None)
    return fn(env) if callable(fn) else None


@dataclass
class _SplitKeys:
    tasks: list[str] = field(default_factory=list)  # per seed: episode state + first observation
    parts: dict[str, list[str]] = field(default_factory=dict)  # per top-level attribute, per seed
    first_obs: list[str] = field(default_factory=list)
    opaque: set[str] = field(default_factory=set)
    declared: bool = False


def _add_split_key(keys: _SplitKeys, env, seed: int, memo: dict[int, Any]) -> None:
    _, info = env.reset(seed=seed)
    episode = env.unwrapped.current_env
    keys.first_obs.append(info["text"])
    declared = _declared_task_key(env.unwrapped.source, episode)
    if declared is not None:
        keys.declared = True
        keys.tasks.append(_digest_of(_state_of(declared, [])))
        return
    opaque: list[str] = []
    state = {k: _state_of(v, opaque, f"env.{k}", memo=memo)
             for k, v in dict(getattr(episode, "__dict__", {})).items()}
    keys.opaque.update(re.sub(r"\[[^\]]*\]", "[]", o) for o in opaque)
    keys.tasks.append(_digest_of([state, info["text"]]))
    for name, value in state.items():
        keys.parts.setdefault(name, []).append(_digest_of(value))


def _sample_split_keys(target: _Target, min_seeds: int, max_seeds: int, budget_s: float
                       ) -> tuple[_SplitKeys, _SplitKeys]:
    """Task keys of seeds 0, 1, ... on both splits, alternating, until `max_seeds` each or (past
    `min_seeds`) `budget_s`: a cheap reset gets many seeds, so a small leak shows; a very slow
    one (a generated game) stops at 8 seeds past ten budgets."""
    envs = {}
    try:
        for split in ("train", "test"):
            envs[split] = _make(target, split=split)
        keys = {split: _SplitKeys() for split in envs}
        memo: dict[int, Any] = {}
        start = time.perf_counter()
        for seed in range(max_seeds):
            elapsed = time.perf_counter() - start
            if (seed >= min_seeds and elapsed > budget_s) or (seed >= 8 and elapsed > 10 * budget_s):
                break  # the row reports how many seeds it saw (a slow reset: a generated game)
            for split, env in envs.items():
                try:
                    _add_split_key(keys[split], env, seed, memo)
                except Exception as exc:
                    raise RuntimeError(f"reset(seed={seed}) on split={split!r} raised "
                                       f"{_one_line(exc)}") from exc
    finally:
        for env in envs.values():
            env.close()
    return keys["train"], keys["test"]


def _shared_if_one_pool(train: list[str], test: list[str], rng, permutations: int = 200
                        ) -> tuple[float, float]:
    """If both splits drew from one pool, how many distinct keys would the two samples share?
    Re-split the pooled draws at random (a permutation test of "both splits are the same
    distribution"): (mean shared, fraction of re-splits sharing none)."""
    import numpy as np

    _, codes = np.unique(np.array(train + test), return_inverse=True)
    n = len(train)
    shared = np.empty(permutations, dtype=np.int64)
    for i in range(permutations):
        order = rng.permutation(codes)
        shared[i] = len(np.intersect1d(order[:n], order[n:]))
    return float(shared.mean()), float((shared == 0).mean())


def _check_split(target: _Target, min_seeds: int = 48, max_seeds: int = 1000,
                 budget_s: float = 3.0) -> CheckRow:
    import numpy as np

    try:
        train, test = _sample_split_keys(target, min_seeds, max_seeds, budget_s)
    except RuntimeError as exc:
        return CheckRow("split", "fail", str(exc))
    n = len(train.tasks)
    shared = set(train.tasks) & set(test.tasks)
    fixed_start = len(set(train.first_obs) | set(test.first_obs)) == 1
    what = "declared task keys (source.task_key)" if train.declared else (
        "episode states + first observations")
    opaque = sorted(train.opaque | test.opaque)
    data: dict[str, Any] = {
        "seeds": n, "key": "task_key" if train.declared else "state",
        "train_distinct": len(set(train.tasks)), "test_distinct": len(set(test.tasks)),
        "overlap": len(shared), "fixed_first_observation": fixed_start, "opaque": opaque[:10]}
    if shared:
        seed = train.tasks.index(sorted(shared)[0])
        example = " ".join(train.first_obs[seed].split())
        example = example if len(example) <= 80 else example[:77] + "..."
        if opaque and not train.declared:
            return CheckRow(
                "split", "skip",
                f"warning: cannot tell: {len(shared)} train and test episodes look the same, but "
                f"their state holds what the check cannot read ({opaque[0]}); declare "
                "source.task_key(env)", data)
        return CheckRow(
            "split", "fail",
            f"{len(shared)} tasks appear in both splits ({what}; {n} seeds each), e.g. train "
            f"seed {seed}: {example!r}", data)
    if len(set(train.tasks)) == 1 and len(set(test.tasks)) == 1:
        why = (f"it holds what the check cannot read ({opaque[0]}); declare source.task_key(env)"
               if opaque else "the task does not depend on the seed")
        return CheckRow("split", "skip", "warning: cannot tell: every seed gives the same "
                        f"episode state and first observation on each split: {why}", data)
    rng = np.random.default_rng(0)
    mean, p_none = _shared_if_one_pool(train.tasks, test.tasks, rng)
    carrier = ""
    if mean < 3:  # the whole state is too fine a key: does one attribute carry the split?
        for name in sorted(set(train.parts) & set(test.parts)):
            a, b = train.parts[name], test.parts[name]
            if len(a) != n or len(b) != n or set(a) & set(b) or len(set(a) | set(b)) < 2:
                continue
            m, p = _shared_if_one_pool(a, b, rng)
            if m > mean:
                carrier, mean, p_none = name, m, p
    data.update(one_pool_shared=round(mean, 2), one_pool_none=p_none, carrier=carrier or None)
    head = f"0 tasks in both splits ({what}; {n} seeds each"
    head += "; the first observation is the same for every seed)" if fixed_start else ")"
    if mean >= 3 and p_none <= 0.05:
        by = f", by env.{carrier} alone" if carrier else ""
        odds = ("no random re-split of the same draws shares none" if p_none == 0 else
                f"{p_none:.1%} of random re-splits of the same draws share none")
        return CheckRow("split", "pass", f"{head}; one pool would share ~{mean:.1f}{by} "
                        f"({odds})", data)
    # Name what makes every seed's task new (an opponent's generator, a generated question).
    fresh = [f"env.{name}" for name in sorted(set(train.parts) & set(test.parts))
             if len(set(train.parts[name]) | set(test.parts[name])) == 2 * n][:2]
    return CheckRow(
        "split", "pass",
        f"{head}; {len(set(train.tasks))} train / {len(set(test.tasks))} test distinct"
        + (f" ({' and '.join(fresh)} new for every seed)" if fresh else "")
        + f": one pool would share only ~{mean:.1f}, so this sample shows no leak but cannot "
        "rule out a small one", data)


def _declared_context_bound(env) -> int | None:
    source = env.unwrapped.source
    for name in ("max_context_tokens", "max_context"):
        value = getattr(source, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _long_episode_max_obs(target: _Target, seeds: Sequence[int] = (0, 1, 2),
                          max_steps: int = 64) -> int:
    """The longest observation of episodes that cycle through short fixed replies until the
    episode ends (or `max_steps`): random replies often end a game at once, these keep going."""
    from llm_gym.scripted import reply_tokens

    env = _make(target)
    longest = 0
    try:
        replies = [reply_tokens(env.unwrapped.renderer, text) for text in _FIXED_REPLIES]
        for seed in seeds:
            obs, _ = env.reset(seed=seed)
            longest = max(longest, len(obs))
            for step in range(max_steps):
                obs, _, terminated, truncated, _ = env.step(replies[step % len(replies)])
                longest = max(longest, len(obs))
                if terminated or truncated:
                    break
    finally:
        env.close()
    return longest


def _check_context(stats: _FuzzStats, env, target: _Target) -> CheckRow:
    bound = _declared_context_bound(env)
    longest = max(stats.max_obs_tokens, _long_episode_max_obs(target))
    data = {"max_observation_tokens": longest, "declared_bound": bound}
    seen = f"longest observation in the fuzz and fixed-reply episodes: {longest} tokens"
    if bound is None:
        if not getattr(getattr(env.unwrapped.source, "card", None), "multi_turn", True):
            return CheckRow("context", "pass", seen + " (single-turn: the prompt is the whole "
                            "context; no bound declared)", data)
        return CheckRow("context", "skip", "warning: " + seen + " and no bound declared (a "
                        "multi-turn source states one in a max_context_tokens attribute)", data)
    if longest > bound:
        return CheckRow("context", "fail", seen + f" > the declared bound {bound}", data)
    return CheckRow("context", "pass", seen + f" <= the declared bound {bound}", data)


def _check_throughput(target: _Target, budget_s: float = 0.5, max_episodes: int = 50) -> CheckRow:
    import numpy as np

    env = _make(target)
    rng = np.random.default_rng(1)
    vocab = _vocab_size(env)
    episodes = steps = 0
    start = time.perf_counter()
    try:
        while episodes < max_episodes and (episodes == 0 or time.perf_counter() - start < budget_s):
            env.reset(seed=int(rng.integers(0, 2**31)))
            for _ in range(_MAX_FUZZ_STEPS_PER_EPISODE):
                _, _, terminated, truncated, _ = env.step(_random_action(rng, vocab, "tokens"))
                steps += 1
                if terminated or truncated:
                    break
            episodes += 1
    except Exception as exc:
        return CheckRow("throughput", "fail", f"a random-policy episode raised {_one_line(exc)}")
    finally:
        env.close()
    elapsed = max(time.perf_counter() - start, 1e-9)
    data = {"episodes": episodes, "steps": steps, "seconds": round(elapsed, 4),
            "episodes_per_s": round(episodes / elapsed, 2), "steps_per_s": round(steps / elapsed, 2)}
    return CheckRow("throughput", "pass",
                    f"{data['episodes_per_s']:g} episodes/s, {data['steps_per_s']:g} steps/s "
                    f"(random policy, {episodes} episodes; informational)", data)


# --------------------------------------------------------------------------------------------
# one id, many ids


def check_env_id(env_id: str, *, seeds: int = 3, fuzz: int = 48, split_seeds: int = 48,
                 only: Sequence[str] | None = None, timeout_s: float | None = 120.0,
                 env_kwargs: dict[str, Any] | None = None) -> list[CheckRow]:
    """Run the checks on `env_id` built with its registered kwargs updated by `env_kwargs`
    (knobs, tokenizer, renderer: JSON values), each check within `timeout_s` seconds, else a
    failed row; raises `ValueError` (one line) for an id that is not a registered llm-gym env."""
    try:
        target = _resolve_target(env_id, env_kwargs)
    except _UnknownId as exc:
        raise ValueError(str(exc)) from None
    wanted = set(only or CHECK_NAMES)
    rows: list[CheckRow] = []
    try:
        with _time_limit(timeout_s):
            env = _make(target)
            env.reset(seed=0)
    except _CheckTimeout as exc:
        return [CheckRow("build", "fail", f"gym.make({env_id!r}) / reset {exc}")]
    except Exception as exc:
        return [CheckRow("build", "fail", f"gym.make({env_id!r}) / reset raised "
                         f"{_one_line(exc)}{_where(exc)}")]
    scripted_seeds = list(range(max(1, seeds)))
    determinism_seeds = [0, 1, 2, 3, 17, 123, 4242, 2**31 - 1][: max(8, seeds)]
    determinism_seeds += [1000 + i for i in range(len(determinism_seeds), seeds)]
    stats: _FuzzStats | None = None

    def guarded(name: str, fn: Callable[[], CheckRow]) -> None:
        if name not in wanted:
            return
        start = time.perf_counter()
        try:
            # The determinism check bounds its subprocesses itself.
            with _time_limit(None if name == "determinism" else timeout_s):
                row = fn()
        except _CheckTimeout as exc:
            row = CheckRow(name, "fail", f"the check {exc}")
        except Exception as exc:  # a check must not take the others down
            row = CheckRow(name, "fail", f"the check raised {_one_line(exc)}{_where(exc)}")
        row.seconds = time.perf_counter() - start
        rows.append(row)

    def fuzz_row() -> CheckRow:
        nonlocal stats
        stats = _run_fuzz(target, fuzz)
        return _check_fuzz(stats, fuzz)

    def context_row() -> CheckRow:
        nonlocal stats
        if stats is None:
            stats = _run_fuzz(target, fuzz)
        return _check_context(stats, env, target)

    try:
        guarded("check_env", lambda: _check_gym(target))
        guarded("determinism", lambda: _check_determinism(target, determinism_seeds,
                                                          timeout_s or 120.0))
        guarded("fuzz", fuzz_row)
        guarded("card", lambda: _check_card(target, env))
        guarded("scripted", lambda: _check_scripted(target, env, scripted_seeds))
        guarded("adversarial", lambda: _check_adversarial(target, env, scripted_seeds))
        guarded("split", lambda: _check_split(target, split_seeds))
        guarded("context", context_row)
        guarded("throughput", lambda: _check_throughput(target))
    finally:
        env.close()
    return rows


def _table(env_id: str, rows: list[CheckRow], seconds: float,
           env_kwargs: dict[str, Any] | None = None) -> str:
    width = max(len(r.name) for r in rows)
    failed = sum(r.status == "fail" for r in rows)
    with_kwargs = f"  (kwargs {json.dumps(env_kwargs)})" if env_kwargs else ""
    lines = [f"{env_id}{with_kwargs}  ({seconds:.1f} s)"]
    for r in rows:
        lines.append(f"  {r.name:<{width}}  {r.status:<4}  {r.detail}")
    lines.append(f"  => {'FAIL' if failed else 'ok'}"
                 + (f" ({failed} check(s) failed)" if failed else ""))
    return "\n".join(lines)


def _all_ids() -> list[str]:
    from llm_gym.cli_list import registered_envs

    return [row["id"] for row in registered_envs()]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="llm-gym check",
        description="Check registered llm-gym envs: check_env, seeding across processes, "
        "random-token fuzz, card, scripted cases, train/test split, context bound, throughput.",
    )
    parser.add_argument("env_ids", nargs="*", metavar="ENV_ID", help="ids to check (llm/Name-v0)")
    parser.add_argument("--all", action="store_true", help="check every registered llm-gym id")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--seeds", type=int, default=3,
                        help="seeds per scripted case, split and renderer (default 3; the "
                        "determinism check uses at least 8)")
    parser.add_argument("--fuzz", type=int, default=48,
                        help="random actions in the fuzz episodes (default 48)")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds one check may take before it fails (default 120)")
    parser.add_argument("--only", default="",
                        help=f"comma-separated subset of the checks: {','.join(CHECK_NAMES)}")
    parser.add_argument("--kwargs", default=None, metavar="JSON",
                        help="env kwargs as a JSON object (knobs, tokenizer, renderer), e.g. "
                        "'{\"digits\": 3}'")
    parser.add_argument("--kwarg", action="append", default=[], metavar="KEY=VALUE",
                        help="one env kwarg (VALUE is read as JSON, else as a string); "
                        "repeatable, applied after --kwargs")
    return parser


def _parse_env_kwargs(text: str | None, pairs: Sequence[str]) -> dict[str, Any]:
    """--kwargs JSON, then each --kwarg KEY=VALUE; `ValueError` (one line) when malformed."""
    kwargs: dict[str, Any] = {}
    if text is not None:
        try:
            kwargs = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"--kwargs {text!r} is not JSON ({exc.msg} at character "
                             f"{exc.pos}); pass an object, e.g. '{{\"digits\": 3}}'") from None
        if not isinstance(kwargs, dict):
            raise ValueError(f"--kwargs must be a JSON object {{\"knob\": value}}, got "
                             f"{type(kwargs).__name__} {text!r}")
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--kwarg {pair!r} is not KEY=VALUE (e.g. --kwarg digits=3)")
        try:
            kwargs[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            kwargs[key.strip()] = value  # a bare string: --kwarg renderer=role_colon
    return kwargs


def check_main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.seeds < 1 or args.fuzz < 1:
        print("llm-gym check: --seeds and --fuzz must be at least 1", file=sys.stderr)
        return 2
    only = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = [name for name in only if name not in CHECK_NAMES]
    if unknown:
        print(f"llm-gym check: unknown check {unknown[0]!r} in --only; the checks are "
              f"{', '.join(CHECK_NAMES)}", file=sys.stderr)
        return 2
    if args.all and args.env_ids:
        print("llm-gym check: give ENV_IDs or --all, not both", file=sys.stderr)
        return 2
    env_ids = _all_ids() if args.all else list(args.env_ids)
    if not env_ids:
        print("llm-gym check: name an ENV_ID (e.g. llm/Math-v0) or pass --all", file=sys.stderr)
        return 2
    try:
        env_kwargs = _parse_env_kwargs(args.kwargs, args.kwarg)
    except ValueError as exc:
        print(f"llm-gym check: {exc}", file=sys.stderr)
        return 2
    for env_id in env_ids:  # every id is resolved (and built with the kwargs) before any check
        try:
            target = _resolve_target(env_id, env_kwargs)
        except _UnknownId as exc:
            print(f"llm-gym check: {exc}", file=sys.stderr)
            return 2
        if env_kwargs:
            try:
                _make(target).close()
            except Exception as exc:  # an unknown knob, a bad value, a tokenizer not found
                print(f"llm-gym check: {target.env_id} with {json.dumps(env_kwargs)}: "
                      f"{_one_line(exc)}", file=sys.stderr)
                return 2
    results = []
    with _stdout_to_stderr() if args.json else contextlib.nullcontext():
        _run_checks(args, env_ids, only, env_kwargs, results)
    all_ok = all(r["ok"] for r in results)
    if args.json:
        print(json.dumps({"ok": all_ok, "results": results}, indent=1))
    elif len(results) > 1:
        failed = [r["env_id"] for r in results if not r["ok"]]
        print(f"\n{len(results) - len(failed)}/{len(results)} ids passed"
              + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 0 if all_ok else 1


@contextlib.contextmanager
def _stdout_to_stderr():
    """Send everything written to stdout -- by this process, a bridged library's progress dots,
    a child process -- to stderr, so that `--json` prints nothing but its JSON on stdout."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _run_checks(args: argparse.Namespace, env_ids: list[str], only: list[str],
                env_kwargs: dict[str, Any], results: list[dict[str, Any]]) -> None:
    for env_id in env_ids:
        start = time.perf_counter()
        rows = check_env_id(env_id, seeds=args.seeds, fuzz=args.fuzz, only=only or None,
                            timeout_s=args.timeout, env_kwargs=env_kwargs)
        seconds = time.perf_counter() - start
        ok = not any(r.status == "fail" for r in rows)
        results.append({"env_id": env_id, "kwargs": env_kwargs, "ok": ok,
                         "seconds": round(seconds, 3), "checks": [r.as_dict() for r in rows]})
        if not args.json:
            print(_table(env_id, rows, seconds, env_kwargs), flush=True)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(check_main())
