"""GymEnvGroupBuilder / GymRLDataset: Gymnasium envs (ours and a third party's) as seed-API groups,
driven by the real `do_group_rollout`."""

from __future__ import annotations

import asyncio
import pickle

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.spaces import Discrete, Sequence

import llm_gym
from llm_gym import GymEnvGroupBuilder, GymRLDataset
from llm_gym.completers import TokenCompleter, TokensWithLogprobs
from llm_gym.rl import RLDataset, do_group_rollout
from llm_gym.rl.types import EnvGroupBuilder
from llm_gym.wrappers.grouping import DEFAULT_N_BATCHES, GymEnvAdapter

IM_END = 260


# --- a third-party env llm-gym did not write: echo the observed token ---------------------------
class EchoEnv(gym.Env):
    """Observation: one random token in 0..15; reward 1 for replying with exactly that token."""

    metadata = {"render_modes": []}

    def __init__(self, with_eos: bool = False):
        self.observation_space = Sequence(Discrete(16), stack=True)
        self.action_space = Sequence(Discrete(16), stack=True)
        if with_eos:
            self.tokenizer = type("Tok", (), {"eos_token_id": 15})()
        self._target = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._target = int(self.np_random.integers(0, 15))
        return np.array([self._target], dtype=np.int64), {}

    def step(self, action):
        reward = float(list(np.asarray(action)) == [self._target])
        return np.zeros(0, dtype=np.int64), reward, True, False, {"metrics": {"hit": reward, "note": "x"}}


gym.register("thirdparty/Echo-v0", entry_point=EchoEnv)


def make_echo(**kwargs) -> gym.Env:  # a picklable factory
    return EchoEnv(**kwargs)


class EchoPolicy(TokenCompleter):
    """Replies with the last observed token; `wrong` members reply with token 15 instead."""

    def __init__(self, wrong: int = 0):
        self.wrong, self.calls = wrong, 0

    async def __call__(self, model_input, stop, *, max_tokens=None):
        self.calls += 1
        token = 15 if self.calls <= self.wrong else model_input.to_ints()[-1]
        return TokensWithLogprobs([token], [-0.5])


class AnswerPolicy(TokenCompleter):
    """Answers a ChatML arithmetic prompt ("a+b=") with `answer(a, b)` and <|im_end|>."""

    def __init__(self, answer):
        self.answer, self.prompts = answer, []

    async def __call__(self, model_input, stop, *, max_tokens=None):
        text = bytes(t for t in model_input.to_ints() if t < 256).decode()
        self.prompts.append(text)
        question = text.split("user\n", 1)[1].split("=", 1)[0]
        a, b = (int(x) for x in question.split("+"))
        return TokensWithLogprobs(list(str(self.answer(a, b)).encode()) + [IM_END], None)


def test_builder_is_a_seed_api_group_of_same_task_envs():
    builder = GymEnvGroupBuilder("llm/Math-v0", group_size=4, seed=123)
    assert isinstance(builder, EnvGroupBuilder)
    assert builder.logging_tags() == ["llm/Math-v0"]

    async def observe():
        envs = await builder.make_envs()
        firsts = [await e.initial_observation() for e in envs]
        await builder.cleanup()
        return envs, firsts

    envs, firsts = asyncio.run(observe())
    assert len(envs) == 4 and all(isinstance(e, GymEnvAdapter) for e in envs)
    assert len({ob for ob, _ in firsts}) == 1  # same seed => same task
    assert firsts[0][1] == [IM_END, 258]  # the TextEnv's stop condition
    assert len({id(e.gym_env) for e in envs}) == 4  # each backed by its own Gymnasium env


def test_group_rollout_over_a_catalog_env():
    builder = GymEnvGroupBuilder("llm/Math-v0", group_size=3, seed=7)
    policy = AnswerPolicy(lambda a, b: a + b)
    group = asyncio.run(do_group_rollout(builder, policy))
    assert group.get_total_rewards() == [1.0, 1.0, 1.0]
    assert len(set(policy.prompts)) == 1
    transition = group.trajectories_G[0].transitions[0]
    assert transition.metrics["correct"] == 1.0 and transition.episode_done
    wrong = asyncio.run(do_group_rollout(builder, AnswerPolicy(lambda a, b: a + b + 1)))
    assert wrong.get_total_rewards() == [0.0, 0.0, 0.0]


def test_group_rewards_delegate_to_the_text_env_source():
    llm_gym.register_env("llmtest/GroupBonus-v0", "tests._gym_sources:GroupBonusSource")
    builder = GymEnvGroupBuilder("llmtest/GroupBonus-v0", group_size=3, seed=1)

    class Lengths(TokenCompleter):
        def __init__(self):
            self.n = 0

        async def __call__(self, model_input, stop, *, max_tokens=None):
            self.n += 1
            return TokensWithLogprobs([ord("1")] * (4 - self.n) + [IM_END], None)

    group = asyncio.run(do_group_rollout(builder, Lengths()))
    # The source (which asserts it sees its own seed-API envs) rewards the shortest response.
    assert group.final_rewards_G == [0.0, 0.0, 1.0]
    assert group.metrics_G[2] == {"bonus": 1.0}


@pytest.mark.parametrize("env", ["thirdparty/Echo-v0", make_echo])
def test_third_party_env_rollout_with_zero_group_rewards(env):
    builder = GymEnvGroupBuilder(env, group_size=4, seed=5)
    group = asyncio.run(do_group_rollout(builder, EchoPolicy(wrong=1)))
    assert sorted(group.get_total_rewards()) == [0.0, 1.0, 1.0, 1.0]
    assert group.final_rewards_G == [0.0] * 4
    transition = group.trajectories_G[1].transitions[0]
    assert transition.metrics == {"hit": 1.0}  # numeric metrics only
    assert transition.ac.maybe_logprobs == [-0.5]


def test_stop_condition_falls_back_to_the_tokenizer_eos():
    async def first_stop(**kwargs):
        builder = GymEnvGroupBuilder(make_echo, group_size=1, seed=0, **kwargs)
        (env,) = await builder.make_envs()
        return (await env.initial_observation())[1]

    assert asyncio.run(first_stop()) == []
    assert asyncio.run(first_stop(with_eos=True)) == [15]


def test_builder_pickles_without_live_envs():
    builder = GymEnvGroupBuilder("llm/Math-v0", group_size=2, seed=9, tokenizer="byte")

    async def go(b):
        envs = await b.make_envs()
        return [(await e.initial_observation())[0] for e in envs]

    before = asyncio.run(go(builder))  # live envs now held by the builder
    clone = pickle.loads(pickle.dumps(builder))
    assert clone._envs == [] and clone.make_kwargs == {"tokenizer": "byte"}
    assert asyncio.run(go(clone)) == before
    assert pickle.loads(pickle.dumps(GymEnvGroupBuilder(make_echo, 2, 0))).logging_tags() == ["make_echo"]


@pytest.mark.parametrize("bad", [0, -1, 2.0, True])
def test_builder_validates_group_size(bad):
    with pytest.raises(ValueError, match="group_size"):
        GymEnvGroupBuilder("llm/Math-v0", bad, 0)


def test_dataset_is_deterministic_and_splits_are_disjoint():
    train = GymRLDataset("llm/Math-v0", batch_size=4, group_size=2, seed=3)
    test = GymRLDataset("llm/Math-v0", batch_size=4, group_size=2, seed=3, split="test")
    assert isinstance(train, RLDataset) and len(train) == DEFAULT_N_BATCHES == 10_000
    batch = train.get_batch(5)
    assert [b.seed for b in batch] == [b.seed for b in train.get_batch(5)]
    assert [b.seed for b in batch] == [b.seed for b in GymRLDataset("llm/Math-v0", 4, 2, seed=3).get_batch(5)]
    assert all(b.group_size == 2 and b.make_kwargs == {"split": "train"} for b in batch)
    train_seeds = {b.seed for i in range(20) for b in train.get_batch(i)}
    test_seeds = {b.seed for i in range(20) for b in test.get_batch(i)}
    assert len(train_seeds) == 80 and not train_seeds & test_seeds
    assert test.get_batch(0)[0].make_kwargs == {"split": "test"}
    other_seed = GymRLDataset("llm/Math-v0", 4, 2, seed=4)
    assert {b.seed for b in other_seed.get_batch(5)} != {b.seed for b in batch}
    with pytest.raises(IndexError):
        train.get_batch(10_000)
    with pytest.raises(ValueError, match="split"):
        GymRLDataset("llm/Math-v0", 1, 1, split="validation")


def test_test_split_reaches_the_source():
    llm_gym.register_env("llmtest/Add-v0", "tests._gym_sources:AddSource")  # high=9 (default)
    dataset = GymRLDataset("llmtest/Add-v0", batch_size=3, group_size=2, split="test", n_batches=2)
    policy = AnswerPolicy(lambda a, b: a + b)
    for builder in dataset.get_batch(1):
        group = asyncio.run(do_group_rollout(builder, policy))
        assert group.get_total_rewards() == [1.0, 1.0]
    # AddSource's test split only has first operands above `high`.
    assert all(int(p.split("user\n")[1].split("+")[0]) > 9 for p in policy.prompts)


def test_dataset_over_a_third_party_env_uses_seed_streams_only():
    dataset = GymRLDataset("thirdparty/Echo-v0", batch_size=2, group_size=3, split="test", n_batches=5)
    assert len(dataset) == 5
    builders = dataset.get_batch(4)
    assert all("split" not in b.make_kwargs for b in builders)
    group = asyncio.run(do_group_rollout(builders[0], EchoPolicy()))
    assert group.get_total_rewards() == [1.0, 1.0, 1.0]


class _LegacySeedingEnv(gym.Env):
    """A third-party token env that seeds numpy's legacy RandomState (rejects seeds >= 2**32)."""

    def __init__(self):
        from llm_gym.spaces import TokenSequence

        self.observation_space = TokenSequence(16)
        self.action_space = TokenSequence(16)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.rs = np.random.RandomState(seed)  # ValueError for seed >= 2**32
        return np.array([int(self.rs.randint(16))], dtype=np.int64), {}

    def step(self, action):
        return np.empty(0, dtype=np.int64), 1.0, True, False, {}


def test_dataset_seeds_fit_third_party_legacy_seeding():
    from llm_gym.wrappers.grouping import fold_seed_32

    dataset = GymRLDataset(_LegacySeedingEnv, batch_size=4, group_size=2, seed=0)
    seeds = [dataset.group_seed(0, j) for j in range(4)]
    assert max(seeds) >= 1 << 32  # the dataset's seeds are 63-bit
    for builder in dataset.get_batch(0):
        envs = asyncio.run(builder.make_envs())
        obs = [asyncio.run(e.initial_observation())[0].to_ints() for e in envs]
        assert obs[0] == obs[1]  # both copies face the same task
    assert fold_seed_32((5 << 32) | 7) == 2 and 0 <= fold_seed_32(2**63 - 1) < 2**32
