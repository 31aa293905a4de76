"""The trainer keeps every episode inside the model's context window.

A multi-turn episode's context grows each turn; past the model's `max_position_embeddings` a RoPE
model still runs (on positions it never saw) and the vLLM engine refuses the prompt. The trainer
passes the sampler's window as the trajectory's token budget (`rollout_limits`), so such an
episode ends with `StopReason.MAX_TOKENS` and the step logs `frac_context_full`.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from llm_gym import GymEnvGroupBuilder  # noqa: E402
from llm_gym.rl import RolloutLimits, StopReason  # noqa: E402

WINDOW = 220  # GuessNumber's first prompt is ~140 byte tokens; turn 3 or so reaches 220


@pytest.fixture(scope="module")
def short_window_model(tmp_path_factory):
    from trainers.models import build_tiny_model, tiny_config

    config = tiny_config()
    config.max_position_embeddings = WINDOW
    path = tmp_path_factory.mktemp("short") / "model"
    build_tiny_model(path, seed=0, config=config)
    return path


def _rollouts(model_dir, limits_from_sampler: bool):
    from trainers.grpo import GRPOConfig
    from trainers.grpo.trainer import rollout_groups, rollout_limits
    from trainers.models import load_policy
    from trainers.sampling.hf import HFSampler

    model = load_policy(str(model_dir), device="cpu", dtype=torch.float32)[0]
    sampler = HFSampler(model, temperature=1.0, max_tokens=8, stop_token_ids=[258], seed=0)
    cfg = GRPOConfig(model=str(model_dir), env="llm/GuessNumber-v0", max_tokens=8)
    sampler.max_tokens = 64  # the trainer's limits, not the sampler's default, must cap a turn
    limits = rollout_limits(cfg, sampler) if limits_from_sampler else RolloutLimits(max_turns=cfg.max_turns)
    builders = [GymEnvGroupBuilder("llm/GuessNumber-v0", 4, seed) for seed in (1, 2)]
    return sampler, limits, [t for g in rollout_groups(builders, sampler, limits) for t in g.trajectories_G]


def _longest_context(traj) -> int:
    return max(tr.ob.length + len(tr.ac.tokens) for tr in traj.transitions)


def test_hf_sampler_reports_the_models_window(short_window_model):
    sampler, limits, _ = _rollouts(short_window_model, limits_from_sampler=True)
    assert sampler.context_window == WINDOW
    assert limits.max_trajectory_tokens == WINDOW


@pytest.mark.slow
def test_episodes_end_at_the_window_instead_of_running_past_it(short_window_model):
    _, _, unbounded = _rollouts(short_window_model, limits_from_sampler=False)
    assert max(map(_longest_context, unbounded)) > WINDOW  # without the bound they run past it

    _, _, bounded = _rollouts(short_window_model, limits_from_sampler=True)
    assert all(_longest_context(t) <= WINDOW for t in bounded)
    assert any(t.stop_reason == StopReason.MAX_TOKENS for t in bounded)
    assert all(t.transitions for t in bounded)  # the first turn fits: nobody is cut before it
    # the window bounds the context, not the turn: each turn still samples at most max_tokens
    assert max(len(tr.ac.tokens) for t in bounded for tr in t.transitions) == 8


def test_train_logs_the_fraction_of_episodes_that_filled_the_window(short_window_model, tmp_path):
    from trainers.grpo import GRPOConfig
    from trainers.grpo.trainer import train

    cfg = GRPOConfig(model=str(short_window_model), env="llm/GuessNumber-v0", sft_steps=0,
                     group_size=2, groups_per_batch=2, max_tokens=8, steps=1, eval_problems=2,
                     output_dir=str(tmp_path), progress=False, seed=0)
    with pytest.warns(UserWarning, match="trained on no datum"):  # every untrained episode fails
        train(cfg)
    rows = [json.loads(line) for line in (cfg.run_dir / "metrics.jsonl").read_text().splitlines()]
    step = next(r for r in rows if "reward" in r)
    assert 0.0 < step["frac_context_full"] <= 1.0


def test_the_tiny_preset_fits_a_whole_guess_number_episode():
    """The preset's window covers the README's multi-turn command (8 turns, ~700 byte tokens)."""
    from trainers.models import TINY_PRESET

    assert TINY_PRESET.max_position_embeddings >= 1024
