"""Turn-level credit (`compute_advantages(credit="turn")`): per-turn returns-to-go centred per turn
index, checked against advantages worked out by hand; the per-turn advantages on each turn's
sampled tokens; and the episode-level default left exactly as it was."""

from __future__ import annotations

import random

import numpy as np
import pytest

from llm_gym.completers import TokensWithLogprobs
from llm_gym.model_input import ModelInput
from llm_gym.rl import (
    Trajectory,
    TrajectoryGroup,
    Transition,
    assemble_training_data,
    compute_advantages,
    trajectory_to_data,
    turn_rewards,
)
from llm_gym.rl.types import PARSE_ERROR_MASKED_METRIC_KEY

EPS = 1e-6


def _trajectory(step_rewards, first_token=10, reset_at=None, masked_turns=()):
    """A chat-like episode: turn t's observation is the previous observation + action + one env
    token (the prefix property), except at turn `reset_at`, which starts a fresh context. Turn t
    samples the two tokens first_token + 10t + 1 and + 2 (one token on the last turn)."""
    transitions, ob = [], [1, 2]
    for t, reward in enumerate(step_rewards):
        if t and t == reset_at:
            ob = [5]
        last = t == len(step_rewards) - 1
        tokens = [first_token + 10 * t + 1] + ([] if last else [first_token + 10 * t + 2])
        metrics = {PARSE_ERROR_MASKED_METRIC_KEY: 1.0} if t in masked_turns else {}
        transitions.append(Transition(ModelInput.from_ints(ob), TokensWithLogprobs(tokens, [-0.5] * len(tokens)),
                                      reward, last, metrics))
        ob = ob + tokens + [3 + t]
    return Trajectory(transitions, ModelInput.empty())


def _group(step_rewards_G, final_rewards_G):
    return TrajectoryGroup([_trajectory(r) for r in step_rewards_G], list(final_rewards_G),
                           [{} for _ in step_rewards_G])


def _group_a():
    """Three episodes of 3, 2 and 1 turns. Per-turn rewards (group reward on the last turn):
    [0, 0.5, 1], [-0.25, 0], [1.0]; returns-to-go [1.5, 1.5, 1], [-0.25, 0], [1.0]."""
    return _group([[0.0, 0.5, 0.0], [-0.25, 0.0], [0.5]], [1.0, 0.0, 0.5])


def _group_b():
    """Equal totals (1 and 1: no episode-level signal) but the reward came at different turns:
    returns-to-go [1, 1] and [1, 0]."""
    return _group([[0.0, 1.0], [1.0, 0.0]], [0.0, 0.0])


# ------------------------------------------------------------------------------------------------
# Advantages, by hand
# ------------------------------------------------------------------------------------------------
def test_turn_rewards_put_the_group_reward_on_the_last_turn():
    rewards = turn_rewards(_group_a())
    assert [r.tolist() for r in rewards] == [[0.0, 0.5, 1.0], [-0.25, 0.0], [1.0]]
    assert [float(r.sum()) for r in rewards] == _group_a().get_total_rewards()


def test_turn_advantages_are_returns_to_go_minus_the_turn_index_mean():
    adv_a, adv_b = compute_advantages([_group_a(), _group_b()], credit="turn")
    # turn 0: returns [1.5, -0.25, 1.0], mean 0.75; turn 1: [1.5, 0], mean 0.75;
    # turn 2: only episode 0 got there -> 0; entries past an episode's last turn are padding 0
    expected_a = [[0.75, 0.75, 0.0],
                  [-1.0, -0.75, 0.0],
                  [0.25, 0.0, 0.0]]
    assert adv_a.shape == (3, 3) and adv_a.dtype == np.float32
    np.testing.assert_array_equal(adv_a, np.array(expected_a, dtype=np.float32))
    # group b: same totals, so the episode advantages are 0; turn 1 tells the episodes apart
    np.testing.assert_array_equal(compute_advantages([_group_b()])[0], [0.0, 0.0])
    np.testing.assert_array_equal(adv_b, np.array([[0.0, 0.5], [0.0, -0.5]], dtype=np.float32))


def test_turn_advantages_group_std_divides_each_turn_index_by_its_own_std():
    (adv,) = compute_advantages([_group_a()], scale="group_std", credit="turn")
    std0 = np.sqrt((0.75**2 + 1.0**2 + 0.25**2) / 2)  # returns [1.5, -0.25, 1.0], ddof=1
    std1 = np.sqrt((0.75**2 + 0.75**2) / 1)  # returns [1.5, 0]
    expected = [[0.75 / (std0 + EPS), 0.75 / (std1 + EPS), 0.0],  # turn 2: one episode, not divided
                [-1.0 / (std0 + EPS), -0.75 / (std1 + EPS), 0.0],
                [0.25 / (std0 + EPS), 0.0, 0.0]]
    np.testing.assert_allclose(adv, expected, rtol=1e-6)
    # the loss's default scale is used when none is given: grpo divides by the group's std
    np.testing.assert_array_equal(compute_advantages([_group_a()], loss_fn="grpo", credit="turn")[0], adv)


def test_turn_advantages_batch_std_divides_by_the_std_of_every_real_entry():
    adv_a, adv_b = compute_advantages([_group_a(), _group_b()], scale="batch_std", credit="turn")
    # the centred entries of the episodes' real turns (padding left out), group a then group b
    centred = [0.75, 0.75, 0.0, -1.0, -0.75, 0.25, 0.0, 0.5, 0.0, -0.5]
    std = np.std(centred, ddof=1)
    np.testing.assert_allclose(adv_a, np.array([[0.75, 0.75, 0.0], [-1.0, -0.75, 0.0], [0.25, 0.0, 0.0]])
                               / (std + EPS), rtol=1e-6)
    np.testing.assert_allclose(adv_b, np.array([[0.0, 0.5], [0.0, -0.5]]) / (std + EPS), rtol=1e-6)
    assert adv_a[1, 2] == 0.0 and adv_a[2, 1] == 0.0  # padding stays 0


def test_an_episode_without_turns_gets_a_row_of_padding_and_no_say_in_the_baselines():
    group = _group([[1.0, 0.0], [0.0, 0.0], []], [0.0, 0.0, 5.0])
    adv = compute_advantages([group], credit="turn")[0]
    np.testing.assert_array_equal(adv, np.array([[0.5, 0.0], [-0.5, 0.0], [0.0, 0.0]], dtype=np.float32))


def test_a_bad_credit_value_is_named_with_the_choices():
    with pytest.raises(ValueError, match=r"unknown credit 'step'; use 'episode'.*or 'turn'"):
        compute_advantages([_group_a()], credit="step")  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------
# Per-turn advantages in the datums
# ------------------------------------------------------------------------------------------------
def test_each_turns_sampled_tokens_carry_that_turns_advantage():
    group = _group_a()
    advantages = compute_advantages([group], credit="turn")
    data, metadata = assemble_training_data([group], advantages)
    assert [m["traj_idx"] for m in metadata] == [0, 1, 2]
    # episode 0: [1, 2 | 11, 12 | 3 | 21, 22 | 4 | 31] -> targets drop the first token
    d0 = data[0]
    assert d0.loss_fn_inputs["target_tokens"].tolist() == [2, 11, 12, 3, 21, 22, 4, 31]
    assert d0.loss_fn_inputs["mask"].tolist() == [0, 1, 1, 0, 1, 1, 0, 1]
    assert d0.loss_fn_inputs["advantages"].tolist() == [0, 0.75, 0.75, 0, 0.75, 0.75, 0, 0]
    # episode 1: turns 0 and 1 carry -1.0 and -0.75; its padding entry (turn 2) is not used
    d1 = data[1]
    assert d1.loss_fn_inputs["target_tokens"].tolist() == [2, 11, 12, 3, 21]
    assert d1.loss_fn_inputs["advantages"].tolist() == [0, -1.0, -1.0, 0, -0.75]
    assert data[2].loss_fn_inputs["advantages"].tolist() == [0, 0.25]


def test_per_turn_advantages_follow_a_context_reset_into_the_next_datum():
    traj = _trajectory([0.0, 0.0, 0.0], reset_at=2)
    data = trajectory_to_data(traj, np.array([0.5, -0.25, 2.0], dtype=np.float32))
    assert len(data) == 2  # turns 0-1 in one datum, turn 2 (a fresh context) in another
    assert data[0].loss_fn_inputs["advantages"].tolist() == [0, 0.5, 0.5, 0, -0.25, -0.25]
    assert data[1].loss_fn_inputs["target_tokens"].tolist() == [31]
    assert data[1].loss_fn_inputs["advantages"].tolist() == [2.0]


def test_a_masked_parse_error_turn_keeps_advantage_zero_under_turn_credit():
    traj = _trajectory([0.0, 0.0], masked_turns=(0,))
    data = trajectory_to_data(traj, [0.5, -0.25])
    assert data[0].loss_fn_inputs["advantages"].tolist() == [0, 0, 0, 0, -0.25]
    assert data[0].loss_fn_inputs["mask"].tolist() == [0, 0, 0, 0, 1]


def test_too_few_per_turn_advantages_is_an_error_naming_the_shapes():
    traj = _trajectory([0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match=r"shape \(2,\) for a trajectory of 3 turns"):
        trajectory_to_data(traj, [0.5, 0.5])
    with pytest.raises(ValueError, match=r"shape \(3, 1\)"):
        trajectory_to_data(traj, np.zeros((3, 1)))


# ------------------------------------------------------------------------------------------------
# Properties: the default is untouched; single-turn "turn" is "episode"
# ------------------------------------------------------------------------------------------------
def _random_groups(rng: random.Random, max_turns: int, n_groups: int = 4) -> list[TrajectoryGroup]:
    groups = []
    for _ in range(n_groups):
        size = rng.randint(1, 5)
        steps = [[rng.choice([-0.1, 0.0, 0.3, 1.0]) for _ in range(rng.randint(1, max_turns))]
                 for _ in range(size)]
        groups.append(_group(steps, [rng.uniform(-1, 1) for _ in range(size)]))
    return groups


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("scale", [None, "none", "group_std", "batch_std"])
def test_episode_credit_is_the_default_call_bit_for_bit(seed, scale):
    groups = _random_groups(random.Random(seed), max_turns=4)
    for loss_fn in ("importance_sampling", "grpo"):
        default = compute_advantages(groups, loss_fn, scale)
        explicit = compute_advantages(groups, loss_fn, scale, credit="episode")
        for a, b in zip(default, explicit, strict=True):
            assert a.dtype == b.dtype == np.float32 and a.shape == b.shape
            np.testing.assert_array_equal(a, b)
        data_default, _ = assemble_training_data(groups, default)
        data_explicit, _ = assemble_training_data(groups, explicit)
        for d, e in zip(data_default, data_explicit, strict=True):
            np.testing.assert_array_equal(d.loss_fn_inputs["advantages"], e.loss_fn_inputs["advantages"])


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("scale", ["none", "group_std", "batch_std"])
def test_single_turn_groups_get_the_episode_advantages_exactly(seed, scale):
    groups = _random_groups(random.Random(seed), max_turns=1)
    episode = compute_advantages(groups, scale=scale)
    turn = compute_advantages(groups, scale=scale, credit="turn")
    for e, t in zip(episode, turn, strict=True):
        assert t.shape == (len(e), 1)
        np.testing.assert_array_equal(t[:, 0], e)
    data_e, _ = assemble_training_data(groups, episode)
    data_t, _ = assemble_training_data(groups, turn)
    for d, e in zip(data_e, data_t, strict=True):
        for key in ("target_tokens", "advantages", "mask", "logprobs"):
            np.testing.assert_array_equal(d.loss_fn_inputs[key], e.loss_fn_inputs[key])


@pytest.mark.parametrize("seed", range(5))
def test_multi_turn_turn_credit_centres_every_turn_index_and_starts_from_the_episode(seed):
    groups = _random_groups(random.Random(seed), max_turns=5)
    episode = compute_advantages(groups, credit="episode")
    for group, e, t in zip(groups, episode, compute_advantages(groups, credit="turn"), strict=True):
        lengths = np.array([len(traj.transitions) for traj in group.trajectories_G])
        assert t.shape == (len(lengths), lengths.max())
        np.testing.assert_allclose(t[:, 0], e, atol=1e-6)  # turn 0's return-to-go is the return
        for turn in range(t.shape[1]):
            reached = lengths > turn
            assert abs(float(t[reached, turn].sum())) < 1e-5  # centred over who got there
            assert not t[~reached, turn].any()  # padding
