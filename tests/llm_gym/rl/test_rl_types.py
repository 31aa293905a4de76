"""The seed API's types: dataclasses, ABC defaults, datasets, and picklable builders/strategies."""

from __future__ import annotations

import asyncio
import functools
import pickle

import pytest

import llm_gym.rl as rl
from llm_gym.completers import StopCondition, TokensWithLogprobs
from llm_gym.model_input import ModelInput
from llm_gym.renderers import ChatMLRenderer
from llm_gym.rl import (
    Action,
    Env,
    EnvGroupBuilder,
    FailFast,
    MinViableGroup,
    Observation,
    ProblemEnv,
    ProblemGroupBuilder,
    RetryOnFailure,
    RLDataset,
    RLDatasetBuilder,
    RolloutError,
    StepResult,
    Trajectory,
    TrajectoryGroup,
    Transition,
)
from llm_gym.tokenizers import ByteTokenizer


def test_aliases():
    assert Action == list[int]
    assert Observation is ModelInput
    assert rl.Metrics == dict[str, float | int]
    # The cookbook's TypedDict: a plain dict at run time, with the sampler's stop reason.
    assert rl.ActionExtra(stop_reason="length") == {"stop_reason": "length"}
    assert set(rl.ActionExtra.__annotations__) == {"stop_reason"}
    assert rl.StopReason.ROLLOUT_TIMEOUT == "rollout_timeout"
    assert StopCondition == list[str] | list[int]
    for name in rl.__all__:
        assert hasattr(rl, name), name


def test_step_result_defaults_are_fresh_dicts():
    a = StepResult(reward=1.0, episode_done=True, next_observation=ModelInput.empty(), next_stop_condition=[1])
    b = StepResult(0.0, False, ModelInput.from_ints([1]), ["x"])
    assert a.metrics == {} and a.logs == {}
    a.metrics["m"] = 1
    assert b.metrics == {}


def test_transition_trajectory_and_group_returns():
    ac = TokensWithLogprobs([1, 2], [-0.1, -0.2])
    t1 = Transition(ob=ModelInput.from_ints([9]), ac=ac, reward=0.5, episode_done=False)
    t2 = Transition(ModelInput.from_ints([9, 1, 2]), ac, -0.25, True, {"m": 1.0}, {"l": "x"})
    traj = Trajectory([t1, t2], ModelInput.empty())
    assert traj.stop_reason is None and t1.metrics == {} and t2.logs == {"l": "x"}
    short = Trajectory([t1], ModelInput.from_ints([3]), stop_reason="max_turns")
    group = TrajectoryGroup([traj, short], [1.0, 0.0], [{}, {}])
    assert group.get_total_rewards() == [1.25, 0.5]
    assert group.rollout_errors == []
    group2 = TrajectoryGroup([traj], [0.0], [{}], [RolloutError("ValueError", "boom")])
    assert group2.rollout_errors[0].error_type == "ValueError"
    with pytest.raises(ValueError, match="same length"):
        TrajectoryGroup([traj, short], [1.0], [{}, {}])


def test_tokens_with_logprobs():
    t = TokensWithLogprobs([1, 2], None)
    assert t.stop_reason == "stop"
    with pytest.raises(ValueError, match="without logprobs"):
        t.logprobs
    assert TokensWithLogprobs([1], [-0.5], "length").logprobs == [-0.5]
    with pytest.raises(ValueError, match="2 tokens but 1 logprobs"):
        TokensWithLogprobs([1, 2], [-0.5])


def test_abstract_classes_cannot_be_instantiated():
    for cls in (Env, EnvGroupBuilder, RLDataset, RLDatasetBuilder):
        with pytest.raises(TypeError):
            cls()
    # TokenCompleter is a plain base class, as in the cookbook: it instantiates; calling it raises
    with pytest.raises(NotImplementedError, match="must implement"):
        asyncio.run(rl.TokenCompleter()(ModelInput.from_ints([1]), [0]))


class _OneStepEnv(Env):
    async def initial_observation(self):
        return ModelInput.from_ints([1]), [0]

    async def step(self, action, *, extra=None):
        return StepResult(1.0, True, ModelInput.empty(), [0])


class _Builder(EnvGroupBuilder):
    def __init__(self, n):
        self.n = n

    async def make_envs(self):
        return [_OneStepEnv() for _ in range(self.n)]


def test_env_group_builder_defaults():
    b = _Builder(3)
    envs = asyncio.run(b.make_envs())
    assert len(envs) == 3
    trajs = [Trajectory([], ModelInput.empty()) for _ in envs]
    assert asyncio.run(b.compute_group_rewards(trajs, envs)) == [(0.0, {})] * 3
    assert asyncio.run(b.cleanup()) is None
    assert b.logging_tags() == []


class _Dataset(RLDataset):
    def __init__(self, n_batches, batch_size):
        self.n_batches, self.batch_size = n_batches, batch_size

    def get_batch(self, index):
        if not 0 <= index < self.n_batches:
            raise IndexError(index)
        return [_Builder(index + 1) for _ in range(self.batch_size)]

    def __len__(self):
        return self.n_batches


class _DatasetBuilder(RLDatasetBuilder):
    async def __call__(self):
        return _Dataset(4, 2), None


def test_dataset_and_builder():
    train, test = asyncio.run(_DatasetBuilder()())
    assert test is None and len(train) == 4
    batch = train.get_batch(2)
    assert len(batch) == 2 and all(b.n == 3 for b in batch)


class _AddEnv(ProblemEnv):
    def __init__(self, renderer, a: int, b: int):
        super().__init__(renderer)
        self.a, self.b = a, b

    def get_question(self):
        return f"{self.a}+{self.b}"

    def check_answer(self, s):
        return s.strip() == str(self.a + self.b)

    def check_format(self, s):
        return s.strip().isdigit()

    def get_reference_answer(self):
        return str(self.a + self.b)


def test_problem_group_builder_with_partial_pickles():
    renderer = ChatMLRenderer(ByteTokenizer())
    builder = ProblemGroupBuilder(functools.partial(_AddEnv, renderer, 2, 3), num_envs=4, dataset_name="add")
    clone = pickle.loads(pickle.dumps(builder))
    assert clone.num_envs == 4 and clone.logging_tags() == ["add"]
    envs = asyncio.run(clone.make_envs())
    assert len(envs) == 4 and len({id(e) for e in envs}) == 4
    ob, _ = asyncio.run(envs[0].initial_observation())
    assert ob == asyncio.run(builder.env_thunk().initial_observation())[0]


@pytest.mark.parametrize(
    "strategy", [FailFast(), RetryOnFailure(max_retries=2, per_rollout_timeout=1.5), MinViableGroup(3, 1, 2.0)]
)
def test_strategies_pickle(strategy):
    clone = pickle.loads(pickle.dumps(strategy))
    assert clone == strategy and type(clone) is type(strategy)
