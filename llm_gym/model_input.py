"""Token sequences handed to a policy: `ModelInput`, the cookbook's name for a prompt.

Tinker's `ModelInput` is a list of chunks (text tokens, images). llm-gym is text-only, so a
`ModelInput` is an immutable tuple of token ids that still answers to the cookbook's names
(`from_ints`, `to_ints`, `length`, `empty`, `append`, `append_int`, `chunks`), so environment code
written for the cookbook keeps working after an import switch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence


@dataclass(frozen=True)
class EncodedTextChunk:
    """A run of text token ids (the only chunk kind llm-gym has)."""

    tokens: Sequence[int]

    @property
    def length(self) -> int:
        return len(self.tokens)


class ModelInput:
    """An immutable sequence of token ids.

    Build with `ModelInput.from_ints(tokens=[...])`, read back with `to_ints()`; `length` is a
    property, as in the cookbook. Equality and hashing are by token ids.
    """

    __slots__ = ("_tokens",)

    def __init__(self, tokens: Iterable[int] = ()) -> None:
        self._tokens: tuple[int, ...] = tuple(int(t) for t in tokens)

    @classmethod
    def from_ints(cls, tokens: Iterable[int]) -> "ModelInput":
        return cls(tokens)

    @classmethod
    def empty(cls) -> "ModelInput":
        return _EMPTY

    def to_ints(self) -> list[int]:
        return list(self._tokens)

    @property
    def tokens(self) -> tuple[int, ...]:
        return self._tokens

    @property
    def length(self) -> int:
        return len(self._tokens)

    @property
    def chunks(self) -> list[EncodedTextChunk]:
        return [EncodedTextChunk(tokens=list(self._tokens))] if self._tokens else []

    def append(self, chunk: EncodedTextChunk | "ModelInput" | Sequence[int]) -> "ModelInput":
        """Return a new ModelInput with `chunk` (a chunk, a ModelInput or token ids) appended."""
        if isinstance(chunk, ModelInput):
            extra: Sequence[int] = chunk._tokens
        elif isinstance(chunk, EncodedTextChunk):
            extra = chunk.tokens
        else:
            extra = chunk
        return ModelInput(self._tokens + tuple(int(t) for t in extra))

    def append_int(self, token: int) -> "ModelInput":
        return ModelInput(self._tokens + (int(token),))

    def __len__(self) -> int:
        return len(self._tokens)

    def __iter__(self):
        return iter(self._tokens)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ModelInput):
            return self._tokens == other._tokens
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._tokens)

    def __repr__(self) -> str:
        head = list(self._tokens[:8])
        more = "..." if len(self._tokens) > 8 else ""
        return f"ModelInput(length={len(self._tokens)}, tokens={head}{more})"

    def __reduce__(self):
        return (ModelInput, (self._tokens,))


_EMPTY = ModelInput(())
