"""Advantages and training data, checked element by element."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import numpy as np
import pytest

from llm_gym.completers import TokenCompleter, TokensWithLogprobs
from llm_gym.model_input import ModelInput
from llm_gym.rl import (
    Datum,
    Env,
    StepResult,
    Trajectory,
    TrajectoryGroup,
    Transition,
    assemble_training_data,
    compute_advantages,
    do_single_rollout,
    remove_constant_reward_groups,
    trajectory_to_data,
)
from llm_gym.rl.data_processing import DEFAULT_SCALE
from llm_gym.rl.types import PARSE_ERROR_MASKED_METRIC_KEY


def _group(rewards):
    trajs = [Trajectory([Transition(ModelInput.from_ints([1]), TokensWithLogprobs([2], [-1.0]), r, True)],
                        ModelInput.empty()) for r in rewards]
    return TrajectoryGroup(trajs, [0.0] * len(rewards), [{} for _ in rewards])


def test_advantages_none_is_group_centred():
    adv = compute_advantages([_group([1.0, 0.0, 0.0, 1.0]), _group([3.0, 0.0])], scale="none")
    np.testing.assert_allclose(adv[0], [0.5, -0.5, -0.5, 0.5])
    np.testing.assert_allclose(adv[1], [1.5, -1.5])
    assert all(a.dtype == np.float32 for a in adv)


def test_advantages_group_std():
    adv = compute_advantages([_group([1.0, 0.0, 0.0, 1.0]), _group([3.0, 0.0]), _group([2.0, 2.0])],
                             scale="group_std", eps=0.0 + 1e-6)
    s0 = np.std([1, 0, 0, 1], ddof=1)  # 0.57735
    np.testing.assert_allclose(adv[0], np.array([0.5, -0.5, -0.5, 0.5]) / (s0 + 1e-6), rtol=1e-6)
    s1 = np.std([3, 0], ddof=1)
    np.testing.assert_allclose(adv[1], [1.5 / (s1 + 1e-6), -1.5 / (s1 + 1e-6)], rtol=1e-6)
    np.testing.assert_allclose(adv[1], [0.70710677, -0.70710677], rtol=1e-5)
    np.testing.assert_array_equal(adv[2], [0.0, 0.0])  # constant group: 0, not NaN


def test_advantages_batch_std():
    adv = compute_advantages([_group([1.0, 0.0, 0.0, 1.0]), _group([3.0, 0.0])], scale="batch_std")
    centred = np.array([0.5, -0.5, -0.5, 0.5, 1.5, -1.5])
    std = centred.std(ddof=1)  # sqrt((4*0.25 + 2*2.25) / 5) = sqrt(1.1)
    assert std == pytest.approx(np.sqrt(1.1))
    np.testing.assert_allclose(np.concatenate(adv), centred / (std + 1e-6), rtol=1e-6)


def test_advantages_default_scale_per_loss():
    groups = [_group([1.0, 0.0])]
    assert DEFAULT_SCALE["grpo"] == "group_std" and DEFAULT_SCALE["importance_sampling"] == "none"
    np.testing.assert_allclose(compute_advantages(groups, loss_fn="importance_sampling")[0], [0.5, -0.5])
    np.testing.assert_allclose(compute_advantages(groups, loss_fn="ppo")[0], [0.5, -0.5])
    np.testing.assert_allclose(compute_advantages(groups, loss_fn="grpo")[0],
                               [0.5 / (np.sqrt(0.5) + 1e-6), -0.5 / (np.sqrt(0.5) + 1e-6)], rtol=1e-6)
    with pytest.raises(ValueError, match="unknown loss_fn"):
        compute_advantages(groups, loss_fn="reinforce++")
    with pytest.raises(ValueError, match="unknown advantage scale"):
        compute_advantages(groups, scale="std")


def test_advantages_use_total_returns_including_group_rewards():
    g = _group([1.0, 0.0])
    g.final_rewards_G = [0.0, 2.0]
    np.testing.assert_allclose(compute_advantages([g])[0], [-0.5, 0.5])


class _ToolEnv(Env):
    """Two turns; after the first action the env appends tool output [50, 51]."""

    def __init__(self):
        self.turn = 0

    async def initial_observation(self):
        return ModelInput.from_ints([1, 2, 3]), [0]

    async def step(self, action, *, extra=None):
        self.turn += 1
        if self.turn == 1:
            return StepResult(0.25, False, ModelInput.from_ints([1, 2, 3, *action, 50, 51]), [0])
        return StepResult(0.75, True, ModelInput.empty(), [0])


class _Scripted(TokenCompleter):
    def __init__(self):
        self.replies = [TokensWithLogprobs([10, 11], [-0.1, -0.2]),
                        TokensWithLogprobs([20, 21, 22], [-0.3, -0.4, -0.5])]

    async def __call__(self, model_input, stop, *, max_tokens=None):
        return self.replies.pop(0)


def test_multi_turn_trajectory_becomes_exactly_one_datum():
    traj = asyncio.run(do_single_rollout(_Scripted(), _ToolEnv()))
    assert len(traj.transitions) == 2
    data = trajectory_to_data(traj, traj_advantage=2.5)
    assert len(data) == 1
    d = data[0]
    # full sequence: prompt 1 2 3 | sampled 10 11 | tool 50 51 | sampled 20 21 22
    assert d.model_input.to_ints() == [1, 2, 3, 10, 11, 50, 51, 20, 21]
    inp = d.loss_fn_inputs
    np.testing.assert_array_equal(inp["target_tokens"], [2, 3, 10, 11, 50, 51, 20, 21, 22])
    np.testing.assert_array_equal(inp["mask"], [0, 0, 1, 1, 0, 0, 1, 1, 1])
    np.testing.assert_allclose(inp["logprobs"], [0, 0, -0.1, -0.2, 0, 0, -0.3, -0.4, -0.5], rtol=1e-6)
    np.testing.assert_array_equal(inp["advantages"], [0, 0, 2.5, 2.5, 0, 0, 2.5, 2.5, 2.5])
    assert inp["target_tokens"].dtype == np.int64 and inp["mask"].dtype == np.float32


def test_non_prefix_observation_starts_a_new_datum():
    t1 = Transition(ModelInput.from_ints([1, 2]), TokensWithLogprobs([3], [-0.5]), 0.0, False)
    t2 = Transition(ModelInput.from_ints([7, 8]), TokensWithLogprobs([9, 9], [-0.25, -0.5]), 1.0, True)
    data = trajectory_to_data(Trajectory([t1, t2], ModelInput.empty()), -1.0)
    assert [d.model_input.to_ints() for d in data] == [[1, 2], [7, 8, 9]]
    np.testing.assert_array_equal(data[0].loss_fn_inputs["target_tokens"], [2, 3])
    np.testing.assert_array_equal(data[0].loss_fn_inputs["mask"], [0, 1])
    np.testing.assert_array_equal(data[0].loss_fn_inputs["advantages"], [0, -1])
    np.testing.assert_array_equal(data[1].loss_fn_inputs["logprobs"], [0, -0.25, -0.5])
    np.testing.assert_array_equal(data[1].loss_fn_inputs["mask"], [0, 1, 1])
    assert trajectory_to_data(Trajectory([], ModelInput.empty()), 1.0) == []


def test_mismatched_or_missing_logprobs_raise():
    ob = ModelInput.from_ints([1, 2])
    missing = Transition(ob, TokensWithLogprobs([3, 4], None), 1.0, True)
    with pytest.raises(ValueError, match="no logprobs"):  # as the cookbook: no silent zeros
        trajectory_to_data(Trajectory([missing], ModelInput.empty()), 1.0)

    class Ac:  # duck-typed action: TokensWithLogprobs itself refuses mismatched lengths
        tokens, maybe_logprobs, stop_reason = [3, 4], [-0.1], "stop"

    mismatched = Transition(ob, Ac(), 1.0, True)
    with pytest.raises(ValueError, match="2 tokens but 1 logprobs"):
        trajectory_to_data(Trajectory([mismatched], ModelInput.empty()), 1.0)


def test_parse_error_masked_turn_gets_zero_mask_and_advantage():
    # prompt 1 2 | turn one 3 4 (flagged) | env 5 | turn two 6
    t1 = Transition(ModelInput.from_ints([1, 2]), TokensWithLogprobs([3, 4], [-0.1, -0.2]), 0.0, False,
                    metrics={PARSE_ERROR_MASKED_METRIC_KEY: 1.0})
    t2 = Transition(ModelInput.from_ints([1, 2, 3, 4, 5]), TokensWithLogprobs([6], [-0.3]), 1.0, True)
    (datum,) = trajectory_to_data(Trajectory([t1, t2], ModelInput.empty()), 2.0)
    np.testing.assert_array_equal(datum.loss_fn_inputs["mask"], [0, 0, 0, 0, 1])
    np.testing.assert_array_equal(datum.loss_fn_inputs["advantages"], [0, 0, 0, 0, 2.0])
    np.testing.assert_allclose(datum.loss_fn_inputs["logprobs"], [0, -0.1, -0.2, 0, -0.3], rtol=1e-6)
    # below the threshold (0.5) the turn trains normally, as in the cookbook's `>= 1.0`
    t1_half = Transition(t1.ob, t1.ac, 0.0, False, metrics={PARSE_ERROR_MASKED_METRIC_KEY: 0.5})
    (plain,) = trajectory_to_data(Trajectory([t1_half, t2], ModelInput.empty()), 2.0)
    np.testing.assert_array_equal(plain.loss_fn_inputs["mask"], [0, 1, 1, 0, 1])


def test_assemble_training_data_and_metadata():
    g0, g1 = _group([1.0, 0.0]), _group([0.0, 0.0, 3.0])
    adv = compute_advantages([g0, g1])
    data, meta = assemble_training_data([g0, g1], adv)
    assert meta == [{"group_idx": 0, "traj_idx": 0}, {"group_idx": 0, "traj_idx": 1},
                    {"group_idx": 1, "traj_idx": 0}, {"group_idx": 1, "traj_idx": 1},
                    {"group_idx": 1, "traj_idx": 2}]
    assert [float(d.loss_fn_inputs["advantages"][-1]) for d in data] == pytest.approx([0.5, -0.5, -1.0, -1.0, 2.0])
    with pytest.raises(ValueError, match="2 groups but 1"):
        assemble_training_data([g0, g1], adv[:1])
    with pytest.raises(ValueError, match="3 trajectories, 2 advantages"):
        assemble_training_data([g1], [adv[0]])


def test_remove_constant_reward_groups():
    varied, flat1, flat2 = _group([1.0, 0.0]), _group([1.0, 1.0]), _group([0.0, 0.0])
    assert remove_constant_reward_groups([flat1, varied, flat2]) == [varied]
    assert remove_constant_reward_groups([flat1, flat2]) == [flat1]  # never an empty batch
    assert remove_constant_reward_groups([]) == []


def test_datum_validates_lengths_and_is_torch_free():
    with pytest.raises(ValueError, match="length 1"):
        Datum(ModelInput.from_ints([1, 2]), {"mask": np.zeros(1)})
    code = "import sys, llm_gym.rl.data_processing; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr
