"""Shared helpers for catalog families: knob validation, the train/test split rule, child seeds,
and `TurnContinuation`, which builds multi-turn observations with the prefix property.

Prefix property: the observation of turn t+1 starts with the observation of turn t followed by
the action tokens the policy sampled, token for token. Then the trainer can turn a whole
multi-turn trajectory into one datum (`llm_gym.rl.data_processing.trajectory_to_data`). Re-rendering
the conversation from text would break this whenever the sampled tokens are not the canonical
tokenization of their text, or when the action was truncated; appending tokens never does.
"""

from __future__ import annotations

import zlib
from typing import Any, Sequence

import numpy as np

from llm_gym.model_input import ModelInput
from llm_gym.renderers import ChatMLRenderer, Message, Renderer, RoleColonRenderer
from llm_gym.renderers.role_colon import STOP_TEXT as ROLE_COLON_STOP_TEXT

TEST_SPLIT_MODULUS = 10  # 1 task in 10 (by hash) is held out for split="test"
_MAX_CACHED_TAILS = 1024
_JUST_INT = {int}


def hash_key(key: str) -> int:
    """A stable 32-bit hash of `key` (CRC-32; Python's `hash` is salted per process)."""
    return zlib.crc32(key.encode("utf-8"))


def split_of(key: str) -> str:
    """"test" for about one key in ten, else "train"; a pure function of `key` (CRC-32), so
    the two splits are disjoint and stable across processes and Python versions."""
    return "test" if hash_key(key) % TEST_SPLIT_MODULUS == 0 else "train"


def child_seed(rng: np.random.Generator) -> int:
    """A seed for an episode's own generator, drawn from the source's `rng` (so episodes are
    reproducible from the seed the user passed to `reset`)."""
    return int(rng.integers(0, 2**63 - 1))


def check_int(name: str, value: Any, low: int, high: int) -> int:
    """`value` as an int in [low, high], else a ValueError/TypeError naming knob and range."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer in [{low}, {high}], got {value!r}")
    if not low <= int(value) <= high:
        raise ValueError(f"{name} must be in [{low}, {high}], got {value!r}")
    return int(value)


def check_float(name: str, value: Any, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise TypeError(f"{name} must be a number in [{low}, {high}], got {value!r}")
    if not low <= float(value) <= high:
        raise ValueError(f"{name} must be in [{low}, {high}], got {value!r}")
    return float(value)


def check_choice(name: str, value: Any, choices: Sequence[Any]) -> Any:
    """`value` if it is one of `choices` (same type too: True is not 1), else a ValueError."""
    if not any(type(value) is type(c) and value == c for c in choices):
        raise ValueError(f"{name} must be one of {list(choices)!r}, got {value!r}")
    return value


class TurnContinuation:
    """Builds multi-turn observations for one renderer, keeping the prefix property.

    `first(messages)` is the renderer's own generation prompt. `next(prev_ob, action, user_text)`
    returns `prev_ob + action + [end of the assistant turn, if the action lacks it] + the new
    user turn + the assistant header`. Supported: `ChatMLRenderer` (the default; end of turn is the
    `<|im_end|>` id) and `RoleColonRenderer` (end of turn is the text "\\n\\nUser:"). Other
    renderers raise a `NotImplementedError` naming these two, at construction.
    """

    def __init__(self, renderer: Renderer) -> None:
        self.renderer = renderer
        tok = renderer.tokenizer
        if isinstance(renderer, ChatMLRenderer):
            self._kind = "chatml"
            self._end_of_turn = [renderer.im_end]
            self._after_end = tok.encode("\n", add_special_tokens=False)
            self._user_header = [renderer.im_start] + tok.encode("user\n", add_special_tokens=False)
            self._assistant_header = [renderer.im_end] + tok.encode("\n", add_special_tokens=False)
            self._assistant_header += [renderer.im_start] + tok.encode(
                "assistant\n", add_special_tokens=False
            )
        elif isinstance(renderer, RoleColonRenderer):
            self._kind = "role_colon"
            self._user_prefix = {  # the tokens before the user text, by how the action ended
                "stop": [],
                "blank": tok.encode("User:", add_special_tokens=False),
                "other": tok.encode("\n\n", add_special_tokens=False)
                + tok.encode("User:", add_special_tokens=False),
            }
        else:
            raise NotImplementedError(
                f"multi-turn catalog envs build prefix-extending observations for the 'chatml' and "
                f"'role_colon' renderers; got {type(renderer).__name__}. Pass renderer='chatml' "
                "(tokenizers with <|im_start|>/<|im_end|>) or renderer='role_colon'."
            )
        # Tokens that follow the action for a given user text (games repeat a few texts, such
        # as "Higher." and "Lower."); bounded, cleared when full.
        self._tails: dict[str, list[int]] = {}
        # `(prev_ob, ob)` of the last `next` call: `ob` is `prev_ob` plus tokens. `TextEnv` reads
        # it (checking both by identity) to append only the new tokens to its observation buffer.
        self.last_extension: tuple[ModelInput, ModelInput] | None = None

    def _user_turn(self, user_text: str) -> list[int]:
        """The tokens of the new user turn and the assistant header (cached per text); for
        chatml they start after the end-of-turn id, for role_colon after the "User:" header."""
        tail = self._tails.get(user_text)
        if tail is None:
            tok = self.renderer.tokenizer
            if self._kind == "chatml":
                tail = self._after_end + self._user_header
                tail += tok.encode(user_text, add_special_tokens=False) + self._assistant_header
            else:
                tail = tok.encode(" " + user_text + "\n\n", add_special_tokens=False)
                tail += tok.encode("Assistant:", add_special_tokens=False)
            if len(self._tails) >= _MAX_CACHED_TAILS:
                self._tails.clear()
            self._tails[user_text] = tail
        return tail

    def first(self, messages: Sequence[Message]) -> ModelInput:
        return self.renderer.build_generation_prompt(list(messages))

    def next(self, prev_ob: ModelInput, action: Sequence[int], user_text: str) -> ModelInput:
        """The observation after `action`, with a new user turn `user_text`. Callers must not
        pass actions holding out-of-vocabulary ids (end the episode instead)."""
        if type(action) is not list or set(map(type, action)) != _JUST_INT:
            action = [int(t) for t in action]
        if self._kind == "chatml":
            if not action or action[-1] != self._end_of_turn[0]:
                ob = prev_ob.append(action + self._end_of_turn + self._user_turn(user_text))
            else:
                ob = prev_ob.append(action + self._user_turn(user_text))
            self.last_extension = (prev_ob, ob)
            return ob
        tok = self.renderer.tokenizer
        # role_colon: the stop text "\n\nUser:" doubles as the next user header; pieces are
        # encoded as the renderer encodes them (header "User:", body " text\n\n").
        text = tok.decode(action, skip_special_tokens=True) if action else ""
        eos = getattr(tok, "eos_token_id", None)
        ended_by_eos = bool(action) and action[-1] == eos
        if text.endswith(ROLE_COLON_STOP_TEXT) and not ended_by_eos:
            prefix = self._user_prefix["stop"]
        elif text.endswith("\n\n") and not ended_by_eos:
            prefix = self._user_prefix["blank"]
        else:
            prefix = self._user_prefix["other"]
        ob = prev_ob.append(action + prefix + self._user_turn(user_text))
        self.last_extension = (prev_ob, ob)
        return ob
