"""Vector envs over token envs: real `gym.make_vec` in sync and async modes (autoreset included),
and the GroupAdvantages wrapper (same task per group, GRPO advantages in info)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import llm_gym
from llm_gym import GroupAdvantages
from llm_gym.tokenizers import ByteTokenizer

IM_END = 260
TOK = ByteTokenizer()

llm_gym.register_env("llmtest/Add-v0", "tests._gym_sources:AddSource")
llm_gym.register_env("llmtest/TwoTurn-v0", "tests._gym_sources:TwoTurnSource")
llm_gym.register_env("llmtest/UntilRight-v0", "tests._gym_sources:UntilRightSource")


def sum_answer(obs: np.ndarray) -> np.ndarray:
    """The right answer to an AddSource prompt ("a+b=")."""
    question = bytes(t for t in obs.tolist() if t < 256).decode().split("user\n")[1].split("=")[0]
    a, b = (int(x) for x in question.split("+"))
    return np.asarray(TOK.encode(str(a + b)) + [IM_END], dtype=np.int64)


def make_vec(env_id, n, mode, autoreset=AutoresetMode.SAME_STEP):
    vector_kwargs = {"autoreset_mode": autoreset}
    if mode == "async":
        vector_kwargs["shared_memory"] = False
    return gym.make_vec(env_id, num_envs=n, vectorization_mode=mode, vector_kwargs=vector_kwargs)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_make_vec_reset_step_and_same_step_autoreset(mode):
    vec = make_vec("llmtest/Add-v0", 3, mode)
    try:
        obs, info = vec.reset(seed=10)
        assert isinstance(obs, tuple) and len(obs) == 3 and obs in vec.observation_space
        assert all(o.dtype == np.int64 for o in obs)
        assert list(info["_text"]) == [True] * 3
        actions = [sum_answer(o) for o in obs]
        actions[1] = np.asarray(TOK.encode("nope") + [IM_END])
        new_obs, rewards, terminated, truncated, info = vec.step(tuple(actions))
        assert rewards.tolist() == pytest.approx([1.0, -0.1, 1.0])
        assert terminated.tolist() == [True] * 3 and truncated.tolist() == [False] * 3
        # SAME_STEP: the finished episodes' last observations are in info, the returned
        # observations are already the next prompts.
        assert all(f.size == 0 for f in info["final_obs"])
        assert info["final_info"]["metrics"]["correct"].tolist() == [1.0, 0.0, 1.0]
        assert all(o.size > 0 for o in new_obs)
        assert [o.tolist() for o in new_obs] != [o.tolist() for o in obs]
        again, *_ = vec.step(tuple(sum_answer(o) for o in new_obs))
        assert all(o.size > 0 for o in again)
    finally:
        vec.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_make_vec_next_step_autoreset_and_action_sampling(mode):
    vec = make_vec("llmtest/TwoTurn-v0", 2, mode, autoreset=AutoresetMode.NEXT_STEP)
    try:
        vec.reset(seed=0)
        vec.action_space.seed(0)
        dones = []
        for _ in range(3):
            _, _, terminated, truncated, _ = vec.step(vec.action_space.sample())
            dones.append((terminated | truncated).tolist())
        # Two turns, then NEXT_STEP spends one step resetting.
        assert dones == [[False, False], [True, True], [False, False]]
    finally:
        vec.close()


def test_sync_and_async_give_the_same_episodes():
    results = []
    for mode in ("sync", "async"):
        vec = make_vec("llm/Math-v0", 2, mode)
        obs, _ = vec.reset(seed=42)
        _, rewards, *_ = vec.step(tuple(np.asarray(TOK.encode("12") + [IM_END]) for _ in obs))
        results.append(([o.tolist() for o in obs], rewards.tolist()))
        vec.close()
    assert results[0] == results[1]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_group_advantages_single_turn(mode):
    vec = GroupAdvantages.make("llmtest/Add-v0", batch_size=2, group_size=3, vectorization_mode=mode)
    try:
        assert vec.num_envs == 6 and vec.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
        obs, _ = vec.reset(seed=0)
        for _ in range(2):
            prompts = [o.tolist() for o in obs]
            assert prompts[0] == prompts[1] == prompts[2] and prompts[3] == prompts[4] == prompts[5]
            assert prompts[0] != prompts[3]
            actions = [sum_answer(o) for o in obs]
            actions[0] = actions[4] = np.asarray([IM_END])  # two members fail
            obs, rewards, terminated, _, info = vec.step(tuple(actions))
            assert terminated.all()
            assert rewards.tolist() == pytest.approx([-0.1, 1, 1, 1, -0.1, 1])
            assert info["_group_advantage"].all()
            mean_a, mean_b = (-0.1 + 2) / 3, (-0.1 + 2) / 3
            expected = [-0.1 - mean_a, 1 - mean_a, 1 - mean_a, 1 - mean_b, -0.1 - mean_b, 1 - mean_b]
            assert info["group_advantage"] == pytest.approx(expected)
            assert info["group_return"] == pytest.approx(rewards)
    finally:
        vec.close()


def test_group_advantages_reuse_seeds_deterministically():
    def first_prompts(seed):
        vec = GroupAdvantages.make("llmtest/Add-v0", batch_size=2, group_size=2)
        obs, _ = vec.reset(seed=seed)
        vec.close()
        return [o.tolist() for o in obs]

    assert first_prompts(1) == first_prompts(1)
    assert first_prompts(1) != first_prompts(2)


def _word(obs: np.ndarray) -> str:
    text = bytes(t for t in obs.tolist() if t < 256).decode()
    return text.split("Say ")[1].split(".")[0]


def say(word: str) -> np.ndarray:
    return np.asarray(TOK.encode(word) + [IM_END])


def test_group_advantages_multi_turn_members_finish_at_different_steps():
    vec = GroupAdvantages(
        gym.make_vec(
            "llmtest/UntilRight-v0", num_envs=2, vectorization_mode="sync",
            vector_kwargs={"autoreset_mode": AutoresetMode.DISABLED},
        ),
        group_size=2,
    )
    obs, _ = vec.reset(seed=3)
    word = _word(obs[0])
    assert _word(obs[1]) == word
    # Step 1: member 0 is right and starts its next episode at once; member 1 keeps going.
    obs, rewards, terminated, _, info = vec.step((say(word), say("no")))
    assert terminated.tolist() == [True, False] and "group_advantage" not in info
    next_task = obs[0].tolist()
    # Steps 2-3: member 0 plays round 1, member 1 fails round 0 and finishes it at step 3.
    obs, _, terminated, _, info = vec.step((say("no"), say("no")))
    assert not terminated.any() and "group_advantage" not in info
    obs, _, terminated, _, info = vec.step((say("no"), say("no")))
    assert terminated.tolist() == [False, True]
    assert info["_group_advantage"].all()
    assert info["group_return"] == pytest.approx([1.0, 0.0])
    assert info["group_advantage"] == pytest.approx([0.5, -0.5])
    assert info["group_episode"].tolist() == [0, 0]
    assert info["_final_obs"].tolist() == [False, True]
    # Member 1's round-1 episode is the same task member 0 got for round 1.
    assert obs[1].tolist() == next_task
    vec.close()


def test_group_advantages_group_std_scaling():
    vec = GroupAdvantages.make("llmtest/TwoTurn-v0", batch_size=2, group_size=2, scale="group_std")
    obs, _ = vec.reset(seed=3)
    words = [_word(o) for o in obs]
    assert words[0] == words[1] and words[2] == words[3]
    vec.step((say(words[0]), say("no"), say(words[2]), say(words[3])))
    obs, rewards, terminated, _, info = vec.step((say(words[0]), say(words[1]), say("no"), say("no")))
    assert terminated.all()
    assert info["group_return"] == pytest.approx([1.0, 0.5, 0.5, 0.5])
    # (r - mean) / (std + eps) with the sample std; a constant group gives zeros.
    assert info["group_advantage"][:2] == pytest.approx([0.7071, -0.7071], abs=1e-3)
    assert info["group_advantage"][2:] == pytest.approx([0.0, 0.0])
    vec.close()


def test_group_advantages_requires_disabled_inner_autoreset_and_whole_groups():
    vec = make_vec("llmtest/Add-v0", 4, "sync")
    with pytest.raises(ValueError, match="AutoresetMode.DISABLED"):
        GroupAdvantages(vec, 2)
    vec.close()
    disabled = make_vec("llmtest/Add-v0", 4, "sync", autoreset=AutoresetMode.DISABLED)
    with pytest.raises(ValueError, match="multiple of group_size"):
        GroupAdvantages(disabled, 3)
    wrapper = GroupAdvantages(disabled, 2)
    with pytest.raises(gym.error.ResetNeeded):
        wrapper.step(tuple(np.asarray([IM_END]) for _ in range(4)))
    with pytest.raises(TypeError, match="one int seed"):
        wrapper.reset(seed=[1, 2, 3, 4])
    disabled.close()


@pytest.mark.parametrize("group_size", [1, 0, -2, True, 2.0])
def test_group_advantages_rejects_groups_of_one_before_building_envs(group_size, monkeypatch):
    def never(*args, **kwargs):  # the size check comes before any sub-env is built
        raise AssertionError("gym.make_vec was called")

    monkeypatch.setattr(gym, "make_vec", never)
    with pytest.raises(ValueError, match=r"group_size must be an int >= 2.*advantage 0"):
        GroupAdvantages.make("llmtest/Add-v0", batch_size=2, group_size=group_size)
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        GroupAdvantages.make("llmtest/Add-v0", batch_size=0, group_size=2)


def test_group_advantages_wrapper_rejects_a_group_of_one():
    disabled = make_vec("llmtest/Add-v0", 2, "sync", autoreset=AutoresetMode.DISABLED)
    with pytest.raises(ValueError, match="group_size must be an int >= 2"):
        GroupAdvantages(disabled, 1)
    disabled.close()
