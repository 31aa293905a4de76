"""End-to-end GRPO (slow): a few real steps on llm/Math-v0 and the multi-turn llm/GuessNumber-v0,
finite losses, gradients only through sampled tokens, checkpoint -> resume reproducing an
uninterrupted run's next steps exactly, and an empty RL step after SFT leaving every weight as is."""

from __future__ import annotations

import asyncio
import json
import math
import shutil

import pytest
import torch

from tests._grpo_helpers import NoRewardEnv, train_records, warm_start_model
from trainers.grpo.config import GRPOConfig

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def warm_model(tmp_path_factory):
    return warm_start_model(tmp_path_factory.mktemp("warm") / "model")


def _math_cfg(model: str, out, **kw) -> GRPOConfig:
    base = dict(model=model, env="llm/Math-v0", env_kwargs={"digits": 1}, sft_steps=0,
                group_size=4, groups_per_batch=4, max_tokens=4, eval_problems=8, steps=4,
                micro_batch_size=5, output_dir=str(out), progress=False, seed=3)
    base.update(kw)
    return GRPOConfig(**base)



def test_math_trains_and_resume_matches_uninterrupted_run(warm_model, tmp_path):
    from trainers.grpo.trainer import train

    full_cfg = _math_cfg(warm_model, tmp_path / "a", save_every=2)
    summary = train(full_cfg)
    full = train_records(full_cfg.run_dir)
    assert sorted(full) == [1, 2, 3, 4]
    assert all(math.isfinite(r["loss"]) and math.isfinite(r["grad_norm"]) for r in full.values())
    assert any(r["grad_norm"] > 0 for r in full.values())  # the warm model gives reward variance
    assert abs(full[1]["sampler_kl"]) < 1e-4  # sampling logprobs == the learner's on-policy
    assert any(r["group_reward_std"] > 0 and r["frac_mixed_groups"] > 0 for r in full.values())
    for key in ("reward", "correct", "entropy", "kl", "clip_frac", "tokens_per_s", "step_seconds",
                "step_cpu_seconds", "loss", "grad_norm"):
        assert key in full[1], key
    assert 0 < full[1]["step_cpu_seconds"]
    for key in ("eval_before_rl", "eval_after_rl", "steps", "wall_seconds"):
        assert key in summary
    assert json.loads((full_cfg.run_dir / "summary.json").read_text())["steps"] == 4
    ckpts = sorted(p.name for p in (full_cfg.run_dir / "checkpoints").iterdir())
    assert ckpts == ["step_000002", "step_000004"]  # no leftover temp dirs

    # Interrupted after step 2: the run directory as a crash right after the step-2 checkpoint
    # leaves it (same config, so the same lr schedule), resumed to step 4. Steps 3 and 4 must
    # match the uninterrupted run.
    resumed_cfg = _math_cfg(warm_model, tmp_path / "b", save_every=2, resume=True)
    shutil.copytree(full_cfg.run_dir, resumed_cfg.run_dir)
    shutil.rmtree(resumed_cfg.run_dir / "checkpoints" / "step_000004")
    (resumed_cfg.run_dir / "summary.json").unlink()
    train(resumed_cfg)
    resumed = train_records(resumed_cfg.run_dir)
    assert sorted(resumed) == [1, 2, 3, 4]  # metrics.jsonl continued, no duplicates
    for step in (3, 4):
        for key in ("reward", "loss", "grad_norm", "entropy", "sampled_tokens", "lr"):
            assert resumed[step][key] == pytest.approx(full[step][key], rel=1e-5, abs=1e-6), (step, key)




class _NoRewardDataset:
    def __init__(self, dataset):
        self.dataset = dataset

    def get_batch(self, index):
        return [_NoRewardBuilder(b) for b in self.dataset.get_batch(index)]

    def __len__(self):
        return len(self.dataset)


class _NoRewardBuilder:
    def __init__(self, builder):
        self.builder = builder

    async def make_envs(self):
        return [NoRewardEnv(e) for e in await self.builder.make_envs()]

    async def compute_group_rewards(self, trajectory_group, env_group):
        return [(0.0, {}) for _ in trajectory_group]

    async def cleanup(self):
        await self.builder.cleanup()

    def logging_tags(self):
        return []


def test_an_empty_rl_step_after_sft_changes_no_weight(tmp_path, monkeypatch):
    """The SFT -> RL handover (issue 8, item 2): a first RL step with zero datums must leave the
    warm-started weights exactly as SFT left them (SFT's leftover gradient is not applied)."""
    from llm_gym import GymRLDataset
    from trainers.grpo import trainer

    after_sft = {}
    real_run_sft = trainer.run_sft

    def run_sft_and_remember(cfg, model, accelerator):
        out = real_run_sft(cfg, model, accelerator)
        after_sft.update({k: v.detach().clone() for k, v in model.state_dict().items()})
        return out

    monkeypatch.setattr(trainer, "run_sft", run_sft_and_remember)
    cfg = GRPOConfig(model="tiny", env="llm/Math-v0", env_kwargs={"digits": 1}, sft_steps=2,
                     sft_batch_size=4, group_size=2, groups_per_batch=2, max_tokens=2,
                     eval_problems=2, steps=1, output_dir=str(tmp_path), progress=False)
    dataset = _NoRewardDataset(GymRLDataset("llm/Math-v0", batch_size=2, group_size=2, seed=0,
                                            digits=1))
    summary = trainer.train(cfg, dataset=dataset)
    assert summary["sft_steps_run"] == 2
    assert train_records(cfg.run_dir)[1]["datums"] == 0
    final = torch.load(cfg.run_dir / "checkpoints" / "step_000001" / "model_state.pt")
    assert final.keys() == after_sft.keys()
    changed = [k for k in final if not torch.equal(final[k], after_sft[k])]
    assert changed == []


def test_guess_number_multi_turn_trains_only_sampled_tokens(warm_model, tmp_path):
    from trainers.grpo.trainer import train

    cfg = GRPOConfig(model=warm_model, env="llm/GuessNumber-v0",
                     env_kwargs={"max_number": 5, "max_turns": 2}, sft_steps=0, group_size=2,
                     groups_per_batch=2, max_tokens=4, eval_problems=2, steps=2,
                     remove_constant_reward_groups=False, output_dir=str(tmp_path), progress=False)
    train(cfg)
    records = train_records(cfg.run_dir)
    assert sorted(records) == [1, 2]
    for r in records.values():
        assert math.isfinite(r["loss"])
        # every sampled token is trained, and nothing else (env replies and prompts are masked)
        assert r["trained_tokens"] == r["sampled_tokens"] > 0


def test_masked_positions_of_a_real_multi_turn_datum_get_no_gradient(warm_model):
    """Loss gradient w.r.t. the logits is exactly zero wherever the Datum's mask is 0."""
    from llm_gym import GymRLDataset
    from llm_gym.rl import assemble_training_data, compute_advantages, do_group_rollout
    from trainers.grpo.losses import LossParams, policy_loss, token_weights
    from trainers.grpo.trainer import collate, token_logprobs
    from trainers.models import load_policy
    from trainers.sampling.hf import HFSampler

    model, _ = load_policy(warm_model)
    ds = GymRLDataset("llm/GuessNumber-v0", batch_size=1, group_size=2, seed=0,
                      max_number=5, max_turns=3)
    sampler = HFSampler(model, temperature=1.0, max_tokens=4, stop_token_ids=[260, 258],
                        pad_token_id=256, seed=0)
    group = asyncio.run(do_group_rollout(ds.get_batch(0)[0], sampler))
    data, _ = assemble_training_data([group], compute_advantages([group]))
    for d in data:  # force a non-zero advantage everywhere, masked positions included
        d.loss_fn_inputs["advantages"][:] = 1.0
    assert any(len(t.transitions) > 1 for t in group.trajectories_G) or len(data) >= 1
    mb = collate(data, 256, torch.device("cpu"))
    model.train()
    logp, logits = token_logprobs(model, mb, 1.0)
    logits.retain_grad()
    weights = token_weights(mb.mask, "token_sum", len(data), float(mb.mask.sum()))
    loss, _ = policy_loss("importance_sampling", logp, mb.sampling_logp, mb.advantages, mb.mask,
                          weights, LossParams())
    loss.backward()
    grad_norm_per_pos = logits.grad.abs().sum(-1)
    assert (mb.mask == 0).any() and (mb.mask == 1).any()
    assert grad_norm_per_pos[mb.mask == 0].max() == 0
    assert grad_norm_per_pos[mb.mask == 1].min() > 0


def test_lora_and_bf16_paths_train(warm_model, tmp_path):
    from trainers.grpo.trainer import train

    cfg = _math_cfg(warm_model, tmp_path, steps=2, lora_r=4, bf16=True, kl_beta=0.1,
                    loss="ppo", loss_reduction="seq_mean")
    train(cfg)
    records = train_records(cfg.run_dir)
    assert all(math.isfinite(r["loss"]) and r["kl"] >= 0 for r in records.values())
    state = torch.load(cfg.run_dir / "checkpoints" / "step_000002" / "model_state.pt")
    assert any("lora_A" in k for k in state)  # adapters were trained and saved
    assert (cfg.run_dir / "checkpoints" / "step_000002" / "model" / "adapter_config.json").is_file()


def test_episode_metrics_are_logged_as_env_means():
    """The env's episode-level metrics (last step) reach metrics.jsonl as `env/<key>` means, so a
    run shows e.g. how often a tool env's policy called its tool; missing keys count 0."""
    from llm_gym import ModelInput, TokensWithLogprobs
    from llm_gym.rl import Trajectory, TrajectoryGroup, Transition
    from trainers.grpo.trainer import MAX_ENV_METRICS, episode_metric_means

    def traj(metrics):
        step = Transition(ModelInput.from_ints([1]), TokensWithLogprobs([2], [0.0]), 0.0, True, metrics)
        return Trajectory([step], ModelInput.empty())

    group = TrajectoryGroup([traj({"tool_calls": 2.0, "used_tool": 1.0}), traj({"tool_calls": 0.0}),
                             traj({"note": "text is skipped", "flag": True})], [0.0] * 3, [{}] * 3)
    assert episode_metric_means([group]) == {"env/tool_calls": 2 / 3, "env/used_tool": 1 / 3}
    many = TrajectoryGroup([traj({f"k{i:02d}": 1.0 for i in range(50)})], [0.0], [{}])
    assert len(episode_metric_means([many])) == MAX_ENV_METRICS
    assert episode_metric_means([]) == {}


def test_group_stats_counts_constant_groups_as_constant():
    """Eight equal float rewards have a float32 std of ~6e-8; such a group is still constant (the
    constant-group filter drops it), so it must not count in `frac_mixed_groups`."""
    from llm_gym.rl import Trajectory, TrajectoryGroup
    from trainers.grpo.trainer import group_stats

    constant = TrajectoryGroup([Trajectory([], None) for _ in range(8)], [-0.8] * 8, [{}] * 8)
    mixed = TrajectoryGroup([Trajectory([], None) for _ in range(2)], [0.0, 1.0], [{}] * 2)
    stats = group_stats([constant, mixed])
    assert stats["mixed_groups"] == 1.0 and stats["groups"] == 2.0


def test_an_optimizer_step_moves_every_trained_parameters_version(warm_model, tmp_path, monkeypatch):
    """The vLLM weight push and the HF sampler's KV reuse detect new weights by tensor version
    counters; an optimizer whose kernel skips them (torch's fused AdamW does) would leave both on
    the old weights."""
    import trainers.grpo.trainer as trainer_mod

    seen: list[list[int]] = []
    real_step = torch.optim.AdamW.step

    def step(self, *a, **k):
        before = [p._version for g in self.param_groups for p in g["params"] if p.grad is not None]
        out = real_step(self, *a, **k)
        after = [p._version for g in self.param_groups for p in g["params"] if p.grad is not None]
        seen.append([int(b < c) for b, c in zip(before, after)])
        return out

    monkeypatch.setattr(torch.optim.AdamW, "step", step)
    # constant-reward groups kept, so every step has datums and every parameter a gradient (a step
    # whose groups were all dropped has nothing to move: seen once as an empty step)
    trainer_mod.train(_math_cfg(warm_model, tmp_path, steps=2, remove_constant_reward_groups=False))
    assert len(seen) == 2 and all(flags and all(flags) for flags in seen)
