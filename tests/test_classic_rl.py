"""Classic RL libraries on the padded view: SB3's PPO learns on llm/Math-v0, torchrl rolls it out.

Each library is optional (the `classic` extra); its tests skip where it is not installed. The
Python-style unknown-keyword error is tested here too: torchrl's `GymEnv` depends on its wording.
"""

from __future__ import annotations

import gc
import warnings

import gymnasium as gym
import numpy as np
import pytest

import llm_gym  # noqa: F401  (registers the llm/ ids)
from llm_gym.wrappers.padded import PaddedTokens

OBS_LEN, ACT_LEN = 32, 4


def padded_math(**kwargs) -> PaddedTokens:
    env = gym.make("llm/Math-v0")
    return PaddedTokens(env, max_obs_len=OBS_LEN, max_action_len=ACT_LEN, **kwargs)


def test_unknown_option_reads_like_pythons_unexpected_keyword():
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'frameskip'; its knobs are \["):
        gym.make("llm/Math-v0", frameskip=4)
    with pytest.raises(TypeError, match=r"MathSource.__init__\(\) got an unexpected keyword argument 'a' "
                                        r"\(unknown options: \['a', 'frameskip'\]\)"):
        gym.make("llm/Math-v0", frameskip=4, a=1)


# --- Stable-Baselines3 ------------------------------------------------------------------------


def test_sb3_env_checker_accepts_the_padded_view():
    pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.env_checker import check_env

    gc.collect()  # earlier tests' garbage: its ResourceWarnings are not this block's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(padded_math())
        check_env(padded_math(token_space="box"))
    assert [str(w.message) for w in caught] == []


def _ppo_run(total_timesteps: int):
    torch = pytest.importorskip("torch")
    sb3 = pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.callbacks import BaseCallback

    class Record(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.actions, self.rewards, self.infos = [], [], []

        def _on_step(self) -> bool:
            self.actions += [np.array(a) for a in self.locals["actions"]]
            self.rewards += [float(r) for r in self.locals["rewards"]]
            self.infos += list(self.locals["infos"])
            return True

    torch.set_num_threads(1)  # deterministic and polite on shared CPUs
    env = padded_math()
    model = sb3.PPO(
        "MultiInputPolicy", env, n_steps=64, batch_size=32, n_epochs=2, seed=0, device="cpu",
        policy_kwargs={"net_arch": [64]},
    )
    before = [p.detach().clone() for p in model.policy.parameters()]
    record = Record()
    model.learn(total_timesteps=total_timesteps, callback=record)
    moved = any(not torch.equal(a, b) for a, b in zip(before, model.policy.parameters()))
    return env, model, record, moved


def test_sb3_ppo_learns_on_padded_math():
    env, model, record, moved = _ppo_run(256)
    assert model.num_timesteps == 256 and len(record.actions) == 256
    assert moved  # 4 rollouts of 64 steps, each followed by gradient steps
    low, high = env.unwrapped.reward_range
    returns = [info["episode_metrics"]["return"] for info in record.infos]  # single-turn episodes
    assert all(low <= g <= high for g in returns)
    assert record.rewards == pytest.approx(returns)  # SB3 saw the env's rewards (as float32)
    # Every sampled action reached the env, cut at its first pad or stop token as documented.
    stops = set(env.unwrapped.stop_condition)
    for action, info in zip(record.actions, record.infos):
        assert action.shape == (ACT_LEN,) and action in env.action_space
        sent = env.action_tokens(action).tolist()
        assert len(sent) == info["action_length"] and sent == action[: len(sent)].tolist()
        rest = action[len(sent):].tolist()
        assert len(sent) == ACT_LEN or (rest and rest[0] == env.pad_id) or sent[-1] in stops
    # Seeded runs are reproducible: a shorter run with the same seed samples the same actions.
    _, _, again, _ = _ppo_run(128)
    assert [a.tolist() for a in again.actions] == [a.tolist() for a in record.actions[:128]]
    assert again.rewards == record.rewards[:128]


# --- torchrl ----------------------------------------------------------------------------------


def test_torchrl_gym_wrapper_rollout():
    pytest.importorskip("torchrl")
    import torch
    from torchrl.envs import GymWrapper
    from torchrl.envs.utils import check_env_specs

    env = GymWrapper(padded_math())
    check_env_specs(env)
    torch.manual_seed(0)
    env.set_seed(0)
    td = env.rollout(12, break_when_any_done=False)
    vocab_values = env._env.num_token_values
    assert td.batch_size == torch.Size([12])
    assert td["tokens"].shape == (12, OBS_LEN, vocab_values)  # MultiDiscrete -> one-hot per slot
    assert td["action"].shape == (12, ACT_LEN, vocab_values)
    assert (td["tokens"].sum(-1) == 1).all() and (td["action"].sum(-1) == 1).all()
    assert td["next", "reward"].shape == (12, 1) and td["next", "done"].all()
    low, high = env._env.unwrapped.reward_range
    assert ((td["next", "reward"] >= low) & (td["next", "reward"] <= high)).all()
    tokenizer = env._env.unwrapped.tokenizer
    for tokens, length in zip(td["tokens"].argmax(-1), td["length"].flatten()):
        text = tokenizer.decode(tokens[: int(length)].tolist())
        assert text.startswith("<|im_start|>user\n") and text.endswith("<|im_start|>assistant\n")
        assert (tokens[int(length):] == env._env.pad_id).all()


def test_torchrl_gym_env_makes_a_registered_padded_id():
    """`GymEnv(id)` passes `frameskip=1` to `gym.make` and retries without it only when the error
    says `unexpected keyword argument 'frameskip'`, so this also covers the error's wording."""
    pytest.importorskip("torchrl")
    from torchrl.envs import GymEnv

    spec = padded_math().spec
    env_id = "llmtest/PaddedMath-v0"
    gym.register(env_id, entry_point=spec.entry_point, kwargs=spec.kwargs,
                 additional_wrappers=spec.additional_wrappers)
    try:
        env = GymEnv(env_id, categorical_action_encoding=True)
        assert isinstance(env._env, PaddedTokens)
        td = env.rollout(5, break_when_any_done=False)
        assert td["tokens"].shape == (5, OBS_LEN) and td["action"].shape == (5, ACT_LEN)
        assert td["length"].min() > 0 and td["next", "done"].all()
    finally:
        gym.registry.pop(env_id, None)


def test_torchrl_gym_env_on_raw_token_spaces_needs_the_padded_view():
    """The raw id builds (the frameskip retry works) and resets, but torchrl maps a token sequence
    to a one-hot spec of dynamic length (-1), which it cannot sample from: the padded view is the
    way to roll out."""
    pytest.importorskip("torchrl")
    from torchrl.envs import GymEnv

    env = GymEnv("llm/Math-v0")
    td = env.reset()
    vocab = env._env.unwrapped.vocab_size
    assert td["observation"].ndim == 2 and td["observation"].shape[1] == vocab
    assert env.full_action_spec["action"].shape[0] == -1
    with pytest.raises(RuntimeError, match="negative dimension"):
        env.rollout(2)


# --- Tianshou ---------------------------------------------------------------------------------


@pytest.mark.parametrize("env_id, max_obs_len", [("llm/Math-v0", 32), ("llm/GuessNumber-v0", 64)])
def test_tianshou_collector_fills_a_replay_buffer(env_id, max_obs_len):
    pytest.importorskip("tianshou")
    from tianshou.algorithm.algorithm_base import Policy
    from tianshou.data import Batch, Collector, VectorReplayBuffer
    from tianshou.env import DummyVectorEnv

    def make() -> PaddedTokens:
        return PaddedTokens(gym.make(env_id), max_obs_len=max_obs_len, max_action_len=3)

    class RandomTokens(Policy):
        def forward(self, batch, state=None, **kwargs):
            n = len(batch.obs.tokens)
            return Batch(act=np.stack([self.action_space.sample() for _ in range(n)]))

    envs = DummyVectorEnv([make, make])
    envs.seed(0)
    # Tianshou's workers read attributes from env.unwrapped, so envs.action_space is the raw
    # TokenSequence: take the spaces from a wrapped env.
    space = make().action_space
    policy = RandomTokens(action_space=space)
    policy.action_space.seed(0)
    collector = Collector(policy, envs, VectorReplayBuffer(64, 2))
    collector.reset()
    stats = collector.collect(n_step=16)
    assert stats.n_collected_steps == 16 and stats.n_collected_episodes >= 2
    buffer = collector.buffer
    assert len(buffer) == 16
    assert buffer.obs.tokens.shape == (64, max_obs_len) and buffer.act.shape == (64, 3)
    real = buffer.sample_indices(0)
    low, high = make().unwrapped.reward_range
    assert ((buffer.rew[real] >= low) & (buffer.rew[real] <= high)).all()
    assert (buffer.info.action_length[real] <= 3).all() and (buffer.obs.length[real] > 0).all()
