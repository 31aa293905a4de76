"""Token-sequence spaces: what a language-model environment observes and acts with.

`TokenSequence(vocab_size)` is a `gymnasium.spaces.Sequence(Discrete(vocab_size), stack=True)`:
its elements are 1-D int64 numpy arrays of any length whose ids lie in `0..vocab_size-1`. It is a
real `Sequence` subclass, so Gymnasium's env checker, vector batching (`batch_space` turns it into a
`Tuple` of per-env sequences) and other libraries that know `Sequence` treat it natively; it only
replaces the per-token Python loops of `contains` and `sample` with numpy operations, and bounds
`sample()` lengths with `max_length`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.spaces import Discrete, Sequence, Space, Text
from gymnasium.vector.utils import batch_space

from llm_gym.tokenizers import vocab_size_of

__all__ = ["FreeText", "TokenSequence", "token_space_for"]

DEFAULT_SAMPLE_MAX_LENGTH = 64


class TokenSequence(Sequence):
    """Variable-length sequences of token ids in `0..vocab_size-1`, as 1-D int64 numpy arrays.

    Args:
        vocab_size: number of token ids (`llm_gym.tokenizers.vocab_size_of(tokenizer)`).
        max_length: the longest sequence `sample()` draws. Membership (`contains`) does not check
            length: a prompt or a model response may be as long as the model's context allows.
        seed: seeds the space's generator (`sample`).

    `x in space` is true for a 1-D integer array (or a list/tuple of ints) whose ids are all in
    range; an empty sequence is a member. The check is vectorised: one pass of numpy reductions,
    no per-token Python work.
    """

    def __init__(
        self,
        vocab_size: int,
        max_length: int = DEFAULT_SAMPLE_MAX_LENGTH,
        seed: int | np.random.Generator | None = None,
    ) -> None:
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, (int, np.integer)) or vocab_size < 1:
            raise ValueError(f"vocab_size must be a positive int, got {vocab_size!r}")
        if isinstance(max_length, bool) or not isinstance(max_length, (int, np.integer)) or max_length < 0:
            raise ValueError(f"max_length must be a non-negative int, got {max_length!r}")
        self.vocab_size = int(vocab_size)
        self.max_length = int(max_length)
        # `stack=True` semantics, but the batched copy of the feature space that `Sequence` builds
        # for it (a `MultiDiscrete` with a deep copy of a freshly seeded generator, ~0.1 ms, most
        # of an env's construction) is made on first use: only `iterate`/`to_jsonable`/
        # `from_jsonable`/`flatten` need it, and none of them samples from it.
        super().__init__(Discrete(self.vocab_size), seed=seed, stack=False)
        self.stack = True

    @property
    def stacked_feature_space(self) -> Space[Any]:  # type: ignore[override]
        """`batch_space(feature_space, 1)`, as `Sequence(stack=True)` has it (built lazily)."""
        stacked = self.__dict__.get("_stacked_feature_space")
        if stacked is None:
            stacked = self._stacked_feature_space = batch_space(self.feature_space, 1)
        return stacked

    @stacked_feature_space.setter
    def stacked_feature_space(self, value: Space[Any]) -> None:
        self._stacked_feature_space = value

    @classmethod
    def for_tokenizer(cls, tokenizer: Any, max_length: int = DEFAULT_SAMPLE_MAX_LENGTH) -> "TokenSequence":
        """The token space of `tokenizer` (its vocabulary size counts added tokens)."""
        return cls(vocab_size_of(tokenizer), max_length=max_length)

    # --- membership --------------------------------------------------------------------------
    def contains(self, x: Any) -> bool:
        """True when `x` is a 1-D sequence of integer ids, each in `0..vocab_size-1`."""
        if isinstance(x, np.ndarray):
            arr = x
        elif isinstance(x, (list, tuple)):
            try:
                arr = np.asarray(x)
            except (ValueError, TypeError, OverflowError):
                return False
        else:
            return False
        if arr.ndim != 1:
            return False
        if arr.size == 0:
            # np.asarray([]) is float64; an empty list is still the empty sequence.
            return arr.dtype.kind in "iuf" or arr.dtype == object
        if arr.dtype.kind not in "iu":
            return False
        return bool(arr.min() >= 0) and bool(arr.max() < self.vocab_size)

    # --- sampling -----------------------------------------------------------------------------
    def sample(
        self,
        mask: tuple[None | int | np.ndarray, Any] | None = None,
        probability: tuple[None | int | np.ndarray, Any] | None = None,
    ) -> np.ndarray:
        """A random int64 token array.

        The length is uniform in `0..max_length` unless the first element of `mask` /
        `probability` fixes it (an int, or an array of allowed lengths, as for `Sequence`); token
        ids are uniform over the vocabulary unless the second element is a `Discrete` mask or
        probability vector of length `vocab_size`.
        """
        if mask is not None and probability is not None:
            raise ValueError("pass either mask or probability to TokenSequence.sample, not both")
        length_spec, values_spec, kind = None, None, None
        if mask is not None:
            length_spec, values_spec, kind = mask[0], mask[1], "mask"
        elif probability is not None:
            length_spec, values_spec, kind = probability[0], probability[1], "probability"
        if length_spec is None:
            length = int(self.np_random.integers(0, self.max_length + 1))
        else:
            # gymnasium annotates np.integer, and takes a Python int alike (np.issubdtype)
            length = int(self.generate_sample_length(length_spec, kind))  # pyright: ignore[reportArgumentType]
        if values_spec is None:
            return self.np_random.integers(0, self.vocab_size, size=length, dtype=np.int64)
        values_spec = np.asarray(values_spec)
        if values_spec.shape != (self.vocab_size,):
            raise ValueError(
                f"the token {kind} must have shape ({self.vocab_size},), got {values_spec.shape}"
            )
        if kind == "mask":
            allowed = np.flatnonzero(values_spec)
            if allowed.size == 0:
                raise ValueError("the token mask allows no token id; allow at least one")
            return allowed[self.np_random.integers(0, allowed.size, size=length)].astype(np.int64)
        return self.np_random.choice(self.vocab_size, size=length, p=values_spec).astype(np.int64)

    # --- identity ----------------------------------------------------------------------------
    def __repr__(self) -> str:
        return f"TokenSequence(vocab_size={self.vocab_size}, max_length={self.max_length})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, TokenSequence)
            and self.vocab_size == other.vocab_size
            and self.max_length == other.max_length
        )


def token_space_for(tokenizer: Any, max_length: int = DEFAULT_SAMPLE_MAX_LENGTH) -> TokenSequence:
    """Shorthand for `TokenSequence.for_tokenizer(tokenizer, max_length)`."""
    return TokenSequence.for_tokenizer(tokenizer, max_length=max_length)


class FreeText(Text):
    """Any Python string of at most `max_length` characters (`gymnasium.spaces.Text` without the
    charset restriction on membership; `sample()` still draws from `charset`)."""

    def __init__(self, max_length: int = 1 << 20, *, min_length: int = 0, seed: Any = None) -> None:
        super().__init__(max_length=max_length, min_length=min_length, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"FreeText(max_length={self.max_length})"
