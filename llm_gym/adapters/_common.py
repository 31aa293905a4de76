"""Shared plumbing for the adapters: resolving a registered id to its `EnvSource`, deterministic
per-row task seeds, rebuilding a row's env, and scoring text through the env's own `step`.

Every adapter (TRL, datasets export) rebuilds an episode the same way, through the Gymnasium face
itself: `gym.make(env_id, split=..., **knobs).unwrapped.reset(seed=task_seed)` and then
`.current_env`, the seed-API episode that reset started. So a row's task is by construction the
task any Gymnasium user gets from `reset(seed=task_seed)`, whatever seeding TextEnv uses.
"""

from __future__ import annotations

import asyncio
import difflib
import importlib
import json
import re
import threading
from typing import Any, Callable, Coroutine, TypeVar

import numpy as np

T = TypeVar("T")

INSTALL_HINT = "pip install 'llm-gym[train]'"


def require(module: str, purpose: str) -> Any:
    """Import an optional dependency or raise an ImportError that names the install command."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"{purpose} needs the optional dependency `{module}`, which is not installed: "
            f"{INSTALL_HINT} (or pip install {module})"
        ) from exc


def registered_llm_ids() -> list[str]:
    import gymnasium as gym

    import llm_gym  # noqa: F401  (registers the llm/ ids)

    return sorted(k for k in gym.registry if k.startswith("llm/"))


def make_gym_env(env_id: str, *, split: str = "train", **env_kwargs: Any) -> Any:
    """`gym.make(env_id, split=split, **env_kwargs)`; an unknown id raises a ValueError that lists
    the registered `llm/` ids and the closest match."""
    import gymnasium as gym

    import llm_gym  # noqa: F401

    if not isinstance(env_id, str) or env_id not in gym.registry:
        known = registered_llm_ids()
        close = difflib.get_close_matches(str(env_id), known, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(
            f"unknown env id {env_id!r}.{hint} Registered llm/ ids: {known} "
            "(a third-party catalog registers through the `llm_gym.envs` entry-point group)"
        )
    return gym.make(env_id, split=split, **env_kwargs)


def text_env(env_id: str, *, split: str = "train", **env_kwargs: Any) -> Any:
    """The unwrapped llm-gym `TextEnv` for a registered id (its `source`, `renderer`, split and
    difficulty knobs)."""
    env = make_gym_env(env_id, split=split, **env_kwargs).unwrapped
    if getattr(env, "source", None) is None or not hasattr(env, "current_env"):
        raise TypeError(
            f"{env_id!r} is not an llm-gym TextEnv (env.unwrapped has no `source`); the adapters need "
            "an id registered by an llm-gym catalog"
        )
    return env


def env_source(env_id: str, *, split: str = "train", **env_kwargs: Any) -> Any:
    """The `EnvSource` behind a registered id (with its renderer, split and difficulty knobs)."""
    return text_env(env_id, split=split, **env_kwargs).source


def episode(env: Any, task_seed: int) -> tuple[Any, list[int], dict[str, Any]]:
    """Reset the `TextEnv` on `task_seed`; return the seed-API episode it started (its initial
    observation already taken), the prompt tokens and the reset `info`."""
    obs, info = env.reset(seed=int(task_seed))
    return env.current_env, [int(t) for t in obs], info


def task_seeds(seed: int, n: int) -> list[int]:
    """`n` deterministic 31-bit task seeds derived from `seed` (same seed, same list)."""
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")
    state = np.random.SeedSequence(int(seed)).generate_state(n, dtype=np.uint32) if n else []
    return [int(s) & 0x7FFFFFFF for s in state]


def dump_knobs(env_kwargs: dict[str, Any]) -> str:
    """Difficulty knobs as a canonical JSON string (a column type every dataset backend keeps)."""
    return json.dumps(env_kwargs, sort_keys=True)


def load_knobs(text: str | dict | None) -> dict[str, Any]:
    if text is None or text == "":
        return {}
    if isinstance(text, dict):
        return dict(text)
    return json.loads(text)


def run_async(fn: Callable[..., Coroutine[Any, Any, T]], *args: Any, **kwargs: Any) -> T:
    """Call the async function `fn(*args, **kwargs)` from synchronous code and return its result.

    With no event loop running in this thread it uses `asyncio.run`; inside a running loop
    (Jupyter, an async reward loop) it runs on a private loop in a helper thread, so it never
    blocks or re-enters the caller's loop.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(fn(*args, **kwargs))
    box: dict[str, Any] = {}

    def worker() -> None:
        try:
            box["value"] = asyncio.run(fn(*args, **kwargs))
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=worker, daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def text_to_action(renderer: Any, text: str, *, terminated: bool = True) -> list[int]:
    """The token action that makes `renderer.parse_response` return `text`: the text's tokens plus,
    when the response ended on its own, the renderer's first stop sequence."""
    tokens = list(renderer.tokenizer.encode(text, add_special_tokens=False))
    if terminated:
        stops = renderer.get_stop_sequences()
        if stops:
            stop = stops[0]
            if isinstance(stop, str):
                tokens += list(renderer.tokenizer.encode(stop, add_special_tokens=False))
            else:
                tokens.append(int(stop))
    return tokens



# The ChatML markup of the default (chatml) renderer: a turn is "<|im_start|>role\n...<|im_end|>".
_CHATML_TURN = re.compile(r"<\|im_start\|>(\w+)\n(.*?)(?:<\|im_end\|>|$)", re.S)


def observation_messages(tokenizer: Any, tokens: Any) -> list[dict[str, str]]:
    """Observation tokens as chat messages: the turns of ChatML markup, else one user message
    with the plain decoded text. Empty turns (the open assistant header) are dropped."""
    tokens = [int(t) for t in tokens]
    raw = tokenizer.decode(tokens, skip_special_tokens=False)
    turns = [{"role": r, "content": c.strip()} for r, c in _CHATML_TURN.findall(raw) if c.strip()]
    if turns:
        return turns
    text = tokenizer.decode(tokens, skip_special_tokens=True).strip()
    return [{"role": "user", "content": text}] if text else []


def new_env_messages(tokenizer: Any, tokens: Any) -> list[dict[str, str]]:
    """What the env said after the model's last message: the non-assistant turns after the last
    assistant turn of the observation (all of them when it has none)."""
    messages = observation_messages(tokenizer, tokens)
    last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
    return [m for m in messages[last + 1:] if m["role"] != "assistant"]


def float_metrics(metrics: dict[str, Any]) -> dict[str, float]:
    """The numeric entries of a metrics dict, as floats (bools and numpy scalars included)."""
    return {
        k: float(v) for k, v in metrics.items()
        if isinstance(v, (bool, int, float, np.integer, np.floating))
    }
