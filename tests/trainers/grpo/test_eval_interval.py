"""What the held-out evaluation says about itself (issue 23): a 95% Wilson interval of its accuracy
and the number of distinct held-out episodes it covered, in its result, metrics.jsonl and
summary.json, and one warning a run when that number is under 100. Tiny in-process model."""

from __future__ import annotations

import json
import warnings

import pytest

from tests._grpo_helpers import train_records
from tests.trainers.grpo.test_train_reporting import _cfg, _ScriptedDataset
from trainers.grpo import trainer


@pytest.mark.parametrize("successes, n, low, high", [
    (0, 10, 0.0, 0.2775), (10, 10, 0.7225, 1.0), (5, 10, 0.2366, 0.7634), (37, 200, 0.1374, 0.2445),
])
def test_the_wilson_interval(successes, n, low, high):
    lo, hi = trainer.wilson_interval(successes, n)
    assert (lo, hi) == (pytest.approx(low, abs=1e-4), pytest.approx(high, abs=1e-4))
    assert lo <= successes / n <= hi


def test_an_empty_evaluation_has_the_whole_interval():
    assert trainer.wilson_interval(0, 0) == (0.0, 1.0)


@pytest.mark.filterwarnings("ignore:.*is_gradient_checkpointing:FutureWarning")
def test_evaluation_counts_distinct_held_out_episodes_by_task_key(tmp_path):
    """The classic GuessNumber (range_starts=1) holds out 2 secrets of 1..20: 6 problems play at
    most 2 distinct episodes; Math's generated problems are all different."""
    from trainers.models import load_policy, resolve_model

    model, _ = load_policy(resolve_model("tiny"))
    for env, env_kwargs, most in [("llm/GuessNumber-v0", {"range_starts": 1, "max_turns": 2}, 2),
                                  ("llm/Math-v0", {"digits": 1}, 6)]:
        cfg = _cfg(tmp_path, env=env, env_kwargs=env_kwargs, eval_problems=6)
        accelerator = trainer.make_accelerator(cfg)
        tok, stops = trainer.env_tokenizer_and_stops(cfg)
        result = trainer.evaluate(cfg, model, accelerator, stops, int(tok.pad_token_id or 0))
        assert result["problems"] == 6
        assert 1 <= result["distinct_episodes"] <= most
        if env == "llm/Math-v0":
            assert result["distinct_episodes"] >= 5  # 1-digit sums may repeat, rarely
        low, high = result["accuracy_ci95"]
        assert 0.0 <= low <= result["accuracy"] <= high <= 1.0 and high - low > 0.3  # 6 episodes
        assert (low, high) == pytest.approx(trainer.wilson_interval(result["accuracy"] * 6, 6))


def _fake_evaluate(distinct: int):
    accuracies = iter([0.1, 0.2, 0.3, 0.4])  # before RL, after steps 1 and 2, final

    def fake(*args, **kwargs):
        accuracy = next(accuracies)
        return {"accuracy": accuracy, "reward": 0.0, "problems": 200, "distinct_episodes": distinct,
                "accuracy_ci95": [accuracy - 0.05, accuracy + 0.05]}

    return fake


def test_few_distinct_episodes_warn_once_a_run_and_reach_the_logs_and_summary(tmp_path,
                                                                              monkeypatch):
    monkeypatch.setattr(trainer, "evaluate", _fake_evaluate(distinct=2))
    cfg = _cfg(tmp_path, eval_every=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary = trainer.train(cfg, dataset=_ScriptedDataset(constant_steps=set()))
    few = [str(w.message) for w in caught if "distinct episodes" in str(w.message)]
    assert len(few) == 1, few  # four evaluations, one warning
    assert "\n" not in few[0] and "only 2 distinct episodes (200 problems), fewer than 100" in few[0]
    assert "--eval-problems" in few[0] and "llm-gym check llm/Math-v0 --only split" in few[0]

    lines = map(json.loads, (cfg.run_dir / "metrics.jsonl").read_text().splitlines())
    evals = [r for r in lines if "eval/accuracy" in r]  # before RL, steps 1 and 2, final
    assert [(r["step"], r["eval/accuracy"]) for r in evals] == [(0, 0.1), (1, 0.2), (2, 0.3), (3, 0.4)]
    assert all(r["eval/distinct_episodes"] == 2 for r in evals)
    assert [(r["eval/accuracy_ci95_low"], r["eval/accuracy_ci95_high"]) for r in evals] == [
        (pytest.approx(a - 0.05), pytest.approx(a + 0.05)) for a in (0.1, 0.2, 0.3, 0.4)]
    assert "eval/accuracy" in train_records(cfg.run_dir)[1]  # beside the step's training metrics
    written = json.loads((cfg.run_dir / "summary.json").read_text())
    for s in (summary, written):
        assert s["eval_after_rl"] == 0.4 and s["eval_distinct_episodes"] == 2
        assert s["eval_after_rl_ci95"] == [pytest.approx(0.35), pytest.approx(0.45)]
        assert s["eval_before_rl"] == 0.1 and s["eval_before_rl_ci95"] == [
            pytest.approx(0.05), pytest.approx(0.15)]


def test_enough_distinct_episodes_do_not_warn(tmp_path, monkeypatch):
    monkeypatch.setattr(trainer, "evaluate", _fake_evaluate(distinct=100))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.train(_cfg(tmp_path, eval_every=1), dataset=_ScriptedDataset(constant_steps=set()))
    assert not [w for w in caught if "distinct episodes" in str(w.message)]


@pytest.mark.filterwarnings("ignore:.*is_gradient_checkpointing:FutureWarning")
def test_groups_dropped_by_the_retry_strategy_are_not_counted_as_evaluated_tasks(tmp_path, monkeypatch):
    """With `rollout_retries`, an evaluation group whose rollouts all failed is left out: neither its
    episode nor its task counts (Math's 2-digit held-out problems are all different, so counting
    the dropped groups' tasks would give 6 distinct episodes for 4 played)."""
    from dataclasses import dataclass

    from llm_gym.exceptions import AllTrajectoriesFailedError
    from llm_gym.rl.rollout_strategy import FailFast, RolloutStrategy
    from trainers.models import load_policy, resolve_model

    cfg = _cfg(tmp_path, env="llm/Math-v0", env_kwargs={}, eval_problems=6)
    builders = list(trainer.make_dataset(cfg, "test", 6, 1, trainer.EVAL_SEED).get_batch(0))
    lost = frozenset((builders[1].seed, builders[4].seed))

    @dataclass(frozen=True)
    class DropTwo(RolloutStrategy):
        async def execute(self, env_group_builder, policy, limits=None):
            if env_group_builder.seed in lost:
                raise AllTrajectoriesFailedError("every rollout of this group failed")
            return await FailFast().execute(env_group_builder, policy, limits=limits)

    monkeypatch.setattr(trainer, "rollout_strategy", lambda cfg: DropTwo())
    model, _ = load_policy(resolve_model("tiny"))
    accelerator = trainer.make_accelerator(cfg)
    tok, stops = trainer.env_tokenizer_and_stops(cfg)
    result = trainer.evaluate(cfg, model, accelerator, stops, int(tok.pad_token_id or 0))
    played = [b for b in builders if b.seed not in lost]
    assert len(set(trainer.eval_task_keys(builders, []))) == 6  # so the count below can fail
    assert result["problems"] == 4
    assert result["distinct_episodes"] == len(set(trainer.eval_task_keys(played, []))) == 4
