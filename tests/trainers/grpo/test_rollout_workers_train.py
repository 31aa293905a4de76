"""`llm-gym train --rollout-workers N`: the trainer rolls its env groups out in Ray actors.

The pool itself (identical trajectories, lost workers, bounds) is tested in
tests/trainers/test_rollout_workers.py; here: the flags' one-line errors, and a real tiny run whose
sampled episodes equal the in-process run's (the policy samples in this process with per-rollout
keyed streams, so the remote calls' timing does not change what is sampled; the recorded logprobs
may differ in their last bits with the batches' shapes, hence a tolerance on the float metrics)."""

from __future__ import annotations

import sys

import pytest

from trainers.cli_train import config_from_args
from trainers.grpo.config import ConfigError, GRPOConfig

TIMING_KEYS = ("time", "tokens_per_s", "sample_seconds", "step_seconds", "step_cpu_seconds")
# Metrics computed from the trainer's float forward (the sampler's logprobs enter them).
FLOAT_KEYS = ("loss", "grad_norm", "entropy", "sampler_kl", "clip_fraction", "kl")


def test_flags_parse_and_bad_combinations_are_one_line_errors(monkeypatch):
    cfg = config_from_args(["--rollout-workers", "2", "--ray-address", "auto"])
    assert (cfg.rollout_workers, cfg.ray_address) == (2, "auto")
    for kwargs, pattern in [
        (dict(rollout_workers=-1), r"rollout_workers=-1 must be >= 0"),
        (dict(ray_address="auto"), r"ray_address='auto'.*--rollout-workers N"),
        (dict(rollout_workers=1, max_staleness=1), r"rollout_workers=1 with max_staleness=1.*as 0"),
    ]:
        with pytest.raises(ConfigError, match=pattern) as exc:
            GRPOConfig(**kwargs)._check_ranges()
        assert "\n" not in str(exc.value)
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails as if not installed
    with pytest.raises(ConfigError, match=r"rollout_workers=1: .*pip install 'llm-gym\[ray\]'") as exc:
        GRPOConfig(rollout_workers=1)._check_ranges()
    assert "\n" not in str(exc.value)


@pytest.mark.slow
def test_a_run_on_ray_workers_samples_the_episodes_of_the_in_process_run(tmp_path):
    pytest.importorskip("ray")
    from tests._grpo_helpers import train_records, warm_start_model
    from trainers.grpo.trainer import train

    model = warm_start_model(tmp_path / "warm", steps=30)
    runs = {}
    for workers in (0, 1):
        cfg = GRPOConfig(model=model, env="llm/Math-v0", env_kwargs={"digits": 1}, sft_steps=0,
                         group_size=4, groups_per_batch=3, max_tokens=4, eval_problems=4, steps=2,
                         eval_every=0, micro_batch_size=8, output_dir=str(tmp_path),
                         run_name=f"workers{workers}", remove_constant_reward_groups=False,
                         progress=False, seed=5, rollout_workers=workers)
        train(cfg)
        runs[workers] = {step: {k: v for k, v in r.items() if k not in TIMING_KEYS}
                         for step, r in train_records(cfg.run_dir).items()}
    local, remote = runs[0], runs[1]
    assert local.keys() == remote.keys() and len(local) >= 2
    for step in local:
        assert local[step].keys() == remote[step].keys(), step
        for key, value in local[step].items():
            if key in FLOAT_KEYS:
                assert remote[step][key] == pytest.approx(value, rel=1e-4, abs=1e-6), (step, key)
            else:  # rewards, accuracy, token counts, env metrics: the same episodes
                assert remote[step][key] == value, (step, key)
