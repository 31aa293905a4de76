"""`TextEnv.reset(seed=...)` seeding: `seeded_np_random`'s contract (determinism, distinct streams
for distinct seeds, in-place reuse, no global RNG), not bit-identity with `default_rng(seed)`."""

from __future__ import annotations

import random
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

import llm_gym  # noqa: F401
from llm_gym.text_env import seeded_np_random

SEEDS = [0, 1, 12345, 2**32, 2**63, 2**64 - 1, 2**64, 2**100 + 7, 2**1000 + 3]


def _draws(rng: np.random.Generator) -> list[int]:
    return rng.integers(0, 2**62, size=8).tolist()


@pytest.mark.parametrize("seed", SEEDS)
def test_same_seed_same_stream_fresh_and_reused(seed):
    first, s1 = seeded_np_random(seed)
    assert s1 == seed and isinstance(first.bit_generator, np.random.PCG64)
    expected = _draws(first)
    other, _ = seeded_np_random(seed + 1)
    again, s2 = seeded_np_random(seed, reuse=other)  # re-seeded in place, no new generator
    assert again is other and s2 == seed
    assert _draws(again) == expected
    assert _draws(seeded_np_random(seed)[0]) == expected


def test_stream_is_stable_across_processes():
    code = (
        "from llm_gym.text_env import seeded_np_random as f;"
        "print([f(s)[0].integers(0, 2**62) for s in (0, 7, 2**70)])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    here = [seeded_np_random(s)[0].integers(0, 2**62) for s in (0, 7, 2**70)]
    assert out.stdout.strip() == str(here)


def test_distinct_seeds_give_distinct_streams():
    seeds = list(range(10_000)) + [2**64 - 1 - i for i in range(100)] + SEEDS
    seeds = sorted(set(seeds))
    states, firsts = set(), set()
    rng, _ = seeded_np_random(0)
    for seed in seeds:
        rng, _ = seeded_np_random(seed, reuse=rng)
        states.add(rng.bit_generator.state["state"]["state"])
        firsts.add(int(rng.integers(0, 2**63)))
    assert len(states) == len(seeds) and len(firsts) == len(seeds)


def test_no_global_random_state_is_touched():
    np_state, py_state = np.random.get_state(), random.getstate()
    for seed in (0, 5, 2**80):
        seeded_np_random(seed)
    np_after = np.random.get_state()
    assert np_state[0] == np_after[0] and (np_state[1] == np_after[1]).all()
    assert np_state[2:] == np_after[2:]
    assert random.getstate() == py_state


def test_seeded_np_random_rejects_what_gymnasium_rejects():
    with pytest.raises(gym.error.Error):
        seeded_np_random(-1)
    with pytest.raises(gym.error.Error):
        seeded_np_random(1.5)  # type: ignore[arg-type]
    rng, seed = seeded_np_random(None)
    assert isinstance(rng, np.random.Generator) and isinstance(seed, int)


def test_reset_seed_is_deterministic_and_keeps_user_generators():
    env = gym.make("llm/Math-v0")
    tasks = {}
    for seed in (3, 4, 3, 4, 3):
        obs, _ = env.reset(seed=seed)
        assert env.unwrapped.np_random_seed == seed
        question = env.unwrapped.current_env.get_question()
        assert tasks.setdefault(seed, (obs.tolist(), question)) == (obs.tolist(), question)
    questions = set()
    for seed in range(40):
        env.reset(seed=seed)
        questions.add(env.unwrapped.current_env.get_question())
    assert len(questions) > 30  # different seeds, different tasks (bar the odd repeat)
    mine = np.random.default_rng(99)
    env.unwrapped.np_random = mine
    env.reset(seed=3)
    assert env.unwrapped.np_random is not mine  # a user's generator is replaced, never re-seeded
    assert mine.bit_generator.state == np.random.default_rng(99).bit_generator.state
    assert env.unwrapped.current_env.get_question() == tasks[3][1]
    env.reset()  # seed=None keeps the generator
    assert env.unwrapped.np_random_seed == 3
