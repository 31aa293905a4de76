"""The RL lr fitted to the warm start (`trainers.grpo.fit.fitted_rl_lr`, `fit_lr_to_warm_start`):
a multi-turn env whose start already solves `WARM_START_ACCURACY` of held-out episodes trains at
`WARM_START_LR` unless the user set the lr (flag, config file); single-turn envs and the Python API's
`train(cfg)` keep theirs. End to end through `llm-gym train`: the fitted lr reaches the optimizer's
schedule, is printed and saved in the summary, and a resumed run keeps it."""

from __future__ import annotations

import json
import math
import shutil

import pytest

from trainers.cli_train import config_and_explicit, train_main
from trainers.grpo.config import GRPOConfig
from trainers.grpo.fit import (
    WARM_START_ACCURACY,
    WARM_START_LR,
    fit_lr_to_warm_start,
    fit_to_env,
    fitted_rl_lr,
)

GUESS = ["--env", "llm/GuessNumber-v0", "--env-kwargs", '{"max_number": 5, "max_turns": 2}']


# --- the rule ------------------------------------------------------------------------------------
def test_a_strong_multi_turn_start_gets_the_smaller_lr_and_a_weak_one_keeps_the_default():
    default = GRPOConfig.lr
    assert WARM_START_LR < default
    assert fitted_rl_lr(default, 0.45, multi_turn=True) == WARM_START_LR
    assert fitted_rl_lr(default, WARM_START_ACCURACY, multi_turn=True) == WARM_START_LR
    assert fitted_rl_lr(default, 0.035, multi_turn=True) == default  # TicTacToe's start
    assert fitted_rl_lr(default, None, multi_turn=True) == default  # not measured


def test_single_turn_envs_and_a_users_lr_are_never_changed():
    assert fitted_rl_lr(GRPOConfig.lr, 0.9, multi_turn=False) == GRPOConfig.lr
    assert fitted_rl_lr(GRPOConfig.lr, 0.9, multi_turn=True, lr_explicit=True) == GRPOConfig.lr
    assert fitted_rl_lr(5e-5, 0.9, multi_turn=True) == 5e-5  # never raised


# --- who may have it fitted ----------------------------------------------------------------------
def _fitted(argv: list[str]) -> GRPOConfig:
    cfg, explicit = config_and_explicit(argv)
    fit_to_env(cfg, explicit)
    return cfg


def test_llm_gym_train_fits_an_unset_lr_on_a_multi_turn_env_only(tmp_path):
    cfg = _fitted(GUESS)
    assert fit_lr_to_warm_start(cfg, 0.05) is None and cfg.lr == GRPOConfig.lr
    note = fit_lr_to_warm_start(cfg, 0.45)
    assert cfg.lr == WARM_START_LR
    assert note is not None and note.startswith("lr=1e-4 (") and "0.45" in note
    cfg = _fitted(["--env", "llm/Math-v0"])  # the default run: single-turn
    assert fit_lr_to_warm_start(cfg, 0.9) is None and cfg.lr == GRPOConfig.lr
    # set by flag or by config file, even to the default's value: the user's
    for argv in (GUESS + ["--lr", "3e-4"], GUESS + ["--lr", "5e-4"]):
        cfg = _fitted(argv)
        lr = cfg.lr
        assert fit_lr_to_warm_start(cfg, 0.9) is None and cfg.lr == lr
    config = tmp_path / "c.yaml"
    config.write_text("lr: 3e-4\n")
    cfg = _fitted(GUESS + ["--config", str(config)])
    assert fit_lr_to_warm_start(cfg, 0.9) is None and cfg.lr == GRPOConfig.lr


def test_the_python_api_keeps_its_lr_unless_fit_to_env_is_asked():
    # train(cfg) cannot tell GRPOConfig() from GRPOConfig(lr=3e-4): it keeps the lr as given.
    cfg = GRPOConfig(env="llm/GuessNumber-v0")
    assert fit_lr_to_warm_start(cfg, 0.9) is None and cfg.lr == GRPOConfig.lr
    # fit_to_env without `explicit` treats the fields as unset, but not an lr moved off the default
    cfg = GRPOConfig(env="llm/GuessNumber-v0", lr=5e-4)
    fit_to_env(cfg)
    assert fit_lr_to_warm_start(cfg, 0.9) is None and cfg.lr == 5e-4
    cfg = GRPOConfig(env="llm/GuessNumber-v0")
    fit_to_env(cfg)
    assert fit_lr_to_warm_start(cfg, 0.9) is not None and cfg.lr == WARM_START_LR


# --- end to end ----------------------------------------------------------------------------------
def _records(run_dir) -> dict[int, dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return {r["step"]: r for r in map(json.loads, lines) if "loss" in r}


def _cosine(lr: float, step: int, steps: int) -> float:
    return lr * 0.5 * (1 + math.cos(math.pi * step / steps))


def test_the_fitted_lr_reaches_the_schedule_is_saved_and_survives_resume(tmp_path, monkeypatch,
                                                                          capsys):
    """The tiny preset solves no GuessNumber game, so the eval before RL reports a strong start
    (0.5); everything after it is the real trainer."""
    from trainers.grpo import trainer

    real_evaluate = trainer.evaluate

    def evaluate(*args, **kwargs):
        ev = real_evaluate(*args, **kwargs)
        return {**ev, "accuracy": 0.5} if kwargs.get("desc") == "eval before RL" else ev

    monkeypatch.setattr(trainer, "evaluate", evaluate)
    argv = GUESS + ["--no-sft", "--group-size", "2", "--groups-per-batch", "1", "--eval-problems",
                    "2", "--save-every", "1", "--output-dir", str(tmp_path / "a"),
                    "--run-name", "gn", "--no-progress", "--no-remove-constant-reward-groups"]
    assert train_main(argv + ["--steps", "2"]) == 0
    out = capsys.readouterr().out
    assert "Fitted to the warm start (set --lr to override): lr=1e-4 (" in out
    run_dir = tmp_path / "a" / "gn"
    records = _records(run_dir)
    # metrics' lr is the scheduler's after each optimizer step: the fitted lr times the cosine
    assert records[1]["lr"] == pytest.approx(_cosine(WARM_START_LR, 1, 2))
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["fitted_lr"] == WARM_START_LR and summary["eval_before_rl"] == 0.5
    assert json.loads((run_dir / "config.json").read_text())["lr"] == GRPOConfig.lr  # as given

    # A crash after step 1, resumed (no eval before RL) to 3 steps: the schedule continues from
    # the fitted lr, not the default the resumed command line holds.
    shutil.rmtree(run_dir / "checkpoints" / "step_000002")
    (run_dir / "summary.json").unlink()
    assert train_main(argv + ["--steps", "3", "--resume", "--resume-override", "steps"]) == 0
    assert "Fitted to the warm start" not in capsys.readouterr().out
    records = _records(run_dir)
    assert sorted(records) == [1, 2, 3]
    assert records[2]["lr"] == pytest.approx(_cosine(WARM_START_LR, 2, 3))
    assert json.loads((run_dir / "summary.json").read_text())["fitted_lr"] == WARM_START_LR

    # An lr the user overrides on resume replaces the fitted one, also in the saved summary.
    assert train_main(argv + ["--steps", "6", "--lr", "2e-4", "--resume",
                              "--resume-override", "steps,lr"]) == 0
    assert _records(run_dir)[4]["lr"] == pytest.approx(_cosine(2e-4, 4, 6))
    assert "fitted_lr" not in json.loads((run_dir / "summary.json").read_text())
