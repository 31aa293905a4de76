"""`GRPOConfig.credit` in the trainer (issue 23, item 3): `--credit turn` trains a multi-turn env
with per-turn advantages and logs bounded per-turn metrics that match the step's episodes;
`credit="episode"` (the default) logs exactly what a run without the option logs; single-turn envs
train identically under both. Tiny in-process model, one or two GRPO steps per run."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from llm_gym import GymRLDataset, ModelInput, TokensWithLogprobs
from llm_gym.rl import (
    Env,
    EnvGroupBuilder,
    RLDataset,
    Trajectory,
    TrajectoryGroup,
    Transition,
    turn_rewards,
)
from llm_gym.rl import data_processing
from tests._grpo_helpers import train_records
from trainers.cli_train import build_parser, config_from_args
from trainers.grpo import config as grpo_config
from trainers.grpo import trainer
from trainers.grpo.config import ConfigError, GRPOConfig

# Timing keys differ between any two runs; everything else of a step is determined by the seed.
_TIMING = {"time", "tokens_per_s", "sample_seconds", "step_seconds", "step_cpu_seconds"}


# ------------------------------------------------------------------------------------------------
# Configuration and flag
# ------------------------------------------------------------------------------------------------
def test_config_credits_are_the_data_processing_credits():
    assert grpo_config.CREDITS == data_processing.CREDITS
    assert GRPOConfig().credit == "episode"


def test_a_bad_credit_is_a_one_line_config_error_naming_it():
    with pytest.raises(ConfigError, match=r"^unknown credit 'turns'; choose one of episode, turn\. "
                                          r"Did you mean 'turn'\?$"):
        GRPOConfig(credit="turns").validate(check_env=False)


def test_the_credit_flag_sets_the_field_and_is_documented_in_help():
    assert config_from_args(["--credit", "turn"]).credit == "turn"
    assert config_from_args([]).credit == "episode"
    help_text = " ".join(build_parser().format_help().split())
    assert "--credit CREDIT How rewards reach tokens" in help_text and "(default: 'episode')" in help_text


# ------------------------------------------------------------------------------------------------
# The per-turn metrics, by hand
# ------------------------------------------------------------------------------------------------
def _trajectory(step_rewards):
    return Trajectory([Transition(ModelInput.from_ints([1]), TokensWithLogprobs([2], [-1.0]), r,
                                  t == len(step_rewards) - 1) for t, r in enumerate(step_rewards)],
                      ModelInput.empty())


def test_turn_metrics_are_means_by_turn_index_with_later_turns_pooled():
    # 12 turns and 2 turns; group reward 1.0 on the first episode's last turn
    group = TrajectoryGroup([_trajectory([0.5] * 12), _trajectory([0.0, 0.25])], [1.0, 0.0], [{}, {}])
    advantages_GT = np.zeros((2, 12), dtype=np.float32)
    advantages_GT[0] = np.arange(12)
    advantages_GT[1, :2] = [-1.0, -3.0]
    metrics = trainer.turn_credit_metrics(trainer.turn_credit_sums([group], [advantages_GT]))
    # 8 single turns + 1 pool, two families: bounded whatever the episode length
    assert len(metrics) == 18
    assert metrics["turn_credit/reward_mean/turn_0"] == 0.25
    assert metrics["turn_credit/advantage_abs_mean/turn_0"] == 0.5  # |0| and |-1|
    assert metrics["turn_credit/reward_mean/turn_1"] == 0.375
    assert metrics["turn_credit/advantage_abs_mean/turn_1"] == 2.0  # |1| and |-3|
    assert metrics["turn_credit/reward_mean/turn_7"] == 0.5
    # turns 8..11 of the first episode: rewards 0.5, 0.5, 0.5, 1.5; advantages 8..11
    assert metrics["turn_credit/reward_mean/turn_8plus"] == 0.75
    assert metrics["turn_credit/advantage_abs_mean/turn_8plus"] == 9.5
    # a turn index nobody reached logs nothing
    two_turns = trainer.turn_credit_metrics(trainer.turn_credit_sums(
        [TrajectoryGroup([_trajectory([0.0, 1.0])] * 2, [0.0, 0.0], [{}, {}])], [np.zeros((2, 2))]))
    assert sorted(two_turns) == sorted(f"turn_credit/{k}/turn_{t}" for k in ("reward_mean", "advantage_abs_mean")
                                       for t in (0, 1))


# ------------------------------------------------------------------------------------------------
# Real runs
# ------------------------------------------------------------------------------------------------
class _FirstTurnRewardEnv(Env):
    """Wraps an env: reward `reward` on the first turn, 0 on every later one, so returns-to-go
    differ between a group's episodes at turn 0 only."""

    def __init__(self, env, reward: float):
        self.env, self.reward, self.turns = env, reward, 0

    async def initial_observation(self):
        return await self.env.initial_observation()

    async def step(self, action, *, extra=None):
        result = await self.env.step(action, extra=extra)
        self.turns += 1
        return dataclasses.replace(result, reward=self.reward if self.turns == 1 else 0.0)


class _IndexRewardBuilder(EnvGroupBuilder):
    """Episode i of a group gets reward i: on its first turn (`first_turn`), else as its group
    reward (on its last turn). Every group is mixed, so a random-init model's episodes train."""

    def __init__(self, builder, first_turn: bool):
        self.builder, self.first_turn = builder, first_turn

    async def make_envs(self):
        envs = await self.builder.make_envs()
        return [_FirstTurnRewardEnv(e, float(i)) for i, e in enumerate(envs)] if self.first_turn else envs

    async def compute_group_rewards(self, trajectory_group, env_group):
        return [(0.0 if self.first_turn else float(i), {}) for i in range(len(trajectory_group))]

    async def cleanup(self):
        await self.builder.cleanup()

    def logging_tags(self):
        return []


class _IndexRewardDataset(RLDataset):
    def __init__(self, inner, first_turn: bool = False):
        self.inner, self.first_turn = inner, first_turn

    def get_batch(self, index):
        return [_IndexRewardBuilder(b, self.first_turn) for b in self.inner.get_batch(index)]

    def __len__(self):
        return len(self.inner)


def _cfg(tmp_path, name: str, **kw) -> GRPOConfig:
    base: dict[str, Any] = dict(
        model="tiny", env="llm/Math-v0", env_kwargs={"digits": 1}, sft_steps=0, group_size=3,
        groups_per_batch=2, max_tokens=2, eval_problems=2, steps=1, output_dir=str(tmp_path),
        run_name=name, progress=False, seed=0)
    base.update(kw)
    return GRPOConfig(**base)


def test_turn_credit_trains_guess_number_and_logs_its_per_turn_metrics(tmp_path, monkeypatch):
    seen = []  # (groups, advantages) of each step
    real = trainer.compute_advantages

    def recording(groups, *args, **kwargs):
        advantages = real(groups, *args, **kwargs)
        seen.append((list(groups), advantages))
        return advantages

    monkeypatch.setattr(trainer, "compute_advantages", recording)
    env_kwargs: dict[str, Any] = {"max_number": 5, "max_turns": 3}

    def run(credit: str) -> dict:
        cfg = _cfg(tmp_path, credit, env="llm/GuessNumber-v0", env_kwargs=env_kwargs, credit=credit)
        dataset = _IndexRewardDataset(GymRLDataset("llm/GuessNumber-v0", batch_size=2, group_size=3,
                                                   seed=0, **env_kwargs), first_turn=True)
        trainer.train(cfg, dataset=dataset)
        return train_records(cfg.run_dir)[1]

    record = run("turn")
    (groups, advantages), = seen
    assert all(a.ndim == 2 for a in advantages)  # per-turn [G, T] arrays reached the trainer
    lengths = [len(t.transitions) for g in groups for t in g.trajectories_G]
    assert max(lengths) > 1  # multi-turn episodes
    assert record["datums"] > 0 and record["grad_norm"] > 0
    logged = {k: v for k, v in record.items() if k.startswith("turn_credit/")}
    assert len(logged) == 2 * min(max(lengths), 9)
    for t in range(max(lengths)):  # the logged means are the step's episodes', turn by turn
        rewards = [r[t] for g in groups for r in turn_rewards(g) if len(r) > t]
        adv = [abs(float(row[t])) for g, a in zip(groups, advantages)
               for row, traj in zip(a, g.trajectories_G) if len(traj.transitions) > t]
        assert logged[f"turn_credit/reward_mean/turn_{t}"] == pytest.approx(np.mean(rewards))
        assert logged[f"turn_credit/advantage_abs_mean/turn_{t}"] == pytest.approx(np.mean(adv))
    # episode i's reward i came on its first turn: only turn 0 is credited with it
    assert logged["turn_credit/advantage_abs_mean/turn_0"] > 0
    assert logged["turn_credit/advantage_abs_mean/turn_1"] == 0.0

    # Episode credit on the same episodes also credits the later turns: a different gradient.
    episode = run("episode")
    assert episode["reward"] == record["reward"] and episode["sampled_tokens"] == record["sampled_tokens"]
    assert not [k for k in episode if k.startswith("turn_credit/")]
    assert episode["grad_norm"] != pytest.approx(record["grad_norm"], rel=1e-3)


def _step_metrics(cfg: GRPOConfig) -> dict:
    return {k: v for k, v in train_records(cfg.run_dir)[1].items() if k not in _TIMING}


def test_episode_credit_logs_what_a_run_without_the_option_logs(tmp_path):
    dataset = _IndexRewardDataset(GymRLDataset("llm/Math-v0", batch_size=2, group_size=3, seed=0,
                                               digits=1))
    default = _cfg(tmp_path, "default")
    trainer.train(default, dataset=dataset)
    episode = _cfg(tmp_path, "episode", credit="episode")
    trainer.train(episode, dataset=dataset)
    turn = _cfg(tmp_path, "turn", credit="turn")
    trainer.train(turn, dataset=dataset)

    reference = _step_metrics(default)
    assert reference["datums"] > 0 and reference["grad_norm"] > 0
    assert not [k for k in reference if k.startswith("turn_credit/")]
    assert _step_metrics(episode) == reference
    # single-turn episodes: turn credit trains exactly as episode credit, and adds its metrics
    turn_metrics = _step_metrics(turn)
    assert {k: v for k, v in turn_metrics.items() if not k.startswith("turn_credit/")} == reference
    assert sorted(k for k in turn_metrics if k.startswith("turn_credit/")) == [
        "turn_credit/advantage_abs_mean/turn_0", "turn_credit/reward_mean/turn_0"]
