"""`TextEnv.reset(seed=...)` seeding: the stream of `np.random.default_rng(seed)`, cached per seed."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import llm_gym  # noqa: F401
from llm_gym.text_env import seeded_np_random


@pytest.mark.parametrize("seed", [0, 1, 12345, 2**32, 2**64 - 1, 2**100 + 7])
def test_seeded_np_random_matches_gymnasium_fresh_and_reused(seed):
    ref, ref_seed = gym.utils.seeding.np_random(seed)
    expected = ref.integers(0, 2**62, size=8).tolist()
    first, s1 = seeded_np_random(seed)  # a new generator (a miss or a hit without `reuse`)
    assert (s1, first.integers(0, 2**62, size=8).tolist()) == (ref_seed, expected)
    other, _ = seeded_np_random(seed + 1)
    again, s2 = seeded_np_random(seed, reuse=other)  # a hit: re-seeded in place
    assert again is other and s2 == seed
    assert again.integers(0, 2**62, size=8).tolist() == expected


def test_seeded_np_random_rejects_what_gymnasium_rejects():
    with pytest.raises(gym.error.Error):
        seeded_np_random(-1)
    with pytest.raises(gym.error.Error):
        seeded_np_random(1.5)  # type: ignore[arg-type]
    rng, seed = seeded_np_random(None)
    assert isinstance(rng, np.random.Generator) and isinstance(seed, int)


def test_reset_seed_gives_default_rng_task_and_keeps_user_generators():
    env = gym.make("llm/Math-v0")
    source = env.unwrapped.source
    for seed in (3, 4, 3):
        obs, _ = env.reset(seed=seed)
        assert env.unwrapped.np_random_seed == seed
        task = source.make_env(np.random.default_rng(seed)).get_question()
        assert task == env.unwrapped.current_env.get_question()
    mine = np.random.default_rng(99)
    env.unwrapped.np_random = mine
    env.reset(seed=3)
    assert env.unwrapped.np_random is not mine  # a user's generator is replaced, never re-seeded
    assert mine.bit_generator.state == np.random.default_rng(99).bit_generator.state
    env.reset()  # seed=None keeps the generator
    assert env.unwrapped.np_random_seed == 3
