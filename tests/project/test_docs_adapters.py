"""Every Python block in docs/adapters.md runs (from a temporary directory) without error."""

from __future__ import annotations

import os
import pathlib
import re

import pytest

from tests._adapter_helpers import ensure_catalog

ensure_catalog()

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "adapters.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def test_doc_has_a_block_per_adapter():
    text = "\n".join(BLOCKS)
    assert len(BLOCKS) >= 5
    for needle in ("GRPOTrainer", "environment_factory", "do_group_rollout", "reinforce_gymnasium",
                   "export_dataset"):
        assert needle in text, needle


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_doc_block_runs(index, tmp_path, monkeypatch):
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": f"docs_adapters_block_{index}"}
    exec(compile(BLOCKS[index], f"{DOC}:block{index}", "exec"), namespace)
    if "export_dataset" in BLOCKS[index]:
        assert (tmp_path / "math_train.jsonl").exists() and (tmp_path / "math_test_arrow").is_dir()
