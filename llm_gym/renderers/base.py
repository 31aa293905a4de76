"""The `Renderer` contract: chat messages ⇄ tokens for one model family.

A renderer builds the prompt a policy continues (`build_generation_prompt`), says where sampling
stops (`get_stop_sequences`), parses sampled tokens back into a message with a `ParseTermination`,
and builds supervised examples with per-token loss weights for SFT.
"""

from __future__ import annotations

import array
import enum
import operator
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
    """Return `content` as text: a str as is, a list of parts only if every part is text
    (`{"type": "text", "text": ...}` or a str). Anything else (images, other objects) raises."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and part.get("type", "text") == "text" and "text" in part:
                texts.append(part["text"])
            else:
                raise ValueError(f"expected text-only content, got a non-text part {part!r:.80}")
        return "".join(texts)
    raise TypeError(f"expected text content (str or list of text parts), got {type(content).__name__}")


class ParseTermination(str, enum.Enum):
    """How a sampled response ended. Truthy when the response parsed cleanly (`is_clean`), so
    cookbook code written as `message, ok = renderer.parse_response(tokens)` keeps working; it also
    compares equal to its string value ("stop_sequence", "eos", ...), like the cookbook's StrEnum."""

    STOP_SEQUENCE = "stop_sequence"  # ended on one of the renderer's stop sequences (end of turn)
    EOS = "eos"  # ended on the tokenizer's end-of-sequence token (and it is not the end of turn)
    LENGTH = "length"  # no stop: ran out of tokens (truncated)
    MALFORMED = "malformed"  # invalid token ids or otherwise unparseable

    @property
    def is_clean(self) -> bool:
        return self is ParseTermination.STOP_SEQUENCE or self is ParseTermination.EOS

    @property
    def is_stop_sequence(self) -> bool:
        return self is ParseTermination.STOP_SEQUENCE

    def __bool__(self) -> bool:
        return self.is_clean

    def __str__(self) -> str:
        return self.value


class TrainOnWhat(str, enum.Enum):
    LAST_ASSISTANT_MESSAGE = "last_assistant_message"
    ALL_ASSISTANT_MESSAGES = "all_assistant_messages"


def trained_messages(messages: Sequence[Message], train_on_what: TrainOnWhat) -> list[bool]:
    """Per message: does a supervised example put loss weight on its content?"""
    assistant = [m["role"] == "assistant" for m in messages]
    if train_on_what == TrainOnWhat.ALL_ASSISTANT_MESSAGES:
        return assistant
    last = max((i for i, a in enumerate(assistant) if a), default=-1)
    return [i == last for i in range(len(messages))]


def validate_messages(messages: Sequence[Message]) -> None:
    if not isinstance(messages, (list, tuple)):
        raise TypeError(f"messages must be a list of dicts, got {type(messages).__name__}")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or "role" not in m or "content" not in m:
            raise ValueError(f"message {i} must be a dict with 'role' and 'content', got {m!r}")
        if not isinstance(m["role"], str):
            raise TypeError(f"message {i}: role must be a str, got {type(m['role']).__name__}")
        if not isinstance(m["content"], (str, list)):
            raise TypeError(
                f"message {i}: content must be a str (or a list of text parts), got "
                f"{type(m['content']).__name__}"
            )


def first_index(tokens: list[int], stops: Sequence[int]) -> tuple[int, int | None]:
    """(position, stop id) of the first occurrence of any id in `stops`, or (len, None).
    One C-level `list.index` scan per stop id, no Python work per token."""
    best, which = len(tokens), None
    for stop in stops:
        if stop in tokens:  # C-level scan; avoids raising ValueError for absent stops
            pos = tokens.index(stop)
            if pos < best:
                best, which = pos, stop
    return best, which


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
        """Drop ids outside the vocabulary (and non-integers); report whether any were dropped.

        Sampled tokens are nearly always valid, so that case costs a few C-level passes and no
        Python work per token."""
        if isinstance(tokens, (str, bytes, bytearray)):
            raise TypeError(
                f"parse_response expects sampled token ids, got {type(tokens).__name__}; "
                "pass the list of ints the policy sampled"
            )
        if not isinstance(tokens, list):
            tolist = getattr(tokens, "tolist", None)
            tokens = tolist() if tolist is not None and getattr(tokens, "ndim", None) == 1 else list(tokens)
        limit = self._vocab_size
        try:  # array('Q') rejects negatives and non-integers in one C pass
            ids = array.array("Q", tokens)
        except (TypeError, OverflowError):
            pass
        else:
            if not ids or max(ids) < limit:
                return ids.tolist(), False
            return [t for t in ids.tolist() if t < limit], True
        valid = []
        for t in tokens:
            if type(t) is bool:
                continue
            try:
                i = operator.index(t)
            except TypeError:
                continue
            if 0 <= i < limit:
                valid.append(i)
        return valid, len(valid) != len(tokens)

    def _parse_at_stop_ids(
        self, tokens: Sequence[int], stops: Sequence[int], turn_ends: Sequence[int]
    ) -> tuple[Message, ParseTermination]:
        """`parse_response` for renderers that stop on token ids: cut at the first id in `stops`
        (one in `turn_ends` -> STOP_SEQUENCE, any other, i.e. EOS -> EOS; none -> LENGTH; ids
        outside the vocabulary dropped -> MALFORMED) and decode the rest without special tokens."""
        valid, had_invalid = self._split_valid(tokens)
        cut, which = first_index(valid, stops)
        if which is None:
            termination = ParseTermination.LENGTH
        else:
            valid = valid[:cut]
            termination = (
                ParseTermination.STOP_SEQUENCE if which in turn_ends else ParseTermination.EOS
            )
        if had_invalid:
            termination = ParseTermination.MALFORMED
        text = self.tokenizer.decode(valid, skip_special_tokens=True)
        return Message(role="assistant", content=text), termination
