"""`set_rollout_executor` / `RolloutErrorCounter` (the cookbook's `rl/rollouts.py` names)."""

from __future__ import annotations

import asyncio
import multiprocessing
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from functools import partial

import pytest

from llm_gym.rl import ProblemGroupBuilder, RolloutError, TrajectoryGroup
from llm_gym.rl.rollouts import (
    RolloutErrorCounter,
    do_group_rollout_and_filter_constant_reward,
    get_rollout_executor,
    set_rollout_executor,
)
from tests.llm_gym.rl.test_problem_env import AddEnv, TOK, IM_END  # noqa: F401 - a picklable ProblemEnv
from llm_gym.completers import TokenCompleter, TokensWithLogprobs
from llm_gym.renderers import ChatMLRenderer


class Alternating(TokenCompleter):
    """Right, wrong, right, wrong... (a module-level class, so it pickles)."""

    def __init__(self):
        self.n = 0

    async def __call__(self, model_input, stop, *, max_tokens=None):
        self.n += 1
        tokens = TOK.encode("5" if self.n % 2 else "6") + [IM_END]
        return TokensWithLogprobs(tokens, [-0.5] * len(tokens))


def _builder():
    return ProblemGroupBuilder(env_thunk=partial(AddEnv, ChatMLRenderer(TOK)), num_envs=4)


def _run(executor):
    async def main():
        set_rollout_executor(executor)
        try:
            assert get_rollout_executor() is executor
            return await do_group_rollout_and_filter_constant_reward(
                Alternating(), _builder(), None, None, False)
        finally:
            set_rollout_executor(None)

    return asyncio.run(main())


def test_groups_run_in_the_executor_with_the_same_results():
    in_process = _run(None)
    with ThreadPoolExecutor(1) as threads:
        threaded = _run(threads)
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as processes:
        spawned = _run(processes)
    assert in_process.get_total_rewards() == threaded.get_total_rewards() == spawned.get_total_rewards()
    assert sorted(in_process.get_total_rewards()) == [0.0, 0.0, 1.0, 1.0]


def test_fork_started_process_pools_are_refused():
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as pool:
        with pytest.raises(ValueError, match="spawn"):
            set_rollout_executor(pool)
    assert get_rollout_executor() is None


def test_error_counter():
    counter = RolloutErrorCounter()
    assert counter.get_metrics() == {}
    group = TrajectoryGroup([], [], [], [RolloutError("TimeoutError", "x"), RolloutError("OSError", "y"),
                                         RolloutError("TimeoutError", "z")])
    counter.ingest(group)
    counter.ingest(None)
    assert counter.get_metrics() == {
        "rollout_errors/TimeoutError": 2.0, "rollout_errors/OSError": 1.0,
        "rollout_errors/total": 3.0, "rollout_errors/groups_skipped": 1.0,
    }
