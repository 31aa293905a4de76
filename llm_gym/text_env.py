"""`TextEnv`: the Gymnasium face of a catalog family (`gym.make("llm/Math-v0")`).

A `TextEnv` owns one `EnvSource` (resolved lazily from a `"module:Class"` string, so registering an
id imports nothing) and drives the seed-API `Env` that the source makes for each episode:
`reset(seed=...)` draws the task from `self.np_random` and returns the prompt tokens, `step(tokens)`
feeds the sampled tokens to the episode and returns the next observation tokens, the reward,
`terminated`, `truncated` and an `info` with text, stop condition and metrics. Observations and
actions live in `llm_gym.spaces.TokenSequence`. The seed API is async; the sync methods drive its
coroutines directly (catalog envs rarely suspend) and fall back to an event loop when one
does (one loop per thread, shared by every env: see `thread_loop`), while `areset`/`astep` await
the same episode from inside a running loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib
import os
import threading
import weakref
from collections.abc import Coroutine
from typing import Any, Sequence, TypeVar, cast

import gymnasium as gym
import numpy as np
from gymnasium.utils import seeding

from llm_gym.completers import StopCondition
from llm_gym.env_source import EnvSource
from llm_gym.model_input import ModelInput
from llm_gym.renderers import Renderer, get_renderer
from llm_gym.renderers.base import known_prompt_text
from llm_gym.rl.types import (
    Env, InitialObservationOverflow, Metrics, Observation, StepResult, Trajectory, release_env,
)
from llm_gym.spaces import DEFAULT_SAMPLE_MAX_LENGTH, TokenSequence
from llm_gym.tokenizers import load_tokenizer, vocab_size_of

__all__ = [
    "TextEnv",
    "load_tokenizer_and_renderer",
    "resolve_source",
    "run_coroutine",
    "seeded_np_random",
    "thread_loop",
]

_T = TypeVar("_T")

_M64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15  # SplitMix64's increment


def _mix64(z: int) -> int:
    """SplitMix64's finalizer: a bijection on 64-bit ints with good avalanche."""
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9 & _M64
    z = (z ^ (z >> 27)) * 0x94D049BB133111EB & _M64
    return z ^ (z >> 31)


def seeded_np_random(
    seed: int | None, reuse: np.random.Generator | None = None
) -> tuple[np.random.Generator, int]:
    """`(generator, seed)` for `reset(seed=...)`: a `PCG64` generator whose state is a
    SplitMix64-style mix of `seed` (~2-3 us instead of the ~10-15 us of `SeedSequence`).

    Contract: the same seed always gives the same stream (across processes and platforms: the
    mix is plain integer arithmetic); different seeds below 2**64 give different 128-bit PCG64
    states (the first state word is a bijective mix of the seed), so different streams; larger
    Python ints are folded to 64 bits first, 64 bits at a time (a collision needs a 2**-64
    accident). The stream is *not* that of `np.random.default_rng(seed)` (Gymnasium's
    `seeding.np_random`): to face the task `reset(seed=s)` gives, call `reset(seed=s)` and read
    `current_env`. No global random state is read or written.

    When `reuse` (a generator over a `PCG64`, normally one this function returned earlier) is
    given, its state is overwritten in place and it is returned (no allocation). `None` (fresh
    entropy) and anything but a non-negative `int` (Gymnasium's `error.Error` for negative or
    non-int seeds) go through `gymnasium.utils.seeding.np_random` unchanged.
    """
    if type(seed) is not int or seed < 0:
        return seeding.np_random(seed)
    x = seed
    if x > _M64:  # fold big ints, 64 bits at a time, on a path of their own
        h = _GOLDEN
        while x:
            h = _mix64((h ^ (x & _M64)) + _GOLDEN & _M64)
            x >>= 64
        x = h ^ 0xD1B54A32D192ED03
    hi = _mix64(x + _GOLDEN & _M64)
    lo = _mix64(hi + _GOLDEN & _M64)
    inc = _mix64(x + 2 * _GOLDEN & _M64)
    state: Any = {  # numpy's stubs type it as a private TypedDict
        "bit_generator": "PCG64",
        "state": {"state": hi << 64 | lo, "inc": inc << 1 | 1},  # the increment must be odd
        "has_uint32": 0,
        "uinteger": 0,
    }
    if reuse is not None and type(reuse.bit_generator) is np.random.PCG64:
        reuse.bit_generator.state = state
        return reuse, seed
    bit_generator = np.random.PCG64(_PCG64_TEMPLATE_SEED)
    bit_generator.state = state
    return np.random.Generator(bit_generator), seed


_PCG64_TEMPLATE_SEED = 0  # a fixed seed, so building a fresh PCG64 reads no OS entropy


_RENDERER_CACHE_SIZE = 64
_named_renderers: dict[tuple[str | None, Any], Renderer] = {}


def _named_renderer(name: str | None, tokenizer: Any) -> Renderer:
    """`get_renderer(name, tokenizer)` for a tokenizer that `load_tokenizer` resolved from a name
    (and so caches): renderers are immutable, so envs made by name share one, and with it the
    per-renderer prompt caches of their sources."""
    key = (name, tokenizer)
    renderer = _named_renderers.get(key)
    if renderer is None:
        renderer = get_renderer(name, tokenizer)
        if len(_named_renderers) >= _RENDERER_CACHE_SIZE:
            _named_renderers.clear()
        _named_renderers[key] = renderer
    return renderer


def load_tokenizer_and_renderer(tokenizer: Any = None, renderer: str | Renderer | None = None) -> tuple[Any, Renderer]:
    """The tokenizer and renderer of `TextEnv(source, tokenizer=tokenizer, renderer=renderer)`
    (see its arguments); the source is built over that renderer. A renderer made by name over a
    tokenizer given by name (or the default) is shared by every env asking for the same pair
    (`_named_renderer`); `llm_gym.wrappers.source` builds sources with the same call, so the
    trainer's episodes and `gym.make`'s are rendered alike."""
    tok = load_tokenizer(tokenizer)
    if (tokenizer is None or type(tokenizer) is str) and (renderer is None or type(renderer) is str):
        return tok, _named_renderer(renderer, tok)
    return tok, get_renderer(renderer, tok)


def resolve_source(source: str | type[EnvSource]) -> type[EnvSource]:
    """The `EnvSource` subclass named by `source` (`"package.module:ClassName"`) or `source` itself."""
    if isinstance(source, str):
        module_name, sep, attr = source.partition(":")
        if not sep or not module_name or not attr:
            raise ValueError(
                f"source {source!r} must look like 'package.module:ClassName' (an EnvSource subclass)"
            )
        module = importlib.import_module(module_name)
        try:
            cls: Any = module
            for part in attr.split("."):
                cls = getattr(cls, part)
        except AttributeError:
            raise ValueError(
                f"source {source!r}: module {module_name!r} has no attribute {attr!r}"
            ) from None
    else:
        cls = source
    if not (isinstance(cls, type) and issubclass(cls, EnvSource)):
        raise TypeError(
            f"source must be an EnvSource subclass or a 'module:Class' string naming one, got {cls!r}"
        )
    return cls


# asyncio's (C) accessors of the thread's running loop, bound once: run_coroutine runs twice per
# reset+step.
_get_running_loop = asyncio.events._get_running_loop
_set_running_loop = asyncio.events._set_running_loop


def run_coroutine(coro: Coroutine[Any, Any, _T], loop_factory: Any = None) -> _T:
    """Run `coro` to completion from synchronous code, cheaply.

    Fast path: step the coroutine by hand (`coro.send(None)`) with an event loop set as the
    thread's running loop, so code that only *touches* the loop (`get_running_loop()`,
    `run_in_executor`, `create_task`) works, and a coroutine that never suspends finishes without
    any scheduling. If it does suspend, the rest of it runs on that loop with
    `run_until_complete` -- in this thread, or, when another event loop is already running here
    (sync `step` called from async code or Jupyter), in a helper thread while this one waits.

    The loop is `loop_factory()` when given, else this thread's shared loop (`thread_loop()`):
    one loop per thread, however many envs, so file descriptors do not grow with the number of
    envs (a private loop per env once held ~1,400 fds in a default training pool).
    """
    if loop_factory is not None:
        loop = loop_factory()
    else:  # thread_loop(), inlined for the common case of a live loop
        loop = _thread_loops.loop
        if loop is None or loop.is_closed():
            loop = thread_loop()
    temporary = None
    if loop.is_running():  # re-entered from a coroutine this loop is running: a loop of its own
        loop = temporary = asyncio.new_event_loop()
    outer = _get_running_loop()
    _set_running_loop(loop)
    try:
        yielded = coro.send(None)
    except StopIteration as stop:
        if temporary is not None:
            temporary.close()
        return stop.value
    except BaseException:
        coro.close()
        if temporary is not None:
            temporary.close()
        raise
    finally:
        _set_running_loop(outer)
    finish = _finish_suspended(coro, yielded)
    try:
        if outer is None:
            return loop.run_until_complete(finish)
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="llm_gym-env") as pool:
            return pool.submit(loop.run_until_complete, finish).result()
    finally:
        if temporary is not None:
            temporary.close()


class _ThreadLoop(threading.local):
    """Holds each thread's shared loop (created on first use)."""

    loop: asyncio.AbstractEventLoop | None = None


_thread_loops = _ThreadLoop()


# Every thread's shared loop, and, in a forked child, the ones it inherited, kept alive for good.
# An inherited loop shares its epoll set with the parent's: closing it would unregister the
# parent's self-pipe from that set, after which the parent's loop never wakes for a callback from
# another thread (`asyncio.to_thread`) and hangs in `select`. Our finalizer checks the pid, but
# asyncio's own `BaseEventLoop.__del__` closes an unclosed loop, so the child must never drop one.
_all_thread_loops: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()
_inherited_loops: list[asyncio.AbstractEventLoop] = []


def _forget_thread_loop_in_child() -> None:
    # The forking thread's loop (and any other thread's) belongs to the parent: the child makes
    # its own and keeps the inherited ones referenced, unclosed (see `_inherited_loops`).
    _inherited_loops.extend(loop for loop in list(_all_thread_loops) if not loop.is_closed())
    _thread_loops.loop = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_thread_loop_in_child)


def thread_loop() -> asyncio.AbstractEventLoop:
    """This thread's event loop for driving env coroutines from sync code (made on first use).

    Every `TextEnv` in a thread shares it, so a pool of thousands of envs costs one loop's file
    descriptors. It is closed when its thread ends (or at interpreter exit for the main thread);
    a forked child gets a fresh one (the parent's shares its epoll set with the parent, so it is
    left alone, not closed)."""
    holder = _thread_loops
    loop = holder.loop
    if loop is None or loop.is_closed():
        loop = asyncio.new_event_loop()
        holder.loop = loop
        _all_thread_loops.add(loop)
        # Closed by a finalizer rather than a __del__: weakref.finalize also runs at interpreter
        # exit, *before* modules are torn down, so closing never meets a half-destroyed
        # `selectors`/`asyncio`. A thread's locals die with the thread, and with them `_LoopCloser`.
        closer = _LoopCloser()
        holder.closer = closer
        weakref.finalize(closer, _close_loop, loop, os.getpid())
    return loop


class _LoopCloser:
    """An object that lives exactly as long as its thread's `_ThreadLoop` entry."""


async def _finish_suspended(coro: Coroutine[Any, Any, _T], yielded: Any) -> _T:
    """Continue a hand-stepped coroutine inside a real task, awaiting whatever it yielded."""
    while True:
        if yielded is None:  # a bare `yield` (asyncio.sleep(0))
            await asyncio.sleep(0)
        else:  # an asyncio future the coroutine is blocked on
            if getattr(yielded, "_asyncio_future_blocking", False):
                yielded._asyncio_future_blocking = False  # as asyncio.Task does before waiting
            try:
                await yielded
            except BaseException:
                pass  # the coroutine's own `await` re-raises the future's exception below
        try:
            yielded = coro.send(None)
        except StopIteration as stop:
            return stop.value


class TextEnv(gym.Env[np.ndarray, np.ndarray]):
    """A Gymnasium env over token ids, backed by a seed-API `EnvSource`.

    Args:
        source: an `EnvSource` subclass or a `"module:Class"` string naming one (imported on
            construction, not at registration).
        tokenizer: a tokenizer name, path or object (`llm_gym.tokenizers.load_tokenizer`); `None`
            is the embedded byte tokenizer. Names keep `env.spec.to_json()` working; objects work
            too but are not JSON-serialisable.
        renderer: a renderer name or object (`llm_gym.renderers.get_renderer`); `None` picks one
            for the tokenizer.
        split: `"train"` or `"test"` (the source's held-out task set).
        turn_limit: truncate the episode after this many steps (`truncated=True`); `None` = no
            limit. (Not called `max_turns`, which is a difficulty knob of some sources.) A
            registered `max_episode_steps` is applied by Gymnasium's `TimeLimit` instead.
        max_action_length: the longest action `action_space.sample()` draws (membership is not
            limited by length).
        render_mode: `None` or `"ansi"` (`render()` returns the conversation so far as text).
        **knobs: the source's difficulty knobs (JSON-serialisable values).

    Spaces: `observation_space` and `action_space` are `TokenSequence(vocab_size)`.

    Every observation is a new array that shares no memory with any other (Gymnasium's
    `check_env` requires it); a multi-turn observation that extends the previous one is copied
    out of a private per-episode int64 buffer that only the new tokens are converted into.

    `reset(seed=None, options=None) -> (obs, info)`: `obs` is the prompt as an int64 array; `info`
    has `"text"` (the decoded prompt), `"stop_condition"` (token ids or strings that end a
    response) and `"turn"` (0).

    `step(action) -> (obs, reward, terminated, truncated, info)`: `action` is a 1-D sequence of int
    token ids (a list, tuple or integer numpy array). It is model output, so anything of that type
    is accepted: out-of-vocabulary ids, an empty or very long action or invalid UTF-8 reach the
    episode, which scores them with a defined reward (renderers drop invalid ids and mark the
    response malformed). Only a wrong *type* (a string, floats, nested sequences) raises
    `TypeError`. `info` has `"text"` (the decoded action, invalid ids left out), `"stop_condition"`
    (for the next turn), `"turn"`, `"metrics"` (this step's), `"logs"`, `"invalid_tokens"` (how many
    ids were out of vocabulary) and, on the episode's last step, `"episode_metrics"` (`"return"`,
    `"turns"`, `"truncated"` and each step metric averaged over the episode). After the episode
    ends, `step` raises `gymnasium.error.ResetNeeded` until `reset` is called. An exception raised
    by the episode itself (an env bug, not bad model output) propagates with a note, counts in
    `env_errors`, and ends the episode.

    Vector envs: `gym.make_vec(id, num_envs=N, vector_kwargs={"autoreset_mode":
    AutoresetMode.SAME_STEP})` is the recommended mode for LLM rollouts (a finished sub-env returns
    the next prompt at once, with the last step in `info["final_obs"]`/`info["final_info"]`, so no
    dummy action is ever sampled). Token sequences have no fixed shape, so batched observations
    are tuples of arrays, and `vectorization_mode="async"` needs
    `vector_kwargs={"shared_memory": False}`. For GRPO groups see
    `llm_gym.wrappers.GroupAdvantages`.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}
    # Token sequences are int64 arrays; Gymnasium types `Sequence`'s elements as tuples.
    observation_space: TokenSequence
    action_space: TokenSequence

    def __init__(
        self,
        source: str | type[EnvSource],
        tokenizer: Any = None,
        renderer: str | Renderer | None = None,
        split: str = "train",
        turn_limit: int | None = None,
        render_mode: str | None = None,
        max_action_length: int = DEFAULT_SAMPLE_MAX_LENGTH,
        **knobs: Any,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode {render_mode!r} is not supported; use None or one of "
                f"{self.metadata['render_modes']}"
            )
        if turn_limit is not None and (
            isinstance(turn_limit, bool) or not isinstance(turn_limit, int) or turn_limit < 1
        ):
            raise ValueError(f"turn_limit must be a positive int or None, got {turn_limit!r}")
        self.render_mode = render_mode
        self.turn_limit = turn_limit
        self.source_cls = resolve_source(source)
        self.tokenizer, self.renderer = load_tokenizer_and_renderer(tokenizer, renderer)
        self.source: EnvSource = self.source_cls(renderer=self.renderer, split=split, **knobs)
        self.split = split
        self.vocab_size = vocab_size_of(self.tokenizer)
        self.observation_space = TokenSequence(self.vocab_size)
        self.action_space = TokenSequence(self.vocab_size, max_length=max_action_length)
        self.env_errors = 0
        # The generator reset(seed=...) made; re-seeded in place by the next seeded reset (never
        # one a user assigned to env.np_random).
        self._seeded_rng: np.random.Generator | None = None
        self._env: Env | None = None
        self._done = True
        self._turn = 0
        self._return = 0.0
        self._metric_sums: dict[str, float] = {}
        self._metric_counts: dict[str, int] = {}
        self._transcript: list[int] = []
        # The last observation (its ModelInput and a private read-only int64 array of it) and
        # the episode's growable token buffer: an observation that extends the previous one
        # (see `_observation_array`) converts only its new tokens into the buffer.
        self._obs_ob: ModelInput | None = None
        self._obs_arr: np.ndarray = _EMPTY_OBS
        self._obs_buf: np.ndarray | None = None
        self._obs_buf_len = 0
        self._stop: StopCondition = []

    # --- public attributes ------------------------------------------------------------------
    @property
    def current_env(self) -> Env | None:
        """The seed-API `Env` of the current episode (`None` before the first `reset`)."""
        return self._env

    @property
    def stop_condition(self) -> StopCondition:
        """Where the policy should stop sampling for the next action."""
        return cast(StopCondition, list(self._stop))

    @property
    def reward_range(self) -> tuple[float, float]:
        return tuple(self.source.reward_range)  # type: ignore[return-value]

    async def compute_group_rewards(
        self, trajectory_group: list[Trajectory], env_group: Sequence[Env]
    ) -> list[tuple[float, Metrics]]:
        """Group rewards for G episodes on one task, as the source defines them."""
        return await self.source.compute_group_rewards(trajectory_group, env_group)

    # --- reset ------------------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start an episode on a task drawn from `self.np_random`; return `(prompt tokens, info)`.
        No `options` are defined (an unknown key raises `ValueError`)."""
        env = self._begin_reset(seed, options)
        return self._finish_reset(run_coroutine(env.initial_observation()))

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """`reset` for async code: awaits the episode's `initial_observation` directly."""
        env = self._begin_reset(seed, options)
        return self._finish_reset(await env.initial_observation())

    def _begin_reset(self, seed: int | None, options: dict[str, Any] | None) -> Env:
        if options:
            raise ValueError(f"TextEnv.reset takes no options, got {sorted(options)}")
        if seed is not None:  # Env.reset's seeding, through the cheap seeded_np_random
            own = self._seeded_rng
            self._np_random, self._np_random_seed = seeded_np_random(
                seed, own if own is not None and own is self._np_random else None
            )
            self._seeded_rng = self._np_random
        if self._env is not None:
            release_env(self._env)  # the previous episode's tools and sandboxes
        self._env = None
        self._done = True
        env = self.source.make_env(self.np_random)
        if not isinstance(env, Env):
            raise TypeError(
                f"{self.source_cls.__name__}.make_env returned {type(env).__name__}, expected an "
                "llm_gym.rl.Env"
            )
        self._env = env  # usable once its initial observation is in (_finish_reset)
        return env

    def _finish_reset(
        self, first: tuple[Observation, StopCondition] | InitialObservationOverflow
    ) -> tuple[np.ndarray, dict[str, Any]]:
        if isinstance(first, InitialObservationOverflow):
            # The rollout loop turns it into an empty, finished episode; reset cannot.
            raise RuntimeError(
                f"{self.source_cls.__name__}'s episode has no first observation to return (its "
                "initial_observation returned InitialObservationOverflow: the prompt is over its "
                "token budget, or the episode ended before its first turn); call reset() again "
                "with another seed, or roll it out with llm_gym.rl"
            )
        ob, stop = first
        # Sources that hand out cached prompt objects (fixed game intros, per-task prompt caches
        # shared by every env made by name) get the text and array from a process-wide memo
        # keyed by object identity: an entry holds its prompt object, so the id cannot be reused
        # while the entry exists.
        tokenizer = self.tokenizer
        entry = _prompt_memo.get(id(ob))
        if entry is None or entry[0] is not ob or entry[1] is not tokenizer:
            tokens = ob.to_ints()
            array = _int64_array(tokens)
            array.setflags(write=False)  # shared: callers get copies
            text = known_prompt_text(ob, tokenizer)  # the renderer's, when it kept it
            if text is None:
                text = tokenizer.decode(tokens, skip_special_tokens=False)
            entry = (ob, tokenizer, text, array)
            _remember_prompt(entry)
        _, _, text, array = entry
        self._obs_ob, self._obs_arr = ob, array
        self._obs_buf, self._obs_buf_len = None, 0  # views of the last episode's buffer stay valid
        if self.render_mode == "ansi":  # the transcript exists only to be rendered
            self._transcript = array.tolist()
        self._stop = cast(StopCondition, list(stop))
        self._turn = 0
        self._return = 0.0
        self._metric_sums, self._metric_counts = {}, {}
        self._done = False
        info = {"text": text, "stop_condition": list(stop), "turn": 0}
        return array.copy(), info

    # --- step -------------------------------------------------------------------------------
    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Feed one sampled action (token ids) to the episode; see the class docstring."""
        env, tokens = self._begin_step(action)
        try:
            result = run_coroutine(env.step(tokens))
        except Exception as exc:
            self._fail(exc, tokens)
            raise
        return self._finish_step(tokens, result)

    async def astep(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """`step` for async code: awaits the episode's `step` directly."""
        env, tokens = self._begin_step(action)
        try:
            result = await env.step(tokens)
        except Exception as exc:
            self._fail(exc, tokens)
            raise
        return self._finish_step(tokens, result)

    def _begin_step(self, action: Any) -> tuple[Env, list[int]]:
        tokens = _action_to_ids(action)
        if self._env is None or self._done:
            raise gym.error.ResetNeeded(
                "TextEnv.step called before reset() or after the episode ended; call env.reset()"
            )
        return self._env, tokens

    def _fail(self, exc: Exception, tokens: list[int]) -> None:
        self.env_errors += 1
        self._done = True
        exc.add_note(
            f"raised by {self.source_cls.__name__}'s episode on an action of {len(tokens)} tokens "
            f"(turn {self._turn + 1}); the episode is over, call reset()"
        )

    def _finish_step(
        self, tokens: list[int], result: StepResult
    ) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        turn = self._turn = self._turn + 1
        reward = float(result.reward)
        self._return += reward
        terminated = bool(result.episode_done)
        limit = self.turn_limit
        truncated = not terminated and limit is not None and turn >= limit
        vocab_size = self.vocab_size  # ids outside the vocabulary are left out of the text
        if tokens and (min(tokens) < 0 or max(tokens) >= vocab_size):
            valid = [t for t in tokens if 0 <= t < vocab_size]
        else:  # the common case: two C-level passes
            valid = tokens
        ob = result.next_observation
        next_tokens = ob.tokens if type(ob) is ModelInput else ob.to_ints()  # ints, validated
        if self.render_mode == "ansi":
            self._extend_transcript(valid, list(next_tokens))
        if next_tokens:
            array = self._observation_array(ob, next_tokens)
        else:  # the usual last step: nothing to convert or remember
            self._obs_ob, self._obs_arr = None, _EMPTY_OBS
            array = np.empty(0, _INT64)
        stop = self._stop = cast(StopCondition, list(result.next_stop_condition))
        metrics = dict(result.metrics)
        done = terminated or truncated
        if done and turn == 1:
            # A one-step episode (every single-turn env): each numeric metric's mean is its value,
            # computed as the sums below would (0.0 + value, divided by a count of 1). (Metrics
            # are nearly always floats: that test first, then the full one; a plain loop, which
            # costs less than a comprehension's own frame.)
            episode = {}
            for key, value in metrics.items():
                if type(value) is float or _is_number(value):
                    episode[key] = 0.0 + float(value)
        else:
            sums, counts = self._metric_sums, self._metric_counts
            for key, value in metrics.items():
                if _is_number(value):
                    sums[key] = sums.get(key, 0.0) + float(value)
                    counts[key] = counts.get(key, 0) + 1
            episode = {k: total / counts[k] for k, total in sums.items()} if done else None
        info: dict[str, Any] = {
            "text": self.tokenizer.decode(valid, skip_special_tokens=False),
            "stop_condition": stop[:],
            "turn": turn,
            "metrics": metrics,
            "logs": dict(result.logs),
            "invalid_tokens": len(tokens) - len(valid),
        }
        if episode is not None:
            self._done = True
            episode["return"] = self._return
            episode["turns"] = turn
            episode["truncated"] = float(truncated)
            info["episode_metrics"] = episode
        return array, reward, terminated, truncated, info

    def _observation_array(self, ob: Any, tokens: Sequence[int]) -> np.ndarray:
        """A new int64 array of a step's observation `ob` (its validated ids `tokens`).

        When the episode says `ob` extends the previous observation (its `continuation` -- a
        `llm_gym.renderers.continuation.Continuation` -- built `ob` from exactly that `ModelInput`,
        an identity check, never a token comparison), only the new tokens are converted from Python
        ints, at the end of the episode's private growable buffer; the caller gets a copy of
        the buffer's first `len(ob)` ids (one memcpy). Any other observation is converted in
        full. The buffer is only ever written past the tokens already in it."""
        n = len(tokens)
        if n == 0:
            self._obs_ob, self._obs_arr = ob, _EMPTY_OBS
            return np.empty(0, _INT64)
        prev = self._obs_arr
        k = len(prev)
        extension = getattr(getattr(self._env, "continuation", None), "last_extension", None)
        if (
            extension is not None and extension[1] is ob and extension[0] is self._obs_ob
            and self._obs_ob is not None and n > k
        ):
            buf = self._obs_buf
            if buf is None or self._obs_buf_len != k or buf.shape[0] < n:
                new = np.empty(max(2 * n, 256), dtype=np.int64)
                new[:k] = prev
                buf = self._obs_buf = new
            buf[k:n] = tokens[k:]
            self._obs_buf_len = n
            array = buf[:n]
            array.setflags(write=False)
            self._obs_ob, self._obs_arr = ob, array
            return array.copy()
        array = _int64_array(tokens)
        self._obs_buf, self._obs_buf_len = None, 0
        if _may_extend(self._env):  # keep a private copy for the next observation to extend
            array.setflags(write=False)
            self._obs_ob, self._obs_arr = ob, array
            return array.copy()
        self._obs_ob, self._obs_arr = None, _EMPTY_OBS
        return array

    # --- rendering and teardown --------------------------------------------------------------
    def render(self) -> str | None:
        """With `render_mode="ansi"`, the conversation so far (special tokens shown); else None."""
        if self.render_mode != "ansi":
            return None
        return self._decode(self._transcript)

    def close(self) -> None:
        # The episode's resources (see release_env); the event loop that drives sync calls
        # belongs to the thread, not to this env.
        if self._env is not None:
            release_env(self._env)
        super().close()

    # --- helpers ----------------------------------------------------------------------------
    def _decode(self, tokens: Sequence[int]) -> str:
        if type(tokens) is not list:
            tokens = list(tokens)
        return self.tokenizer.decode(tokens, skip_special_tokens=False)

    def _extend_transcript(self, action: list[int], next_obs: list[int]) -> None:
        # Multi-turn observations usually extend the conversation (prefix property); otherwise
        # the transcript keeps what came before and appends the new context.
        self._transcript += action
        n = len(self._transcript)
        if len(next_obs) >= n and next_obs[:n] == self._transcript:
            self._transcript = list(next_obs)
        else:
            self._transcript += next_obs


def _close_loop(loop: asyncio.AbstractEventLoop, pid: int) -> None:
    """Close a thread's shared loop unless something is still running it, or it was inherited
    through a fork (closing would unregister fds from the epoll set it shares with the parent)."""
    if pid == os.getpid() and not loop.is_running() and not loop.is_closed():
        loop.close()


def _action_to_ids(action: Any) -> list[int]:
    """Token ids of an action, or TypeError for a value that is not a 1-D sequence of ints.

    Values are not range-checked here: out-of-vocabulary ids are model output and go to the env.
    """
    if type(action) is list and set(map(type, action)) <= _JUST_INT:  # what samplers return
        return action[:]
    if isinstance(action, (str, bytes)):
        raise TypeError(
            f"TextEnv actions are token ids, got {type(action).__name__} {action[:40]!r}; encode it "
            "with env.tokenizer or wrap the env in llm_gym.wrappers.TextActions to send text"
        )
    if isinstance(action, ModelInput):
        return action.to_ints()
    if isinstance(action, np.ndarray):
        arr = action
    elif isinstance(action, (list, tuple)):
        if not action:
            return []
        if set(map(type, action)) == _JUST_INT:  # plain Python ints: nothing to convert
            return list(action)
        try:
            arr = np.asarray(action)
        except (ValueError, TypeError, OverflowError) as exc:
            raise TypeError(f"action must be a flat sequence of int token ids: {exc}") from None
    else:
        raise TypeError(
            f"action must be a list, tuple or 1-D integer numpy array of token ids, got "
            f"{type(action).__name__}"
        )
    if arr.ndim != 1:
        raise TypeError(f"action must be 1-D (one sequence of token ids), got shape {arr.shape}")
    if arr.size == 0:
        return []
    if arr.dtype.kind in "iu":
        return arr.tolist()
    if arr.dtype == object and all(
        isinstance(t, (int, np.integer)) and not isinstance(t, bool) for t in arr.tolist()
    ):
        return [int(t) for t in arr.tolist()]  # ints too large for int64: still model output
    raise TypeError(
        f"action token ids must be integers, got dtype {arr.dtype} (e.g. {arr.tolist()[:3]!r})"
    )


_JUST_INT = {int}
# Metric values averaged into episode_metrics (bools are not: isinstance(True, int) holds).
_NUMBER_TYPES = (int, float, np.integer, np.floating)


def _is_number(value: Any) -> bool:
    kind = type(value)
    return kind is float or kind is int or (kind is not bool and isinstance(value, _NUMBER_TYPES))


# id(prompt) -> (prompt, tokenizer, its text under that tokenizer, its read-only int64 array);
# emptied when it holds more than _PROMPT_MEMO_TOKENS tokens (~20 MB at most). One entry per
# prompt object: envs over another tokenizer (which never share a source's prompt objects) just
# replace it.
_PromptEntry = tuple[ModelInput, Any, str, np.ndarray]
_prompt_memo: dict[int, _PromptEntry] = {}
_PROMPT_MEMO_TOKENS = 1 << 20
_prompt_memo_tokens = 0


def _remember_prompt(entry: _PromptEntry) -> None:
    global _prompt_memo_tokens
    size = len(entry[3])
    if _prompt_memo_tokens + size > _PROMPT_MEMO_TOKENS:
        _prompt_memo.clear()  # rare; no iteration, so safe across threads
        _prompt_memo_tokens = 0
    _prompt_memo[id(entry[0])] = entry
    _prompt_memo_tokens += size

_EMPTY_OBS = np.empty(0, dtype=np.int64)  # private: never returned
_EMPTY_OBS.flags.writeable = False


def _may_extend(env: Any) -> bool:
    """Whether `env`'s next observation may be built on its last one (it has a continuation
    that records extensions), so `TextEnv` must keep a private copy of it."""
    return hasattr(getattr(env, "continuation", None), "last_extension")


def _int64_array(tokens: Sequence[int]) -> np.ndarray:
    """A fresh int64 array of validated token ids (`np.fromiter` is the cheapest conversion for
    the short sequences here; ids of 2**63 and more raise OverflowError, as `np.asarray` does).
    Arguments are positional: numpy parses keywords here at ~3x the cost of the conversion."""
    return np.fromiter(tokens, _INT64, len(tokens))


_INT64 = np.dtype(np.int64)

