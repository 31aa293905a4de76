"""The `Renderer` contract: chat messages ⇄ tokens for one model family.

A renderer builds the prompt a policy continues (`build_generation_prompt`), says where sampling
stops (`get_stop_sequences`), parses sampled tokens back into a message with a `ParseTermination`,
and builds supervised examples with per-token loss weights for SFT.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from typing import Any, Sequence, TypedDict

from llm_gym.model_input import ModelInput
from llm_gym.tokenizers import vocab_size_of


class Message(TypedDict, total=False):
    """A chat message: `role` ("system", "user", "assistant", "tool") and text `content`."""

    role: str
    content: str


def get_text_content(message: Message | dict) -> str:
    """The text of a message; list-of-parts content keeps only its text parts."""
    content = message.get("content", "")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p.get("text", "") if isinstance(p, dict) else str(p) for p in content
        )
    raise TypeError(f"message content must be a str or a list of parts, got {type(content).__name__}")


def ensure_text(content: Any) -> str:
    """Return `content` if it is text; raise a TypeError naming what it was otherwise."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return get_text_content({"content": content})
    raise TypeError(f"expected text content, got {type(content).__name__}")


class ParseTermination(enum.Enum):
    """How a sampled response ended. Truthy when the response parsed cleanly, so cookbook code
    written as `message, ok = renderer.parse_response(tokens)` keeps working."""

    STOP_SEQUENCE = "stop_sequence"  # ended on one of the renderer's stop sequences
    EOS = "eos"  # ended on the tokenizer's end-of-sequence token
    LENGTH = "length"  # no stop: ran out of tokens (truncated)
    MALFORMED = "malformed"  # invalid token ids or otherwise unparseable

    def __bool__(self) -> bool:
        return self in (ParseTermination.STOP_SEQUENCE, ParseTermination.EOS)


class TrainOnWhat(str, enum.Enum):
    LAST_ASSISTANT_MESSAGE = "last_assistant_message"
    ALL_ASSISTANT_MESSAGES = "all_assistant_messages"


def validate_messages(messages: Sequence[Message]) -> None:
    if not isinstance(messages, (list, tuple)):
        raise TypeError(f"messages must be a list of dicts, got {type(messages).__name__}")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or "role" not in m or "content" not in m:
            raise ValueError(f"message {i} must be a dict with 'role' and 'content', got {m!r}")


class Renderer(ABC):
    """Turns messages into tokens and sampled tokens back into messages for one tokenizer."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self._vocab_size = vocab_size_of(tokenizer)

    @abstractmethod
    def build_generation_prompt(
        self, messages: Sequence[Message], role: str = "assistant", prefill: str | None = None
    ) -> ModelInput: ...

    @abstractmethod
    def get_stop_sequences(self) -> list[int] | list[str]: ...

    @abstractmethod
    def parse_response(self, tokens: Sequence[int]) -> tuple[Message, ParseTermination]: ...

    @abstractmethod
    def build_supervised_example(
        self,
        messages: Sequence[Message],
        train_on_what: TrainOnWhat = TrainOnWhat.LAST_ASSISTANT_MESSAGE,
    ) -> tuple[ModelInput, list[float]]:
        """Return the whole conversation's tokens and a loss weight per token (1 on trained
        assistant tokens, including their end-of-turn token; 0 elsewhere)."""

    # --- shared helpers ---------------------------------------------------------------------
    def _split_valid(self, tokens: Sequence[int]) -> tuple[list[int], bool]:
        """Drop ids outside the vocabulary; report whether any were dropped."""
        limit = self._vocab_size
        valid = [int(t) for t in tokens if isinstance(t, (int,)) or hasattr(t, "__index__")]
        valid = [t for t in valid if 0 <= t < limit]
        return valid, len(valid) != len(tokens)

    def _decode(self, tokens: Sequence[int]) -> str:
        return self.tokenizer.decode(list(tokens), skip_special_tokens=False)
