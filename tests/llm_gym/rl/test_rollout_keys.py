"""`llm_gym.rl.rollout_keys`: which rollout a policy call comes from.

A group's task is marked with `group_key(i)`; each `do_single_rollout` under it takes the next
child key in the order the trajectories start; a policy reads the key in its own call and counts
the trajectory's calls; sibling groups and code outside a marked group see their own key or none."""

from __future__ import annotations

import asyncio

import pytest

from llm_gym.completers import TokensWithLogprobs
from llm_gym.model_input import ModelInput
from llm_gym.rl.rollout_keys import RolloutKey, call_seed, current_rollout_key, group_key, trajectory_key
from llm_gym.rl.rollout_strategy import FailFast
from llm_gym.rl.rollouts import do_group_rollout, do_single_rollout
from llm_gym.rl.types import Env, EnvGroupBuilder, StepResult


class _Turns(Env):
    """`turns` turns; each step first yields to the loop `delay` times (a stand-in for awaited
    tool or grader work), so its next call arrives later than its siblings'."""

    def __init__(self, turns: int, delay: int) -> None:
        self.turns, self.delay, self.turn = turns, delay, 0

    async def initial_observation(self):
        return ModelInput.from_ints([1, 2]), [0]

    async def step(self, action, *, extra=None) -> StepResult:
        for _ in range(self.delay):
            await asyncio.sleep(0)
        self.turn += 1
        done = self.turn >= self.turns
        return StepResult(reward=0.0, episode_done=done, next_observation=ModelInput.from_ints([1, 2]),
                          next_stop_condition=[0])


class _Builder(EnvGroupBuilder):
    def __init__(self, delays: list[int], turns: int = 3) -> None:
        self.delays, self.turns = delays, turns

    async def make_envs(self):
        return [_Turns(self.turns, d) for d in self.delays]


class _KeyRecorder:
    """A policy that answers with nothing and records the key of every call it gets."""

    def __init__(self) -> None:
        self.calls: list[tuple[tuple[int, ...], int] | None] = []

    async def __call__(self, ob, stop, **_):
        key = current_rollout_key()
        self.calls.append(None if key is None else (key.path, key.next_call()))
        await asyncio.sleep(0)
        return TokensWithLogprobs([5], [-1.0])


async def _marked_groups(builders, policy):
    async def one(index, builder):
        group_key(index)
        return await do_group_rollout(builder, policy, FailFast())

    return await asyncio.gather(*[one(i, b) for i, b in enumerate(builders)])


@pytest.mark.parametrize("delays", [[0, 0, 0], [6, 0, 3], [0, 9, 1]])
def test_each_trajectory_of_each_group_gets_its_own_key_and_counts_its_calls(delays):
    policy = _KeyRecorder()
    asyncio.run(_marked_groups([_Builder(delays), _Builder(delays[::-1])], policy))
    assert None not in policy.calls
    # whatever order the calls arrived in, each (group, trajectory) made calls 0, 1, 2
    by_path: dict[tuple[int, ...], list[int]] = {}
    for path, index in policy.calls:  # type: ignore[misc]
        by_path.setdefault(path, []).append(index)
    assert by_path == {(g, t): [0, 1, 2] for g in (0, 1) for t in range(3)}


def test_no_key_outside_a_marked_group():
    policy = _KeyRecorder()
    asyncio.run(do_single_rollout(policy, _Turns(2, 0)))
    asyncio.run(do_group_rollout(_Builder([0, 0]), policy, FailFast()))
    assert policy.calls == [None] * (2 + 2 * 3)
    assert current_rollout_key() is None


def test_trajectory_key_nests_once_and_is_reset_after_its_block():
    async def main():
        group_key(4)
        group = current_rollout_key()
        with trajectory_key() as first:
            assert current_rollout_key() is first and first.path == (4, 0)
            with trajectory_key() as inner:  # inside a trajectory: no new key
                assert inner is None and current_rollout_key() is first
        assert current_rollout_key() is group
        with trajectory_key() as second:
            assert second.path == (4, 1)

    asyncio.run(main())
    with pytest.raises(ValueError, match="group index must be >= 0"):
        group_key(-1)


def test_call_seeds_are_stable_and_distinct():
    assert call_seed(1, 2, 3) == call_seed(1, 2, 3)
    seeds = {call_seed(s, g, t, c) for s in range(3) for g in range(4) for t in range(4) for c in range(4)}
    assert len(seeds) == 3 * 4 * 4 * 4
    assert call_seed(1, 2) != call_seed(2, 1)
    assert all(0 <= x < 2**64 for x in seeds)
    key = RolloutKey((0, 1))
    assert key.is_trajectory and [key.next_call() for _ in range(3)] == [0, 1, 2]
