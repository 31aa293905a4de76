"""Probing what a `GRPOConfig` meets, and fitting its defaults to it, torch-free.

`GRPOConfig` (`trainers.grpo.config`) holds the values and checks them against themselves; this
module checks them against the world: the model is loadable without a download (`check_model`), the
env id is registered (`check_env_id`) and builds and resets with the config's `env_kwargs` on both
splits with token spaces (`RunEnv.check`, which `GRPOConfig.validate` calls), and what the SFT
warm start would learn from (`sft_source_kind`: the env's reference responses or a gold scripted
case, `first_gold_case`, `RunEnv.gold_case_summary`; `trainers.sft` plays that case). `fit_to_env`
then fits the defaults of the fields a user left unset to the env (`llm-gym train` calls it before
`validate`): `max_tokens` from the env's longest own answer (`RunEnv.reply_need`,
`fitted_max_tokens`), and `loss_reduction` for long or multi-turn completions; on a multi-turn env
it also leaves the RL `lr` to be fitted once the warm start is measured (`fit_lr_to_warm_start`,
which the trainer calls after its "eval before RL": `fitted_rl_lr`). Errors are `ConfigError`s
naming the bad value and the fix.

The env is built once per run: `run_env(cfg)` is the config's `RunEnv` (made by the first call,
kept on the config), which validation, fitting, the `SFT source` line, the SFT warm start, the
trainer's datasets and evaluations, and its tokenizer and stop ids all read. For an llm-gym id
that is its `EnvSource` per split (`llm_gym.wrappers.source`), with no Gymnasium env in between.
"""

from __future__ import annotations

import difflib
import json
import math
from pathlib import Path
from typing import Any, Callable

from trainers.grpo.config import ConfigError, GRPOConfig

__all__ = [
    "MODEL_PRESETS",
    "SFT_GOLD",
    "SFT_NONE",
    "SFT_REFERENCE",
    "WARM_START_ACCURACY",
    "WARM_START_LR",
    "RunEnv",
    "check_env_builds",
    "check_env_id",
    "check_model",
    "first_gold_case",
    "fit_lr_to_warm_start",
    "fit_to_env",
    "fitted_max_tokens",
    "fitted_rl_lr",
    "gold_case_summary",
    "reply_need",
    "run_env",
    "run_env_kwargs",
    "sft_source_kind",
]


# --- the model -----------------------------------------------------------------------------------
# The built-in presets, built locally on first use (`trainers.models.PRESETS`; a test checks the
# two agree: this module stays torch-free).
MODEL_PRESETS = ("tiny", "tiny-bpe")


def check_model(model: str) -> None:
    """Raise `ConfigError` unless `model` is a preset (`MODEL_PRESETS`), a local checkpoint
    directory (with a `config.json`) or a hub id already in the local Hugging Face cache: llm-gym
    never downloads at run time (`trainers.models.load_policy`). Torch-free."""
    if model in MODEL_PRESETS:
        return
    path = Path(model)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ConfigError(
                f"model={model!r} is a directory without a config.json; point --model at a "
                "directory written by save_pretrained (or use a preset: --model tiny)"
            )
        return
    if path.exists():
        raise ConfigError(f"model={model!r} is a file; --model takes a checkpoint directory or tiny")
    if _in_hf_cache(model):
        return
    raise ConfigError(
        f"model={model!r} is neither a local checkpoint directory nor in the local Hugging Face "
        "cache, and llm-gym never downloads at run time (the hub is offline); use --model tiny, a "
        f"directory written by save_pretrained, or download it once on a connected machine "
        f"(`huggingface-cli download {model}`)"
    )


def _in_hf_cache(repo_id: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return False
    try:
        return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)
    except Exception:  # not a valid repo id (e.g. "./runs/x" that does not exist)
        return False


# --- the environment -----------------------------------------------------------------------------
def check_env_id(env_id: str) -> None:
    """Raise `ConfigError` with close matches (across the whole Gymnasium registry, third-party
    namespaces included) when `env_id` is not registered. `"module:id"` imports `module` first,
    as `gym.make` does."""
    import gymnasium as gym

    import llm_gym  # noqa: F401  (registers the catalog's ids)
    from llm_gym.registration import close_env_ids

    module, sep, bare_id = env_id.rpartition(":")
    if sep:
        import importlib

        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ConfigError(f"env={env_id!r}: cannot import module {module!r} ({exc})") from None
    if bare_id in gym.registry:
        return
    close = close_env_ids(bare_id)
    hint = f" Did you mean: {', '.join(repr(c) for c in close)}?" if close else ""
    llm_ids = sorted(k for k in gym.registry if k.startswith("llm/"))
    raise ConfigError(f"unknown environment id {env_id!r}.{hint} Registered llm/ ids: {llm_ids}")


# env_kwargs the trainer passes itself (to `GymRLDataset` / `gym.make`), with what to set instead.
_RESERVED_ENV_KWARGS = {
    "split": "the trainer trains on split 'train' and evaluates on split 'test' itself",
    "seed": "set the config's seed instead",
    "batch_size": "set groups_per_batch instead",
    "group_size": "set group_size instead",
    "n_batches": "the trainer sets it",
}


# What an env's construction raises for a bad knob (the EnvSource contract: ValueError/TypeError),
# a tokenizer or renderer it cannot load (OSError, LookupError, NotImplementedError) or a source
# package that is not installed. Anything else is a bug in the env and keeps its traceback.
_ENV_SETUP_ERRORS = (ValueError, TypeError, LookupError, OSError, NotImplementedError, ImportError)


def check_env_builds(env_id: str, env_kwargs: dict[str, Any], seed: int = 0,
                     needs_references: bool = False) -> str:
    """`RunEnv(env_id, env_kwargs).check(seed, needs_references)`: raise `ConfigError` unless the
    env builds and resets on both splits with token spaces (and, with `needs_references`, has
    something for the SFT warm start to learn from); return what that would be."""
    return RunEnv(env_id, env_kwargs).check(seed, needs_references)


class RunEnv:
    """The env a run trains and evaluates on (`env_id` with `env_kwargs`), built once per split.

    An llm-gym `TextEnv` id (every catalog and bridge id: `llm_gym.wrappers.source.is_source_id`)
    is built as its `EnvSource` (`env_source_for_id`), the first time a split is asked for, and
    everything reads that one source: `check`, `reply_need`, `gold_case_summary`, `source` (the SFT
    warm start), `dataset` (`SourceRLDataset`: episodes straight from `source.make_env(rng)`, with
    `GymRLDataset`'s seeds and `TextEnv.reset(seed)`'s generators, so a run sees the episodes the
    Gymnasium path gave it) and `tokenizer_and_stops` (the env's own tokenizer and renderer). Any
    other Gymnasium env with token spaces (a third party's id) goes through `gym.make` and
    `GymRLDataset`. Torch-free.
    """

    def __init__(self, env_id: str, env_kwargs: dict[str, Any]) -> None:
        import gymnasium as gym

        import llm_gym  # noqa: F401  (registers the catalog's ids)
        from llm_gym.wrappers.source import is_source_id

        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs)
        self.bare_id = env_id.rpartition(":")[2]
        self.from_source = is_source_id(env_id)
        self.spec = gym.registry.get(self.bare_id)  # a re-registered id is a different env
        self._splits: dict[str, Any] = {}  # split -> llm_gym.wrappers.source.EnvFromSource
        self._sources: dict[tuple[str, str], Any] = {}  # (split, extra knobs) -> EnvSource | None
        self._gold: dict[int, tuple[str, int] | None] = {}  # seed -> gold_case_summary
        self._found: tuple[str, str] | None = None  # (SFT kind, the train episode's type name)
        self._gym_parts: tuple[Any, list[int]] | None = None  # a Gymnasium env's tokenizer, stops

    # --- building ------------------------------------------------------------------------------
    def split(self, split: str) -> Any:
        """The `EnvFromSource` (source, tokenizer, turn limit) of `split`, built on first use
        (llm-gym ids only)."""
        env = self._splits.get(split)
        if env is None:
            from llm_gym.wrappers.source import env_source_for_id

            env = self._splits[split] = env_source_for_id(self.env_id, split, **self.env_kwargs)
        return env

    def source(self, split: str = "train", **knobs: Any) -> Any:
        """The `EnvSource` of `split` (with `knobs` over `env_kwargs`: a gold case's own), or None
        for an env without one (a third party's Gymnasium env)."""
        if not knobs and self.from_source:
            return self.split(split).source
        key = (split, json.dumps(knobs, sort_keys=True, default=repr))
        if key not in self._sources:
            self._sources[key] = self._build_source(split, {**self.env_kwargs, **knobs})
        return self._sources[key]

    def _build_source(self, split: str, kwargs: dict[str, Any]) -> Any:
        from llm_gym.env_source import EnvSource

        if self.from_source:
            from llm_gym.wrappers.source import env_source_for_id

            return env_source_for_id(self.env_id, split, **kwargs).source
        import gymnasium as gym

        from llm_gym.wrappers.grouping import _accepts_split

        if _accepts_split(self.bare_id):
            kwargs = {**kwargs, "split": split}
        env = gym.make(self.bare_id, **kwargs)
        try:
            source = getattr(env.unwrapped, "source", None)
        finally:
            env.close()
        return source if isinstance(source, EnvSource) else None

    def dataset(self, split: str, batch_size: int, group_size: int, seed: int) -> Any:
        """The `RLDataset` of `split`: groups of `group_size` episodes, `batch_size` per batch."""
        if self.from_source:
            from llm_gym.wrappers.source import SourceRLDataset

            return SourceRLDataset(self.split(split), batch_size, group_size, seed)
        from llm_gym.wrappers.grouping import GymRLDataset

        return GymRLDataset(self.env_id, batch_size=batch_size, group_size=group_size, seed=seed,
                            split=split, **self.env_kwargs)

    def tokenizer_and_stops(self) -> tuple[Any, list[int]]:
        """The tokenizer the env decodes with and the token ids that end a sampled reply (its
        renderer's single-token stop sequences, then EOS): asked of the env, never rebuilt from
        `env_kwargs`. A Gymnasium env without a `tokenizer` / `renderer` attribute gets the ones
        `env_kwargs` name (default: the byte tokenizer and its renderer)."""
        if self.from_source:
            env = self.split("train")
            return env.tokenizer, env.stop_token_ids()
        if self._gym_parts is None:
            import gymnasium as gym

            env = gym.make(self.bare_id, **self._gym_kwargs("train"))
            try:
                self._remember_gym_parts(env)
            finally:
                env.close()
        assert self._gym_parts is not None
        return self._gym_parts

    def _gym_kwargs(self, split: str) -> dict[str, Any]:
        from llm_gym.wrappers.grouping import _accepts_split

        if not _accepts_split(self.bare_id):
            return dict(self.env_kwargs)
        return {**self.env_kwargs, "split": split}

    def _remember_gym_parts(self, env: Any) -> None:
        from llm_gym import get_renderer, load_tokenizer
        from llm_gym.wrappers.source import stop_token_ids

        tokenizer = getattr(env.unwrapped, "tokenizer", None)
        renderer = getattr(env.unwrapped, "renderer", None)
        if tokenizer is None:  # nothing to ask: what env_kwargs name (default: bytes, chatml)
            tokenizer = load_tokenizer(self.env_kwargs.get("tokenizer"))
            renderer = renderer or get_renderer(self.env_kwargs.get("renderer"), tokenizer)
        if renderer is None:  # the env's own tokenizer, no renderer: it stops at EOS
            eos = getattr(tokenizer, "eos_token_id", None)
            self._gym_parts = (tokenizer, [] if eos is None else [int(eos)])
        else:
            self._gym_parts = (tokenizer, stop_token_ids(renderer, tokenizer))

    # --- checking ------------------------------------------------------------------------------
    def check(self, seed: int = 0, needs_references: bool = False) -> str:
        """Raise `ConfigError` unless the env is registered and builds and resets with `env_kwargs`
        on both splits, with token observation and action spaces (what the trainer needs), and,
        with `needs_references` (an SFT warm start), unless there is something to warm-start on:
        reference answers (single-turn `ProblemEnv`-style episodes: `conversation()` and
        `get_reference_response()`) or, for multi-turn envs, a gold `ScriptedCase` of the env's
        `EnvSource` (`scripted_cases()`), whose episodes `trainers.sft` plays and learns token for
        token. Returns what the warm start would use (`sft_source_kind` on the train split):
        `SFT_REFERENCE`, `SFT_GOLD` or `SFT_NONE`.

        The first call builds the env once per split -- what the trainer then uses -- so a bad
        knob name or value is reported now, in one line naming the env and the knob (with the
        env's knobs and a close match for an unknown one), not after the model is built; later
        calls reuse what it found. Torch-free for llm-gym's catalog envs.
        """
        if self._found is None:
            self._found = self._check(seed)
        found, episode_type = self._found
        if needs_references and found == SFT_NONE:
            raise ConfigError(
                f"env={self.env_id!r} has no reference answers for the SFT warm start (its "
                f"episodes are {episode_type}, not single-turn ProblemEnvs) and "
                "no gold scripted case to learn from (EnvSource.scripted_cases() declares "
                "none); pass --no-sft (sft_steps=0), or give the env a gold ScriptedCase"
            )
        return found

    def _check(self, seed: int) -> tuple[str, str]:
        check_env_id(self.env_id)
        for key, why in _RESERVED_ENV_KWARGS.items():
            if key in self.env_kwargs:
                raise ConfigError(f"env_kwargs must not set {key!r}: {why}")
        if self.from_source:
            return self._check_source(seed)
        return self._check_gym(seed)

    def _check_source(self, seed: int) -> tuple[str, str]:
        from llm_gym.rl.types import Env, release_env
        from llm_gym.text_env import run_coroutine, seeded_np_random

        found = (SFT_NONE, "None")
        for split in ("train", "test"):
            try:
                source = self.split(split).source
            except _ENV_SETUP_ERRORS as exc:
                raise ConfigError(_env_error(self.bare_id, self.env_kwargs, exc)) from None
            episode = None
            try:
                # what TextEnv.reset(seed=seed) runs: the task the seed draws, its first observation
                episode = source.make_env(seeded_np_random(seed)[0])
                if not isinstance(episode, Env):
                    raise TypeError(f"{type(source).__name__}.make_env returned "
                                    f"{type(episode).__name__}, expected an llm_gym.rl.Env")
                run_coroutine(episode.initial_observation())
                if split == "train":  # SFT draws its examples from the train split
                    found = (sft_source_kind(source, episode), type(episode).__name__)
            except _ENV_SETUP_ERRORS as exc:
                raise ConfigError(_env_error(self.bare_id, self.env_kwargs, exc, during="reset")) from None
            finally:
                if episode is not None:
                    release_env(episode)
        return found

    def _check_gym(self, seed: int) -> tuple[str, str]:
        import gymnasium as gym

        from llm_gym.registration import TEXT_ENV_ENTRY_POINT

        splits: tuple[str | None, ...] = (None,)
        if gym.spec(self.bare_id).entry_point == TEXT_ENV_ENTRY_POINT:
            splits = ("train", "test")
        found = (SFT_NONE, "None")
        for split in splits:
            kwargs = dict(self.env_kwargs) if split is None else {**self.env_kwargs, "split": split}
            try:
                env = gym.make(self.bare_id, **kwargs)
            except _ENV_SETUP_ERRORS as exc:
                raise ConfigError(_env_error(self.bare_id, self.env_kwargs, exc)) from None
            try:
                env.reset(seed=seed)
                for what, space in (("observation", env.observation_space), ("action", env.action_space)):
                    if not isinstance(space, gym.spaces.Sequence):
                        llm_ids = sorted(k for k in gym.registry if k.startswith("llm/"))
                        raise ConfigError(
                            f"env={self.env_id!r} has a {type(space).__name__} {what} space, not "
                            "token sequences; the "
                            f"trainer needs an llm-gym text env, e.g. one of {llm_ids}"
                        )
                if split in (None, "train"):  # SFT draws its examples from the train split
                    episode = getattr(env.unwrapped, "current_env", None)
                    found = (sft_source_kind(getattr(env.unwrapped, "source", None), episode),
                             type(episode).__name__)
                    self._remember_gym_parts(env)
            except ConfigError:
                raise
            except _ENV_SETUP_ERRORS as exc:
                raise ConfigError(_env_error(self.bare_id, self.env_kwargs, exc, during="reset")) from None
            finally:
                env.close()
        return found

    # --- what the env's own answers need -------------------------------------------------------
    def gold_case_summary(self, seed: int = 0) -> tuple[str, int] | None:
        """(name, longest turn in tokens) of the gold case the SFT warm start would play, from one
        gold episode on a train task (`llm_gym.scripted`); None when the env has no gold case.
        Played once per seed (fitting and the `SFT source` line both ask)."""
        if seed not in self._gold:
            from llm_gym.scripted import reply_tokens, run_scripted_case

            source = self.source("train")
            case = first_gold_case(source)
            summary = None
            if case is not None:
                if case.knobs:
                    source = self.source("train", **case.knobs)
                outcome = run_scripted_case(source, case, seed)
                longest = max((len(reply_tokens(source.renderer, r)) for r in outcome.replies),
                              default=0)
                summary = (case.name, longest)
            self._gold[seed] = summary
        return self._gold[seed]

    def reply_need(self, seed: int = 0, tasks: int = 16) -> tuple[int, str, bool] | None:
        """(longest reply in tokens, where it comes from, multi-turn?) for the env's own answers:
        the reference responses of `tasks` train-split tasks (single-turn envs; the tasks
        `reset(seed=seed + i)` draws), else the turns of its first gold scripted episode; None when
        the env offers neither (then nothing is fitted)."""
        from llm_gym.rl.types import release_env
        from llm_gym.scripted import reply_tokens
        from llm_gym.text_env import seeded_np_random

        source = self.source("train")
        if source is None:
            return None
        renderer = getattr(source, "renderer", None)
        multi_turn = bool(getattr(getattr(source, "card", None), "multi_turn", False))
        episode = source.make_env(seeded_np_random(seed)[0])
        kind = sft_source_kind(source, episode)
        release_env(episode)
        if renderer is not None and kind == SFT_REFERENCE:
            longest = 0
            for i in range(tasks):
                episode = source.make_env(seeded_np_random(seed + i)[0])
                longest = max(longest, len(reply_tokens(renderer, episode.get_reference_response())))
                release_env(episode)
            return longest, f"its reference answers run to {longest} tokens", multi_turn
        summary = self.gold_case_summary(seed)
        if summary is None:
            return None
        name, longest = summary
        return longest, f"its gold episode's turns ({name!r}) run to {longest} tokens", multi_turn


def run_env_kwargs(cfg: GRPOConfig) -> dict[str, Any]:
    """`cfg.env_kwargs`, plus `tokenizer` when `cfg.model` is a preset whose model reads other ids
    than the env's default byte tokenizer (`tiny-bpe`: `trainers.models.preset_env_tokenizer`) and
    none is given, so the env tokenizes as the model does. (Building that tokenizer's directory
    imports torch's side of the trainer; only that preset pays it.)"""
    kwargs = dict(cfg.env_kwargs)
    if cfg.model in MODEL_PRESETS and cfg.model != "tiny" and "tokenizer" not in kwargs:
        from trainers.models import preset_env_tokenizer

        tokenizer = preset_env_tokenizer(cfg.model)
        if tokenizer is not None:
            kwargs["tokenizer"] = tokenizer
    return kwargs


def run_env(cfg: GRPOConfig) -> RunEnv:
    """The `RunEnv` of `cfg.env` with `cfg.env_kwargs`: the one `cfg` already holds (its first
    `validate`, fitting or training made it), else a new one that `cfg` then keeps, so a run
    builds its env once. A config whose env, env_kwargs or registered spec changed gets a new one."""
    import gymnasium as gym

    key = (cfg.env, json.dumps(cfg.env_kwargs, sort_keys=True, default=repr), cfg.model)
    held = getattr(cfg, "_run_env", None)
    if held is not None and held[0] == key and gym.registry.get(held[1].bare_id) is held[1].spec:
        return held[1]
    env = RunEnv(cfg.env, run_env_kwargs(cfg))
    cfg._run_env = (key, env)  # type: ignore[attr-defined]
    return env


# What the SFT warm start learns from (`check_env_builds`, `GRPOConfig.sft_source`, trainers.sft).
SFT_REFERENCE = "reference responses"
SFT_GOLD = "gold scripted episodes"
SFT_NONE = "none"


def first_gold_case(source: Any) -> Any:
    """The gold `ScriptedCase` the SFT warm start plays: the first one that needs no knobs of its
    own (so its episodes are the configured env's), else the first gold case; None without one
    (or for an object that is not an `EnvSource`)."""
    cases: Callable[..., Any] | None = getattr(source, "scripted_cases", None)
    if not callable(cases):
        return None
    gold = [c for c in cases() if getattr(c, "kind", None) == "gold"]
    plain = [c for c in gold if not getattr(c, "knobs", None)]
    return (plain or gold or [None])[0]


def sft_source_kind(source: Any, episode: Any) -> str:
    """`SFT_REFERENCE` when `episode` (one of `source`'s envs) offers a reference answer
    (`conversation()` and `get_reference_response()`, the unchanged single-turn path), else
    `SFT_GOLD` when `source` declares a gold scripted case, else `SFT_NONE`."""
    if all(callable(getattr(episode, name, None)) for name in ("conversation", "get_reference_response")):
        return SFT_REFERENCE
    return SFT_GOLD if first_gold_case(source) is not None else SFT_NONE


def gold_case_summary(env_id: str, env_kwargs: dict[str, Any], seed: int = 0) -> tuple[str, int] | None:
    """(name, longest turn in tokens) of the gold case the SFT warm start would play on `env_id`
    with `env_kwargs` (`RunEnv.gold_case_summary`); None when the env has no gold case. Torch-free;
    for `llm-gym train` to say what it chose."""
    return RunEnv(env_id, env_kwargs).gold_case_summary(seed)


def _env_error(env_id: str, env_kwargs: dict[str, Any], exc: Exception, during: str = "") -> str:
    message = " ".join(str(exc).split(" was raised from the environment creator")[0].split())
    knobs, options = _env_knobs(env_id)
    if knobs is not None:
        unknown = [k for k in env_kwargs if k not in knobs and k not in options]
        if unknown:
            parts = []
            for k in unknown:
                close = difflib.get_close_matches(k, knobs + options, n=1)
                parts.append(f"{k!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
            return (f"env_kwargs: {env_id} has no knob {', '.join(parts)}; its knobs are "
                    f"{', '.join(knobs)} (and the TextEnv options {', '.join(options)})")
    step = f" on {during}" if during else ""
    if isinstance(exc, ImportError) or not env_kwargs:
        return f"env={env_id!r} cannot be built{step}: {type(exc).__name__}: {message}"
    return f"env_kwargs={env_kwargs!r}: {env_id} refused them{step}: {message}"


def _env_knobs(env_id: str) -> tuple[list[str] | None, list[str]]:
    """(the source's difficulty knobs, TextEnv's own keyword options) of a TextEnv id, else
    (None, [])."""
    import inspect

    import gymnasium as gym

    from llm_gym.registration import TEXT_ENV_ENTRY_POINT

    spec = gym.spec(env_id)
    if spec.entry_point != TEXT_ENV_ENTRY_POINT:
        return None, []
    try:
        from llm_gym.text_env import TextEnv, resolve_source

        knobs = list(resolve_source(spec.kwargs["source"]).card.difficulty_knobs)
    except Exception:
        return None, []
    params = inspect.signature(TextEnv.__init__).parameters
    options = [p for p in params if p not in ("self", "source", "split", "knobs")]
    options += ["max_episode_steps", "disable_env_checker"]  # gym.make's own
    return knobs, options


# --- defaults fitted to the env (what `llm-gym train` does for fields the user did not set) ------
# Tokens of headroom over the longest reply the env's own answers need: a policy that must say a
# 40-token gold turn whole gets 40 + max(4, 25%), rounded up to a multiple of 8, never below the
# default 8 (so 2-digit addition, whose answers are 4 tokens, keeps its tuned 8) and never above
# 512 (a longer answer is cut there: the note says so).
_MAX_TOKENS_CAP = 512
# Completions longer than this make a `token_sum` loss (and its gradient before clipping) scale
# with the batch's token count: ~1e3 on a multi-turn batch. `token_mean` keeps it O(1).
_TOKEN_SUM_MAX_TOKENS = 16


def fitted_max_tokens(need: int, multi_turn: bool = False) -> int:
    """The `max_tokens` default for an env whose longest needed reply is `need` tokens. Multi-turn
    envs get need + max(2, 25%), at least 4, without the single-turn floor of 8: an untrained
    policy fills the cap every turn, and each sampled token is decoded once and then carried by
    every later turn's context and by the training forward (GuessNumber, 128 episodes: 8 -> 4
    tokens cut rollout CPU 18.3 -> 13.1 s and training 29.0 -> 22.7 s)."""
    if need <= 0:
        return GRPOConfig.max_tokens
    if multi_turn:
        return int(min(max(4, need + max(2, math.ceil(need / 4))), _MAX_TOKENS_CAP))
    padded = math.ceil((need + max(4, math.ceil(need / 4))) / 8) * 8
    return int(min(max(GRPOConfig.max_tokens, padded), _MAX_TOKENS_CAP))


def reply_need(env_id: str, env_kwargs: dict[str, Any], seed: int = 0,
               tasks: int = 16) -> tuple[int, str, bool] | None:
    """(longest reply in tokens, where it comes from, multi-turn?) for the env's own answers
    (`RunEnv.reply_need`); None when the env offers neither references nor a gold case. Torch-free."""
    return RunEnv(env_id, env_kwargs).reply_need(seed, tasks)


def fit_to_env(cfg: GRPOConfig, explicit: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """Fit the defaults of fields not in `explicit` (those the user set) to `cfg.env`, in place;
    return one line per field changed, saying why. `max_tokens` covers the env's longest own
    answer with headroom (`fitted_max_tokens`); `loss_reduction` becomes `token_mean` when
    completions can be long (multi-turn, or `max_tokens` over 16), where `token_sum` would scale
    the loss with the episode length. On a multi-turn env an unset `lr` (still the default) is
    marked on `cfg` to be fitted to the warm start once the trainer has measured it
    (`fit_lr_to_warm_start`); nothing else is fitted."""
    notes: list[str] = []
    need = None
    lr_fittable = "lr" not in explicit and cfg.lr == GRPOConfig.lr
    if "max_tokens" not in explicit or "loss_reduction" not in explicit or lr_fittable:
        try:
            need = run_env(cfg).reply_need(cfg.seed)
        except Exception as exc:  # noqa: BLE001 - fitting is advice; validate() reports real errors
            notes.append(f"defaults not fitted to {cfg.env} ({type(exc).__name__}: {exc})")
    multi_turn = bool(need and need[2])
    if need is not None and "max_tokens" not in explicit:
        fitted = fitted_max_tokens(need[0], multi_turn)
        if fitted != cfg.max_tokens:
            cfg.max_tokens = fitted
            cut = f", so longer answers are cut at {fitted}" if fitted < need[0] else ""
            notes.append(f"max_tokens={fitted} ({need[1]}{cut}; the default is "
                         f"{GRPOConfig.max_tokens})")
    if "loss_reduction" not in explicit and cfg.loss_reduction == "token_sum" and (
            multi_turn or cfg.max_tokens > _TOKEN_SUM_MAX_TOKENS):
        cfg.loss_reduction = "token_mean"
        why = "multi-turn episodes" if multi_turn else f"completions up to {cfg.max_tokens} tokens"
        notes.append(f"loss_reduction=token_mean ({why}: a token_sum loss would grow with their "
                     "length)")
    # Decided later, from the warm start's held-out accuracy; only a multi-turn env can change it.
    setattr(cfg, _LR_FIT_ATTR, multi_turn if lr_fittable else None)
    return notes


# --- the RL learning rate, fitted to the warm start (after the trainer's "eval before RL") -------
# GRPO at the default lr 3e-4 made every multi-turn warm start measured at >= 0.17 held-out greedy
# accuracy worse, and lr 1e-4 held or improved each of them (BENCHMARKS.md, "What keeps the warm
# start from getting worse"; gain over 400 held-out episodes, 3e-4 vs 1e-4): Calculator starts
# 0.45 / 0.45 / 0.55: -0.33 / -0.39 / -0.21 vs -0.03 / +0.02 / +0.01; PythonTool starts
# 0.20 / 0.17 / 0.20: -0.02 / 0.00 / -0.20 vs +0.005 / +0.015 / +0.01; GuessNumber starts
# 0.53 / 0.43: -0.03 / -0.12 vs +0.09 / +0.04. The one weak start, TicTacToe vs random at 0.035,
# gained +0.32 at 3e-4 and nothing at 1e-4: it needs the larger steps. 0.15 lies between the two.
WARM_START_ACCURACY = 0.15
WARM_START_LR = 1e-4
# Where `fit_to_env` leaves its decision on the config: None (lr set by the user, or fit_to_env
# never called: the Python API's `train(cfg)` keeps `cfg.lr` as given), else whether the env is
# multi-turn. Not a config field: it says how `lr` was chosen, not what to train with.
_LR_FIT_ATTR = "_lr_fit_multi_turn"


def fitted_rl_lr(lr: float, start_accuracy: float | None, multi_turn: bool,
                 lr_explicit: bool = False) -> float:
    """The lr GRPO should use from a start whose held-out greedy accuracy is `start_accuracy`
    (None: not measured): `WARM_START_LR` on a multi-turn env whose start already solves at least
    `WARM_START_ACCURACY` of held-out episodes and whose lr the user did not set (and is higher),
    else `lr` unchanged. A strong multi-turn start is made worse by the default's larger steps, a
    weak one needs them (the measurements are at `WARM_START_ACCURACY`'s definition). Pure."""
    if lr_explicit or not multi_turn or start_accuracy is None or lr <= WARM_START_LR:
        return lr
    return WARM_START_LR if start_accuracy >= WARM_START_ACCURACY else lr


def fit_lr_to_warm_start(cfg: GRPOConfig, start_accuracy: float | None) -> str | None:
    """Set `cfg.lr` to `fitted_rl_lr` of the RL start's held-out greedy accuracy when
    `fit_to_env` left the lr to be fitted (not set by the user; see `_LR_FIT_ATTR`); return one
    line saying why it changed, else None. The trainer calls it after its "eval before RL" and
    before building the optimizer; the start is the SFT warm start, or with `sft_steps=0` the
    loaded model (a saved warm start passed as `--model`)."""
    multi_turn = getattr(cfg, _LR_FIT_ATTR, None)
    lr = fitted_rl_lr(cfg.lr, start_accuracy, bool(multi_turn), lr_explicit=multi_turn is None)
    if lr == cfg.lr:
        return None
    default, cfg.lr = cfg.lr, lr
    return (f"lr={_short(lr)} (the start already solves {start_accuracy:.2f} of held-out episodes "
            f"greedily, at least {WARM_START_ACCURACY:g}; on multi-turn envs GRPO at the default "
            f"{_short(default)} made such starts worse)")


def _short(x: float) -> str:
    """1e-4, 3e-4, 2.5e-4: a learning rate as one writes it."""
    mantissa, exponent = f"{x:e}".split("e")
    return f"{float(mantissa):g}e{int(exponent)}"
