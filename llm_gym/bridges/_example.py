"""The bridges' cards, with an `example_episode` made from the bridged env itself, lazily.

A bridge source's card describes one id of another library, so its example episode cannot be
written by hand for every id: it is played on first read of `source.card` (`LazyCard`), from a
fixed seed, on a string env of its own (never one of the source's pooled envs) and on a private
copy of the global random state (so reading a card changes no episode). Each message is clipped
to `MAX_EXAMPLE_CHARS` (marked), and episodes are cached per process by the source's
`_example_key()`, so building a card again costs nothing and `import llm_gym` or making a source
costs nothing either. A source whose example cannot be played (the bridged env raises) gets an
empty one and a `RuntimeWarning`, which `llm-gym check`'s card row reports.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Callable, Hashable

from llm_gym.env_source import EnvCard
from llm_gym.wrappers.from_text import _OPTION_DOCS

__all__ = ["EXAMPLE_SEED", "LazyCard", "MAX_EXAMPLE_CHARS", "clip", "from_text_knobs", "message",
           "play_example"]

EXAMPLE_SEED = 0
MAX_EXAMPLE_CHARS = 700
_EXAMPLES: dict[Hashable, list[dict[str, str]]] = {}
# FromText's options a bridge card documents (the rest are wiring: reward_range, seed_bits, ...).
FROM_TEXT_KNOBS = ("system_prompt", "dedupe_history", "invalid_action_reward", "max_action_chars",
                   "max_context_tokens", "on_env_error")


def from_text_knobs(**overrides: str) -> dict[str, str]:
    """Card entries for the `FromText` options every string-env bridge passes through."""
    return {name: overrides.get(name, _OPTION_DOCS[name]) for name in FROM_TEXT_KNOBS}


def clip(text: Any, limit: int = MAX_EXAMPLE_CHARS) -> str:
    """`text` stripped; when longer than `limit` characters, its head and its tail (where a
    game's board usually is) around a marker saying how many characters were left out."""
    text = str(text).strip()
    if len(text) <= limit:
        return text
    head, tail = text[: limit * 11 // 20].rstrip(), text[-(limit * 9 // 20):].lstrip()
    return f"{head}\n[... {len(text) - len(head) - len(tail)} characters left out ...]\n{tail}"


def message(role: str, content: Any) -> dict[str, str]:
    return {"role": role, "content": clip(content)}


class LazyCard:
    """The `card` attribute of a bridge source.

    On the class it is the generic card it was given; an instance sets its own card without an
    example (`self.card = ...`), and reading `self.card` returns that card with `example_episode`
    filled in by the instance's `_example_episode()` (cached per process by `_example_key()`)."""

    def __init__(self, generic: EnvCard) -> None:
        self.generic = generic

    def __get__(self, obj: Any, owner: type | None = None) -> EnvCard:
        if obj is None:
            return self.generic
        card = obj.__dict__.get("_card_with_example")
        if card is not None:
            return card
        base = obj.__dict__.get("_card_base")
        if base is None:
            return self.generic
        key = obj._example_key()
        episode = _EXAMPLES.get(key)
        if episode is None:
            try:
                episode = [m for m in obj._example_episode() if m["content"]]
            except Exception as exc:  # the bridged env failed: the card stays usable
                warnings.warn(f"{base.id}: could not play the card's example episode: "
                              f"{type(exc).__name__}: {exc}", RuntimeWarning, stacklevel=2)
                episode = []
            _EXAMPLES[key] = episode
        card = dataclasses.replace(base, example_episode=[dict(m) for m in episode])
        obj.__dict__["_card_with_example"] = card
        return card

    def __set__(self, obj: Any, card: EnvCard) -> None:
        obj.__dict__["_card_base"] = card
        obj.__dict__.pop("_card_with_example", None)


def play_example(
    env: Any,
    first: Any,
    reply: Callable[[Any, int], str | None],
    *,
    max_replies: int = 2,
    system_prompt: str | None = None,
    to_text: Callable[[Any], str] = str,
) -> list[dict[str, str]]:
    """A short episode of string env `env` whose reset gave observation `first`: up to
    `max_replies` assistant turns, each `reply(env, turn)` (None: stop), each followed by the
    env's next observation while the episode goes on (the episode ends on an assistant turn)."""
    episode = [message("system", system_prompt)] if system_prompt else []
    episode.append(message("user", to_text(first)))
    for turn in range(max_replies):
        move = reply(env, turn)
        if move is None:
            break
        episode.append(message("assistant", move))
        obs, _reward, terminated, truncated, _info = env.step(move)
        if terminated or truncated or turn == max_replies - 1:
            break
        episode.append(message("user", to_text(obs)))
    return episode
