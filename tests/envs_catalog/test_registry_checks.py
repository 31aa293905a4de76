"""Every registered `llm/` id: Gymnasium's `check_env` with zero warnings, and a random-token fuzz
(out-of-vocabulary ids, empty and very long actions) that never crashes and keeps rewards in the
source's `reward_range`."""

from __future__ import annotations

import gc
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import llm_gym  # noqa: F401  (registers the catalog)

LLM_IDS = sorted(env_id for env_id in gym.registry if env_id.startswith("llm/"))


def test_the_catalog_is_registered():
    assert "llm/Math-v0" in LLM_IDS


@pytest.mark.parametrize("env_id", LLM_IDS)
def test_check_env_passes_without_warnings(env_id):
    env = gym.make(env_id)
    gc.collect()  # earlier tests' garbage: its ResourceWarnings are not this block's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    env.close()
    assert [f"{w.category.__name__}: {w.message}" for w in caught] == []


_VOCAB = 261  # the default byte tokenizer; ids at and beyond it are out of vocabulary
_token = st.one_of(
    st.integers(0, _VOCAB - 1),
    st.integers(-(2**31), -1),
    st.integers(_VOCAB, 2**40),
    st.sampled_from([256, 257, 258, 259, 260, 0xFF, 0xC3]),  # specials, invalid UTF-8 lead bytes
)
_action = st.one_of(
    st.lists(_token, max_size=40),
    st.just([]),
    st.integers(2_000, 20_000).map(lambda n: list(np.arange(n) % _VOCAB)),  # very long
)


@pytest.mark.parametrize("env_id", LLM_IDS)
def test_random_token_fuzz_never_crashes_and_rewards_stay_in_range(env_id):
    env = gym.make(env_id)
    lo, hi = env.unwrapped.source.reward_range

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(seed=st.integers(0, 2**32 - 1), actions=st.lists(_action, min_size=1, max_size=12))
    def episode(seed, actions):
        obs, _ = env.reset(seed=seed)
        total = 0.0
        for action in actions:
            obs, reward, terminated, truncated, info = env.step(action)
            assert lo - 1e-9 <= reward <= hi + 1e-9, (reward, action[:10])
            total += reward
            assert obs in env.observation_space
            assert isinstance(info["text"], str)
            if terminated or truncated:
                assert lo - 1e-9 <= total <= hi + 1e-9, total
                assert info["episode_metrics"]["return"] == pytest.approx(total)
                break

    episode()
    env.close()
