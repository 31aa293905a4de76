"""Data parallelism through `accelerate launch` (slow): two CPU processes (gloo) run a short GRPO
training; both ranks' trajectories enter one global batch and the run finishes with a summary."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests._grpo_helpers import warm_start_model

pytestmark = pytest.mark.slow


def test_accelerate_launch_two_cpu_processes(tmp_path):
    model = warm_start_model(tmp_path / "model", steps=40)
    cmd = [
        sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "2", "--cpu",
        "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
        "-m", "trainers.cli_train",
        "--model", model, "--no-sft", "--env-kwargs", '{"digits": 1}', "--steps", "2",
        "--group-size", "4", "--groups-per-batch", "4", "--max-tokens", "4",
        "--eval-problems", "8", "--micro-batch-size", "3", "--no-remove-constant-reward-groups",
        "--output-dir", str(tmp_path / "runs"), "--run-name", "ddp", "--no-progress",
    ]
    env = dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env,
                          cwd=Path(__file__).resolve().parents[3])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run = tmp_path / "runs" / "ddp"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["steps"] == 2 and summary["eval_problems"] == 8  # both ranks' eval shards
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    train_steps = [r for r in records if "loss" in r]
    assert [r["step"] for r in train_steps] == [1, 2]
    for r in train_steps:
        assert r["datums"] == 16  # 4 groups x 4, split over 2 ranks, counted globally
        assert math.isfinite(r["loss"]) and math.isfinite(r["grad_norm"])
    assert (run / "checkpoints" / "step_000002" / "model_state.pt").is_file()
