"""Registered ids straight to the seed API: groups of episodes from an id's `EnvSource`.

An id registered with `TextEnv` as its entry point (every catalog and bridge id, and any made with
`llm_gym.register_env`) is an `EnvSource` plus `TextEnv` options. `env_source_for_id` builds that
source as `gym.make` builds it (the registered kwargs under the caller's, the same tokenizer and
renderer: `llm_gym.text_env.load_tokenizer_and_renderer`) and says how many turns an episode may
last (`turn_limit`, or Gymnasium's `TimeLimit` from `max_episode_steps`). `SourceEnvGroupBuilder`
makes a group's G episodes with `source.make_env(rng)`, each `rng` the generator that
`TextEnv.reset(seed=s)` would draw the task from (`seeded_np_random(s)`), so a seed gives the same
task, observations, rewards and metrics as `GymEnvGroupBuilder` over `gym.make` -- without the
round trip through int64 arrays, `info` dicts and Gymnasium's wrappers on every turn, and without
keeping envs around between groups. `SourceRLDataset` batches such groups with `GymRLDataset`'s
seeds (`grouping.group_seed`), and `rl_dataset(env_id, ...)` picks the path: this one for `TextEnv`
ids, `GymRLDataset` for every other Gymnasium env (third-party ids, factories).
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
from typing import Any, Sequence

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec

from llm_gym.env_source import EnvSource
from llm_gym.rl.types import (
    Action,
    ActionExtra,
    Env,
    EnvGroupBuilder,
    Metrics,
    RLDataset,
    StepResult,
    Trajectory,
    release_env,
)
from llm_gym.text_env import TextEnv, load_tokenizer_and_renderer, resolve_source, seeded_np_random
from llm_gym.wrappers.grouping import (
    _SPLIT_STREAMS,
    DEFAULT_N_BATCHES,
    GymRLDataset,
    _check_batch_index,
    _check_dataset_args,
    group_seed,
)

__all__ = [
    "EnvFromSource",
    "SourceEnvGroupBuilder",
    "SourceRLDataset",
    "env_source_for_id",
    "is_source_id",
    "rl_dataset",
    "stop_token_ids",
]

# TextEnv's own options that shape no episode (they only affect `render()` and
# `action_space.sample()`), and `gym.make`'s env checker switch.
_PRESENTATION_OPTIONS = ("max_action_length", "disable_env_checker")


@dataclasses.dataclass(frozen=True)
class EnvFromSource:
    """What `env_source_for_id` built: the id's `source` on one split, the `tokenizer` its env
    decodes with, and the most turns an episode may take (`turn_limit`; None: the env decides)."""

    env_id: str
    source: EnvSource
    tokenizer: Any
    turn_limit: int | None = None

    @property
    def renderer(self) -> Any:
        return self.source.renderer

    def stop_token_ids(self) -> list[int]:
        """The token ids that end a sampled reply: see `stop_token_ids`."""
        return stop_token_ids(self.renderer, self.tokenizer)


def stop_token_ids(renderer: Any, tokenizer: Any) -> list[int]:
    """The renderer's stop sequences that are single token ids, then the tokenizer's EOS id when
    it is not among them: what a sampler stops on for an env rendered by `renderer`."""
    stops = [int(s) for s in renderer.get_stop_sequences() if isinstance(s, int)]
    eos = getattr(tokenizer, "eos_token_id", None)
    if eos is not None and int(eos) not in stops:
        stops.append(int(eos))
    return stops


def _registered_spec(env_id: str) -> EnvSpec:
    module, sep, bare_id = env_id.rpartition(":")
    if sep:  # "package.module:llm/Name-v0", as gym.make reads it
        importlib.import_module(module)
    return gym.spec(bare_id)


def is_source_id(env_id: Any) -> bool:
    """Whether `env_id` is a registered id whose env is a plain `TextEnv` over an `EnvSource`
    (the entry point `llm_gym.text_env:TextEnv`, no extra wrappers in its spec), so
    `env_source_for_id` can build it. False for factories, unknown ids and any other env."""
    from llm_gym.registration import TEXT_ENV_ENTRY_POINT

    if not isinstance(env_id, str):
        return False
    try:
        spec = _registered_spec(env_id)
    except (gym.error.Error, ImportError):
        return False
    return spec.entry_point == TEXT_ENV_ENTRY_POINT and not spec.additional_wrappers


def env_source_for_id(env_id: str, split: str = "train", **make_kwargs: Any) -> EnvFromSource:
    """The `EnvSource` that `gym.make(env_id, split=split, **make_kwargs)` would drive, built the
    same way (the registered kwargs updated by `make_kwargs`; `tokenizer`, `renderer` and
    `turn_limit` as `TextEnv` reads them; the rest are the source's knobs), with no `TextEnv` around it.

    The episode's turn limit is the smaller of `turn_limit` and the `TimeLimit` that `gym.make`
    would add (`max_episode_steps` in `make_kwargs`, else the registered one; -1 adds none).
    Raises `ValueError` for an id that is not a `TextEnv` id (see `is_source_id`; build those with
    `gym.make`), and whatever the source raises for a bad knob (`ValueError` / `TypeError`)."""
    if not is_source_id(env_id):
        raise ValueError(
            f"{env_id!r} is not a registered llm-gym TextEnv id, so it has no EnvSource to build; "
            "use gym.make / llm_gym.wrappers.GymRLDataset for it"
        )
    spec = _registered_spec(env_id)
    kwargs = {**copy.deepcopy(spec.kwargs), **make_kwargs}  # as gym.make merges them
    time_limit = kwargs.pop("max_episode_steps", None)
    if time_limit is None:
        time_limit = spec.max_episode_steps
    elif time_limit == -1:
        time_limit = None
    for name in _PRESENTATION_OPTIONS:
        kwargs.pop(name, None)
    render_mode = kwargs.pop("render_mode", None)
    if render_mode is not None and render_mode not in TextEnv.metadata["render_modes"]:
        raise ValueError(f"render_mode {render_mode!r} is not supported; use None or one of "
                         f"{TextEnv.metadata['render_modes']}")
    source_cls = resolve_source(kwargs.pop("source"))
    turn_limit = kwargs.pop("turn_limit", None)
    if turn_limit is not None and (
        isinstance(turn_limit, bool) or not isinstance(turn_limit, int) or turn_limit < 1
    ):
        raise ValueError(f"turn_limit must be a positive int or None, got {turn_limit!r}")
    tokenizer, renderer = load_tokenizer_and_renderer(kwargs.pop("tokenizer", None),
                                                      kwargs.pop("renderer", None))
    source = source_cls(renderer=renderer, split=split, **kwargs)
    limits = [n for n in (turn_limit, time_limit) if n is not None]
    return EnvFromSource(spec.id, source, tokenizer, min(limits) if limits else None)


class _TurnLimited(Env):
    """A seed-API episode ended after `limit` steps, as `TextEnv(turn_limit=...)` or Gymnasium's
    `TimeLimit` truncates it (`episode_done` on the limit-th step, whatever the env said)."""

    def __init__(self, env: Env, limit: int) -> None:
        self.env = env
        self.limit = limit
        self.turns = 0

    async def initial_observation(self) -> Any:
        return await self.env.initial_observation()

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        result = await self.env.step(action, extra=extra)
        self.turns += 1
        if self.turns >= self.limit and not result.episode_done:
            result = dataclasses.replace(result, episode_done=True)
        return result

    def close(self) -> None:
        release_env(self.env)


def _inner(env: Env) -> Env:
    return env.env if isinstance(env, _TurnLimited) else env


class SourceEnvGroupBuilder(EnvGroupBuilder):
    """G episodes of `source`, all on the task that `seed` draws (see the module docstring).

    Args:
        source: the `EnvSource` (one split of one id, e.g. `env_source_for_id(...).source`).
        group_size: G.
        seed: the group's seed: each episode is `source.make_env(seeded_np_random(seed)[0])`, the
            task `TextEnv.reset(seed=seed)` faces; None gives each episode fresh entropy.
        turn_limit: end each episode after this many steps (None: the env decides).
        env_id: the id the source was built for (logging tags).

    `compute_group_rewards` asks the source (pairwise judges, self-play), with the G episodes;
    `cleanup()` releases each episode (`release_env`: sandboxes, tool runs). The builder holds the
    source itself, so a pickled builder carries it (and its tokenizer)."""

    def __init__(self, source: EnvSource, group_size: int, seed: int | None, *,
                 turn_limit: int | None = None, env_id: str | None = None) -> None:
        if not isinstance(source, EnvSource):
            raise TypeError(f"source must be an llm_gym EnvSource, got {type(source).__name__}")
        if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
            raise ValueError(f"group_size must be a positive int, got {group_size!r}")
        self.source = source
        self.group_size = group_size
        self.seed = seed
        self.turn_limit = turn_limit
        self.env_id = env_id
        self._envs: list[Env] = []

    async def make_envs(self) -> Sequence[Env]:
        envs: list[Env] = []
        for _ in range(self.group_size):
            env = self.source.make_env(seeded_np_random(self.seed)[0])
            if not isinstance(env, Env):
                raise TypeError(
                    f"{type(self.source).__name__}.make_env returned {type(env).__name__}, expected "
                    "an llm_gym.rl.Env"
                )
            envs.append(env if self.turn_limit is None else _TurnLimited(env, self.turn_limit))
        self._envs += envs
        return envs

    async def compute_group_rewards(
        self, trajectory_group: list[Trajectory], env_group: Sequence[Env]
    ) -> list[tuple[float, Metrics]]:
        inner = [_inner(env) for env in env_group]
        return list(await self.source.compute_group_rewards(trajectory_group, inner))

    async def cleanup(self) -> None:
        envs, self._envs = self._envs, []
        for env in envs:
            release_env(_inner(env))

    def logging_tags(self) -> list[str]:
        return [self.env_id or type(self.source).__name__]

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_envs"] = []  # live episodes stay in their process
        return state

    def __repr__(self) -> str:
        name = self.env_id or type(self.source).__name__
        return (f"SourceEnvGroupBuilder({name!r}, split={self.source.split!r}, "
                f"group_size={self.group_size}, seed={self.seed})")


class SourceRLDataset(RLDataset):
    """Batches of `SourceEnvGroupBuilder`s over one built source: the same groups, on the same
    seeds, as `GymRLDataset(env.env_id, batch_size, group_size, seed, split=env.source.split,
    **make_kwargs)` makes from `gym.make`, for `env = env_source_for_id(env_id, split,
    **make_kwargs)`. `get_batch(i)` is deterministic; `tokenizer` and `renderer` are the env's.
    `from_id` builds the source first."""

    def __init__(self, env: EnvFromSource, batch_size: int, group_size: int, seed: int = 0,
                 n_batches: int = DEFAULT_N_BATCHES) -> None:
        _check_dataset_args(batch_size, group_size, n_batches, seed)
        if env.source.split not in _SPLIT_STREAMS:
            raise ValueError(f"the source's split {env.source.split!r} is not one of {sorted(_SPLIT_STREAMS)}")
        self.env = env
        self.batch_size = batch_size
        self.group_size = group_size
        self.seed = seed
        self.split = env.source.split
        self.n_batches = n_batches

    @classmethod
    def from_id(cls, env_id: str, batch_size: int, group_size: int, seed: int = 0,
                split: str = "train", n_batches: int = DEFAULT_N_BATCHES,
                **make_kwargs: Any) -> "SourceRLDataset":
        if split not in _SPLIT_STREAMS:
            raise ValueError(f"split must be one of {sorted(_SPLIT_STREAMS)}, got {split!r}")
        return cls(env_source_for_id(env_id, split, **make_kwargs), batch_size, group_size, seed,
                   n_batches)

    @property
    def source(self) -> EnvSource:
        return self.env.source

    @property
    def tokenizer(self) -> Any:
        return self.env.tokenizer

    @property
    def renderer(self) -> Any:
        return self.env.renderer

    def __len__(self) -> int:
        return self.n_batches

    def group_seed(self, index: int, group: int) -> int:
        """The seed of group `group` in batch `index` (`GymRLDataset.group_seed`'s)."""
        return group_seed(self.seed, self.split, index, group)

    def get_batch(self, index: int) -> list[SourceEnvGroupBuilder]:
        index = _check_batch_index(index, self.n_batches)
        env = self.env
        return [
            SourceEnvGroupBuilder(env.source, self.group_size, self.group_seed(index, j),
                                  turn_limit=env.turn_limit, env_id=env.env_id)
            for j in range(self.batch_size)
        ]


def rl_dataset(env_id: Any, batch_size: int, group_size: int, seed: int = 0, split: str = "train",
               n_batches: int = DEFAULT_N_BATCHES, **make_kwargs: Any) -> RLDataset:
    """The dataset of groups for `env_id`: a `SourceRLDataset` for an llm-gym `TextEnv` id
    (`is_source_id`), else a `GymRLDataset` (any other Gymnasium env with token spaces, or a
    factory). Both give the same episodes for the same arguments where both apply."""
    if is_source_id(env_id):
        return SourceRLDataset.from_id(env_id, batch_size, group_size, seed, split, n_batches,
                                       **make_kwargs)
    return GymRLDataset(env_id, batch_size, group_size, seed=seed, split=split,
                        n_batches=n_batches, **make_kwargs)
