"""`llm_gym.authoring`: the split rule is a fixed function of the key (pinned values, so a change
that would move tasks between splits fails here), knob checks name the knob and the fix, child
seeds come from the generator they are given."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from llm_gym import authoring
from llm_gym.authoring import (
    TEST_SPLIT_MODULUS,
    check_choice,
    check_float,
    check_int,
    child_seed,
    hash_key,
    split_of,
)


def test_hash_key_is_crc32_and_the_split_is_pinned():
    assert hash_key("") == 0 and hash_key("llm-gym") == 500232238
    assert TEST_SPLIT_MODULUS == 10
    assert [k for k in (f"k{i}" for i in range(40)) if split_of(k) == "test"] == [
        "k5", "k14", "k20", "k22", "k28", "k37"]
    shares = [split_of(f"task:{i}") == "test" for i in range(20_000)]
    assert 0.09 < sum(shares) / len(shares) < 0.11


def test_the_split_is_the_same_in_another_process():
    keys = [f"puzzle-{i}" for i in range(200)]
    code = ("import sys; from llm_gym.authoring import split_of; "
            "print(''.join('t' if split_of(k) == 'test' else '.' for k in sys.argv[1:]))")
    env = dict(os.environ, PYTHONHASHSEED="123")  # a different salt for str hashes: no effect
    out = subprocess.run([sys.executable, "-c", code, *keys], capture_output=True, text=True,
                         check=True, timeout=120, env=env).stdout.strip()
    assert out == "".join("t" if split_of(k) == "test" else "." for k in keys)


def test_check_int():
    assert check_int("n", 3, 1, 5) == 3 and type(check_int("n", np.int64(5), 1, 5)) is int
    with pytest.raises(ValueError, match=r"n must be in \[1, 5\], got 6"):
        check_int("n", 6, 1, 5)
    for bad in (True, 2.0, "3", None):
        with pytest.raises(TypeError, match=r"n must be an integer in \[1, 5\]"):
            check_int("n", bad, 1, 5)


def test_check_float():
    assert check_float("p", 1, 0.0, 1.0) == 1.0
    assert type(check_float("p", np.float32(0.5), 0, 1)) is float
    for bad in (1.5, -0.1, float("nan")):
        with pytest.raises(ValueError, match=r"p must be in \[0.0, 1.0\]"):
            check_float("p", bad, 0.0, 1.0)
    for bad in (False, "0.5", None):
        with pytest.raises(TypeError, match=r"p must be a number"):
            check_float("p", bad, 0.0, 1.0)


def test_check_choice_compares_types_too():
    assert check_choice("mode", "easy", ["easy", "hard"]) == "easy"
    assert check_choice("flag", True, [True, False]) is True
    with pytest.raises(ValueError, match=r"mode must be one of \['easy', 'hard'\], got 'medium'"):
        check_choice("mode", "medium", ["easy", "hard"])
    with pytest.raises(ValueError, match="got True"):
        check_choice("n", True, [1, 2])  # True == 1, but it is not the knob's type


def test_child_seed_comes_from_the_generator():
    seeds = [child_seed(np.random.default_rng(7)) for _ in range(2)]
    assert seeds[0] == seeds[1] and 0 <= seeds[0] < 2**63 - 1
    rng = np.random.default_rng(7)
    assert child_seed(rng) != child_seed(rng)


def test_the_public_surface():
    assert sorted(authoring.__all__) == sorted(
        ["TEST_SPLIT_MODULUS", "check_choice", "check_float", "check_int", "child_seed",
         "hash_key", "split_of"])
    for name in authoring.__all__:
        obj = getattr(authoring, name)
        assert name == "TEST_SPLIT_MODULUS" or obj.__doc__, name
