"""The `split` row: the task key of seeds 0, 1, ... on split="train" and split="test" (48 seeds,
up to 1,000 while a 3 s budget lasts; fewer, at least 2, for an env too slow to reset 48 times
within half the time limit) -- the source's `task_key(env)` when it declares one,
else the seed-API episode's whole readable state (attributes, generators by their state) plus
the first observation. A key in both splits fails; a permutation test says how many a single
pool would have shared (for the whole key or the one attribute that carries the split), which is
the row's evidence; a state the check cannot read (a closure) is a skip that says so.

A multi-turn env's held-out evaluation must cover at least `HELD_OUT_EPISODES` (100) distinct
episodes (issue 23), so for one the row also counts the distinct test keys: when the sample above
holds fewer, it draws more test seeds (up to `_COUNT_SEEDS`, within two more budgets) and, if
still short, estimates the test split's size from its repeats (bias-corrected Chao1: seen + f1 *
(f1 - 1) / (2 * (f2 + 1)), f1 and f2 the keys seen once and twice). An estimate under 100 fails
the row for a native catalog env (`envs_catalog.ALL_SPECS`' sources), naming the count and the
knobs to change; a bridged or third-party env's row reports it and passes as before.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

from llm_gym.checks.common import _TEXT_ENV_OPTIONS, CheckRow, _make, _one_line, _Target

HELD_OUT_EPISODES = 100  # distinct held-out episodes a multi-turn env's evaluation must cover
_COUNT_SEEDS = 600  # test seeds drawn at most to count them (a split of 100 shows ~99.8)


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


def task_identity(source: Any, env: Any) -> str:
    """A digest naming the task that `env`, a seed-API episode of `source` as `make_env` built
    it, plays; equal digests, the same task. The source's declared `task_key(env)` when it
    declares one, else the episode's readable state (attributes, generators by their state;
    what cannot be read, a closure, counts as equal). Used to count the distinct episodes an
    evaluation covered (`trainers.grpo.trainer.evaluate`)."""
    declared = _declared_task_key(source, env)
    if declared is not None:
        return _digest_of(_state_of(declared, []))
    return _digest_of({str(k): _state_of(v, [], f"env.{k}")
                       for k, v in dict(getattr(env, "__dict__", {})).items()})


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


def _sample_split_keys(target: _Target, min_seeds: int, max_seeds: int, budget_s: float,
                       hard_stop_s: float | None = None) -> tuple[_SplitKeys, _SplitKeys]:
    """Task keys of seeds 0, 1, ... on both splits, alternating, until `max_seeds` each or (past
    `min_seeds`) `budget_s`: a cheap reset gets many seeds, so a small leak shows; a very slow
    one (a generated game) stops at 8 seeds past ten budgets, and at 2 past `hard_stop_s`."""
    envs = {}
    try:
        for split in ("train", "test"):
            envs[split] = _make(target, split=split)
        keys = {split: _SplitKeys() for split in envs}
        memo: dict[int, Any] = {}
        start = time.perf_counter()
        for seed in range(max_seeds):
            elapsed = time.perf_counter() - start
            if ((seed >= min_seeds and elapsed > budget_s) or (seed >= 8 and elapsed > 10 * budget_s)
                    or (hard_stop_s is not None and seed >= 2 and elapsed > hard_stop_s)):
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


def _count_more_test_keys(target: _Target, test: _SplitKeys, budget_s: float,
                          hard_stop_s: float | None) -> None:
    """Add test keys of seeds len(test.tasks), ... to `test` until it holds `HELD_OUT_EPISODES`
    distinct, `_COUNT_SEEDS` seeds, `budget_s` seconds or (past 2 seeds) `hard_stop_s`."""
    env = _make(target, split="test")
    try:
        start, memo = time.perf_counter(), {}
        for seed in range(len(test.tasks), _COUNT_SEEDS):
            elapsed = time.perf_counter() - start
            if (len(set(test.tasks)) >= HELD_OUT_EPISODES or elapsed > budget_s
                    or (hard_stop_s is not None and elapsed > hard_stop_s)):
                break
            try:
                _add_split_key(test, env, seed, memo)
            except Exception as exc:
                raise RuntimeError(f"reset(seed={seed}) on split='test' raised "
                                   f"{_one_line(exc)}") from exc
    finally:
        env.close()


def _estimated_size(keys: list[str]) -> float:
    """Bias-corrected Chao1: how many distinct keys the pool `keys` were drawn from holds."""
    from collections import Counter

    counts = Counter(Counter(keys).values())
    f1, f2 = counts.get(1, 0), counts.get(2, 0)
    return len(set(keys)) + f1 * (f1 - 1) / (2 * (f2 + 1))


def _native(target: _Target) -> bool:
    """Whether the checked id runs a source of llm-gym's own catalog (not a bridge, not a
    third-party package)."""
    try:
        from envs_catalog import ALL_SPECS
    except ImportError:
        return False
    return target.source in {spec["source"] for spec in ALL_SPECS}


def _held_out_count(target: _Target, test: _SplitKeys, source: Any, budget_s: float,
                    hard_stop_s: float | None) -> tuple[str | None, str, dict[str, Any]]:
    """For a multi-turn env: (a failure reason or None, a clause for the row, data). Draws more
    test keys into a copy of `test` (the leak statistics compare equal samples)."""
    test = _SplitKeys(tasks=list(test.tasks), declared=test.declared)
    _count_more_test_keys(target, test, 2 * budget_s, hard_stop_s)
    seeds, distinct = len(test.tasks), len(set(test.tasks))
    data: dict[str, Any] = {"held_out_seeds": seeds, "held_out_distinct": distinct}
    if distinct >= HELD_OUT_EPISODES:
        return None, f"; {distinct} distinct held-out episodes in {seeds} test seeds (>= " \
            f"{HELD_OUT_EPISODES} for a multi-turn evaluation)", data
    estimate = _estimated_size(test.tasks)
    data["held_out_estimate"] = round(estimate, 1)
    counted = f"{distinct} distinct held-out episodes in {seeds} test seeds"
    if estimate >= HELD_OUT_EPISODES:
        return None, f"; {counted} (the sample is too small to tell whether the test split " \
            f"holds {HELD_OUT_EPISODES}: about {estimate:.0f} by its repeats)", data
    set_here = {k: v for k, v in target.overrides.items() if k not in _TEXT_ENV_OPTIONS}
    knobs = sorted(getattr(getattr(source, "card", None), "difficulty_knobs", None) or {})
    change = (f"change the knobs set here ({', '.join(f'{k}={v!r}' for k, v in set_here.items())})"
              if set_here else f"change a knob that widens its task pool (its knobs: {knobs})")
    short = (f"its test split gives only {counted} (about {estimate:.0f} in all), fewer than the "
             f"{HELD_OUT_EPISODES} a multi-turn env's held-out evaluation needs")
    declared = source.small_held_out_reason() if source is not None else None
    if declared:
        return None, f"; warning: {short} (a warning only, as the source declares: {declared})", data
    if _native(target):
        return f"{short}: {change}", "", data
    return None, f"; warning: {short} (not failed: not a native catalog env)", data


def _check_split(target: _Target, min_seeds: int = 48, max_seeds: int = 1000,
                 budget_s: float = 3.0, hard_stop_s: float | None = None,
                 source: Any = None) -> CheckRow:
    """The row; `source` (the built env's `EnvSource`, when the caller has one) may declare a
    fixed task (`fixed_task_reason`): one task has no split, a skip with the reason."""
    import numpy as np

    fixed_reason = source.fixed_task_reason() if source is not None else None
    if fixed_reason:
        return CheckRow("split", "skip", f"one task by design, so no split to check: {fixed_reason}")
    try:
        train, test = _sample_split_keys(target, min_seeds, max_seeds, budget_s, hard_stop_s)
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
    held_out = ""
    if source is not None and getattr(getattr(source, "card", None), "multi_turn", False):
        try:
            failure, held_out, counted = _held_out_count(target, test, source, budget_s,
                                                         hard_stop_s)
        except RuntimeError as exc:
            return CheckRow("split", "fail", str(exc), data)
        data.update(counted)
        if failure:
            return CheckRow("split", "fail", failure, data)
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
                        f"({odds}){held_out}", data)
    # Name what makes every seed's task new (an opponent's generator, a generated question).
    fresh = [f"env.{name}" for name in sorted(set(train.parts) & set(test.parts))
             if len(set(train.parts[name]) | set(test.parts[name])) == 2 * n][:2]
    return CheckRow(
        "split", "pass",
        f"{head}; {len(set(train.tasks))} train / {len(set(test.tasks))} test distinct"
        + (f" ({' and '.join(fresh)} new for every seed)" if fresh else "")
        + f": one pool would share only ~{mean:.1f}, so this sample shows no leak but cannot "
        f"rule out a small one{held_out}", data)
