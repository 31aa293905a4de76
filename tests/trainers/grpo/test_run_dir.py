"""One run per run directory: a new run into a used directory is refused before any model work
(one line naming the directory and the fixes), `--overwrite` leaves nothing of the old run, and
the resume config check ignores only per-invocation fields."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainers.grpo.config import ConfigError, GRPOConfig


def _used_run_dir(root: Path, name: str = "math") -> Path:
    run = root / name
    (run / "checkpoints" / "step_000009").mkdir(parents=True)
    (run / "checkpoints" / "step_000009" / "model_state.pt").write_bytes(b"old weights")
    (run / "config.json").write_text(json.dumps({"lr": 1.0}))
    (run / "metrics.jsonl").write_text('{"step": 9, "loss": 123.0}\n')
    (run / "summary.json").write_text(json.dumps({"old": True}))
    (run / "tb").mkdir()
    (run / "tb" / "events.old").write_text("x")
    (run / "notes.txt").write_text("the user's own file")
    return run


def _snapshot(run_dir) -> dict[str, bytes]:
    return {p.relative_to(run_dir).as_posix(): p.read_bytes()
            for p in sorted(run_dir.rglob("*")) if p.is_file()}


def test_a_new_run_into_a_used_run_dir_is_refused_before_any_model_work(tmp_path, monkeypatch):
    import trainers.models
    from trainers.grpo.trainer import train

    def no_model_work(*args, **kwargs):
        raise AssertionError("the model was loaded before the run directory was checked")

    monkeypatch.setattr(trainers.models, "load_policy", no_model_work)
    monkeypatch.setattr(trainers.models, "resolve_model", no_model_work)
    run = _used_run_dir(tmp_path)
    before = _snapshot(run)
    cfg = GRPOConfig(output_dir=str(tmp_path), run_name="math", progress=False)
    with pytest.raises(ConfigError) as exc:
        train(cfg)
    message = str(exc.value)
    assert str(run) in message and "\n" not in message
    for fix in ("--resume", "--overwrite", "--run-name"):
        assert fix in message
    assert _snapshot(run) == before


def test_the_cli_refuses_a_default_run_name_clash_in_one_line(tmp_path, capsys):
    from llm_gym import cli

    run = _used_run_dir(tmp_path, "Math-v0-importance_sampling-seed0")  # the default name
    quick = ["--no-sft", "--steps", "1", "--group-size", "2", "--groups-per-batch", "1",
             "--max-tokens", "1", "--eval-problems", "1", "--no-progress"]
    argv = ["train", "--output-dir", str(tmp_path), "--env-kwargs", '{"digits": 3}', *quick]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "already holds a run" in err
    assert json.loads((run / "config.json").read_text()) == {"lr": 1.0}


# were the check missing, these would train: make that a second, not the default run's minutes
_QUICK = dict(sft_steps=0, steps=1, group_size=2, groups_per_batch=1, max_tokens=1,
              eval_problems=1, progress=False)


def test_resume_and_overwrite_together_are_refused(tmp_path):
    from trainers.grpo.trainer import train

    cfg = GRPOConfig(output_dir=str(tmp_path), resume=True, overwrite=True, **_QUICK)
    with pytest.raises(ConfigError, match="only one"):
        train(cfg)


def test_unknown_resume_override_fields_suggest_the_right_one(tmp_path):
    from trainers.grpo.trainer import train

    cfg = GRPOConfig(output_dir=str(tmp_path), resume=True, resume_override="steps,eval-evry",
                     **_QUICK)
    with pytest.raises(ConfigError, match="'eval_evry'.*'eval_every'"):
        train(cfg)


def test_config_changes_ignore_only_per_invocation_fields():
    from trainers.grpo.run_dir import PER_INVOCATION_FIELDS, config_changes

    saved = json.loads(json.dumps(GRPOConfig(output_dir="a", run_name="x").to_dict()))
    same = GRPOConfig(output_dir="b", run_name="y", resume=True, overwrite=False, progress=False,
                      tensorboard=True, wandb_project="p", resume_override="lr")
    assert config_changes(saved, same) == {}
    assert config_changes(saved, GRPOConfig(lr=1e-3, sft_target_band=(0.1, 0.2))) == {
        "lr": (3e-4, 1e-3), "sft_target_band": ([0.35, 0.55], [0.1, 0.2])}
    # a field the saved config predates counts as its default
    del saved["share_prefix"]
    assert config_changes(saved, GRPOConfig()) == {}
    assert config_changes(saved, GRPOConfig(share_prefix=False)) == {"share_prefix": (True, False)}
    assert PER_INVOCATION_FIELDS <= set(GRPOConfig.field_names())


@pytest.mark.slow
def test_overwrite_leaves_nothing_of_the_old_run(tmp_path):
    from tests._grpo_helpers import warm_start_model
    from trainers.grpo.trainer import train

    model = warm_start_model(tmp_path / "model", steps=20)
    run = _used_run_dir(tmp_path)
    cfg = GRPOConfig(model=model, env_kwargs={"digits": 1}, sft_steps=0, group_size=2,
                     groups_per_batch=2, max_tokens=4, eval_problems=4, steps=1,
                     output_dir=str(tmp_path), run_name="math", progress=False, overwrite=True)
    summary = train(cfg)
    assert summary["steps"] == 1 and json.loads((run / "summary.json").read_text()) == summary
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step_000001"]
    assert [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()] == [0, 1, 1]
    assert json.loads((run / "config.json").read_text())["steps"] == 1
    assert not (run / "tb").exists()
    assert (run / "notes.txt").read_text() == "the user's own file"


@pytest.mark.slow
def test_both_ranks_of_accelerate_launch_refuse_a_used_run_dir(tmp_path):
    """The main process decides and tells the other: no rank hangs waiting, none writes."""
    run = _used_run_dir(tmp_path)
    before = _snapshot(run)
    cmd = [
        sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "2", "--cpu",
        "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
        "-m", "trainers.cli_train", "--output-dir", str(tmp_path), "--run-name", "math",
        "--no-progress",
    ]
    env = dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env,
                          cwd=Path(__file__).resolve().parents[3])
    assert proc.returncode != 0
    refusals = [line for line in proc.stderr.splitlines() if "already holds a run" in line]
    # (the launcher may stop the second rank once the first exited, before it prints)
    assert refusals, proc.stderr[-3000:]
    assert _snapshot(run) == before
