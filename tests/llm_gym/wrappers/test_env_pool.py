"""Cheap episodes: `GymEnvGroupBuilder`'s per-process env pool, lazily built token spaces, shared
renderers and prompt caches -- same episodes as fresh `gym.make` envs, never shared while live."""

from __future__ import annotations

import asyncio
import pickle

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector.utils import batch_space, iterate

import llm_gym
from llm_gym import GymEnvGroupBuilder, GymRLDataset
from llm_gym.completers import TokenCompleter, TokensWithLogprobs
from llm_gym.rl import do_group_rollout
from llm_gym.spaces import TokenSequence
from llm_gym.wrappers import grouping

IM_END = 260


class AddPolicy(TokenCompleter):
    """Answers "a+b=" prompts correctly for even calls, off by one for odd calls."""

    def __init__(self):
        self.prompts: list[str] = []

    async def __call__(self, model_input, stop, *, max_tokens=None):
        text = bytes(t for t in model_input.to_ints() if t < 256).decode()
        self.prompts.append(text)
        a, b = (int(x) for x in text.split("user\n", 1)[1].split("=", 1)[0].split("+"))
        answer = a + b + (len(self.prompts) % 2)
        return TokensWithLogprobs(list(str(answer).encode()) + [IM_END], None)


@pytest.fixture(autouse=True)
def fresh_pool(monkeypatch):
    monkeypatch.setattr(grouping, "_ENV_POOL", grouping._EnvPool())
    monkeypatch.setattr(GymEnvGroupBuilder, "max_pooled_envs", 1024)
    yield
    grouping._ENV_POOL.clear()


def _gym_env_ids(envs) -> list[int]:
    return [id(e.gym_env) for e in envs]


def _rollout_rewards(builders):
    async def run():
        policy = AddPolicy()
        groups = await asyncio.gather(*[do_group_rollout(b, policy) for b in builders])
        return [g.get_total_rewards() for g in groups], sorted(policy.prompts)

    return asyncio.run(run())


def test_pooled_groups_match_fresh_envs_and_reuse_them():
    dataset = GymRLDataset("llm/Math-v0", batch_size=3, group_size=4, seed=11)
    pooled = [_rollout_rewards(dataset.get_batch(i)) for i in range(4)]
    assert len(grouping._ENV_POOL) == 12  # 3 x 4 envs kept after the first batch, reused since
    GymEnvGroupBuilder.max_pooled_envs = 0
    grouping._ENV_POOL.clear()
    fresh = [_rollout_rewards(dataset.get_batch(i)) for i in range(4)]
    assert len(grouping._ENV_POOL) == 0
    assert pooled == fresh  # same tasks, same rewards, batch by batch
    assert len({p for _, prompts in pooled for p in prompts}) > 4  # seeds really differ


def test_live_envs_are_never_shared_and_released_ones_are_reused():
    a = GymEnvGroupBuilder("llm/Math-v0", group_size=3, seed=1)
    b = GymEnvGroupBuilder("llm/Math-v0", group_size=3, seed=2)

    async def go():
        envs_a = await a.make_envs()
        envs_b = await b.make_envs()  # a's envs are still live
        ids_a, ids_b = _gym_env_ids(envs_a), _gym_env_ids(envs_b)
        await a.cleanup()
        envs_c = await GymEnvGroupBuilder("llm/Math-v0", group_size=3, seed=3).make_envs()
        with pytest.raises(RuntimeError, match="released by GymEnvGroupBuilder.cleanup"):
            await envs_a[0].initial_observation()
        first_b = [await e.initial_observation() for e in envs_b]
        await b.cleanup()
        return ids_a, ids_b, _gym_env_ids(envs_c), first_b

    ids_a, ids_b, ids_c, first_b = asyncio.run(go())
    assert len(set(ids_a + ids_b)) == 6
    assert sorted(ids_c) == sorted(ids_a)  # a's released envs serve the next group
    assert len({ob for ob, _ in first_b}) == 1


def test_what_is_not_pooled():
    def kept_after(builder) -> int:
        async def go():
            await builder.make_envs()
            await builder.cleanup()

        grouping._ENV_POOL.clear()
        asyncio.run(go())
        return len(grouping._ENV_POOL)

    assert kept_after(GymEnvGroupBuilder("llm/Math-v0", 2, seed=0)) == 2
    assert kept_after(GymEnvGroupBuilder("llm/Math-v0", 2, seed=None)) == 0  # fresh entropy
    assert kept_after(GymEnvGroupBuilder(lambda: gym.make("llm/Math-v0"), 2, seed=0)) == 0
    GymEnvGroupBuilder.max_pooled_envs = 1
    assert kept_after(GymEnvGroupBuilder("llm/Math-v0", 3, seed=0)) == 1  # the cap
    GymEnvGroupBuilder.max_pooled_envs = 0
    assert kept_after(GymEnvGroupBuilder("llm/Math-v0", 3, seed=0)) == 0


def test_make_kwargs_and_registrations_keep_pools_apart():
    keep = []  # envs stay referenced, so a dropped env's id() cannot be reused by a new one

    async def envs_of(builder):
        envs = await builder.make_envs()
        keep.extend(e.gym_env for e in envs)
        obs = [await e.initial_observation() for e in envs]
        await builder.cleanup()
        return _gym_env_ids(envs), obs

    train_ids, _ = asyncio.run(envs_of(GymEnvGroupBuilder("llm/Math-v0", 2, 5, split="train")))
    test_ids, _ = asyncio.run(envs_of(GymEnvGroupBuilder("llm/Math-v0", 2, 5, split="test")))
    assert not set(train_ids) & set(test_ids)
    again, _ = asyncio.run(envs_of(GymEnvGroupBuilder("llm/Math-v0", 2, 6, split="train")))
    assert sorted(again) == sorted(train_ids)
    # Type-exact keys: digits=2 and digits=2.0 are different make kwargs.
    assert grouping._freeze({"x": True}) != grouping._freeze({"x": 1})
    assert grouping._freeze({"x": [1]}) != grouping._freeze({"x": (1,)})

    llm_gym.register_env("llmtest/PoolAdd-v0", "tests._gym_sources:AddSource")
    old_ids, _ = asyncio.run(envs_of(GymEnvGroupBuilder("llmtest/PoolAdd-v0", 2, 1)))
    with pytest.warns(UserWarning, match="Overriding"):
        llm_gym.register_env("llmtest/PoolAdd-v0", "tests._gym_sources:AddSource", high=20)
    new_ids, _ = asyncio.run(envs_of(GymEnvGroupBuilder("llmtest/PoolAdd-v0", 2, 1)))
    assert not set(old_ids) & set(new_ids)  # envs of the old registration were dropped


def test_builder_pickles_without_envs_or_pool_state():
    builder = GymEnvGroupBuilder("llm/Math-v0", group_size=2, seed=9, tokenizer="byte")

    async def go(b):
        envs = await b.make_envs()
        obs = [(await e.initial_observation())[0] for e in envs]
        await b.cleanup()
        return obs

    before = asyncio.run(go(builder))
    state = builder.__getstate__()
    assert state["_envs"] == [] and state["_pool_key"] is None
    assert not any(isinstance(v, gym.Env) for v in state.values())
    clone = pickle.loads(pickle.dumps(builder))
    assert asyncio.run(go(clone)) == before


def test_token_sequence_builds_its_stacked_space_lazily():
    space = TokenSequence(300, seed=3)
    assert space.stack and "_stacked_feature_space" not in space.__dict__
    stacked = space.stacked_feature_space
    assert stacked == batch_space(space.feature_space, 1) and space.stacked_feature_space is stacked
    x = np.array([1, 2, 299], dtype=np.int64)
    assert [int(np.asarray(t).item()) for t in iterate(space.stacked_feature_space, x)] == [1, 2, 299]
    assert space.from_jsonable(space.to_jsonable([x]))[0].tolist() == [1, 2, 299]
    assert gym.spaces.flatten(space, x).tolist() == gym.spaces.flatten(
        gym.spaces.Sequence(gym.spaces.Discrete(300), stack=True), x
    ).tolist()
    clone = pickle.loads(pickle.dumps(space))
    assert clone == space and clone.sample().dtype == np.int64
    a, b = TokenSequence(300, seed=5), TokenSequence(300, seed=5)
    assert a.sample().tolist() == b.sample().tolist()


def test_envs_made_by_name_share_renderer_and_prompt_cache():
    one, two = gym.make("llm/Math-v0").unwrapped, gym.make("llm/Math-v0").unwrapped
    assert one.renderer is two.renderer
    assert one.source._prompts is two.source._prompts
    obs_one, _ = one.reset(seed=4)
    obs_two, _ = two.reset(seed=4)
    assert obs_one.tolist() == obs_two.tolist()
    # Different split or tokenizer object: still correct, cache keyed by task table and renderer.
    test_env = gym.make("llm/Math-v0", split="test").unwrapped
    assert test_env.source._prompts is not one.source._prompts
    own = gym.make("llm/Math-v0", tokenizer=llm_gym.load_tokenizer("byte")).unwrapped
    assert own.reset(seed=4)[0].tolist() == obs_one.tolist()
