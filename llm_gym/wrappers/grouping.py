"""From Gymnasium back to the seed API: any token-space Gymnasium env as an `EnvGroupBuilder`.

`GymEnvGroupBuilder` makes G seed-API `Env`s, each backed by its own Gymnasium env (from
`gym.make(env_id)` or a factory) and reset with the same seed, so all G face the same task -- the
group that GRPO-style advantages are centred on. `GymRLDataset` is an `RLDataset` of such builders
with per-group seeds derived from `numpy.random.SeedSequence`, so batch `i` is the same on every
machine. The trainer only sees the seed API, so anything `gym.make` can build (ours or a third
party's, as long as observations and actions are token ids) can be trained. For llm-gym's own ids
the trainer skips Gymnasium altogether: `llm_gym.wrappers.source` makes the same episodes (same
seeds, same tasks) straight from the id's `EnvSource`; this module serves every other Gymnasium
env, and users who want the Gymnasium envs themselves.
"""

from __future__ import annotations

import inspect
import os
import threading
from typing import Any, Callable, ClassVar, Sequence, cast

import gymnasium as gym
import numpy as np

from llm_gym.completers import StopCondition
from llm_gym.model_input import ModelInput
from llm_gym.rl.types import (
    Action,
    ActionExtra,
    Env,
    EnvGroupBuilder,
    Metrics,
    Observation,
    RLDataset,
    StepResult,
    Trajectory,
    release_env,
)

__all__ = [
    "DEFAULT_N_BATCHES",
    "GymEnvAdapter",
    "GymEnvGroupBuilder",
    "GymRLDataset",
    "clear_env_pool",
]

EnvFactory = Callable[..., gym.Env]
DEFAULT_N_BATCHES = 10_000
_SPLIT_STREAMS = {"train": 0, "test": 1}


def _obs_to_ints(obs: Any) -> list[int]:
    if isinstance(obs, np.ndarray) and obs.ndim == 1 and (obs.dtype.kind in "iu" or obs.size == 0):
        return obs.tolist()
    if isinstance(obs, ModelInput):
        return obs.to_ints()
    if isinstance(obs, (list, tuple)) and all(
        isinstance(t, (int, np.integer)) and not isinstance(t, bool) for t in obs
    ):
        return [int(t) for t in obs]
    raise TypeError(
        f"GymEnvGroupBuilder needs token-id observations (a 1-D int array or list of ints), got "
        f"{type(obs).__name__}; wrap a string env in llm_gym.wrappers.FromText(env) first"
    )


def group_seed(seed: int, split: str, index: int, group: int) -> int:
    """The reset seed (a 63-bit int) of group `group` in batch `index` of a dataset seeded with
    `seed` on `split`: from `SeedSequence(seed, spawn_key=(split stream, index, group))`, so batch
    `i` is the same on every machine and the two splits never share a seed. `GymRLDataset` and
    `llm_gym.wrappers.source.SourceRLDataset` both draw their groups' seeds here."""
    seq = np.random.SeedSequence(seed, spawn_key=(_SPLIT_STREAMS[split], index, group))
    return int(seq.generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))


def _check_dataset_args(batch_size: Any, group_size: Any, n_batches: Any, seed: Any) -> None:
    """ValueError unless the sizes are positive ints and `seed` a non-negative int (the checks
    every dataset of groups makes)."""
    for name, value in (("batch_size", batch_size), ("group_size", group_size), ("n_batches", n_batches)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")


def _check_batch_index(index: Any, n_batches: int) -> int:
    """`index` as an int, or TypeError / IndexError for a bad batch index."""
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
        raise TypeError(f"batch index must be an int, got {type(index).__name__}")
    if not 0 <= index < n_batches:
        raise IndexError(f"batch index {index} is out of range for {n_batches} batches")
    return int(index)


def fold_seed_32(seed: int) -> int:
    """A seed below 2**32 derived from all bits of a non-negative int `seed` (xor-folded), for
    envs whose seeding goes through numpy's legacy `np.random.seed`."""
    folded = 0
    while seed:
        folded ^= seed & 0xFFFFFFFF
        seed >>= 32
    return folded


def _is_text_env(env: gym.Env) -> bool:
    from llm_gym.text_env import TextEnv

    return isinstance(env.unwrapped, TextEnv)


def _async_text_env(env: gym.Env) -> Any:
    """The `TextEnv` under `env` when only bookkeeping wrappers sit on it (what `gym.make` adds:
    the order-enforcing and passive-checker wrappers), else None. Its `areset`/`astep` then serve
    the adapter, so an episode awaiting a tool or a sandbox yields the event loop to the group's
    other rollouts (and the sampler's batching) instead of blocking it; any other wrapper (a
    `TimeLimit`, a user's) keeps the synchronous path so its logic runs."""
    from gymnasium.wrappers import OrderEnforcing, PassiveEnvChecker

    from llm_gym.text_env import TextEnv

    while isinstance(env, gym.Wrapper):
        if type(env) not in (OrderEnforcing, PassiveEnvChecker):
            return None
        env = env.env
    return env if isinstance(env, TextEnv) else None


def _mark_reset(env: gym.Env) -> None:
    """Tell the order-enforcing wrapper above an async-reset `TextEnv` that a reset happened, so
    a later synchronous `step` through the wrapper chain is not refused."""
    while isinstance(env, gym.Wrapper):
        if hasattr(env, "_has_reset"):  # OrderEnforcing's private flag; not in the Wrapper type
            setattr(env, "_has_reset", True)
        env = env.env


def _numeric_metrics(raw: Any) -> Metrics:
    if not isinstance(raw, dict):
        return {}
    return {
        str(k): (float(v) if isinstance(v, (float, np.floating)) else int(v))
        for k, v in raw.items()
        if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
    }


class GymEnvAdapter(Env):
    """One seed-API episode played on a Gymnasium env with token spaces.

    `initial_observation()` resets the Gymnasium env with `seed` (and `options`) and returns the
    observation as a `ModelInput` with a stop condition: `info["stop_condition"]` when the env
    gives one, else `[eos_token_id]` of `env.unwrapped.tokenizer` when it has one, else `[]`.
    `step(tokens)` steps the Gymnasium env (the action as an int64 array) and returns a
    `StepResult` with `episode_done = terminated or truncated` and the numeric entries of
    `info["metrics"]` as metrics. An llm-gym `TextEnv` under only `gym.make`'s bookkeeping
    wrappers is driven through its `areset`/`astep` (see `_async_text_env`); any other env or
    wrapper chain through its sync `reset`/`step`, so every wrapper (a `TimeLimit`, a user's) applies.
    """

    def __init__(self, gym_env: gym.Env, seed: int | None, options: dict[str, Any] | None = None):
        self.gym_env = gym_env
        self.seed = seed
        self.options = options
        self._stop: StopCondition = []
        self._released = False
        self._text_env = _async_text_env(gym_env)  # the wrapper chain is fixed: look once

    def _check_live(self) -> None:
        if self._released:
            raise RuntimeError(
                "this episode's Gymnasium env was released by GymEnvGroupBuilder.cleanup() (it may "
                "already serve another group); call make_envs() again for new episodes"
            )

    def _stop_copy(self) -> StopCondition:
        return cast(StopCondition, list(self._stop))  # a copy, of the same kind (str or int)

    def _default_stop(self) -> StopCondition:
        tokenizer = getattr(self.gym_env.unwrapped, "tokenizer", None)
        eos = getattr(tokenizer, "eos_token_id", None)
        return [int(eos)] if isinstance(eos, (int, np.integer)) else []

    async def initial_observation(self) -> tuple[Observation, StopCondition]:
        self._check_live()
        seed = self.seed
        if seed is not None and seed >= 1 << 32 and not _is_text_env(self.gym_env):
            # Third-party envs often call `np.random.seed(seed)` / `RandomState(seed)`, which
            # reject seeds of 2**32 and more; fold the dataset's 63-bit seeds to 32 bits for them
            # (llm-gym's TextEnv takes any int, so its episodes are unchanged).
            seed = fold_seed_32(seed)
        text_env = self._text_env
        if text_env is not None:
            obs, info = await text_env.areset(seed=seed, options=self.options)
            _mark_reset(self.gym_env)
        else:
            obs, info = self.gym_env.reset(seed=seed, options=self.options)
        stop = info.get("stop_condition") if isinstance(info, dict) else None
        self._stop = cast(StopCondition, list(stop)) if stop is not None else self._default_stop()
        return ModelInput.from_ints(_obs_to_ints(obs)), self._stop_copy()

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        self._check_live()
        try:
            gym_action: Any = np.asarray(action, dtype=np.int64)
        except OverflowError:  # ids beyond int64 are still model output: let the env judge them
            gym_action = list(action)
        text_env = self._text_env
        if text_env is not None:
            obs, reward, terminated, truncated, info = await text_env.astep(gym_action)
        else:
            obs, reward, terminated, truncated, info = self.gym_env.step(gym_action)
        info = info if isinstance(info, dict) else {}
        if info.get("stop_condition") is not None:
            self._stop = cast(StopCondition, list(info["stop_condition"]))
        logs = {"text": info["text"]} if isinstance(info.get("text"), str) else {}
        return StepResult(
            reward=float(reward),
            episode_done=bool(terminated or truncated),
            next_observation=ModelInput.from_ints(_obs_to_ints(obs)),
            next_stop_condition=self._stop_copy(),
            metrics=_numeric_metrics(info.get("metrics")),
            logs=logs,
        )

    @property
    def seed_api_env(self) -> Env | None:
        """The episode's own seed-API env when the Gymnasium env is a `TextEnv`, else None."""
        return getattr(self.gym_env.unwrapped, "current_env", None)


class GymEnvGroupBuilder(EnvGroupBuilder):
    """G episodes of one Gymnasium env, all reset with `seed` (so all face the same task).

    Args:
        env_id_or_factory: a registered id (`gym.make(env_id, **make_kwargs)`) or a picklable
            callable returning a Gymnasium env (`factory(**make_kwargs)`).
        group_size: G, the number of episodes in the group.
        seed: the reset seed shared by the group.
        **make_kwargs: passed to `gym.make` / the factory (e.g. `tokenizer="byte"`, `split="test"`).

    `compute_group_rewards` delegates to the env's own `compute_group_rewards` when it has one
    (`TextEnv` asks its source, with the G seed-API episodes), and gives zeros otherwise. The
    builder stores only the id/factory and arguments, so it pickles; Gymnasium envs are made in
    `make_envs()` and released in `cleanup()`.

    Env reuse: making a Gymnasium env per episode is most of a rollout's overhead, so for a
    registered llm-gym id with an int `seed` the envs released by `cleanup()` go to a small
    per-process pool keyed by (id, make kwargs), and later `make_envs()` calls take envs from it
    before calling `gym.make`. A reused env is reset with the new seed, which starts a fresh
    episode (a `TextEnv` draws the task from the seed alone), so results are the same as with
    fresh envs. An env belongs to one builder from `make_envs()` until its `cleanup()`, so
    concurrent rollouts never share one; the seed-API envs of a group must not be used after
    `cleanup()` (they raise `RuntimeError`). Factories, third-party ids and `seed=None` groups
    always get fresh envs. `GymEnvGroupBuilder.max_pooled_envs` (default 1024) caps the idle envs
    kept per key; set it to 0 to turn reuse off; `clear_env_pool()` closes the idle ones.
    """

    max_pooled_envs: ClassVar[int] = 1024

    def __init__(
        self,
        env_id_or_factory: str | EnvFactory,
        group_size: int,
        seed: int | None,
        **make_kwargs: Any,
    ) -> None:
        if not (isinstance(env_id_or_factory, str) or callable(env_id_or_factory)):
            raise TypeError(
                f"env_id_or_factory must be a registered env id or a callable returning a "
                f"gymnasium.Env, got {env_id_or_factory!r}"
            )
        if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
            raise ValueError(f"group_size must be a positive int, got {group_size!r}")
        self.env_id_or_factory = env_id_or_factory
        self.group_size = group_size
        self.seed = seed
        self.make_kwargs = make_kwargs
        self._envs: list[GymEnvAdapter] = []
        self._pool_key: Any = None  # computed on first make_envs (not pickled)

    def _make_gym_env(self) -> gym.Env:
        if isinstance(self.env_id_or_factory, str):
            return gym.make(self.env_id_or_factory, **self.make_kwargs)
        env = self.env_id_or_factory(**self.make_kwargs)
        if not isinstance(env, gym.Env):
            raise TypeError(
                f"the env factory {self.env_id_or_factory!r} returned {type(env).__name__}, "
                "expected a gymnasium.Env; for a string env (GEM, TextArena, ...) return "
                "llm_gym.wrappers.FromText(env)"
            )
        return env

    async def make_envs(self) -> Sequence[Env]:
        key = self._pool_key_or_none()
        gym_envs = _ENV_POOL.take(key, self.group_size) if key is not None else []
        while len(gym_envs) < self.group_size:
            gym_envs.append(self._make_gym_env())
        envs = [GymEnvAdapter(gym_env, self.seed) for gym_env in gym_envs]
        self._envs += envs
        return envs

    def _pool_key_or_none(self) -> Any:
        """The env pool's key for this builder's envs, or None when they must not be pooled: a
        factory (its envs may keep state across resets), `seed=None` (a reused env would continue
        its old generator instead of drawing fresh entropy), pooling switched off, or make kwargs
        that cannot be compared safely."""
        if self.max_pooled_envs <= 0 or self.seed is None or not isinstance(self.env_id_or_factory, str):
            return None
        if self._pool_key is None:
            spec = gym.registry.get(self.env_id_or_factory)
            if spec is None or spec.entry_point != _text_env_entry_point():
                return None  # only llm-gym TextEnvs, whose reset(seed) fully defines the episode
            try:
                self._pool_key = (self.env_id_or_factory, _freeze(self.make_kwargs))
            except TypeError:
                self._pool_key = False
        return self._pool_key or None

    async def compute_group_rewards(
        self, trajectory_group: list[Trajectory], env_group: Sequence[Env]
    ) -> list[tuple[float, Metrics]]:
        if not env_group:
            return [(0.0, {}) for _ in trajectory_group]
        first = env_group[0]
        gym_env = first.gym_env.unwrapped if isinstance(first, GymEnvAdapter) else None
        group_fn = getattr(gym_env, "compute_group_rewards", None)
        if group_fn is None:
            return [(0.0, {}) for _ in trajectory_group]
        # A TextEnv's source judges its own seed-API episodes; other envs get the Gymnasium envs.
        inner = [
            (e.seed_api_env or e.gym_env.unwrapped) if isinstance(e, GymEnvAdapter) else e
            for e in env_group
        ]
        return list(await group_fn(trajectory_group, inner))

    async def cleanup(self) -> None:
        envs, self._envs = self._envs, []
        key = self._pool_key_or_none()
        for env in envs:
            if env.seed_api_env is not None:
                release_env(env.seed_api_env)  # sandboxes and tool runs die with the group
            env._released = True  # its Gymnasium env may now serve another group's episode
            if key is None or not _ENV_POOL.give(key, env.gym_env, self.max_pooled_envs):
                env.gym_env.close()

    def logging_tags(self) -> list[str]:
        if isinstance(self.env_id_or_factory, str):
            return [self.env_id_or_factory]
        return [getattr(self.env_id_or_factory, "__name__", type(self.env_id_or_factory).__name__)]

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_envs"] = []  # live envs stay in their process
        state["_pool_key"] = None
        return state

    def __repr__(self) -> str:
        return (
            f"GymEnvGroupBuilder({self.env_id_or_factory!r}, group_size={self.group_size}, "
            f"seed={self.seed}, **{self.make_kwargs!r})"
        )


class _EnvPool:
    """Per-process pool of idle Gymnasium envs, keyed by (env id, make kwargs).

    An env is in the pool only between two groups: `take` hands it to exactly one
    `GymEnvGroupBuilder.make_envs` call and removes it, and only that builder's `cleanup` gives it
    back, so two running rollouts never share an env. Each key remembers the registry spec its envs
    were made from; re-registering the id drops them. A forked child starts with an empty pool.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: dict[Any, tuple[Any, list[gym.Env]]] = {}
        self._inherited: list[Any] = []
        self._pid = os.getpid()

    def take(self, key: Any, n: int) -> list[gym.Env]:
        spec = gym.registry.get(key[0])
        with self._lock:
            if self._pid != os.getpid():  # forked: the parent's envs are not ours to use
                # Kept (not closed): closing an inherited event loop would unregister its file
                # descriptors from the epoll set it shares with the parent.
                self._inherited.append(self._idle)
                self._idle, self._pid = {}, os.getpid()
            entry = self._idle.get(key)
            if entry is None:
                return []
            if entry[0] is not spec:  # the id was re-registered since these were made
                del self._idle[key]
                stale: list[gym.Env] = entry[1]
                taken: list[gym.Env] = []
            else:
                idle = entry[1]
                taken = idle[-n:] if n < len(idle) else idle[:]
                del idle[len(idle) - len(taken):]
                stale = []
        for env in stale:
            env.close()
        return taken

    def give(self, key: Any, env: gym.Env, limit: int) -> bool:
        """Keep `env` for a later group; False (the caller closes it) when the pool is full."""
        spec = gym.registry.get(key[0])
        with self._lock:
            if self._pid != os.getpid():
                return False
            entry = self._idle.get(key)
            if entry is None or entry[0] is not spec:
                entry = self._idle[key] = (spec, [])
            if len(entry[1]) >= limit:
                return False
            entry[1].append(env)
            return True

    def clear(self) -> None:
        """Close and forget every pooled env."""
        with self._lock:
            idle, self._idle = self._idle, {}
        for _, envs in idle.values():
            for env in envs:
                env.close()

    def __len__(self) -> int:
        return sum(len(envs) for _, envs in self._idle.values())


_ENV_POOL = _EnvPool()


def clear_env_pool() -> None:
    """Close every Gymnasium env that `GymEnvGroupBuilder`s keep for reuse in this process."""
    _ENV_POOL.clear()


def _freeze(value: Any) -> Any:
    """A hashable, type-exact stand-in for make kwargs (so `True` and `1`, or a list and a tuple,
    never share envs). Raises TypeError for values that cannot be hashed."""
    if isinstance(value, dict):
        return (dict, tuple(sorted(((k, _freeze(v)) for k, v in value.items()), key=repr)))
    if isinstance(value, (list, tuple)):
        return (type(value), tuple(_freeze(v) for v in value))
    if isinstance(value, (set, frozenset)):
        return (type(value), frozenset(_freeze(v) for v in value))
    hash(value)
    return (type(value), value)


def _text_env_entry_point() -> str:
    from llm_gym.registration import TEXT_ENV_ENTRY_POINT

    return TEXT_ENV_ENTRY_POINT


def _accepts_split(env_id_or_factory: str | EnvFactory) -> bool:
    """Whether the env takes a `split` argument: llm-gym's `TextEnv`s do; others only if their
    entry point / factory declares a parameter named `split`."""
    from llm_gym.registration import TEXT_ENV_ENTRY_POINT

    if isinstance(env_id_or_factory, str):
        spec = gym.spec(env_id_or_factory)
        if spec.entry_point == TEXT_ENV_ENTRY_POINT:
            return True
        creator: Any = spec.entry_point
        if isinstance(creator, str):
            from gymnasium.envs.registration import load_env_creator

            creator = load_env_creator(creator)
    else:
        creator = env_id_or_factory
    try:
        return "split" in inspect.signature(creator).parameters
    except (TypeError, ValueError):
        return False


class GymRLDataset(RLDataset):
    """Batches of `GymEnvGroupBuilder`s over one env: `get_batch(i)` is deterministic.

    Args:
        env_id: a registered env id or a picklable factory (as for `GymEnvGroupBuilder`).
        batch_size: groups per batch.
        group_size: episodes per group (all on one task).
        seed: the dataset's seed; group `j` of batch `i` resets with a seed derived from
            `SeedSequence(seed, spawn_key=(split stream, i, j))`.
        split: `"train"` or `"test"`. The two splits draw from disjoint seed streams, and when the
            env accepts a `split` argument (every llm-gym env does: its source keeps disjoint task
            sets per split) `split` is also passed to `gym.make`.
        n_batches: `len(dataset)`; defaults to `DEFAULT_N_BATCHES` (10,000), more steps than a
            typical run takes. Seeds never repeat within it.
        **make_kwargs: passed to `gym.make` / the factory.
    """

    def __init__(
        self,
        env_id: str | EnvFactory,
        batch_size: int,
        group_size: int,
        seed: int = 0,
        split: str = "train",
        n_batches: int = DEFAULT_N_BATCHES,
        **make_kwargs: Any,
    ) -> None:
        if split not in _SPLIT_STREAMS:
            raise ValueError(f"split must be one of {sorted(_SPLIT_STREAMS)}, got {split!r}")
        _check_dataset_args(batch_size, group_size, n_batches, seed)
        if "split" in make_kwargs:
            raise TypeError("pass split as GymRLDataset(split=...), not among the make kwargs")
        self.env_id = env_id
        self.batch_size = batch_size
        self.group_size = group_size
        self.seed = seed
        self.split = split
        self.n_batches = n_batches
        self.make_kwargs = dict(make_kwargs)
        if _accepts_split(env_id):
            self.make_kwargs["split"] = split

    def __len__(self) -> int:
        return self.n_batches

    def group_seed(self, index: int, group: int) -> int:
        """The reset seed of group `group` in batch `index` (a 63-bit int; envs other than
        llm-gym's `TextEnv` are reset with it folded to 32 bits, see `fold_seed_32`)."""
        return group_seed(self.seed, self.split, index, group)

    def get_batch(self, index: int) -> list[GymEnvGroupBuilder]:
        index = _check_batch_index(index, self.n_batches)
        return [
            GymEnvGroupBuilder(self.env_id, self.group_size, self.group_seed(index, j), **self.make_kwargs)
            for j in range(self.batch_size)
        ]
