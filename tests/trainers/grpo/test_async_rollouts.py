"""Asynchronous GRPO with bounded staleness (`trainers/grpo/async_rollouts.py`, `max_staleness`).

The pipeline on its own (a one-weight model whose weight is its version): step s is sampled by
version max(0, s - k) from a snapshot the trainer's later updates do not reach; stale groups are
dropped and counted; batches in flight overlap their awaits in one loop; a sampling error is
raised in the caller's thread; the thread is joined on every exit, a KeyboardInterrupt cancelling
the batches being sampled. Then tiny real runs:
`max_staleness=0` (explicit or default) trains bit for bit as the synchronous loop, `max_staleness=1`
is reproducible run to run and samples its first step as the synchronous loop does, a resume from a
middle checkpoint trains what the uninterrupted run trained, a Ctrl-C in training and an env error
in the background thread both end `train` with the thread joined (the error as itself), and the
combinations it cannot run are one-line `ConfigError`s."""

from __future__ import annotations

import asyncio
import shutil
import threading
from types import SimpleNamespace

import pytest
import torch

from tests._grpo_helpers import train_records, warm_start_model
from trainers.cli_train import config_from_args
from trainers.grpo.async_rollouts import (
    THREAD_NAME,
    AsyncRollouts,
    SampledBatch,
    drop_stale,
    sampling_version,
)
from trainers.grpo.checkpoint import list_checkpoints
from trainers.grpo.config import ConfigError, GRPOConfig

TIMING_KEYS = ("time", "tokens_per_s", "sample_seconds", "step_seconds", "step_cpu_seconds",
               "async/wait_seconds")


def _pipeline_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(THREAD_NAME)]


def _version_model(version: int) -> torch.nn.Module:
    model = torch.nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(float(version))
    return model


async def _read_weight(step: int, policy) -> tuple[list[float], int]:
    await asyncio.sleep(0.01)  # let the trainer move on (and update its model) first
    return [float(policy.weight)], 0


def _run_pipeline(k: int, steps: int, floor: int = 0, ready=()) -> list[SampledBatch]:
    """The trainer's calls on a model whose weight is its version: take, 'train' in place,
    announce the new version."""
    model = _version_model(floor)
    taken = []
    with AsyncRollouts(_read_weight, k, floor=floor, end_step=steps, ready=ready) as rollouts:
        rollouts.policy_updated(model, floor)
        for step in range(floor, steps):
            taken.append(rollouts.take(step))
            with torch.no_grad():
                model.weight.add_(1.0)  # an optimizer step, in place, while batches are sampled
            rollouts.policy_updated(model, step + 1)
    return taken


@pytest.mark.parametrize("k", [1, 2, 3])
def test_each_step_is_sampled_by_the_version_k_steps_back_from_a_snapshot(k):
    steps = 7
    batches = _run_pipeline(k, steps)
    for step, batch in enumerate(batches):
        version = sampling_version(step, k)
        assert version == max(0, step - k)
        assert batch.step == step and batch.groups == [float(version)], step
        assert batch.versions == [version]
        assert batch.metrics["async/staleness_max"] == batch.metrics["async/staleness_mean"] == step - version
        assert batch.metrics["async/dropped_groups"] == 0
        assert batch.metrics["async/wait_seconds"] >= 0
    assert not _pipeline_threads()


def test_stale_groups_are_dropped_and_counted():
    batch = SampledBatch(step=5, groups=["a", "b", "c"], versions=[4, 2, 3], sample_seconds=0.0)
    assert drop_stale(batch, current=5, max_staleness=2) == (["a", "c"], [4, 3], 1)
    # restored from a run with a larger bound: the older group is dropped when taken
    model = _version_model(5)
    with AsyncRollouts(_read_weight, 1, floor=5, end_step=6, ready=[batch]) as rollouts:
        rollouts.policy_updated(model, 5)
        taken = rollouts.take(5)
    assert taken.groups == ["a"] and taken.versions == [4]
    assert taken.metrics["async/dropped_groups"] == 2
    assert taken.metrics["async/staleness_mean"] == taken.metrics["async/staleness_max"] == 1


def test_drained_batches_resume_the_same_schedule():
    k, steps, stop = 2, 7, 3
    full = _run_pipeline(k, steps)
    model = _version_model(0)
    with AsyncRollouts(_read_weight, k, floor=0, end_step=steps) as rollouts:
        rollouts.policy_updated(model, 0)
        for step in range(stop):
            rollouts.take(step)
            with torch.no_grad():
                model.weight.add_(1.0)
            if step + 1 < stop:
                rollouts.policy_updated(model, step + 1)
        saved = [SampledBatch.from_state(b.state()) for b in rollouts.drain()]
    assert [b.step for b in saved] == [3, 4]  # sampled by versions 1 and 2, before version 3
    resumed = _run_pipeline(k, steps, floor=stop, ready=saved)
    assert [b.groups for b in resumed] == [b.groups for b in full[stop:]]
    assert [b.metrics["async/staleness_max"] for b in resumed] == \
        [b.metrics["async/staleness_max"] for b in full[stop:]]


class _SamplingFailed(Exception):
    pass


def test_an_error_in_sampling_is_raised_by_take_in_the_callers_thread():
    seen_in: dict[int, str] = {}

    async def sample(step, policy):
        seen_in[step] = threading.current_thread().name
        if step == 2:
            raise _SamplingFailed("grader crashed on step 2")
        return [step], 0

    model = _version_model(0)
    taken = []
    with pytest.raises(_SamplingFailed, match="grader crashed on step 2"):
        with AsyncRollouts(sample, 1, floor=0, end_step=5) as rollouts:
            rollouts.policy_updated(model, 0)
            for step in range(5):
                taken.append(rollouts.take(step).groups)
                rollouts.policy_updated(model, step + 1)
    assert taken == [[0], [1]]
    assert {0, 1, 2} <= set(seen_in) and all(n.startswith(THREAD_NAME) for n in seen_in.values())
    assert not _pipeline_threads()


def test_batches_in_flight_overlap_their_awaits():
    """k batches in flight share the loop: each waits on an event only the next one sets, which
    would deadlock if they were sampled one after another."""
    k, steps = 3, 6
    arrived = {s: asyncio.Event() for s in range(steps + k)}
    loop_of: list[asyncio.AbstractEventLoop] = []

    async def sample(step, policy):
        loop_of.append(asyncio.get_running_loop())
        arrived[step].set()
        if step + 1 < k:  # the first k batches start together (all sampled by version 0)
            await asyncio.wait_for(arrived[step + 1].wait(), 60)
        return [step], 0

    with AsyncRollouts(sample, k, floor=0, end_step=steps) as rollouts:
        rollouts.policy_updated(_version_model(0), 0)
        groups = []
        for step in range(steps):
            groups.append(rollouts.take(step).groups)
            rollouts.policy_updated(_version_model(step + 1), step + 1)
    assert groups == [[s] for s in range(steps)]
    assert len(set(map(id, loop_of))) == 1
    assert not _pipeline_threads()


def test_keyboard_interrupt_cancels_the_batch_being_sampled_and_joins_the_thread():
    started, cancelled = threading.Event(), threading.Event()

    async def sample(step, policy):
        started.set()
        try:
            await asyncio.sleep(3600)  # a rollout that would outlive the test without the cancel
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return [step], 0

    with pytest.raises(KeyboardInterrupt):
        with AsyncRollouts(sample, 2, floor=0, end_step=10) as rollouts:
            rollouts.policy_updated(_version_model(0), 0)
            assert started.wait(60)
            raise KeyboardInterrupt
    assert cancelled.is_set()
    assert not _pipeline_threads()


# --- configuration ---------------------------------------------------------------------------
def test_max_staleness_flag_and_its_errors():
    assert GRPOConfig().max_staleness == 0
    assert config_from_args(["--max-staleness", "2"]).max_staleness == 2
    with pytest.raises(ConfigError, match=r"^max_staleness=-1 must be >= 0") as exc:
        GRPOConfig(max_staleness=-1)._check_ranges()
    assert "\n" not in str(exc.value)
    with pytest.raises(ConfigError, match=r"max_staleness=1\.5 must be a whole number"):
        GRPOConfig.from_dict({"max_staleness": 1.5})
    with pytest.raises(ConfigError, match=r"max_staleness=1 is not supported with sampler='vllm'"
                                          r".*--max-staleness 0.*--sampler hf") as exc:
        GRPOConfig(sampler="vllm", max_staleness=1)._check_ranges()
    assert "\n" not in str(exc.value)


def test_multi_process_training_with_max_staleness_is_refused():
    from accelerate.utils import DistributedType

    from trainers.grpo.trainer import check_async_supported

    cfg = GRPOConfig(max_staleness=1)
    two = SimpleNamespace(num_processes=2, distributed_type=DistributedType.MULTI_CPU)
    with pytest.raises(ConfigError, match=r"one process, but this run has 2.*--max-staleness 0"):
        check_async_supported(cfg, two)
    sharded = SimpleNamespace(num_processes=1, distributed_type=DistributedType.FSDP)
    with pytest.raises(ConfigError, match=r"FSDP shards.*--max-staleness 0"):
        check_async_supported(cfg, sharded)
    check_async_supported(cfg, SimpleNamespace(num_processes=1, distributed_type=DistributedType.NO))


# --- real runs (tiny model, 1-digit addition) ------------------------------------------------
@pytest.fixture(scope="module")
def warm_model(tmp_path_factory):
    return warm_start_model(tmp_path_factory.mktemp("warm") / "model")


def _cfg(model: str, out, name: str, **kw) -> GRPOConfig:
    base = dict(model=model, env="llm/Math-v0", env_kwargs={"digits": 1}, sft_steps=0,
                group_size=4, groups_per_batch=4, max_tokens=4, eval_problems=4, steps=4,
                eval_every=2, micro_batch_size=8, output_dir=str(out), run_name=name,
                remove_constant_reward_groups=False, progress=False, seed=3)
    base.update(kw)
    return GRPOConfig(**base)


def _untimed(run_dir) -> dict[int, dict]:
    return {step: {k: v for k, v in r.items() if k not in TIMING_KEYS}
            for step, r in train_records(run_dir).items()}


def _final_weights(run_dir) -> dict[str, torch.Tensor]:
    return torch.load(list_checkpoints(run_dir)[-1] / "model_state.pt", weights_only=True)


def _same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.fixture(scope="module")
def sync_run(warm_model, tmp_path_factory):
    from trainers.grpo.trainer import train

    cfg = _cfg(warm_model, tmp_path_factory.mktemp("sync"), "default")
    train(cfg)
    return cfg.run_dir


def test_max_staleness_zero_is_the_synchronous_loop_bit_for_bit(warm_model, sync_run, tmp_path):
    from trainers.grpo.trainer import train

    cfg = _cfg(warm_model, tmp_path, "zero", max_staleness=0)
    train(cfg)
    assert _untimed(cfg.run_dir) == _untimed(sync_run)
    assert _same_weights(_final_weights(cfg.run_dir), _final_weights(sync_run))
    assert not any(k.startswith("async/") for r in _untimed(sync_run).values() for k in r)


def test_max_staleness_one_is_reproducible_and_logs_its_staleness(warm_model, sync_run, tmp_path):
    from trainers.grpo.trainer import train

    runs = []
    for name in ("a", "b"):
        cfg = _cfg(warm_model, tmp_path, name, max_staleness=1)
        train(cfg)
        runs.append(cfg.run_dir)
    first, second = _untimed(runs[0]), _untimed(runs[1])
    assert first == second  # same seed, same trajectories and curve
    assert _same_weights(_final_weights(runs[0]), _final_weights(runs[1]))
    assert not _pipeline_threads()
    # step 1 is sampled by version 0 in both loops: the same samples as the synchronous run's (the
    # sampler's logprobs may differ in the last bits: a fresh copy's first call builds its own cache)
    sync = _untimed(sync_run)
    for key in ("reward", "correct", "sampled_tokens", "datums", "trained_tokens", "group_reward_std"):
        assert first[1][key] == sync[1][key], key
    assert first[1]["loss"] == pytest.approx(sync[1]["loss"], rel=1e-5, abs=1e-6)
    assert [first[s]["async/staleness_max"] for s in sorted(first)] == [0, 1, 1, 1]
    assert all(r["async/staleness_mean"] == r["async/staleness_max"] for r in first.values())
    assert all(r["async/dropped_groups"] == 0 for r in first.values())
    timed = train_records(runs[0])
    assert all(r["async/wait_seconds"] >= 0 and r["sample_seconds"] > 0 for r in timed.values())
    # later steps train on older samples: the learner and the sampler disagree, and the loss's
    # importance ratio sees it (on-policy, the sampler's logprobs equal the learner's)
    assert any(abs(first[s]["sampler_kl"]) > 1e-4 for s in (2, 3, 4))
    assert abs(first[1]["sampler_kl"]) < 1e-5


def test_resume_with_max_staleness_trains_what_the_uninterrupted_run_trained(warm_model, tmp_path):
    from trainers.grpo.trainer import train

    full_cfg = _cfg(warm_model, tmp_path / "full", "run", max_staleness=2, save_every=1, steps=5,
                    eval_every=0)
    train(full_cfg)
    state = torch.load(list_checkpoints(full_cfg.run_dir)[-2] / "trainer_state.pt",
                       weights_only=False)
    assert [b["step"] for b in state["extra"]["async_batches"]] == [4]  # at step 4: step 5's batch

    # a crash right after the step-2 checkpoint (which holds steps 3 and 4's batches)
    resumed_cfg = _cfg(warm_model, tmp_path / "resumed", "run", max_staleness=2, save_every=1,
                       steps=5, eval_every=0, resume=True)
    shutil.copytree(full_cfg.run_dir, resumed_cfg.run_dir)
    for ckpt in list_checkpoints(resumed_cfg.run_dir):
        if int(ckpt.name.split("_")[1]) > 2:
            shutil.rmtree(ckpt)
    (resumed_cfg.run_dir / "summary.json").unlink()
    train(resumed_cfg)
    full, resumed = _untimed(full_cfg.run_dir), _untimed(resumed_cfg.run_dir)
    assert sorted(resumed) == [1, 2, 3, 4, 5]
    for step in (3, 4):  # the batches saved in the checkpoint: trained bit for bit
        assert resumed[step] == full[step], step
    # step 5 is sampled again, by version 3 as before, from a fresh copy of the weights
    for key in ("reward", "correct", "sampled_tokens", "datums", "lr", "async/staleness_max",
                "async/dropped_groups"):
        assert resumed[5][key] == full[5][key], key
    for key in ("loss", "grad_norm", "entropy"):
        assert resumed[5][key] == pytest.approx(full[5][key], rel=1e-5, abs=1e-6), key
    weights, full_weights = _final_weights(resumed_cfg.run_dir), _final_weights(full_cfg.run_dir)
    assert all(torch.allclose(weights[k], full_weights[k], rtol=1e-5, atol=1e-6) for k in weights)


def test_a_keyboard_interrupt_in_training_joins_the_rollout_thread(warm_model, tmp_path, monkeypatch):
    from trainers.grpo import trainer

    real = trainer.forward_backward
    calls = []

    def interrupted_on_the_second_step(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(trainer, "forward_backward", interrupted_on_the_second_step)
    with pytest.raises(KeyboardInterrupt):
        trainer.train(_cfg(warm_model, tmp_path, "ctrl-c", max_staleness=2, eval_every=0))
    assert len(calls) == 2 and sorted(train_records(tmp_path / "ctrl-c")) == [1]
    assert not _pipeline_threads()


class _EnvCrashed(Exception):
    pass


class _CrashingEnv:
    def __init__(self, env, seen_in: list[str]):
        self.env, self.seen_in = env, seen_in

    async def initial_observation(self):
        return await self.env.initial_observation()

    async def step(self, action, *, extra=None):
        self.seen_in.append(threading.current_thread().name)
        raise _EnvCrashed("the grader crashed")


class _CrashAtBatch:
    """The env's dataset, whose envs raise on their first step from batch `crash_at` on."""

    def __init__(self, dataset, crash_at: int, seen_in: list[str]):
        self.dataset, self.crash_at, self.seen_in = dataset, crash_at, seen_in

    def __len__(self):
        return len(self.dataset)

    def get_batch(self, index):
        builders = self.dataset.get_batch(index)
        return builders if index < self.crash_at else [_CrashingBuilder(b, self.seen_in) for b in builders]


class _CrashingBuilder:
    def __init__(self, builder, seen_in):
        self.builder, self.seen_in = builder, seen_in

    async def make_envs(self):
        return [_CrashingEnv(e, self.seen_in) for e in await self.builder.make_envs()]

    async def compute_group_rewards(self, trajectory_group, env_group):
        return await self.builder.compute_group_rewards(trajectory_group, env_group)

    async def cleanup(self):
        await self.builder.cleanup()

    def logging_tags(self):
        return []


def test_an_env_error_in_the_background_thread_surfaces_from_train(warm_model, tmp_path):
    from llm_gym import GymRLDataset
    from trainers.grpo.trainer import train

    seen_in: list[str] = []
    dataset = _CrashAtBatch(GymRLDataset("llm/Math-v0", batch_size=4, group_size=4, seed=3, digits=1),
                            crash_at=2, seen_in=seen_in)
    with pytest.raises(_EnvCrashed, match="the grader crashed"):
        train(_cfg(warm_model, tmp_path, "crash", max_staleness=1, eval_every=0), dataset=dataset)
    assert seen_in and all(name.startswith(THREAD_NAME) for name in seen_in)
    assert sorted(train_records(tmp_path / "crash")) == [1, 2]  # steps 1-2 trained, then the error
    assert not _pipeline_threads()
