"""What the GRPO trainer tells its user while it runs (issue 20, "Say what happens"): one warning
(and an end-of-run count) when steps train on no datum, evaluation bars that count episodes as
sampler batches finish them, and the last held-out accuracy beside the training accuracy on the
GRPO bar. Tiny in-process model, fake rewards, no timing asserts."""

from __future__ import annotations

import dataclasses
import io
import json
import warnings
from types import SimpleNamespace

import pytest

from tests._grpo_helpers import NoRewardEnv, train_records
from tqdm.std import tqdm as std_tqdm

from llm_gym import GymRLDataset, ModelInput, TokensWithLogprobs
from llm_gym.rl import StepResult
from trainers.sampling.batching import BatchingCompleter
from trainers.grpo import trainer
from trainers.grpo.config import GRPOConfig


# ------------------------------------------------------------------------------------------------
# Helpers: rewards chosen by the test, a tqdm that records what it was told
# ------------------------------------------------------------------------------------------------


class _ScriptedBuilder:
    """Group rewards 0, 1, 2, ... (a mixed group), or all 0 when `constant` (a dropped group)."""

    def __init__(self, builder, constant: bool):
        self.builder, self.constant = builder, constant

    async def make_envs(self):
        return [NoRewardEnv(e) for e in await self.builder.make_envs()]

    async def compute_group_rewards(self, trajectory_group, env_group):
        return [(0.0 if self.constant else float(i), {}) for i in range(len(trajectory_group))]

    async def cleanup(self):
        await self.builder.cleanup()

    def logging_tags(self):
        return []


class _ScriptedDataset:
    """Math-v0 groups whose every group is constant at the steps in `constant_steps` (0-based)."""

    def __init__(self, constant_steps: set[int]):
        self.inner = GymRLDataset("llm/Math-v0", batch_size=2, group_size=2, seed=0, digits=1)
        self.constant_steps = constant_steps

    def get_batch(self, index):
        constant = index in self.constant_steps
        return [_ScriptedBuilder(b, constant) for b in self.inner.get_batch(index)]

    def __len__(self):
        return len(self.inner)


class _RecordingBar(std_tqdm):
    """A tqdm writing to a string, remembering every update and postfix (newest bar last)."""

    bars: list["_RecordingBar"] = []

    def __init__(self, *args, **kwargs):
        kwargs["file"] = io.StringIO()
        self.updates: list[int] = []
        self.postfixes: list[str] = []
        super().__init__(*args, **kwargs)
        _RecordingBar.bars.append(self)

    def update(self, n=1):
        self.updates.append(n)
        return super().update(n)

    def set_postfix(self, ordered_dict=None, refresh=True, **kwargs):
        super().set_postfix(ordered_dict, refresh, **kwargs)
        self.postfixes.append(self.postfix)

    def set_postfix_str(self, s="", refresh=True):
        super().set_postfix_str(s, refresh)
        self.postfixes.append(self.postfix)


@pytest.fixture
def recording_bars(monkeypatch):
    import tqdm.auto

    _RecordingBar.bars = []
    monkeypatch.setattr(tqdm.auto, "tqdm", _RecordingBar)
    return _RecordingBar.bars


def _cfg(tmp_path, **kw) -> GRPOConfig:
    base = dict(model="tiny", env="llm/Math-v0", env_kwargs={"digits": 1}, sft_steps=0,
                group_size=2, groups_per_batch=2, max_tokens=2, eval_problems=2, steps=3,
                output_dir=str(tmp_path), progress=False, seed=0)
    base.update(kw)
    return GRPOConfig(**base)



# ------------------------------------------------------------------------------------------------
# 1. Steps that train on no datum: one warning with the count, a total at the end, a metric
# ------------------------------------------------------------------------------------------------
def test_steps_without_datums_warn_once_and_are_counted(tmp_path, capsys):
    cfg = _cfg(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary = trainer.train(cfg, dataset=_ScriptedDataset(constant_steps={1, 2}))
    empty = [w for w in caught if "trained on no datum" in str(w.message)]
    assert len(empty) == 1, [str(w.message) for w in empty]  # once per run, not once per step
    message = str(empty[0].message)
    assert message.startswith("GRPO step 2 trained on no datum")
    assert "1 of 2 steps so far" in message
    assert "each of its 2 groups gave all its episodes the same reward" in message
    for hint in ("an SFT warm start (--sft-steps N rather than --no-sft)", "--env-kwargs",
                 "--group-size"):
        assert hint in message, hint

    records = train_records(cfg.run_dir)
    assert [records[s]["datums"] for s in (1, 2, 3)] == [4, 0, 0]
    assert [records[s]["empty_steps"] for s in (1, 2, 3)] == [0, 1, 2]  # cumulative
    assert summary["empty_steps"] == 2
    assert json.loads((cfg.run_dir / "summary.json").read_text())["empty_steps"] == 2
    out = capsys.readouterr().out
    assert "2 of 3 GRPO steps trained on no datum; 2 because no group had episodes with different " \
        "rewards" in out and "--group-size" in out and "dropped" not in out


def test_a_run_whose_steps_all_train_says_nothing(tmp_path, capsys):
    cfg = _cfg(tmp_path, steps=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary = trainer.train(cfg, dataset=_ScriptedDataset(constant_steps=set()))
    assert not [w for w in caught if "trained on no datum" in str(w.message)]
    assert summary["empty_steps"] == 0 and train_records(cfg.run_dir)[1]["empty_steps"] == 0
    assert "trained on no datum" not in capsys.readouterr().out


def test_the_empty_step_message_says_why_and_what_to_change():
    hint = trainer.empty_steps_hint(sft_steps=0)
    assert "no group came back" in trainer.empty_steps_message(1, 1, 0, 0, hint)
    text = trainer.empty_steps_message(3, 7, groups=8, mixed_groups=0, hint=hint)
    assert text.startswith("GRPO step 7 trained on no datum: each of its 8 groups")
    assert "3 of 7 steps so far" in text and text.endswith(hint + ".")
    assert "rather than --no-sft" in hint
    assert "a longer SFT warm start" in trainer.empty_steps_hint(sft_steps=50)


# ------------------------------------------------------------------------------------------------
# 2. Evaluation bars count episodes, a sampler batch at a time
# ------------------------------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore:.*is_gradient_checkpointing:FutureWarning")
def test_batched_evaluation_bar_counts_episodes_per_batch(tmp_path, recording_bars):
    """All 6 problems are one greedy batch: the bar must get them as one update of 6 (one per
    episode would show the batch's whole time as the time of one episode: an ETA of 5 batches)."""
    from trainers.models import load_policy, resolve_model

    cfg = _cfg(tmp_path, eval_problems=6, progress=True)
    accelerator = trainer.make_accelerator(cfg)
    tok, stops = trainer.env_tokenizer_and_stops(cfg)
    model, _ = load_policy(resolve_model("tiny"))
    result = trainer.evaluate(cfg, model, accelerator, stops, int(tok.pad_token_id or 0),
                              desc="final eval")
    assert result["problems"] == 6
    (bar,) = recording_bars
    assert (bar.desc, bar.total, bar.unit) == ("final eval", 6, "episode")
    assert bar.updates == [6]
    assert bar.postfixes == ["batch 1"]


class _CountdownEnv:
    """An episode that lasts `turns` turns, whatever the policy says."""

    def __init__(self, turns: int):
        self.turns = turns

    async def initial_observation(self):
        return ModelInput.from_ints([1, 2]), [0]

    async def step(self, action, *, extra=None):
        self.turns -= 1
        done = self.turns == 0
        return StepResult(0.0, done, ModelInput.empty() if done else ModelInput.from_ints([3]), [0])


class _CountdownBuilder:
    def __init__(self, turns: int):
        self.turns = turns

    async def make_envs(self):
        return [_CountdownEnv(self.turns)]

    async def compute_group_rewards(self, trajectory_group, env_group):
        return [(0.0, {}) for _ in trajectory_group]

    async def cleanup(self):
        pass

    def logging_tags(self):
        return []


class _EchoCompleter(BatchingCompleter):
    """Answers every call with one token; records the size of each batch it runs."""

    def __init__(self):
        self._init_batching(max_batch_size=64, join_yields=2)
        self.batch_sizes: list[int] = []

    def _make_request(self, model_input, stop, max_tokens):
        return SimpleNamespace(future=None)

    def _generate(self, requests):
        self.batch_sizes.append(len(requests))
        return [TokensWithLogprobs([5], [0.0]) for _ in requests]


class _FakeBar:
    def __init__(self):
        self.updates: list[int] = []
        self.postfixes: list[str] = []

    def update(self, n=1):
        self.updates.append(n)

    def set_postfix_str(self, s="", refresh=True):
        self.postfixes.append(s)


def test_multi_turn_evaluation_bar_advances_as_batches_finish_episodes():
    """Episodes of 1, 2 and 3 turns (two each): each turn is one batch, and the bar advances by
    the episodes a batch finished, once per batch."""
    policy = _EchoCompleter()
    bar = _FakeBar()
    progress = trainer.BatchProgress(bar, policy)
    builders = [_CountdownBuilder(turns) for turns in (1, 2, 3, 1, 2, 3)]
    groups = trainer.rollout_groups(builders, policy, on_group_done=progress.episode_done)
    progress.flush()
    assert len(groups) == 6
    assert policy.batch_sizes == [6, 4, 2]
    assert bar.updates == [2, 2, 2]
    assert bar.postfixes == ["batch 1", "batch 2", "batch 3"]


def test_a_policy_without_batches_advances_the_bar_per_episode():
    bar = _FakeBar()
    progress = trainer.BatchProgress(bar, policy=object())
    progress.episode_done()
    progress.episode_done()
    progress.flush()
    assert bar.updates == [1, 1]


# ------------------------------------------------------------------------------------------------
# 3. The GRPO bar shows the last held-out accuracy beside the training accuracy
# ------------------------------------------------------------------------------------------------
def test_grpo_bar_shows_the_last_eval_accuracy(tmp_path, recording_bars, monkeypatch):
    accuracies = iter([0.1, 0.2, 0.3, 0.4])  # before RL, after steps 1 and 2, final

    def fake_evaluate(*args, **kwargs):
        return {"accuracy": next(accuracies), "reward": 0.0, "problems": 2}

    monkeypatch.setattr(trainer, "evaluate", fake_evaluate)
    cfg = _cfg(tmp_path, progress=True, eval_every=1)
    trainer.train(cfg, dataset=_ScriptedDataset(constant_steps=set()))
    (bar,) = [b for b in recording_bars if b.desc == "GRPO"]
    assert len(bar.postfixes) == 3
    for postfix, shown in zip(bar.postfixes, ["0.20", "0.30", "0.30"]):
        fields = dict(part.split("=") for part in postfix.split(", "))
        assert fields["eval"] == shown, postfix
        assert "acc" in fields
    assert "acc=" in bar.postfixes[0] and ", eval=" in bar.postfixes[0]  # side by side


def test_grpo_bar_shows_the_eval_before_rl_from_the_first_step(tmp_path, recording_bars,
                                                               monkeypatch):
    monkeypatch.setattr(trainer, "evaluate",
                        lambda *a, **k: {"accuracy": 0.25, "reward": 0.0, "problems": 2})
    cfg = _cfg(tmp_path, progress=True, steps=1)
    trainer.train(cfg, dataset=_ScriptedDataset(constant_steps=set()))
    (bar,) = [b for b in recording_bars if b.desc == "GRPO"]
    assert bar.postfixes and "eval=0.25" in bar.postfixes[0]


# ------------------------------------------------------------------------------------------------
# Resume: the count and the bar's eval carry over from the run's earlier segment
# ------------------------------------------------------------------------------------------------
def test_a_resumed_run_continues_the_empty_step_count_and_shows_its_last_eval(
        tmp_path, recording_bars, monkeypatch):
    import shutil

    accuracies = iter([0.1, 0.2, 0.3, 0.4])  # before RL, after steps 1 and 2, final
    monkeypatch.setattr(trainer, "evaluate", lambda *a, **k: {
        "accuracy": next(accuracies), "reward": 0.0, "problems": 2})
    dataset = _ScriptedDataset(constant_steps={0, 2})
    cfg = _cfg(tmp_path, progress=True, eval_every=1, save_every=1)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        trainer.train(cfg, dataset=dataset)
    # the run as a crash right after its step-2 checkpoint leaves it
    shutil.rmtree(cfg.run_dir / "checkpoints" / "step_000003")
    (cfg.run_dir / "summary.json").unlink()

    recording_bars.clear()
    accuracies = iter([0.9])  # the final evaluation of the resumed segment
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary = trainer.train(dataclasses.replace(cfg, resume=True), dataset=dataset)
    (message,) = [str(w.message) for w in caught if "trained on no datum" in str(w.message)]
    assert message.startswith("GRPO step 3 ") and "2 of 3 steps so far" in message
    assert summary["empty_steps"] == 2
    assert [r["empty_steps"] for _, r in sorted(train_records(cfg.run_dir).items())] == [1, 1, 2]
    (bar,) = [b for b in recording_bars if b.desc == "GRPO"]
    assert len(bar.postfixes) == 1 and "eval=0.30" in bar.postfixes[0]
