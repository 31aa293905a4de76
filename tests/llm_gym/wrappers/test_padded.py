"""PaddedTokens: the fixed-shape view of token envs (spaces, checker, truncation, bad actions, seeds)."""

from __future__ import annotations

import gc
import warnings
from functools import partial

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env

import llm_gym  # noqa: F401  (registers the llm/ ids)
from llm_gym.wrappers.padded import PaddedTokens

OBS_LEN, ACT_LEN = 32, 6


def make(env_id: str = "llm/Math-v0", **kwargs) -> PaddedTokens:
    kwargs.setdefault("max_obs_len", OBS_LEN)
    kwargs.setdefault("max_action_len", ACT_LEN)
    return PaddedTokens(gym.make(env_id), **kwargs)


def encode(env: gym.Env, text: str) -> list[int]:
    return list(env.unwrapped.tokenizer.encode(text, add_special_tokens=False))


def answer_tokens(env: PaddedTokens) -> list[int]:
    """The right answer to the current Math-v0 task, ended by the renderer's first stop token."""
    reference = env.unwrapped.current_env.get_reference_answer()
    return encode(env, reference) + [env.unwrapped.stop_condition[0]]


# --- spaces -----------------------------------------------------------------------------------


def test_spaces_are_fixed_shape_with_an_extra_pad_id_by_default():
    env = make()
    vocab = env.unwrapped.vocab_size
    assert env.pad_id == vocab and env.num_token_values == vocab + 1
    obs_space = env.observation_space
    assert isinstance(obs_space, spaces.Dict) and set(obs_space.spaces) == {"tokens", "length"}
    assert isinstance(obs_space["tokens"], spaces.MultiDiscrete)
    assert obs_space["tokens"].shape == (OBS_LEN,)
    assert set(obs_space["tokens"].nvec.tolist()) == {vocab + 1}
    assert obs_space["length"] == spaces.Box(0, OBS_LEN, shape=(1,), dtype=np.int64)
    assert isinstance(env.action_space, spaces.MultiDiscrete)
    assert env.action_space.shape == (ACT_LEN,) and set(env.action_space.nvec.tolist()) == {vocab + 1}


def test_box_tokens_and_an_in_vocabulary_pad_id():
    env = make(token_space="box", pad_id=0)
    vocab = env.unwrapped.vocab_size
    tokens = env.observation_space["tokens"]
    assert isinstance(tokens, spaces.Box) and tokens.dtype == np.int64 and tokens.shape == (OBS_LEN,)
    assert tokens.low.min() == 0 and tokens.high.max() == vocab - 1  # pad 0 adds no value
    assert set(env.action_space.nvec.tolist()) == {vocab}
    obs, _ = env.reset(seed=0)
    assert obs in env.observation_space and (obs["tokens"][obs["length"][0]:] == 0).all()


@pytest.mark.parametrize("token_space", ["multidiscrete", "box"])
@pytest.mark.parametrize("env_id", ["llm/Math-v0", "llm/GuessNumber-v0"])
def test_gymnasium_env_checker_passes(env_id, token_space):
    env = make(env_id, token_space=token_space, max_obs_len=64)
    gc.collect()  # earlier tests' garbage: its ResourceWarnings are not this block's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env, skip_render_check=True)
    # The only warning is the generic "env is wrapped" one check_env gives every wrapper.
    messages = [str(w.message) for w in caught]
    assert [m for m in messages if "different from the unwrapped" not in m] == []


def test_spec_records_the_wrapper_so_make_rebuilds_it():
    env = make(max_obs_len=40, truncation_side="right")
    [wrapper] = env.spec.additional_wrappers
    assert wrapper.entry_point == "llm_gym.wrappers.padded:PaddedTokens"
    again = gym.make(env.spec)
    assert isinstance(again, PaddedTokens)
    assert again.max_obs_len == 40 and again.truncation_side == "right"
    assert again.observation_space == env.observation_space and again.action_space == env.action_space


def test_rejects_non_token_envs_and_bad_arguments():
    with pytest.raises(TypeError, match="token-sequence spaces.*Box"):
        PaddedTokens(gym.make("CartPole-v1"), max_obs_len=4, max_action_len=4)
    with pytest.raises(ValueError, match="max_obs_len must be a positive int, got 0"):
        make(max_obs_len=0)
    with pytest.raises(ValueError, match="max_action_len must be a positive int"):
        make(max_action_len=2.5)
    with pytest.raises(ValueError, match=r"pad_id must be an int in \[0, 261\]"):
        make(pad_id=1000)
    with pytest.raises(ValueError, match="truncation_side must be 'left' or 'right'"):
        make(truncation_side="middle")
    with pytest.raises(ValueError, match="token_space must be"):
        make(token_space="onehot")


# --- observations and truncation --------------------------------------------------------------


def test_observation_is_the_prompt_then_padding():
    env, raw = make(), gym.make("llm/Math-v0")
    obs, info = env.reset(seed=5)
    prompt, raw_info = raw.reset(seed=5)
    n = len(prompt)
    assert obs["length"].tolist() == [n] and obs["tokens"].dtype == np.int64
    assert obs["tokens"][:n].tolist() == prompt.tolist()
    assert (obs["tokens"][n:] == env.pad_id).all()
    assert env.unpad_observation(obs).tolist() == prompt.tolist()
    assert info["obs_length"] == n and info["obs_tokens_dropped"] == 0
    assert info["text"] == raw_info["text"]
    assert env.truncated_observations == 0


@pytest.mark.parametrize("side", ["left", "right"])
def test_long_observations_are_truncated_as_documented(side):
    env = make(max_obs_len=10, truncation_side=side)
    prompt, _ = gym.make("llm/Math-v0").reset(seed=1)
    obs, info = env.reset(seed=1)
    kept = prompt[-10:] if side == "left" else prompt[:10]
    assert obs["tokens"].tolist() == kept.tolist() and obs["length"].tolist() == [10]
    assert info["obs_length"] == len(prompt) and info["obs_tokens_dropped"] == len(prompt) - 10
    assert env.truncated_observations == 1
    if side == "left":  # the most recent tokens: the assistant header the policy answers
        assert env.unwrapped.tokenizer.decode(obs["tokens"].tolist()).endswith("assistant\n")


def test_multi_turn_observations_grow_then_truncate():
    env = make("llm/GuessNumber-v0", max_obs_len=150, max_action_len=4)
    obs, info = env.reset(seed=0)
    seen = [(info["obs_length"], info["obs_tokens_dropped"], int(obs["length"][0]))]
    stop = env.unwrapped.stop_condition[0]
    secret = env.unwrapped.current_env.secret
    for guess in [g for g in ("10", "5", "15", "3") if int(g) != secret][:3]:  # wrong guesses
        obs, reward, terminated, truncated, info = env.step(env.pad_action(encode(env, guess) + [stop]))
        assert obs in env.observation_space and not (terminated or truncated)
        seen.append((info["obs_length"], info["obs_tokens_dropped"], int(obs["length"][0])))
    full = [n for n, _, _ in seen]
    assert full == sorted(full) and full[0] < 150 < full[-1]  # the conversation grows past the slots
    assert all(kept == min(n, 150) and dropped == n - kept for n, dropped, kept in seen)
    assert env.truncated_observations == sum(n > 150 for n in full) >= 1


# --- actions ----------------------------------------------------------------------------------


def test_a_right_answer_scores_and_reaches_the_env():
    env = make()
    env.reset(seed=3)
    tokens = answer_tokens(env)
    obs, reward, terminated, truncated, info = env.step(env.pad_action(tokens))
    assert reward == 1.0 and terminated and not truncated
    assert info["action_length"] == len(tokens) and info["metrics"]["correct"] == 1.0
    assert obs["length"].tolist() == [0] and (obs["tokens"] == env.pad_id).all()  # the empty last obs


def test_action_ends_after_the_first_stop_token_unless_disabled():
    for cut in (True, False):
        env = make(stop_at_stop_tokens=cut)
        env.reset(seed=3)
        tokens = answer_tokens(env)
        junk = encode(env, "99")
        action = env.pad_action(tokens + junk)
        sent = env.action_tokens(action).tolist()
        assert sent == (tokens if cut else tokens + junk)
        _, reward, _, _, info = env.step(action)
        assert info["action_length"] == len(sent) and reward == 1.0  # the env stops at the stop token too


@pytest.mark.parametrize(
    "slots, expected_sent, expected_invalid",
    [
        pytest.param("all_pad", [], 0, id="all-pad=empty"),
        pytest.param([7000, -3, 50], [7000, -3, 50], 2, id="out-of-vocab"),
        pytest.param("full", None, 0, id="no-pad-no-stop"),
    ],
)
def test_bad_actions_get_the_envs_defined_reward(slots, expected_sent, expected_invalid):
    env = make()
    env.reset(seed=0)
    low, high = env.unwrapped.reward_range
    if slots == "all_pad":
        action = np.full(ACT_LEN, env.pad_id)
    elif slots == "full":
        action = np.full(ACT_LEN, encode(env, "1")[0])
        expected_sent = action.tolist()
    else:
        action = np.array(slots + [env.pad_id] * (ACT_LEN - len(slots)))
    obs, reward, terminated, truncated, info = env.step(action)
    assert env.action_tokens(action).tolist() == expected_sent
    assert info["action_length"] == len(expected_sent)
    assert info["invalid_tokens"] == expected_invalid
    assert low <= reward <= high and reward < 1.0 and terminated
    assert obs in env.observation_space


def test_action_types_and_shapes():
    env = make()
    env.reset(seed=0)
    tokens = answer_tokens(env)
    as_float = env.pad_action(tokens).astype(np.float32)  # some libraries hand over floats
    assert env.action_tokens(as_float).tolist() == tokens
    assert env.action_tokens(env.pad_action(tokens).tolist()).tolist() == tokens
    with pytest.raises(ValueError, match=rf"shape \({ACT_LEN},\).*got shape \(3,\)"):
        env.step(np.array(tokens))
    with pytest.raises(TypeError, match="integer ids"):
        env.step(as_float + 0.5)
    with pytest.raises(TypeError, match="integer ids"):
        env.step(np.array(["a"] * ACT_LEN))
    with pytest.raises(ValueError, match="do not fit"):
        env.pad_action(list(range(ACT_LEN + 1)))
    with pytest.raises(ValueError, match="contain pad_id"):
        env.pad_action([env.pad_id])


# --- seeds and vector envs --------------------------------------------------------------------


def _trajectory(seed: int, steps: int = 12) -> list:
    env = make("llm/GuessNumber-v0", max_obs_len=64, max_action_len=3)
    env.action_space.seed(seed)
    obs, _ = env.reset(seed=seed)
    out = [obs["tokens"].tolist()]
    for _ in range(steps):
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        out.append((obs["tokens"].tolist(), obs["length"].tolist(), reward, terminated, truncated))
        if terminated or truncated:
            obs, _ = env.reset()
            out.append(obs["tokens"].tolist())
    return out


def test_deterministic_under_seeds():
    assert _trajectory(4) == _trajectory(4)
    prompts = {tuple(make().reset(seed=s)[0]["tokens"].tolist()) for s in range(6)}
    assert len(prompts) > 1  # different seeds, different tasks


def test_works_in_gymnasium_vector_envs():
    envs = gym.make_vec(
        "llm/Math-v0", num_envs=3, vectorization_mode="sync",
        wrappers=[partial(PaddedTokens, max_obs_len=OBS_LEN, max_action_len=ACT_LEN)],
    )
    obs, infos = envs.reset(seed=0)
    assert obs["tokens"].shape == (3, OBS_LEN) and obs["length"].shape == (3, 1)
    singles = [make().reset(seed=s)[0] for s in range(3)]  # sub-env i is seeded with seed + i
    assert obs["tokens"].tolist() == [s["tokens"].tolist() for s in singles]
    envs.action_space.seed(0)
    obs, rewards, terminated, truncated, infos = envs.step(envs.action_space.sample())
    assert rewards.shape == (3,) and terminated.all() and obs in envs.observation_space
    envs.close()


def test_flatten_observation_gives_one_vector():
    env = gym.wrappers.FlattenObservation(make(token_space="box"))
    obs, _ = env.reset(seed=0)
    assert env.observation_space.shape == (OBS_LEN + 1,) and obs.shape == (OBS_LEN + 1,)
    assert obs in env.observation_space
