"""`FromText`: any string-in/string-out env as a token env (chat-rendered, multi-turn, groupable).

A string env is anything with `reset(seed=...) -> (observation, info)` and `step(text) ->
(observation, reward, terminated, truncated, info)` (coroutine functions too): a Gymnasium env with
`Text` spaces, a GEM env, or a duck-typed object (the TextArena and SkyRL-gym bridges in
`llm_gym.bridges` adapt theirs to this shape). `FromText(env)` is a `llm_gym.TextEnv` over a
`StringEnvSource`: each observation becomes a user turn rendered by any renderer, the sampled tokens
are parsed back into the assistant text the env receives, and later turns keep the prefix property
through `llm_gym.renderers.continuation.Continuation` (its one-hot `continuation/*` metrics are in
each continuing step's metrics). An observation that starts over with the first and the previous
observation (envs that resend the whole history, as TextArena's LLMObservationWrapper does) adds
only its new part. Bad model output never reaches the env and never earns credit: out-of-vocabulary
ids, invalid UTF-8 and over-long replies end the episode with `invalid_action_reward` and a metric;
so does an exception the env raises on a reply (`on_env_error="raise"` propagates it instead), and
an env with a `forfeit()` method (a self-play seat) is told. Reset seeds are mapped into
`[0, 2**seed_bits)` (GEM and TextArena seed numpy's legacy generator, which rejects seeds of 2**32
and more), even for split="train" and odd for "test"; with `isolate_global_rng` (the default) every
call into the env runs on a private copy of Python's and numpy's global random state, seeded from
the episode's seed, so episodes are reproducible however many envs interleave in one process (calls
from several threads are serialised by a lock). Being a `TextEnv`, the result passes Gymnasium's
`check_env` and works with `GymEnvGroupBuilder` and every llm-gym wrapper.
"""

from __future__ import annotations

import inspect
import math
import random
import threading
import weakref
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from llm_gym.env_source import EnvCard, EnvSource
from llm_gym.model_input import ModelInput
from llm_gym.renderers import Message, Renderer, get_text_content
from llm_gym.renderers.continuation import Continuation
from llm_gym.rl.types import Action, ActionExtra, Env, Observation, StepResult, StopCondition
from llm_gym.text_env import TextEnv

__all__ = ["FromText", "StringEnvSource", "StringEpisode"]

DEFAULT_MAX_ACTION_CHARS = 16_384
DEFAULT_MAX_CONTEXT_TOKENS = 32_768
_REPLACEMENT = "\ufffd"
# Swapping the process-wide random state in and out is only atomic if no two threads do it at once.
_GLOBAL_RNG_LOCK = threading.RLock()

_OPTION_DOCS = {
    "system_prompt": "a system message put before the first observation (default None: none)",
    "dedupe_history": "send only the new part of an observation that repeats the first and the "
    "previous observation (envs that resend the whole history) (default True)",
    "invalid_action_reward": "reward for a reply that never reaches the env (out-of-vocabulary ids, "
    "invalid UTF-8, over max_action_chars) or that the env raised on; default: the lower end of "
    "reward_range when finite, else 0.0",
    "reward_range": "(low, high) of one step's reward, for the card and invalid_action_reward "
    "(default (-inf, inf))",
    "max_action_chars": f"longest reply passed to the env (default {DEFAULT_MAX_ACTION_CHARS})",
    "max_context_tokens": "end the episode (metric context_exceeded) when the next observation "
    f"would be longer (default {DEFAULT_MAX_CONTEXT_TOKENS})",
    "seed_bits": "reset seeds handed to the env lie in [0, 2**seed_bits) (default 32)",
    "isolate_global_rng": "run the env on a private, seeded copy of Python's and numpy's global "
    "random state (default True)",
    "on_env_error": "'end' (the episode ends with invalid_action_reward, metric env_error) or "
    "'raise', for an exception the env raises in step (default 'end')",
    "observation_to_text": "callable turning a non-str observation into text (default None: str "
    "observations, or lists of chat messages, only)",
}


class _PrivateGlobalRNG:
    """A private copy of `random`'s and `numpy.random`'s global state, seeded from one int, that
    `active()` swaps in for the duration of a call into the wrapped env (and saves back after)."""

    def __init__(self, seed: int) -> None:
        with _GLOBAL_RNG_LOCK:
            outer_py, outer_np = random.getstate(), np.random.get_state()
            try:
                random.seed(seed)
                np.random.seed(seed % (1 << 32))
                self._py, self._np = random.getstate(), np.random.get_state(legacy=True)
            finally:
                random.setstate(outer_py)
                np.random.set_state(outer_np)

    def fingerprint(self) -> str:
        """A short digest of the private state now, the same in every process (a task key for
        games that draw their task while they are played)."""
        import hashlib

        state = self._np
        assert isinstance(state, tuple)  # the legacy form (numpy types get_state() as dict | tuple)
        return hashlib.sha256(repr((self._py, state[1].tolist(), state[2:])).encode()).hexdigest()[:16]

    @contextmanager
    def active(self) -> Iterator[None]:
        with _GLOBAL_RNG_LOCK:
            outer_py, outer_np = random.getstate(), np.random.get_state()
            random.setstate(self._py)
            np.random.set_state(self._np)
            try:
                yield
            finally:
                self._py, self._np = random.getstate(), np.random.get_state(legacy=True)
                random.setstate(outer_py)
                np.random.set_state(outer_np)


@contextmanager
def _no_isolation() -> Iterator[None]:
    yield


def _call_reset(env: Any, seed: int) -> Any:
    try:
        return env.reset(seed=seed)
    except TypeError as exc:
        if "seed" not in str(exc):
            raise
        return env.reset()  # an env without a seed argument: the seeded global state decides


def _reset_result(out: Any) -> tuple[Any, dict]:
    if isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], dict):
        return out
    return out, {}


def _unpack_step(out: Any) -> tuple[Any, float, bool, bool, dict]:
    if isinstance(out, tuple) and len(out) == 5:
        obs, reward, terminated, truncated, info = out
    elif isinstance(out, tuple) and len(out) == 4:  # old Gym: (obs, reward, done, info)
        obs, reward, terminated, info = out
        truncated = False
    else:
        raise TypeError(
            "a string env's step must return (observation, reward, terminated, truncated, info), "
            f"got {type(out).__name__}"
        )
    return obs, reward, bool(terminated), bool(truncated), info if isinstance(info, dict) else {}


def _env_metrics(info: dict) -> dict[str, float]:
    """The env's numeric info entries, as `env/<key>` metrics."""
    out: dict[str, float] = {}
    for key, value in info.items():
        if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
            value = float(value)
            if math.isfinite(value):
                out[f"env/{key}"] = value
    return out


class StringEpisode(Env):
    """One episode of a string env, at the token level (what `StringEnvSource.make_env` returns).

    `initial_observation()` resets the env with the episode's seed and renders its observation as
    the first user turn. `step(tokens)` parses the tokens into the assistant's text, checks it (see
    the module docstring), steps the env and renders the next observation with the prefix
    property. Step metrics: `invalid_action` (1 when the reply never reached the env: with one of
    `invalid_tokens`, `invalid_utf8`, `action_too_long`), `env_error`, `truncated_action` (the reply
    did not end cleanly but was passed on), `context_exceeded`, `env_truncated` (the env itself
    truncated the episode), the continuation's one-hot mode and the env's numeric `info` entries as
    `env/<key>`.
    """

    def __init__(self, source: StringEnvSource, seed: int) -> None:
        self.source = source
        self.seed = seed
        self.renderer = source.renderer
        self.continuation = source.continuation  # TextEnv reads its `last_extension`
        self._env: Any = None
        self._rng = _PrivateGlobalRNG(seed) if source.isolate_global_rng else None
        self._messages: list[Message] = []
        self._ob: ModelInput = ModelInput.empty()
        self._last_text: str | None = None
        self._first_text: str | None = None
        self._done = False

    @property
    def stop_condition(self) -> StopCondition:
        return self.renderer.get_stop_sequences()

    @property
    def string_env(self) -> Any:
        """The wrapped string env playing this episode (None before `initial_observation`)."""
        return self._env

    def global_rng_fingerprint(self) -> str | None:
        """A digest of the episode's private `random` / `numpy.random` state now (None without
        `isolate_global_rng`): what a game that draws its task during play (Minesweeper's mines)
        will draw from."""
        return self._rng.fingerprint() if self._rng is not None else None

    def _context(self):
        return self._rng.active() if self._rng is not None else _no_isolation()

    def _text_of(self, obs: Any) -> list[Message]:
        """The new message(s) an observation adds to the conversation."""
        if isinstance(obs, list) and all(isinstance(m, dict) and "role" in m for m in obs):
            messages = [
                Message(role=m["role"], content=m.get("content") or "") for m in obs
                if m["role"] != "assistant"
            ]
            return messages or [Message(role="user", content="")]
        if not isinstance(obs, str):
            convert = self.source.observation_to_text
            if convert is None:
                raise TypeError(
                    f"{type(self._env).__name__} returned a {type(obs).__name__} observation; "
                    "FromText needs str observations (or lists of chat messages): pass "
                    "observation_to_text=<callable returning str>"
                )
            obs = convert(obs)
            if not isinstance(obs, str):
                raise TypeError(f"observation_to_text returned {type(obs).__name__}, expected str")
        text = obs
        prev, first = self._last_text, self._first_text
        self._last_text = obs
        if first is None:
            self._first_text = obs
        elif self.source.dedupe_history and first and obs.startswith(first) and obs.startswith(prev or first):
            # The env resends the conversation from its start: only what follows is new. (An env
            # whose turns merely repeat a short reply, "Lower." twice, does not start over.)
            text = obs[len(prev or first):].lstrip("\n")
        return [Message(role="user", content=text)]

    async def initial_observation(self) -> tuple[Observation, StopCondition]:
        self._env = self.source._acquire(self)
        with self._context():
            out = _call_reset(self._env, self.seed)
        if inspect.isawaitable(out):  # an async env (e.g. a self-play seat) isolates itself
            out = await out
        obs, _info = _reset_result(out)
        messages: list[Message] = []
        if self.source.system_prompt:
            messages.append(Message(role="system", content=self.source.system_prompt))
        messages += self._text_of(obs)
        self._messages = messages
        self._ob = self.continuation.first(messages)
        return self._ob, self.stop_condition

    def _end(
        self, reward: float, metrics: dict[str, float], logs: dict[str, Any], env_ended: bool = False
    ) -> StepResult:
        self._done = True
        forfeit = getattr(self._env, "forfeit", None)
        if not env_ended and callable(forfeit):  # e.g. a self-play seat: the other player wins
            with self._context():
                forfeit()
        self.source._release(self)
        return StepResult(
            reward=float(reward), episode_done=True, next_observation=ModelInput.empty(),
            next_stop_condition=self.stop_condition, metrics=metrics, logs=logs,
        )

    def _invalid(self, kind: str, logs: dict[str, Any]) -> StepResult:
        metrics = {"invalid_action": 1.0, kind: 1.0, "env_error": 0.0}
        return self._end(self.source.invalid_action_reward, metrics, logs)

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        if self._done or self._env is None:
            raise RuntimeError("this episode is over (or was never started); make a new one")
        self.source._check_owner(self)
        renderer = self.renderer
        message, termination = renderer.parse_response(action)
        if renderer.has_invalid_ids(action):
            return self._invalid("invalid_tokens", {"reason": "out-of-vocabulary token ids"})
        text = get_text_content(message)
        if _REPLACEMENT in text:
            return self._invalid("invalid_utf8", {"reason": "the reply is not valid UTF-8"})
        if len(text) > self.source.max_action_chars:
            return self._invalid(
                "action_too_long",
                {"reason": f"reply of {len(text)} chars > max_action_chars={self.source.max_action_chars}"},
            )
        metrics: dict[str, float] = {
            "invalid_action": 0.0,
            "truncated_action": float(
                not termination.is_clean or (extra or {}).get("stop_reason") == "length"
            ),
        }
        try:
            with self._context():
                out = self._env.step(text)
            if inspect.isawaitable(out):
                out = await out
            obs, reward, terminated, truncated, info = _unpack_step(out)
            reward = float(reward)
            if not math.isfinite(reward):
                raise ValueError(f"the env returned a non-finite reward {reward!r}")
        except Exception as exc:
            if self.source.on_env_error == "raise":
                self._done = True
                raise
            metrics.update(env_error=1.0, invalid_action=1.0)
            return self._end(
                self.source.invalid_action_reward, metrics,
                {"reason": f"the env raised {type(exc).__name__}: {str(exc)[:500]}"},
            )
        metrics["env_error"] = 0.0
        metrics.update(_env_metrics(info))
        if terminated or truncated:
            metrics["env_truncated"] = float(truncated and not terminated)
            return self._end(reward, metrics, {}, env_ended=True)
        new_messages = self._text_of(obs)
        messages = self._messages + [message] + new_messages
        cont = self.continuation.next(self._ob, action, messages)
        if cont.observation.length > self.source.max_context_tokens:
            metrics["context_exceeded"] = 1.0
            return self._end(reward, metrics, {"reason": "max_context_tokens reached"})
        metrics.update(cont.metrics)
        self._messages, self._ob = messages, cont.observation
        return StepResult(
            reward=reward, episode_done=False, next_observation=cont.observation,
            next_stop_condition=self.stop_condition, metrics=metrics,
            logs={"observation": get_text_content(new_messages[-1])[:2000]},
        )


class StringEnvSource(EnvSource):
    """The `EnvSource` behind `FromText` and the bridges: episodes of a string env.

    Give it `env` (one string env object, reused episode after episode; a second concurrent
    episode takes it over and the first one's next step raises `RuntimeError`) or `env_factory`
    (a callable making a fresh string env: concurrent episodes each get their own, finished ones
    are reused). Subclasses (the bridges) override `make_string_env` and set `card`. Options: see
    `_OPTION_DOCS` / the card's knobs.
    """

    card = EnvCard(
        id="from_text",
        family="text",
        description="A string-in/string-out environment wrapped by llm_gym.wrappers.FromText.",
        multi_turn=True,
        reward_range=(-math.inf, math.inf),
        reward_meaning="the wrapped env's own reward; invalid_action_reward for a reply that never "
        "reached it",
        difficulty_knobs=dict(_OPTION_DOCS),
        data_source="the wrapped env",
        license="the wrapped env's",
    )

    def __init__(
        self,
        *,
        renderer: Renderer,
        split: str = "train",
        env: Any = None,
        env_factory: Callable[[], Any] | None = None,
        system_prompt: str | None = None,
        dedupe_history: bool = True,
        invalid_action_reward: float | None = None,
        reward_range: Sequence[float] | None = None,
        max_action_chars: int = DEFAULT_MAX_ACTION_CHARS,
        max_context_tokens: int = DEFAULT_MAX_CONTEXT_TOKENS,
        seed_bits: int = 32,
        isolate_global_rng: bool = True,
        on_env_error: str = "end",
        observation_to_text: Callable[[Any], str] | None = None,
        **knobs: Any,
    ) -> None:
        super().__init__(renderer=renderer, split=split, **knobs)
        if env is not None and env_factory is not None:
            raise TypeError("pass env or env_factory, not both")
        if env is not None and not (callable(getattr(env, "reset", None)) and callable(getattr(env, "step", None))):
            raise TypeError(
                f"FromText needs an env with reset(seed=...) and step(text) methods, got "
                f"{type(env).__name__}"
            )
        if env_factory is not None and not callable(env_factory):
            raise TypeError(f"env_factory must be callable, got {type(env_factory).__name__}")
        if on_env_error not in ("end", "raise"):
            raise ValueError(f"on_env_error must be 'end' or 'raise', got {on_env_error!r}")
        if isinstance(seed_bits, bool) or not isinstance(seed_bits, int) or not 2 <= seed_bits <= 64:
            raise ValueError(f"seed_bits must be an int in [2, 64], got {seed_bits!r}")
        for name, value in (("max_action_chars", max_action_chars), ("max_context_tokens", max_context_tokens)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if reward_range is not None:
            low, high = (float(x) for x in reward_range)
            if not low <= high:
                raise ValueError(f"reward_range must be (low, high) with low <= high, got {reward_range!r}")
            self._reward_range = (low, high)
        else:
            self._reward_range = tuple(self.card.reward_range)
        if invalid_action_reward is None:
            low = self._reward_range[0]
            invalid_action_reward = low if math.isfinite(low) else 0.0
        self.invalid_action_reward = float(invalid_action_reward)
        self.system_prompt = system_prompt
        self.dedupe_history = bool(dedupe_history)
        self.max_action_chars = max_action_chars
        self.max_context_tokens = max_context_tokens
        self.seed_bits = seed_bits
        self.isolate_global_rng = bool(isolate_global_rng)
        self.on_env_error = on_env_error
        self.observation_to_text = observation_to_text
        self.continuation = Continuation(renderer)
        self._env = env
        self._env_factory = env_factory
        # Every string env this source made (or was given), and a weak reference to the episode
        # playing each: an env is free when that episode is done or gone (an episode abandoned by
        # a reset mid-game dies with TextEnv's reference to it, so its env is reused at once).
        self._envs: list[Any] = [env] if env is not None else []
        self._owners: dict[int, weakref.ref[StringEpisode]] = {}

    @property
    def reward_range(self) -> tuple[float, float]:
        return self._reward_range  # type: ignore[return-value]

    def make_string_env(self) -> Any:
        """A fresh string env (bridges override this); the default calls `env_factory`."""
        if self._env_factory is None:
            raise RuntimeError(f"{type(self).__name__} has no env_factory to make a string env with")
        return self._env_factory()

    def make_env(self, rng: np.random.Generator) -> StringEpisode:
        # Train and test draw from disjoint seed sets (even / odd), within what the env accepts.
        half = int(rng.integers(0, 1 << (self.seed_bits - 1), dtype=np.uint64))
        return StringEpisode(self, 2 * half + (self.split == "test"))

    # --- which episode plays which string env ----------------------------------------------
    def _owner(self, env: Any) -> StringEpisode | None:
        ref = self._owners.get(id(env))
        return ref() if ref is not None else None

    def _acquire(self, episode: StringEpisode) -> Any:
        for env in self._envs:
            owner = self._owner(env)
            if owner is None or owner._done:
                break
        else:
            if self._env is not None and self._env_factory is None and (
                type(self).make_string_env is StringEnvSource.make_string_env
            ):
                env = self._env  # the one object: take it over from the episode playing it
            else:
                env = self.make_string_env()
                self._envs.append(env)
        self._owners[id(env)] = weakref.ref(episode)
        return env

    def _release(self, episode: StringEpisode) -> None:
        if episode._env is not None and self._owner(episode._env) is episode:
            del self._owners[id(episode._env)]

    def _check_owner(self, episode: StringEpisode) -> None:
        if self._owner(episode._env) is not episode:
            episode._done = True
            raise RuntimeError(
                "this episode's string env was taken over by a newer episode (FromText over one env "
                "object plays one episode at a time); pass env_factory for concurrent episodes"
            )


class FromText(TextEnv):
    """A token env (`TokenSequence` spaces) over a string env; see the module docstring.

    Args:
        env: the string env (an object with `reset`/`step`), or a zero-argument callable / class
            that makes one (then concurrent episodes of one source get their own envs).
        tokenizer, renderer, split, turn_limit, render_mode, max_action_length: as for `TextEnv`
            (defaults: the embedded byte tokenizer and the `chatml` renderer).
        **options: `StringEnvSource` options: `system_prompt`, `dedupe_history`,
            `invalid_action_reward`, `reward_range`, `max_action_chars`, `max_context_tokens`,
            `seed_bits`, `isolate_global_rng`, `on_env_error`, `observation_to_text`.

    Example: `FromText(gem.make("game:GuessTheNumber-v0-easy"), tokenizer="Qwen/Qwen3-0.6B")`;
    for a group, `GymEnvGroupBuilder(lambda: FromText(make_my_env()), group_size=8, seed=0)`.
    """

    def __init__(self, env: Any, tokenizer: Any = None, renderer: Any = None, **kwargs: Any) -> None:
        if isinstance(env, type) or (callable(env) and not hasattr(env, "step")):
            kwargs["env_factory"] = env
        else:
            kwargs["env"] = env
        super().__init__(StringEnvSource, tokenizer=tokenizer, renderer=renderer, **kwargs)

    @property
    def string_env(self) -> Any:
        """The string env of the current episode (None before the first `reset`)."""
        episode = self.current_env
        return episode.string_env if isinstance(episode, StringEpisode) else None
