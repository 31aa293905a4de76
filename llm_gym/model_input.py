"""Token sequences handed to a policy: `ModelInput`, the cookbook's name for a prompt.

Tinker's `ModelInput` is a list of chunks (text tokens, images). llm-gym is text-only, so a
`ModelInput` is an immutable tuple of token ids that still answers to the cookbook's names
(`from_ints`, `to_ints`, `length`, `empty`, `append`, `append_int`, `chunks`), so environment code
written for the cookbook keeps working after an import switch. Ids are validated once, at
construction (non-negative integers; `str`/`bytes`/floats are rejected with a `TypeError`), so
everything downstream can trust them.
"""

from __future__ import annotations

import array
import operator
from dataclasses import dataclass
from typing import Any, Iterable, Sequence, cast


def as_token_ids(tokens: object, *, what: str = "token ids") -> tuple[int, ...]:
    """Validate `tokens` (an iterable of non-negative ints, numpy ints or a 1-D integer array) and
    return them as a tuple of Python ints.

    Raises `TypeError` for text (`str`/`bytes`: encode it with a tokenizer first), non-iterables and
    non-integer elements (floats, strings, nested lists), and `ValueError` for negative ids (or ids
    of 2**64 and more). Bools count as the ints 0 and 1, as everywhere in Python.
    """
    if isinstance(tokens, (str, bytes, bytearray)):
        raise TypeError(
            f"{what} must be a sequence of ints, got {type(tokens).__name__} {tokens[:20]!r}; "
            "encode text with a tokenizer first (tokenizer.encode(text))"
        )
    if not isinstance(tokens, (list, tuple)):
        tolist = getattr(tokens, "tolist", None)  # numpy arrays: C-speed conversion
        if tolist is not None and getattr(tokens, "ndim", None) == 1:
            tokens = tolist()
        else:
            try:
                tokens = list(tokens)  # type: ignore[call-overload]
            except TypeError:
                raise TypeError(
                    f"{what} must be a sequence of ints, got {type(tokens).__name__} {tokens!r}"
                ) from None
    seq = cast("list[Any] | tuple[Any, ...]", tokens)  # a list or tuple by now
    # One C-level pass validates everything: array('Q') rejects non-integers (TypeError) and
    # negative ids (OverflowError), and tolist() turns numpy integers into Python ints.
    try:
        ids = tuple(array.array("Q", seq).tolist())
    except TypeError:
        bad = next(t for t in seq if not _is_index(t))
        raise TypeError(f"{what} must be ints, got {type(bad).__name__} {bad!r}") from None
    except OverflowError:
        bad = next(t for t in seq if not 0 <= operator.index(t) < 2**64)
        if operator.index(bad) < 0:
            raise ValueError(f"{what} must be non-negative, got {bad}") from None
        raise ValueError(f"{what}: id {bad} is too large to be a token id") from None
    return ids


def _is_index(x: object) -> bool:
    try:
        operator.index(x)  # type: ignore[arg-type]
    except TypeError:
        return False
    return True


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
    property, as in the cookbook. Equality and hashing are by token ids. Construction rejects text,
    non-integer and negative ids (`TypeError` / `ValueError`).
    """

    __slots__ = ("_tokens",)

    def __init__(self, tokens: Iterable[int] = ()) -> None:
        self._tokens: tuple[int, ...] = as_token_ids(tokens, what="ModelInput tokens")

    @classmethod
    def _trusted(cls, tokens: tuple[int, ...]) -> "ModelInput":
        # Internal: tokens already validated (concatenations of validated inputs).
        obj = object.__new__(cls)
        obj._tokens = tokens
        return obj

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

    def append(self, chunk: EncodedTextChunk | ModelInput | Sequence[int]) -> ModelInput:
        """Return a new ModelInput with `chunk` (a chunk, a ModelInput or token ids) appended."""
        if isinstance(chunk, ModelInput):
            return ModelInput._trusted(self._tokens + chunk._tokens)
        extra = chunk.tokens if isinstance(chunk, EncodedTextChunk) else chunk
        return ModelInput._trusted(self._tokens + as_token_ids(extra, what="appended tokens"))

    def append_int(self, token: int) -> "ModelInput":
        return ModelInput._trusted(self._tokens + as_token_ids((token,), what="appended token"))

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
