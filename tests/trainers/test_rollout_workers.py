"""`trainers.rollout_workers`: env groups in Ray actors, sampling in the driver.

The module starts one local Ray cluster (2 CPUs, no dashboard) for its tests and shuts it down at
the end; those tests (marked slow) skip only when ray is not installed (CI installs it through the
`ray` extra); the one that checks the error a missing ray gives runs either way. Ordering between the driver and a
worker (kill a worker while a step is in flight) uses a `Gate` actor, never sleeps. The helper
envs live at module level so the workers can import them.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import random
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Any, Sequence

import pytest

from llm_gym.completers import TokenCompleter, TokensWithLogprobs
from llm_gym.model_input import ModelInput
from llm_gym.rl.rollout_limits import RolloutLimits
from llm_gym.rl.rollout_strategy import FailFast, RetryOnFailure
from llm_gym.rl.rollouts import do_group_rollout_and_filter_constant_reward
from llm_gym.rl.types import Env, EnvGroupBuilder, StepResult, TrajectoryGroup
from trainers.rollout_workers import (
    RAY_EXTRA_HINT,
    RayRolloutWorkers,
    RemoteGroupBuilder,
    WorkerLostError,
    check_ray_available,
)

# The tests on a Ray cluster are slow: the cluster and its actors take ~10 s to start on 2 cores,
# the module ~40 s. The two without one (ray missing, import hygiene) stay in the fast suite.
on_ray = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


# --- a deterministic policy and the helper envs -----------------------------------------------------
class HashPolicy(TokenCompleter):
    """Replies with a number drawn from a generator seeded by the observation's tokens, then the
    first single-token stop: deterministic, and different for different observations, so equal
    trajectories mean equal observations."""

    async def __call__(self, model_input: ModelInput, stop: Any, *, max_tokens: int | None = None
                       ) -> TokensWithLogprobs:
        rng = random.Random(zlib.crc32(repr(model_input.to_ints()).encode()))
        tokens = list(str(rng.randint(0, 20)).encode())
        tokens += [s for s in stop if isinstance(s, int)][:1]
        await asyncio.sleep(0)
        return TokensWithLogprobs(tokens, [-0.5] * len(tokens))


class Gate:
    """An async Ray actor (wrapped with `ray.remote` in the tests): workers `arrive()` and block
    until the test `release()`s them; the test waits for `n` arrivals with `wait_arrivals(n)`."""

    def __init__(self) -> None:
        self.arrived = 0
        self.changed = asyncio.Condition()
        self.opened = asyncio.Event()

    async def arrive(self) -> None:
        async with self.changed:
            self.arrived += 1
            self.changed.notify_all()
        await self.opened.wait()

    async def wait_arrivals(self, n: int) -> int:
        async with self.changed:
            await self.changed.wait_for(lambda: self.arrived >= n)
        return self.arrived

    async def release(self) -> None:
        self.opened.set()


class CountEnv(Env):
    """Two turns on the group's seed: each turn's observation extends the last with the action;
    the first step waits at `gate` (when given); reward is the action's digit sum mod 3. Reports the
    worker's pid when `report_pid`, the `set_max_tool_calls` value it was given, and raises
    ValueError on an action "13" when `fail_on_13`."""

    def __init__(self, seed: int, gate: Any, report_pid: bool, fail_on_13: bool) -> None:
        self.tokens = [48 + seed % 10, 48 + (seed // 10) % 10]
        self.gate = gate
        self.report_pid = report_pid
        self.fail_on_13 = fail_on_13
        self.turn = 0
        self.max_tool_calls: int | None = None

    def set_max_tool_calls(self, n: int) -> None:
        self.max_tool_calls = n

    async def initial_observation(self):
        return ModelInput.from_ints(self.tokens), [10]

    async def step(self, action, *, extra=None) -> StepResult:
        if self.turn == 0 and self.gate is not None:
            await self.gate.arrive.remote()
        if self.fail_on_13 and bytes(action[:2]) == b"13":
            raise ValueError("CountEnv: thirteen is unlucky")
        self.turn += 1
        self.tokens = self.tokens + list(action)
        metrics: dict[str, float | int] = {"turn": self.turn}
        if self.report_pid:
            metrics["pid"] = os.getpid()
        if self.max_tool_calls is not None:
            metrics["max_tool_calls"] = self.max_tool_calls
        done = self.turn >= 2
        return StepResult(reward=float(sum(action) % 3), episode_done=done,
                          next_observation=ModelInput.from_ints(self.tokens), next_stop_condition=[10],
                          metrics=metrics)


class CountBuilder(EnvGroupBuilder):
    """G `CountEnv`s on `seed`; group rewards read the members' last action from the envs (so they
    need the real envs) and mark each trajectory's last transition `graded`."""

    def __init__(self, seed: int, group_size: int = 2, gate: Any = None, report_pid: bool = False,
                 fail_on_13: bool = False) -> None:
        self.seed = seed
        self.group_size = group_size
        self.gate = gate
        self.report_pid = report_pid
        self.fail_on_13 = fail_on_13

    async def make_envs(self) -> Sequence[Env]:
        return [CountEnv(self.seed, self.gate, self.report_pid, self.fail_on_13)
                for _ in range(self.group_size)]

    async def compute_group_rewards(self, trajectory_group, env_group):
        assert all(isinstance(env, CountEnv) for env in env_group)  # the real envs, in the worker
        for trajectory in trajectory_group:  # graders may edit what they grade (curricula do)
            trajectory.transitions[-1].metrics["graded"] = 1
        return [(float(env.tokens[-1] % 2), {"group_turns": env.turn}) for env in env_group]


# --- fixtures and helpers ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'llm-gym[ray]')")
    # Workers import this module (the helper envs) by name: give them the repository root.
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": path}})
    yield ray
    ray.shutdown()


def canon(group: TrajectoryGroup | None) -> Any:
    """A group as plain data (observations, actions, logprobs, rewards, metrics, stop reasons,
    group rewards), with the trajectories sorted: strategies that retry return completion order."""
    assert group is not None
    rows = []
    for traj, final, metrics in zip(group.trajectories_G, group.final_rewards_G, group.metrics_G):
        transitions = [(t.ob.to_ints(), t.ac.tokens, t.ac.maybe_logprobs, t.reward, t.episode_done,
                        sorted(t.metrics.items())) for t in traj.transitions]
        rows.append(repr((transitions, traj.final_ob.to_ints(), traj.stop_reason, final,
                          sorted(metrics.items()))))
    return sorted(rows)


def rollout(builders: Sequence[EnvGroupBuilder], strategy=None, limits=None) -> list[TrajectoryGroup | None]:
    async def main():
        return await asyncio.gather(*[
            do_group_rollout_and_filter_constant_reward(HashPolicy(), b, None, None, False,
                                                        strategy=strategy, limits=limits)
            for b in builders])

    return asyncio.run(main())


def source_batch(env_id: str, batch_size: int = 3, group_size: int = 4, seed: int = 7):
    """The groups the trainer rolls out for `env_id` (`make_dataset`'s `RunEnv.dataset`)."""
    from trainers.grpo.fit import RunEnv

    return RunEnv(env_id, {}).dataset("train", batch_size, group_size, seed).get_batch(0)


def groups_held(ray, pool: RayRolloutWorkers) -> list[int]:
    return [groups for groups, _ in ray.get([w.holdings.remote() for w in pool.workers])]


# --- 1. the same trajectories as in-process ---------------------------------------------------------
@on_ray
@pytest.mark.parametrize("env_id", ["llm/Math-v0", "llm/GuessNumber-v0", "llm/PairwisePreference-v0"])
def test_trajectories_equal_in_process(ray_cluster, env_id):
    local = rollout(source_batch(env_id))
    with RayRolloutWorkers(2) as pool:
        wrapped = pool.wrap(source_batch(env_id))
        assert all(isinstance(b, RemoteGroupBuilder) for b in wrapped)
        remote = rollout(wrapped)
        # Every group was cleaned up in its worker; the dataset's one EnvSource went to each worker
        # once, shared by the groups there (3 groups on 2 workers).
        assert ray_cluster.get([w.holdings.remote() for w in pool.workers]) == [(0, 1), (0, 1)]
    assert [canon(g) for g in remote] == [canon(g) for g in local]
    # Not vacuous: multi-turn episodes took turns; the group-reward env gave group rewards.
    turns = [len(t.transitions) for g in local if g for t in g.trajectories_G]
    if env_id == "llm/GuessNumber-v0":
        assert max(turns) > 1
    if env_id == "llm/PairwisePreference-v0":
        assert any(r != 0.0 for g in local if g for r in g.final_rewards_G)


@on_ray
def test_group_rewards_seams_and_errors_cross_the_boundary(ray_cluster):
    limits = RolloutLimits(max_tool_calls=3)
    builders = [CountBuilder(seed) for seed in (11, 42)]
    local = rollout(builders, limits=limits)
    with RayRolloutWorkers(2) as pool:
        remote = rollout(pool.wrap(CountBuilder(seed) for seed in (11, 42)), limits=limits)
        assert [canon(g) for g in remote] == [canon(g) for g in local]
        first = remote[0]
        assert first is not None
        assert first.trajectories_G[0].transitions[0].metrics["max_tool_calls"] == 3
        assert first.metrics_G[0] == {"group_turns": 2}
        assert first.trajectories_G[0].transitions[-1].metrics["graded"] == 1  # the grader's edit
        # An env's exception comes back as itself (type and message), as in-process.
        seed_with_13 = next(s for s in range(100) if _first_reply(s) == b"13")
        with pytest.raises(ValueError, match="thirteen is unlucky"):
            rollout(pool.wrap([CountBuilder(seed_with_13, fail_on_13=True)]), strategy=FailFast())
        assert groups_held(ray_cluster, pool) == [0, 0]


def _first_reply(seed: int) -> bytes:
    ob = ModelInput.from_ints([48 + seed % 10, 48 + (seed // 10) % 10])
    reply = asyncio.run(HashPolicy()(ob, [10]))
    return bytes(reply.tokens[:2])


# --- 2. a worker killed mid-rollout -----------------------------------------------------------------
async def _kill_mid_step(ray, pool: RayRolloutWorkers, builder: CountBuilder, strategy) -> Any:
    """Roll out `builder` through `pool`; once every member's first step is blocked in its worker,
    kill that worker, then open the gate. Returns the group, or the exception it raised."""
    [wrapped] = pool.wrap([builder])
    assert isinstance(wrapped, RemoteGroupBuilder)
    task = asyncio.ensure_future(do_group_rollout_and_filter_constant_reward(
        HashPolicy(), wrapped, None, None, False, strategy=strategy))
    await builder.gate.wait_arrivals.remote(builder.group_size)
    assert wrapped.worker_index is not None
    victim = pool.workers[wrapped.worker_index]
    ray.kill(victim)
    await builder.gate.release.remote()
    try:
        result = await task
    except Exception as exc:  # noqa: BLE001 - returned for the test to check
        result = exc
    assert pool.workers[wrapped.worker_index] is not victim  # replaced in its slot
    return result


@on_ray
def test_killed_worker_is_replaced_and_its_group_retried(ray_cluster):
    ray = ray_cluster
    reference = rollout([CountBuilder(5, group_size=2)], strategy=RetryOnFailure(max_retries=2))
    gate = ray.remote(Gate).remote()
    with RayRolloutWorkers(2) as pool:
        group = asyncio.run(_kill_mid_step(ray, pool, CountBuilder(5, group_size=2, gate=gate),
                                           RetryOnFailure(max_retries=2)))
        assert isinstance(group, TrajectoryGroup)
        # Nothing lost, nothing counted twice, and the same episodes as an unkilled run.
        assert len(group.trajectories_G) == 2
        assert canon(group) == canon(reference[0])
        assert [e.error_type for e in group.rollout_errors] == ["WorkerLostError"] * 2
        assert pool.replacements == 1
        assert len(pool.workers) == 2
        assert all(isinstance(pid, int) for pid in ray.get([w.ping.remote() for w in pool.workers]))
        assert groups_held(ray, pool) == [0, 0]


@on_ray
@pytest.mark.parametrize("strategy", [FailFast(), RetryOnFailure(max_retries=1)], ids=repr)
def test_killed_worker_beyond_the_budget_fails_as_the_strategy_says(ray_cluster, strategy):
    ray = ray_cluster
    gate = ray.remote(Gate).remote()
    with RayRolloutWorkers(2) as pool:
        result = asyncio.run(_kill_mid_step(ray, pool, CountBuilder(5, group_size=2, gate=gate), strategy))
        if isinstance(strategy, FailFast):  # no budget: the error propagates
            assert isinstance(result, WorkerLostError)
        else:  # two members lost, one retry: the group is skipped
            assert result is None
        assert pool.replacements == 1
        assert groups_held(ray, pool) == [0, 0]  # the retry's group in the new worker was cleaned up
        # The pool keeps working after the loss.
        again = rollout(pool.wrap([CountBuilder(5, group_size=2)]))
        assert canon(again[0]) == canon(rollout([CountBuilder(5, group_size=2)])[0])


# --- 4. bounded, spread, no leaks -------------------------------------------------------------------
@on_ray
def test_groups_spread_over_a_bounded_pool_and_close_kills_the_actors(ray_cluster):
    ray = ray_cluster
    pool = RayRolloutWorkers(2)
    worker_pids = set(ray.get([w.ping.remote() for w in pool.workers]))
    wrapped = pool.wrap(CountBuilder(seed, report_pid=True) for seed in range(6))
    groups = rollout(wrapped)
    pids = [g.trajectories_G[0].transitions[0].metrics["pid"] for g in groups if g is not None]
    assert len(pids) == 6
    assert set(pids) == worker_pids and len(worker_pids) == 2  # N actors, all of them used
    assert sorted(pids.count(p) for p in worker_pids) == [3, 3]  # least-loaded: even spread
    assert sorted(b.worker_index for b in wrapped) == [0, 0, 0, 1, 1, 1]  # type: ignore[attr-defined]
    assert pool._load == [0, 0]  # every group released its slot
    with pytest.raises(TypeError, match="does not pickle"):
        pickle.dumps(wrapped[0])
    actors = pool.workers
    pool.close()
    assert all(_dies(ray, actor) for actor in actors)
    with pytest.raises(RuntimeError, match="closed"):
        pool.wrap([CountBuilder(1)])


def _dies(ray, actor, within_s: float = 120.0) -> bool:
    """Whether calls to `actor` fail as a dead actor's do within `within_s` (a generous bound: a
    kill reaches the actor asynchronously, through Ray's control store, so a call made just after
    `ray.kill` may still be served)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            ray.get(actor.ping.remote(), timeout=within_s)
        except ray.exceptions.RayActorError:
            return True
        time.sleep(0.05)
    return False


# --- 3. without ray ---------------------------------------------------------------------------------
def test_without_ray_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    for make in (check_ray_available, lambda: RayRolloutWorkers(2)):
        with pytest.raises(ImportError) as info:
            make()
        message = str(info.value)
        assert "\n" not in message
        assert RAY_EXTRA_HINT in message and "llm-gym[ray]" in message


def test_importing_the_module_imports_no_ray():
    code = "import sys, trainers.rollout_workers, llm_gym; assert 'ray' not in sys.modules, 'ray imported'"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
