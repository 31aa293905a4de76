"""`TextEnv` builds multi-turn observations that extend the previous one from a private buffer:
values must equal a full conversion, and no two returned arrays may share memory."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

import llm_gym  # noqa: F401


def test_extending_observations_are_exact_fresh_arrays():
    env = gym.make("llm/GuessNumber-v0", max_number=1000, max_turns=40)
    base = env.unwrapped
    tok = base.tokenizer
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    for seed in range(3):
        obs, _ = env.reset(seed=seed)
        kept = [(obs, obs.copy())]
        for turn in range(30):  # long enough to regrow the buffer
            action = tok.encode(str(1000 - turn)) + ([im_end] if turn % 2 else [])
            obs, _, terminated, truncated, _ = env.step(np.asarray(action, dtype=np.int64))
            if terminated or truncated:
                break
            assert obs.dtype == np.int64 and obs.flags.writeable
            assert obs.tolist() == list(base.current_env._ob.tokens)
            prev = kept[-1][1]
            assert obs[: len(prev)].tolist() == prev.tolist()  # prefix property
            for old, _ in kept:
                assert not np.shares_memory(old, obs)
            kept.append((obs, obs.copy()))
        obs[:] = 0  # a user writing into an observation does not corrupt the next one
        if not (terminated or truncated):
            nxt, *_ = env.step(np.asarray(tok.encode("7"), dtype=np.int64))
            assert nxt.tolist()[: len(obs)] == kept[-1][1].tolist() or nxt.size == 0
        for old, snapshot in kept[:-1]:
            assert old.tolist() == snapshot.tolist()  # earlier observations never change


def test_reset_observations_are_fresh_arrays():
    env = gym.make("llm/Math-v0")
    a, _ = env.reset(seed=5)
    b, _ = env.reset(seed=5)
    assert a.tolist() == b.tolist() and not np.shares_memory(a, b)
    a[:] = 0
    c, _ = env.reset(seed=5)
    assert c.tolist() == b.tolist()
