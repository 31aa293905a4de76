"""`rollout_retries` / `--rollout-retries N`: the trainer's rollouts under `RetryOnFailure`.

First without a model: the flag and its error; a retried rollout samples under a key of its own
(the group's next one, never the failed rollout's), and the trainer keeps a group's trajectories in
slot order where the strategy returns them in completion order; the batch sampled ahead carries
how many groups its sampling dropped, also through a checkpoint. Then tiny real runs on 1-digit
addition (a random tiny model: rewards do not matter here, every group is trained): an env error
stops a run with 0 retries and is retried with 1, in the synchronous and the asynchronous loop; a
group that always fails is dropped and counted while the run goes on; a step whose every group was
dropped warns and trains on nothing; with retries but no failure a run trains what a run without
retries trains. The run on Ray workers with a worker killed mid-rollout is marked slow."""

from __future__ import annotations

import asyncio
import os
import warnings
from pathlib import Path
from typing import Any

import pytest

from llm_gym import GymRLDataset
from llm_gym.completers import TokenCompleter, TokensWithLogprobs
from llm_gym.model_input import ModelInput
from llm_gym.rl import Env, EnvGroupBuilder, RetryOnFailure, StepResult
from llm_gym.rl.rollout_keys import current_rollout_key
from tests._grpo_helpers import train_records
from trainers.cli_train import build_parser, config_from_args
from trainers.grpo import trainer
from trainers.grpo.async_rollouts import AsyncRollouts, SampledBatch
from trainers.grpo.config import ConfigError, GRPOConfig

TIMING_KEYS = ("time", "tokens_per_s", "sample_seconds", "step_seconds", "step_cpu_seconds")


# --- the flag --------------------------------------------------------------------------------------
def test_the_flag_parses_and_a_negative_count_is_a_one_line_error():
    assert GRPOConfig().rollout_retries == 0
    assert config_from_args(["--rollout-retries", "3"]).rollout_retries == 3
    assert "--rollout-retries" in build_parser().format_help()
    with pytest.raises(ConfigError, match=r"rollout_retries=-1 must be >= 0") as exc:
        GRPOConfig(rollout_retries=-1)._check_ranges()
    assert "\n" not in str(exc.value)
    assert trainer.rollout_strategy(GRPOConfig()) is None  # FailFast, as without the field
    strategy = trainer.rollout_strategy(GRPOConfig(rollout_retries=3))
    assert strategy is not None and strategy.catches_group_errors
    assert getattr(strategy, "inner") == RetryOnFailure(max_retries=3)


# --- keys and order, without a model ----------------------------------------------------------------
class _KeyPolicy(TokenCompleter):
    """Answers with one token naming the trajectory key it was called under: 100 + its index."""

    def __init__(self) -> None:
        self.paths: list[tuple[int, ...]] = []

    async def __call__(self, model_input: ModelInput, stop: Any, *, max_tokens: int | None = None
                       ) -> TokensWithLogprobs:
        key = current_rollout_key()
        assert key is not None and key.is_trajectory
        self.paths.append(key.path)
        return TokensWithLogprobs([100 + key.path[1]], [-1.0])


class _EnvFailed(Exception):
    pass


class _SlotEnv(Env):
    """Rewards `reward`; takes `yields` turns of the event loop in its step, so envs with fewer
    finish first (no clock involved); raises on its step when `fail`."""

    def __init__(self, reward: float, yields: int, fail: bool) -> None:
        self.reward, self.yields, self.fail = reward, yields, fail

    async def initial_observation(self):
        return ModelInput.from_ints([1, 2]), [10]

    async def step(self, action, *, extra=None) -> StepResult:
        for _ in range(self.yields):
            await asyncio.sleep(0)
        if self.fail:
            raise _EnvFailed("slot failed")
        return StepResult(reward=self.reward, episode_done=True, next_observation=ModelInput.from_ints([]),
                          next_stop_condition=[10])


class _SlotBuilder(EnvGroupBuilder):
    """Groups of 3 whose slot i finishes after slot i + 1 (reverse completion order); call c of
    `make_envs` gives rewards 10c + i, and its first call's slot `fail_slot` raises."""

    def __init__(self, fail_slot: int | None) -> None:
        self.fail_slot, self.calls = fail_slot, 0

    async def make_envs(self):
        call, self.calls = self.calls, self.calls + 1
        return [_SlotEnv(10.0 * call + i, yields=3 * (3 - i), fail=call == 0 and i == self.fail_slot)
                for i in range(3)]


def _rollout(strategy, builders) -> tuple[list[list[float]], list[list[int]], _KeyPolicy]:
    policy = _KeyPolicy()
    groups = asyncio.run(trainer._rollout_groups(builders, policy, None, strategy=strategy))
    rewards = [[t.transitions[0].reward for t in g.trajectories_G] for g in groups]
    keys = [[t.transitions[0].ac.tokens[0] - 100 for t in g.trajectories_G] for g in groups]
    return rewards, keys, policy


def test_a_retried_rollout_samples_under_a_key_of_its_own_and_groups_keep_slot_order():
    strategy = trainer.rollout_strategy(GRPOConfig(rollout_retries=1))
    rewards, keys, policy = _rollout(strategy, [_SlotBuilder(None), _SlotBuilder(fail_slot=1)])
    # group 1's slot 1 failed after sampling under key (1, 1); its retry, on the first env of a
    # fresh group (reward 10), sampled under the group's next key (1, 3), never a sibling's
    assert sorted(policy.paths) == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (1, 3)]
    assert keys == [[0, 1, 2], [0, 2, 3]]
    assert rewards == [[0.0, 1.0, 2.0], [0.0, 2.0, 10.0]]  # slot order, then the retry
    # not vacuous: the strategy on its own returns them in completion order
    rewards, keys, _ = _rollout(RetryOnFailure(max_retries=1), [_SlotBuilder(fail_slot=1)])
    assert rewards == [[2.0, 0.0, 10.0]] and keys == [[2, 0, 3]]


def test_a_batch_sampled_ahead_carries_its_dropped_groups_through_a_checkpoint():
    import torch

    async def sample(step, policy):
        return [f"group of step {step}"], step  # step s dropped s groups

    model = torch.nn.Linear(1, 1, bias=False)
    with AsyncRollouts(sample, 1, floor=0, end_step=3) as rollouts:
        rollouts.policy_updated(model, 0)
        taken = [rollouts.take(0)]
        rollouts.policy_updated(model, 1)
        taken.append(rollouts.take(1))
        [ahead] = rollouts.drain()
    assert [b.groups_dropped for b in taken] == [0, 1]
    assert SampledBatch.from_state(ahead.state()).groups_dropped == 2


# --- tiny runs -----------------------------------------------------------------------------------
class _FlakyEnv:
    def __init__(self, env, fail) -> None:
        self.env, self.fail = env, fail

    async def initial_observation(self):
        return await self.env.initial_observation()

    async def step(self, action, *, extra=None):
        if self.fail():
            raise _EnvFailed("the env crashed")
        return await self.env.step(action, extra=extra)


class _FlakyBuilder(EnvGroupBuilder):
    """`builder`'s envs, whose steps raise when `fail()` says so (asked once a step)."""

    def __init__(self, builder, fail) -> None:
        self.builder, self.fail = builder, fail

    async def make_envs(self):
        return [_FlakyEnv(e, self.fail) for e in await self.builder.make_envs()]

    async def cleanup(self):
        await self.builder.cleanup()

    def logging_tags(self):
        return self.builder.logging_tags()


class _FlakyDataset:
    """Math-v0 groups (4 of 2 a batch) where the groups in `always` fail every step and group
    `once` fails the first step taken in it over the run."""

    def __init__(self, always: frozenset[int] = frozenset(), once: int | None = None) -> None:
        self.inner = GymRLDataset("llm/Math-v0", batch_size=4, group_size=2, seed=0, digits=1)
        self.always, self.once, self.failed_once = always, once, False

    def _fails_once(self) -> bool:
        fail, self.failed_once = not self.failed_once, True
        return fail

    def get_batch(self, index):
        builders = []
        for i, b in enumerate(self.inner.get_batch(index)):
            if i in self.always:
                builders.append(_FlakyBuilder(b, lambda: True))
            elif i == self.once:
                builders.append(_FlakyBuilder(b, self._fails_once))
            else:
                builders.append(b)
        return builders

    def __len__(self):
        return len(self.inner)


def _cfg(tmp_path, name: str, **kw) -> GRPOConfig:
    base = dict(model="tiny", env="llm/Math-v0", env_kwargs={"digits": 1}, sft_steps=0,
                group_size=2, groups_per_batch=4, max_tokens=2, eval_problems=2, steps=2,
                eval_every=0, micro_batch_size=8, output_dir=str(tmp_path), run_name=name,
                remove_constant_reward_groups=False, progress=False, seed=0, cpu_threads=1)
    base.update(kw)
    return GRPOConfig(**base)


@pytest.mark.parametrize("max_staleness", [0, 1], ids=["sync", "async"])
def test_an_env_error_stops_a_run_without_retries_and_is_retried_with_them(tmp_path, max_staleness):
    with pytest.raises(_EnvFailed, match="the env crashed"):
        trainer.train(_cfg(tmp_path, "no-retries", max_staleness=max_staleness),
                      dataset=_FlakyDataset(once=1))
    cfg = _cfg(tmp_path, "retries", rollout_retries=1, max_staleness=max_staleness)
    trainer.train(cfg, dataset=_FlakyDataset(once=1))
    records = train_records(cfg.run_dir)
    assert sorted(records) == [1, 2]
    # the failure is in step 1's batch (sampled in parallel with step 2's when asynchronous)
    retried = [records[s]["rollouts/retried"] for s in (1, 2)]
    assert retried == [1, 0] if max_staleness == 0 else sum(retried) == 1
    assert [records[s]["rollouts/groups_dropped"] for s in (1, 2)] == [0, 0]
    assert [records[s]["datums"] for s in (1, 2)] == [8, 8]  # 4 groups of 2, none lost or doubled


def test_a_group_that_always_fails_is_dropped_and_counted(tmp_path):
    cfg = _cfg(tmp_path, "dropped", rollout_retries=2)
    summary = trainer.train(cfg, dataset=_FlakyDataset(always=frozenset({0})))
    records = train_records(cfg.run_dir)
    assert [records[s]["rollouts/groups_dropped"] for s in (1, 2)] == [1, 1]
    assert [records[s]["datums"] for s in (1, 2)] == [6, 6]  # the other 3 groups train
    assert [records[s]["rollouts/retried"] for s in (1, 2)] == [0, 0]  # a dropped group's: logged
    assert summary["empty_steps"] == 0


def test_a_step_whose_every_group_was_dropped_warns_and_trains_on_nothing(tmp_path, capsys):
    cfg = _cfg(tmp_path, "all-dropped", rollout_retries=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary = trainer.train(cfg, dataset=_FlakyDataset(always=frozenset(range(4))))
    empty = [str(w.message) for w in caught if "trained on no datum" in str(w.message)]
    assert len(empty) == 1, empty  # once a run
    assert "each of its 4 groups was dropped" in empty[0] and "--rollout-retries (now 1)" in empty[0]
    records = train_records(cfg.run_dir)
    assert [records[s]["rollouts/groups_dropped"] for s in (1, 2)] == [4, 4]
    assert [records[s]["datums"] for s in (1, 2)] == [0, 0]
    assert summary["empty_steps"] == 2 and summary["empty_steps_dropped"] == 2
    # the run's last word names the cause it had, not the constant-reward one it did not
    (line,) = [x for x in capsys.readouterr().out.splitlines() if "trained on no datum" in x]
    assert line.startswith("2 of 2 GRPO steps trained on no datum; 2 because every group was dropped")
    assert "--rollout-retries (now 1)" in line and "different rewards" not in line


def test_retries_without_a_failure_train_what_a_run_without_retries_trains(tmp_path):
    runs = {}
    for retries in (0, 2):
        cfg = _cfg(tmp_path, f"retries{retries}", rollout_retries=retries, group_size=4,
                   groups_per_batch=2)
        trainer.train(cfg, dataset=GymRLDataset("llm/Math-v0", batch_size=2, group_size=4, seed=0,
                                                digits=1))
        runs[retries] = {s: {k: v for k, v in r.items() if k not in TIMING_KEYS}
                         for s, r in train_records(cfg.run_dir).items()}
    with_retries = {s: {k: v for k, v in r.items() if not k.startswith("rollouts/")}
                    for s, r in runs[2].items()}
    assert with_retries == runs[0]
    assert all(r["rollouts/retried"] == r["rollouts/groups_dropped"] == 0 for r in runs[2].values())
    assert not any(k.startswith("rollouts/") for r in runs[0].values() for k in r)


# --- Ray workers: a worker killed mid-rollout ------------------------------------------------------
class _KillOnce(Env):
    """`env`, whose first step in the run (over all workers: `marker` records it) kills the
    worker process it runs in, as an OOM kill would."""

    def __init__(self, env, marker: str) -> None:
        self.env, self.marker = env, marker

    async def initial_observation(self):
        return await self.env.initial_observation()

    async def step(self, action, *, extra=None):
        try:
            fd = os.open(self.marker, os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            return await self.env.step(action, extra=extra)
        os.close(fd)
        os._exit(1)


class _KillOnceBuilder(EnvGroupBuilder):
    # no compute_group_rewards: Math's are zeros, which the driver then gives without its envs
    def __init__(self, builder, marker: str) -> None:
        self.builder, self.marker = builder, marker

    async def make_envs(self):
        return [_KillOnce(e, self.marker) for e in await self.builder.make_envs()]

    async def cleanup(self):
        await self.builder.cleanup()

    def logging_tags(self):
        return self.builder.logging_tags()


class _KillOnceDataset:
    def __init__(self, marker: Path, batch_size: int, group_size: int) -> None:
        self.inner = GymRLDataset("llm/Math-v0", batch_size=batch_size, group_size=group_size, seed=0,
                                  digits=1)
        self.marker = str(marker)

    def get_batch(self, index):
        return [_KillOnceBuilder(b, self.marker) for b in self.inner.get_batch(index)]

    def __len__(self):
        return len(self.inner)


@pytest.mark.slow
def test_a_run_on_ray_workers_survives_a_killed_worker_and_trains_each_group_once(tmp_path):
    pytest.importorskip("ray")
    marker = tmp_path / "killed"
    group_size, groups = 2, 4
    # a lost worker fails every rollout of its groups in flight: group_size retries save a group
    cfg = _cfg(tmp_path, "ray", rollout_workers=2, rollout_retries=group_size,
               group_size=group_size, groups_per_batch=groups)
    trainer.train(cfg, dataset=_KillOnceDataset(marker, groups, group_size))
    assert marker.exists()  # a worker was killed
    records = train_records(cfg.run_dir)
    assert sorted(records) == [1, 2]
    first = records[1]
    assert first["rollouts/retried"] + first["rollouts/groups_dropped"] >= 1
    for record in records.values():  # every group that came back trained once, whole
        assert record["datums"] == (groups - record["rollouts/groups_dropped"]) * group_size
    assert records[2]["rollouts/retried"] == records[2]["rollouts/groups_dropped"] == 0
