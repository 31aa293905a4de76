"""ModelInput: the cookbook's prompt type, as validated immutable token ids."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, strategies as st

import llm_gym
from llm_gym.model_input import EncodedTextChunk, ModelInput


def test_exported_at_top_level():
    assert llm_gym.ModelInput is ModelInput


def test_from_ints_round_trip_and_cookbook_names():
    mi = ModelInput.from_ints(tokens=[5, 6, 7])
    assert mi.to_ints() == [5, 6, 7]
    assert mi.length == 3 and len(mi) == 3
    assert list(mi) == [5, 6, 7]
    assert mi.tokens == (5, 6, 7)
    assert mi.chunks == [EncodedTextChunk(tokens=[5, 6, 7])]
    assert mi.chunks[0].length == 3


def test_empty():
    e = ModelInput.empty()
    assert e.length == 0 and e.to_ints() == [] and e.chunks == []
    assert e == ModelInput.from_ints([])


def test_append_returns_new_and_leaves_original():
    a = ModelInput.from_ints([1, 2])
    b = a.append(EncodedTextChunk(tokens=[3]))
    c = b.append(ModelInput.from_ints([4])).append([5]).append_int(6)
    assert a.to_ints() == [1, 2]
    assert b.to_ints() == [1, 2, 3]
    assert c.to_ints() == [1, 2, 3, 4, 5, 6]


def test_source_list_mutation_does_not_leak_in():
    src = [1, 2, 3]
    mi = ModelInput.from_ints(src)
    src.append(4)
    assert mi.to_ints() == [1, 2, 3]
    out = mi.to_ints()
    out.append(9)
    assert mi.length == 3


def test_equality_hash_pickle():
    a, b = ModelInput.from_ints([1, 2]), ModelInput.from_ints((1, 2))
    assert a == b and hash(a) == hash(b)
    assert a != ModelInput.from_ints([2, 1])
    assert {a: 1}[b] == 1
    assert pickle.loads(pickle.dumps(a)) == a
    assert "length=2" in repr(a)


def test_numpy_and_generators_accepted_as_python_ints():
    mi = ModelInput.from_ints(np.array([3, 4, 5], dtype=np.int64))
    assert mi.to_ints() == [3, 4, 5]
    assert all(type(t) is int for t in mi.tokens)
    assert ModelInput.from_ints([np.int32(7), 8]).to_ints() == [7, 8]
    assert ModelInput.from_ints(x for x in range(3)).to_ints() == [0, 1, 2]


@pytest.mark.parametrize("bad", ["abc", "123", b"abc", bytearray(b"a")])
def test_text_is_rejected_with_a_hint(bad):
    with pytest.raises(TypeError, match="tokenizer"):
        ModelInput.from_ints(bad)


@pytest.mark.parametrize(
    "bad", [[1.0], [1, 2.5], ["1"], [None], [1, [2]], np.array([1.5]), np.array([[1, 2]])]
)
def test_non_integer_ids_are_rejected(bad):
    with pytest.raises(TypeError, match="ints"):
        ModelInput.from_ints(bad)


@pytest.mark.parametrize("bad", [5, None, 3.0, object()])
def test_non_iterables_are_rejected(bad):
    with pytest.raises(TypeError):
        ModelInput.from_ints(bad)


@pytest.mark.parametrize("bad", [[-1], [0, 5, -3], np.array([2, -2])])
def test_negative_ids_are_rejected(bad):
    with pytest.raises(ValueError, match="non-negative"):
        ModelInput.from_ints(bad)


def test_append_validates_too():
    mi = ModelInput.from_ints([1])
    with pytest.raises(TypeError):
        mi.append("x")
    with pytest.raises(ValueError):
        mi.append([-4])
    with pytest.raises(TypeError):
        mi.append_int(2.0)


@given(st.lists(st.integers(min_value=0, max_value=2**40), max_size=200))
def test_round_trip_property(ids):
    mi = ModelInput.from_ints(ids)
    assert mi.to_ints() == ids
    assert mi.length == len(ids)
    assert mi == ModelInput.from_ints(np.array(ids, dtype=np.int64)) if ids else True
