"""HF datasets export: `export_dataset` and `llm-gym export`."""

from __future__ import annotations

import json
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

from tests._adapter_helpers import ensure_catalog

ensure_catalog()

from llm_gym.adapters._common import text_to_action  # noqa: E402
from llm_gym.adapters.datasets_export import export_dataset, main  # noqa: E402

MATH = "llm/Math-v0"


def test_rows_are_deterministic_gradeable_and_sft_ready():
    ds = export_dataset(MATH, 8, "train", seed=5, digits=3)
    assert ds.to_list() == export_dataset(MATH, 8, "train", seed=5, digits=3).to_list()
    assert ds["prompt"] != export_dataset(MATH, 8, "train", seed=6, digits=3)["prompt"]
    for row in ds:
        assert json.loads(row["env_kwargs"]) == {"digits": 3}
        assert (row["env_id"], row["split"], row["seed"]) == (MATH, "train", 5)
        assert row["messages"] == row["prompt"] + [
            {"role": "assistant", "content": row["reference_response"]}]
        # Re-grade through the Gymnasium face: same prompt, and the reference response scores 1.
        env = gym.make(MATH, digits=3)
        _obs, info = env.reset(seed=row["task_seed"])
        assert info["text"] == row["prompt_text"]
        action = text_to_action(env.unwrapped.renderer, row["reference_response"])
        assert env.step(np.asarray(action))[1] == 1.0


def test_train_and_test_rows_are_disjoint():
    train = export_dataset(MATH, 300, "train", seed=0)
    test = export_dataset(MATH, 100, "test", seed=0)
    key = lambda q: "+".join(sorted(q.rstrip("=").split("+")))  # noqa: E731  (a+b is b+a)
    train_tasks = {key(p[-1]["content"]) for p in train["prompt"]}
    test_tasks = {key(p[-1]["content"]) for p in test["prompt"]}
    assert train_tasks and test_tasks and not train_tasks & test_tasks


def test_multi_turn_env_exports_its_opening_prompt():
    ds = export_dataset("llm/GuessNumber-v0", 2, "test", seed=0)
    assert ds["multi_turn"] == [True, True]
    assert all("Guess my number" in t for t in ds["prompt_text"])
    assert ds["reference_answer"] == [None, None]


def test_cli_writes_jsonl_and_arrow(tmp_path):
    from datasets import load_from_disk

    out = tmp_path / "math.jsonl"
    assert main([MATH, "--n", "5", "--split", "test", "--out", str(out), "--seed", "2",
                 "--knob", "digits=1"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 5 and {r["split"] for r in rows} == {"test"}
    assert rows == export_dataset(MATH, 5, "test", seed=2, digits=1).to_list()

    folder = tmp_path / "math_arrow"
    assert main([MATH, "--n", "3", "--out", str(folder), "--format", "arrow"]) == 0
    assert load_from_disk(str(folder)).to_list() == export_dataset(MATH, 3, "train", 0).to_list()


def test_llm_gym_export_command(tmp_path, capsys):
    from llm_gym import cli

    out = tmp_path / "x.jsonl"
    code = cli.main(["export", MATH, "--n", "2", "--out", str(out)])
    assert code in (0, None) and len(out.read_text().splitlines()) == 2
    # A real subprocess through the console entry point module.
    proc = subprocess.run(
        [sys.executable, "-m", "llm_gym.cli", "export", "llm/Mathh-v0", "--n", "1", "--out",
         str(tmp_path / "y.jsonl")], capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2
    assert "unknown env id 'llm/Mathh-v0'" in proc.stderr and "Did you mean 'llm/Math-v0'" in proc.stderr


def test_bad_inputs_name_the_fix(monkeypatch):
    with pytest.raises(ValueError, match="Did you mean 'llm/Math-v0'"):
        export_dataset("llm/math-v0", 1)
    with pytest.raises(ValueError, match="split"):
        export_dataset(MATH, 1, "validation")
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(ImportError, match=r"pip install 'llm-gym\[train\]'"):
        export_dataset(MATH, 1)
