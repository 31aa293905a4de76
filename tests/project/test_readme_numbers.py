"""The README's `make train` row is what `make train` gives today.

`make train` runs `llm-gym train` with no arguments (seed 0); a run is deterministic per seed, so
the accuracies the README states for it must equal what the command writes to `summary.json`,
exactly. Runs in `make test-all` (marked slow: ~2-4 minutes on 2 cores).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
ROW = re.compile(r"^\| `make train` \(= `llm-gym train`, seed 0\) \| ([0-9.]+) \| ([0-9.]+) \|", re.M)


def test_readme_has_one_make_train_row():
    assert len(ROW.findall(README)) == 1, "README lost its `make train` row (or has two)"


@pytest.mark.slow
def test_readme_make_train_row_is_what_make_train_gives(tmp_path):
    stated_before_rl, stated_after_rl = (float(x) for x in ROW.search(README).groups())
    env = {**os.environ, "HOME": str(tmp_path / "home")}  # the tiny preset is built from scratch
    cli = Path(sys.executable).with_name("llm-gym")
    subprocess.run([str(cli), "train", "--no-progress", "--output-dir", str(tmp_path / "runs")],
                   env=env, cwd=tmp_path, check=True, capture_output=True, text=True, timeout=1800)
    (summary_path,) = (tmp_path / "runs").glob("*/summary.json")
    summary = json.loads(summary_path.read_text())
    got = (summary["eval_before_rl"], summary["eval_after_rl"])
    assert got == (stated_before_rl, stated_after_rl), (
        f"README's `make train` row says {stated_before_rl} -> {stated_after_rl}; `llm-gym train` "
        f"gives {got[0]} -> {got[1]} now: update the row (and the run's other numbers)")
