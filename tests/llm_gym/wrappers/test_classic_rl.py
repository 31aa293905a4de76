"""Classic RL libraries on the padded view: SB3's PPO learns on llm/Math-v0, torchrl rolls it out,
Tianshou collects llm/ episodes into its replay buffer and its REINFORCE learns a token-echo env.

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


def _tianshou_collect(env_id: str, max_obs_len: int, n_episode: int):
    """Random token actions through Tianshou's `DummyVectorEnv` + `Collector` on two seeded envs."""
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
    # Tianshou's workers read attributes from env.unwrapped (PaddedTokens' docstring says so), so
    # envs.action_space is the raw TokenSequence: the policy takes its space from a wrapped env.
    assert not isinstance(envs.action_space[0], gym.spaces.MultiDiscrete)
    policy = RandomTokens(action_space=make().action_space)
    policy.action_space.seed(0)
    collector = Collector(policy, envs, VectorReplayBuffer(64, 2))
    collector.reset()
    stats = collector.collect(n_episode=n_episode)
    return make, stats, collector.buffer


@pytest.mark.parametrize("env_id, max_obs_len", [("llm/Math-v0", 32), ("llm/GuessNumber-v0", 64)])
@pytest.mark.slow
def test_tianshou_collector_fills_a_replay_buffer(env_id, max_obs_len):
    pytest.importorskip("tianshou")
    make, stats, buffer = _tianshou_collect(env_id, max_obs_len, n_episode=4)
    real = buffer.sample_indices(0)  # the stored steps, in no particular order
    assert stats.n_collected_episodes == 4 and len(real) == stats.n_collected_steps == stats.lens.sum()
    if env_id == "llm/Math-v0":
        assert (stats.lens == 1).all()  # single-turn: one step per episode
    else:
        assert (stats.lens > 1).all()  # multi-turn: an invalid reply costs a turn, not the episode
        assert buffer.info.obs_tokens_dropped[real].max() > 0  # the chat outgrows 64 slots
    assert buffer.rew[real].sum() == pytest.approx(stats.returns.sum())
    assert int((buffer.terminated[real] | buffer.truncated[real]).sum()) == 4
    low, high = make().unwrapped.reward_range
    assert ((buffer.rew[real] >= low) & (buffer.rew[real] <= high)).all()
    # Fixed shapes all the way into the buffer; each stored observation is a prompt that ends at
    # the assistant header (left truncation keeps it), then padding.
    assert buffer.obs.tokens.shape == (64, max_obs_len) and buffer.act.shape == (64, 3)
    env = make()
    env.reset(seed=0)  # learns the stop ids, so action_tokens cuts as step() did
    for i in real:
        tokens, length = buffer.obs.tokens[i], int(buffer.obs.length[i][0])
        text = env.unwrapped.tokenizer.decode(tokens[:length].tolist())
        assert text.endswith("<|im_start|>assistant\n") and (tokens[length:] == env.pad_id).all()
        # info[i] belongs to step i, so it describes obs_next and the action sent.
        info = buffer.info[i]
        assert int(buffer.obs_next.length[i][0]) == info.obs_length - info.obs_tokens_dropped
        assert info.action_length == len(env.action_tokens(buffer.act[i]))
    # Seeded collection is reproducible.
    _, again, buffer_again = _tianshou_collect(env_id, max_obs_len, n_episode=4)
    assert again.returns.tolist() == stats.returns.tolist()
    assert (buffer_again.act == buffer.act).all() and (buffer_again.obs.tokens == buffer.obs.tokens).all()


class EchoToken(gym.Env):
    """A trivially learnable token env: the observation is one token `t` in `0..vocab-1`; reward 1
    when the response is exactly `[t]`, else 0. One step per episode."""

    def __init__(self, vocab: int = 4) -> None:
        from llm_gym.spaces import TokenSequence

        self.vocab = vocab
        self.observation_space = TokenSequence(vocab)
        self.action_space = TokenSequence(vocab)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.target = int(self.np_random.integers(self.vocab))
        return np.array([self.target], dtype=np.int64), {}

    def step(self, action):
        reward = 1.0 if np.asarray(action).tolist() == [self.target] else 0.0
        return np.empty(0, dtype=np.int64), reward, True, False, {}


def _reinforce_run(updates: int, episodes_per_update: int = 32):
    """Tianshou's REINFORCE on `PaddedTokens(EchoToken())` with 2 action slots: a response is
    right only when slot 0 is the observed token and slot 1 the pad id that ends it."""
    torch = pytest.importorskip("torch")
    from tianshou.algorithm import Reinforce
    from tianshou.algorithm.modelfree.reinforce import ProbabilisticActorPolicy
    from tianshou.algorithm.optim import AdamOptimizerFactory
    from tianshou.data import Batch, Collector, VectorReplayBuffer
    from tianshou.env import DummyVectorEnv
    from tianshou.utils.torch_utils import policy_within_training_step, torch_train_mode

    def make() -> PaddedTokens:
        return PaddedTokens(EchoToken(), max_obs_len=2, max_action_len=2)

    env = make()
    n, slots = env.num_token_values, env.max_action_len

    class TokenBagActor(torch.nn.Module):
        """Logits for every action slot: a sum of per-token embeddings; pad slots add nothing."""

        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(n, slots * n, padding_idx=env.pad_id)
            torch.nn.init.zeros_(self.embed.weight)  # start uniform: P(right) = 1/n**2

        def forward(self, obs, state=None, info=None):
            tokens = torch.as_tensor(obs.tokens, dtype=torch.long)
            return self.embed(tokens).sum(1).view(-1, slots, n), state

    def slots_distribution(logits):  # independent categorical slots: one MultiDiscrete action
        return torch.distributions.Independent(torch.distributions.Categorical(logits=logits), 1)

    torch.manual_seed(0)  # action sampling draws from torch's global generator
    torch.set_num_threads(1)
    policy = ProbabilisticActorPolicy(
        actor=TokenBagActor(), dist_fn=slots_distribution, action_space=env.action_space,
        action_scaling=False, action_bound_method=None, deterministic_eval=True,
    )
    algorithm = Reinforce(policy=policy, optim=AdamOptimizerFactory(lr=0.5), gamma=1.0)
    envs = DummyVectorEnv([make] * 4)
    envs.seed(0)
    collector = Collector(policy, envs, VectorReplayBuffer(episodes_per_update, 4))
    collector.reset()
    before = [p.detach().clone() for p in policy.parameters()]
    returns, losses = [], []
    for _ in range(updates):
        with policy_within_training_step(policy), torch_train_mode(policy, False):
            stats = collector.collect(n_episode=episodes_per_update)
        returns.append(float(stats.returns.mean()))
        with policy_within_training_step(policy):  # one full-batch gradient step
            losses.append(algorithm.update(collector.buffer, batch_size=None, repeat=1).loss.mean)
        collector.buffer.reset()  # on-policy: each update sees only its own episodes
    moved = any(not torch.equal(a, b) for a, b in zip(before, policy.parameters()))
    # The greedy response to each token (deterministic_eval: the mode, outside a training step).
    obs = Batch(tokens=np.array([[t, env.pad_id] for t in range(env.vocab_size)]),
                length=np.ones((env.vocab_size, 1), dtype=np.int64))
    with torch.no_grad():
        greedy = policy(Batch(obs=obs, info=Batch())).act.tolist()
    return env, returns, losses, moved, greedy


@pytest.mark.slow
def test_tianshou_reinforce_learns_through_the_padded_view():
    pytest.importorskip("tianshou")
    env, returns, losses, moved, greedy = _reinforce_run(20)
    assert len(losses) == 20 and all(np.isfinite(losses)) and moved
    assert returns[0] <= 0.25  # a uniform policy is right 1 time in n**2 = 25
    assert np.mean(returns[-2:]) >= 0.7
    # It learned to echo the token and then end the response with the pad id.
    assert greedy == [[t, env.pad_id] for t in range(env.vocab_size)]
    # Seeded runs are reproducible: a shorter run with the same seed has the same first updates.
    _, again, again_losses, _, _ = _reinforce_run(5)
    assert again == returns[:5] and again_losses == losses[:5]
