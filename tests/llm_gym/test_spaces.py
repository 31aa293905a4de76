"""TokenSequence / FreeText spaces: membership, sampling, seeding, Gymnasium batching."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.spaces import Sequence, Tuple
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from llm_gym.spaces import FreeText, TokenSequence, token_space_for
from llm_gym.tokenizers import ByteTokenizer


class NoIterArray(np.ndarray):
    """An array that fails if anything iterates it token by token in Python."""

    def __iter__(self):
        raise AssertionError("per-token Python iteration in contains()")

    def tolist(self):
        raise AssertionError("per-token Python conversion in contains()")


def test_is_a_stacked_gymnasium_sequence_of_the_tokenizer_vocab():
    space = token_space_for(ByteTokenizer())
    assert isinstance(space, Sequence) and space.stack
    assert space.vocab_size == 261 and space.feature_space.n == 261
    assert space == TokenSequence(261) and space != TokenSequence(262)
    assert "vocab_size=261" in repr(space)


@pytest.mark.parametrize(
    "x, member",
    [
        (np.array([0, 5, 260], dtype=np.int64), True),
        (np.array([0, 5, 260], dtype=np.int32), True),
        (np.array([1], dtype=np.uint8), True),
        (np.zeros(0, dtype=np.int64), True),
        ([], True),
        ([1, 2, 3], True),
        ((1, 2, 3), True),
        (np.array([261]), False),
        (np.array([-1, 3]), False),
        (np.array([1.0, 2.0]), False),
        (np.array([[1, 2]]), False),
        (np.array(5), False),
        ([1, "a"], False),
        ([[1], [2, 3]], False),
        ("abc", False),
        (None, False),
        (np.array([True, False]), False),
    ],
)
def test_contains(x, member):
    assert (x in TokenSequence(261)) is member


def test_contains_is_vectorised():
    tokens = np.random.default_rng(0).integers(0, 261, 4096).view(NoIterArray)
    space = TokenSequence(261)
    assert tokens in space
    bad = tokens.copy()
    bad[4000] = 261
    assert bad not in space


def test_sample_bounds_dtype_and_seeding():
    space = TokenSequence(300, max_length=16, seed=7)
    samples = [space.sample() for _ in range(200)]
    assert all(s.dtype == np.int64 and s.ndim == 1 and len(s) <= 16 and s in space for s in samples)
    assert {len(s) for s in samples} >= {0, 16}  # lengths cover 0..max_length
    again = TokenSequence(300, max_length=16, seed=7)
    assert all(np.array_equal(s, again.sample()) for s in samples)


def test_sample_masks_and_probabilities():
    space = TokenSequence(10, seed=0)
    assert len(space.sample(mask=(5, None))) == 5
    allowed = np.zeros(10, dtype=np.int8)
    allowed[[2, 7]] = 1
    assert set(space.sample(mask=(50, allowed)).tolist()) == {2, 7}
    p = np.zeros(10)
    p[3] = 1.0
    assert space.sample(probability=(np.array([4]), p)).tolist() == [3, 3, 3, 3]
    with pytest.raises(ValueError, match="shape"):
        space.sample(mask=(3, np.ones(4, dtype=np.int8)))
    with pytest.raises(ValueError, match="no token"):
        space.sample(mask=(3, np.zeros(10, dtype=np.int8)))


@pytest.mark.parametrize("vocab, max_length", [(0, 4), (True, 4), (3.5, 4), (10, -1)])
def test_constructor_validates(vocab, max_length):
    with pytest.raises(ValueError):
        TokenSequence(vocab, max_length=max_length)


def test_gymnasium_batches_token_sequences_as_tuples():
    space = TokenSequence(261, seed=0)
    batched = batch_space(space, 3)
    assert isinstance(batched, Tuple) and len(batched) == 3
    assert all(sub == space for sub in batched)
    items = (np.array([1, 2]), np.array([], dtype=np.int64), np.array([3]))
    out = concatenate(space, items, create_empty_array(space, 3))
    assert isinstance(out, tuple) and out in batched
    assert [x.tolist() for x in iterate(batched, out)] == [[1, 2], [], [3]]


def test_json_round_trip():
    space = TokenSequence(261, seed=1)
    samples = [space.sample() for _ in range(3)]
    back = space.from_jsonable(space.to_jsonable(samples))
    assert all(np.array_equal(a, b) for a, b in zip(samples, back))


def test_free_text_accepts_any_string():
    space = FreeText(max_length=24, seed=0)
    assert "<|im_start|>user\n½ + ü" in space
    assert "x" * 25 not in space and b"abc" not in space and 3 not in space
    assert space.sample() in space
