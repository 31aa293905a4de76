"""Expose an llm-gym environment as an OpenEnv environment (`openenv-core` 0.3, import name
`openenv`), so OpenEnv clients and trainers that speak its reset/step protocol can play our envs.

`LLMGymEnvironment` is an `openenv.core.Environment` over one registered id: `reset(seed=...)`
starts the task any Gymnasium user gets from `gym.make(env_id).reset(seed=seed)` and returns a
`TextObservation` (the opening conversation as text and messages); `step(TextAction(message=...))`
feeds the model's message to our env (tokenized with its renderer plus its stop sequence, or
without it when `truncated=True`, i.e. the reply was cut off by the token limit) and returns the
env's reply as the next `TextObservation`, with `reward` exactly our env's step reward and `done`
when the episode ends (terminated, truncated, or the registered `max_episode_steps` reached). Bad
model output is scored by the env; protocol misuse (stepping before `reset` or after `done`)
raises. `create_app` builds OpenEnv's own FastAPI server (`create_fastapi_app`, with its HTTP and
WebSocket session endpoints), `serve` runs it with uvicorn on a loopback port in a background
thread, and `LLMGymEnvClient` is an OpenEnv `EnvClient` (WebSocket session) with typed results.

    from llm_gym.adapters.openenv import LLMGymEnvClient, TextAction, serve
    with serve("llm/GuessNumber-v0", max_number=16) as base_url:
        with LLMGymEnvClient(base_url=base_url).sync() as env:
            result = env.reset(seed=0)
            result = env.step(TextAction(message="8"))   # result.reward, result.done
"""

# openenv-core and what it pulls (starlette, uvicorn) are in .venv-adapters (make test-adapters), not
# in the .venv pyright checks against: their imports do not resolve there.
# pyright: reportMissingImports=false

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any, Callable, Optional

import numpy as np

try:
    from openenv.core.client_types import StepResult
    from openenv.core.env_client import EnvClient
    from openenv.core.env_server import Action, Environment, Observation, State, create_fastapi_app
    from openenv.core.env_server.types import EnvironmentMetadata
    from pydantic import Field
except ImportError as exc:  # pragma: no cover - exercised only without the package
    raise ImportError(
        "llm_gym.adapters.openenv needs the optional dependency `openenv-core` 0.3 "
        f"({exc}); install it with: pip install 'openenv-core>=0.3,<0.4' (or its successor `openenv`)"
    ) from exc

from llm_gym.adapters._common import (
    float_metrics,
    make_gym_env,
    new_env_messages,
    observation_messages,
    text_to_action,
)

__all__ = [
    "LLMGymEnvClient",
    "LLMGymEnvironment",
    "LLMGymState",
    "TextAction",
    "TextObservation",
    "create_app",
    "serve",
]



class TextAction(Action):
    """The model's message for this turn."""

    message: str = Field(description="The model's reply, as plain text")
    truncated: bool = Field(
        default=False, description="True when the reply was cut off by the token limit"
    )


class TextObservation(Observation):
    """What the env said: the opening conversation at reset, its reply after a step."""

    text: str = Field(default="", description="The env's new text (non-assistant turns joined)")
    messages: list[dict[str, str]] = Field(
        default_factory=list, description="The env's new chat messages (role, content)"
    )
    env_id: str = ""
    task_seed: Optional[int] = None
    turn: int = 0
    metrics: dict[str, float] = Field(default_factory=dict, description="The env's step metrics")


class LLMGymState(State):
    env_id: str = ""
    task_seed: Optional[int] = None
    episode_return: float = 0.0
    done: bool = True






class LLMGymEnvironment(Environment[TextAction, TextObservation, LLMGymState]):
    """One llm-gym env id as an OpenEnv environment (one episode at a time per instance; the
    server makes one instance per WebSocket session).

    Args:
        env_id: a registered llm-gym id (`llm/Math-v0`, ...); a bad id or knob raises here.
        split: `"train"` or `"test"`.
        **env_kwargs: the env's difficulty knobs.
    """

    SUPPORTS_CONCURRENT_SESSIONS = True  # instances share no mutable state

    def __init__(self, env_id: str, *, split: str = "train", **env_kwargs: Any) -> None:
        super().__init__()
        gym_env = make_gym_env(env_id, split=split, **env_kwargs)
        self._env = gym_env.unwrapped
        if getattr(self._env, "source", None) is None:
            raise TypeError(f"{env_id!r} is not an llm-gym TextEnv; register it through an llm-gym catalog")
        self._max_steps = gym_env.spec.max_episode_steps if gym_env.spec is not None else None
        self.env_id, self.split, self.env_kwargs = env_id, split, dict(env_kwargs)
        self._state = LLMGymState(env_id=env_id)

    # --- reset / step (sync, and async for the server's event loop) ---------------------------

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None,
              **kwargs: Any) -> TextObservation:
        self._check_reset(kwargs)
        tokens, info = self._env.reset(seed=seed)
        return self._after_reset(tokens, info, seed, episode_id)

    async def reset_async(self, seed: Optional[int] = None, episode_id: Optional[str] = None,
                          **kwargs: Any) -> TextObservation:
        self._check_reset(kwargs)
        tokens, info = await self._env.areset(seed=seed)
        return self._after_reset(tokens, info, seed, episode_id)

    def step(self, action: TextAction, timeout_s: Optional[float] = None,
             **kwargs: Any) -> TextObservation:
        return self._after_step(self._env.step(self._action_ids(action)))

    async def step_async(self, action: TextAction, timeout_s: Optional[float] = None,
                         **kwargs: Any) -> TextObservation:
        return self._after_step(await self._env.astep(self._action_ids(action)))

    @property
    def state(self) -> LLMGymState:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        card = self._env.source.card
        return EnvironmentMetadata(
            name=card.id, description=card.description, version=card.id.rsplit("-v", 1)[-1],
        )

    # --- helpers ------------------------------------------------------------------------------

    def _check_reset(self, kwargs: dict[str, Any]) -> None:
        if kwargs:
            raise ValueError(f"LLMGymEnvironment.reset takes seed and episode_id only, got {sorted(kwargs)}")

    def _after_reset(self, tokens: Any, _info: dict, seed: Optional[int],
                     episode_id: Optional[str]) -> TextObservation:
        self._state = LLMGymState(env_id=self.env_id, task_seed=seed, episode_id=episode_id,
                                  step_count=0, episode_return=0.0, done=False)
        conversation: Callable[[], list[dict[str, Any]]] | None = getattr(self._env.current_env, "conversation", None)
        if callable(conversation):  # ProblemEnv: the exact messages, not a decode of them
            messages = [{"role": m["role"], "content": str(m["content"])} for m in conversation()]
        else:
            messages = observation_messages(self._env.tokenizer, tokens)
        return TextObservation(
            text="\n\n".join(m["content"] for m in messages), messages=messages,
            env_id=self.env_id, task_seed=seed, turn=0, done=False, reward=None,
        )

    def _action_ids(self, action: TextAction) -> np.ndarray:
        if not isinstance(action, TextAction):
            raise TypeError(f"step takes a TextAction, got {type(action).__name__}")
        if self._state.done:
            raise RuntimeError("the episode is over (or was never started): call reset() first")
        ids = text_to_action(self._env.renderer, action.message, terminated=not action.truncated)
        return np.asarray(ids, dtype=np.int64)

    def _after_step(self, result: tuple) -> TextObservation:
        tokens, reward, terminated, truncated, info = result
        state = self._state
        state.step_count += 1
        state.episode_return += float(reward)
        done = bool(terminated or truncated) or (
            self._max_steps is not None and state.step_count >= self._max_steps
        )
        state.done = done
        messages = [] if done else self._new_messages(tokens)
        return TextObservation(
            text="\n\n".join(m["content"] for m in messages), messages=messages,
            env_id=self.env_id, task_seed=state.task_seed, turn=state.step_count,
            metrics=float_metrics(info.get("episode_metrics") or info.get("metrics") or {}),
            reward=float(reward), done=done,
        )

    def _new_messages(self, tokens: Any) -> list[dict[str, str]]:
        return new_env_messages(self._env.tokenizer, tokens)


class LLMGymEnvClient(EnvClient[TextAction, TextObservation, LLMGymState]):
    """OpenEnv's WebSocket session client, typed for `LLMGymEnvironment` (`.sync()` for a
    blocking wrapper)."""

    def _step_payload(self, action: TextAction) -> dict[str, Any]:
        return action.model_dump(exclude={"metadata"})

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[TextObservation]:
        observation = TextObservation(
            **payload.get("observation", {}), reward=payload.get("reward"),
            done=bool(payload.get("done", False)),
        )
        return StepResult(observation=observation, reward=payload.get("reward"),
                          done=observation.done)

    def _parse_state(self, payload: dict[str, Any]) -> LLMGymState:
        return LLMGymState(**payload)


def create_app(env_id: str, *, split: str = "train", max_concurrent_envs: int = 8,
               **env_kwargs: Any) -> Any:
    """OpenEnv's FastAPI app (`/reset`, `/step`, `/state`, `/schema`, `/health`, WebSocket `/ws`
    sessions) serving `env_id`; one `LLMGymEnvironment` per session. The id and knobs are
    validated now."""
    LLMGymEnvironment(env_id, split=split, **env_kwargs)

    def factory() -> LLMGymEnvironment:
        return LLMGymEnvironment(env_id, split=split, **env_kwargs)

    factory.__name__ = f"LLMGymEnvironment[{env_id}]"
    return create_fastapi_app(factory, TextAction, TextObservation,
                              max_concurrent_envs=max_concurrent_envs)


def _quiet_ws_close(app: Any) -> Any:
    """openenv-core 0.3.0's `/ws` handler calls `websocket.close()` after the client has already
    closed the session, and the `WebSocketDisconnect` that raises is logged as an ASGI error with a
    traceback at every session end; drop that one exception (websocket scope only)."""
    from starlette.websockets import WebSocketDisconnect

    async def asgi(scope, receive, send):
        try:
            await app(scope, receive, send)
        except WebSocketDisconnect:
            if scope.get("type") != "websocket":
                raise

    return asgi


@contextlib.contextmanager
def serve(env_id: str, *, host: str = "127.0.0.1", port: int = 0, split: str = "train",
          max_concurrent_envs: int = 8, startup_timeout_s: float = 30.0,
          **env_kwargs: Any) -> Iterator[str]:
    """Run `create_app(env_id, ...)` with uvicorn in a background thread; yield its base URL
    (`http://host:port`; `port=0` picks a free one). The server stops when the block exits."""
    import uvicorn

    app = create_app(env_id, split=split, max_concurrent_envs=max_concurrent_envs, **env_kwargs)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    server = uvicorn.Server(uvicorn.Config(_quiet_ws_close(app), log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]},
                              name=f"openenv-{env_id}", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + startup_timeout_s
        while not server.started and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        if not server.started:
            raise RuntimeError(f"the OpenEnv server for {env_id!r} did not start within "
                               f"{startup_timeout_s:g}s")
        bound_host, bound_port = sock.getsockname()[:2]
        yield f"http://{bound_host}:{bound_port}"
    finally:
        server.should_exit = True
        thread.join(timeout=startup_timeout_s)
        sock.close()
