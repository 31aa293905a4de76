"""Checkpoints: a manifest of checksums with every checkpoint, damaged checkpoints detected and
skipped (with a warning naming the file) on resume, crash leftovers finished or undone, and an
atomic re-save of an existing step."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from trainers.grpo import checkpoint as ck  # noqa: E402
from trainers.grpo.checkpoint import (  # noqa: E402
    CheckpointError,
    clean_leftovers,
    latest_intact_checkpoint,
    list_checkpoints,
    load_checkpoint,
    save_checkpoint,
    verify_checkpoint,
)
from trainers.grpo.config import ConfigError  # noqa: E402


class _Model(torch.nn.Linear):
    """A small model with an HF-style `save_pretrained`, so checkpoints have a `model/` dir."""

    def __init__(self, fill: float = 0.0):
        super().__init__(4, 3)
        with torch.no_grad():
            self.weight.fill_(fill)

    def save_pretrained(self, path):
        Path(path).mkdir()
        (Path(path) / "config.json").write_text(json.dumps({"in": 4, "out": 3}))
        torch.save(self.state_dict(), Path(path) / "weights.bin")


def _save(run_dir, step, fill=None, **kw) -> Path:
    model = _Model(float(step) if fill is None else fill)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    return save_checkpoint(run_dir, step, model, opt, None, extra={"next_data_index": step}, **kw)


def _weight(ckpt: Path) -> float:
    model = _Model()
    load_checkpoint(ckpt, model, restore_rng=False)
    return float(model.weight.detach()[0, 0])


def test_manifest_lists_every_file_with_size_and_sha256(tmp_path):
    ckpt = _save(tmp_path, 1)
    manifest = json.loads((ckpt / "manifest.json").read_text())
    files = {p.relative_to(ckpt).as_posix() for p in ckpt.rglob("*") if p.is_file()}
    assert set(manifest["files"]) == files - {"manifest.json"}
    assert {"model_state.pt", "trainer_state.pt", "model/config.json", "model/weights.bin"} <= files
    for name, entry in manifest["files"].items():
        assert entry["size"] == (ckpt / name).stat().st_size
        assert len(entry["sha256"]) == 64
    assert verify_checkpoint(ckpt) is None


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _flip_a_bit(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


DAMAGE = {
    "truncated model_state.pt": ("model_state.pt", _truncate, "model_state.pt has"),
    "empty trainer_state.pt": ("trainer_state.pt", _empty, "trainer_state.pt has 0 bytes"),
    "bit-flipped model_state.pt": ("model_state.pt", _flip_a_bit, "model_state.pt does not match"),
    "bit-flipped model/weights.bin": ("model/weights.bin", _flip_a_bit, "weights.bin does not match"),
    "missing trainer_state.pt": ("trainer_state.pt", Path.unlink, "trainer_state.pt is missing"),
    "missing manifest": ("manifest.json", Path.unlink, "manifest.json is missing"),
    "unreadable manifest": ("manifest.json", _truncate, "manifest.json is unreadable"),
}


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_a_damaged_latest_checkpoint_is_skipped_with_a_warning_naming_the_file(tmp_path, kind):
    _save(tmp_path, 2)
    latest = _save(tmp_path, 4)
    name, damage, message = DAMAGE[kind]
    damage(latest / name)
    assert message in verify_checkpoint(latest)
    with pytest.warns(UserWarning, match="step_000004") as caught:
        found = latest_intact_checkpoint(tmp_path)
    assert found == tmp_path / "checkpoints" / "step_000002"
    assert name.split("/")[-1] in str(caught[0].message)
    assert _weight(found) == 2.0
    # the bad copy is kept aside, out of the way of later resumes and of pruning
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step_000002"]
    assert (tmp_path / "checkpoints" / "step_000004.corrupt").is_dir()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert latest_intact_checkpoint(tmp_path) == found  # no second warning


def test_an_empty_checkpoint_directory_is_not_intact(tmp_path):
    _save(tmp_path, 1)
    (tmp_path / "checkpoints" / "step_000003").mkdir()
    with pytest.warns(UserWarning, match="step_000003"):
        assert latest_intact_checkpoint(tmp_path).name == "step_000001"


def test_no_intact_checkpoint_is_a_one_line_error_naming_each_file(tmp_path):
    one, two = _save(tmp_path, 1, keep_last=3), _save(tmp_path, 2, keep_last=3)
    _flip_a_bit(one / "model_state.pt")
    _empty(two / "trainer_state.pt")
    with pytest.raises(CheckpointError) as exc:
        latest_intact_checkpoint(tmp_path)
    message = str(exc.value)
    assert isinstance(exc.value, ConfigError)  # the CLI prints it as one line, exit status 2
    assert "\n" not in message
    assert str(one / "model_state.pt") in message and str(two / "trainer_state.pt") in message
    assert "--overwrite" in message
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step_000001", "step_000002"]


def test_a_run_without_checkpoints_has_none(tmp_path):
    assert latest_intact_checkpoint(tmp_path) is None
    (tmp_path / "checkpoints").mkdir()
    assert latest_intact_checkpoint(tmp_path) is None


def test_tmp_leftovers_are_removed_by_the_next_save_and_by_resume(tmp_path):
    _save(tmp_path, 1)
    root = tmp_path / "checkpoints"
    (root / ".tmp_step_000002_x1y2").mkdir()
    (root / ".tmp_step_000002_x1y2" / "model_state.pt").write_bytes(b"half")
    _save(tmp_path, 2)
    assert sorted(p.name for p in root.iterdir()) == ["step_000001", "step_000002"]
    (root / ".tmp_step_000003_zz").mkdir()
    clean_leftovers(tmp_path)
    assert sorted(p.name for p in root.iterdir()) == ["step_000001", "step_000002"]


def test_old_copy_of_a_resaved_step_is_restored_when_its_replacement_never_arrived(tmp_path):
    ckpt = _save(tmp_path, 2)
    aside = ckpt.with_name(".old_step_000002")
    os.replace(ckpt, aside)  # a crash between moving the old copy aside and renaming the new in
    clean_leftovers(tmp_path)
    assert not aside.exists() and verify_checkpoint(ckpt) is None and _weight(ckpt) == 2.0


def test_old_copy_is_deleted_when_the_new_one_is_in_place(tmp_path):
    ckpt = _save(tmp_path, 2, fill=7.0)
    aside = ckpt.with_name(".old_step_000002")
    aside.mkdir()  # the swap finished, only the deletion of the old copy did not
    (aside / "model_state.pt").write_bytes(b"old")
    clean_leftovers(tmp_path)
    assert not aside.exists() and _weight(ckpt) == 7.0


def test_resaving_a_step_replaces_it_and_a_crash_mid_swap_keeps_a_complete_copy(tmp_path, monkeypatch):
    ckpt = _save(tmp_path, 2, fill=1.0)
    _save(tmp_path, 2, fill=5.0)  # e.g. the final save at a step that also had a periodic save
    assert _weight(ckpt) == 5.0 and verify_checkpoint(ckpt) is None
    assert sorted(p.name for p in ckpt.parent.iterdir()) == ["step_000002"]

    real_replace = os.replace

    def crash_on_rename_in(src, dst):
        if Path(src).name.startswith(".tmp_step_"):
            raise KeyboardInterrupt  # killed between the two renames
        real_replace(src, dst)

    monkeypatch.setattr(ck.os, "replace", crash_on_rename_in)
    with pytest.raises(KeyboardInterrupt):
        _save(tmp_path, 2, fill=9.0)
    monkeypatch.setattr(ck.os, "replace", real_replace)
    # the complete previous copy still exists (aside); resume puts it back
    assert (ckpt.parent / ".old_step_000002" / "model_state.pt").is_file()
    clean_leftovers(tmp_path)
    assert verify_checkpoint(ckpt) is None and _weight(ckpt) == 5.0
    assert sorted(p.name for p in ckpt.parent.iterdir()) == ["step_000002"]


def test_pruning_keeps_the_newest_and_never_a_newer_step(tmp_path):
    for step in (1, 2, 3):
        _save(tmp_path, step)
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step_000002", "step_000003"]
    _save(tmp_path, 2, keep_last=1)  # re-saving an earlier step (a resume fell back to it)
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step_000002", "step_000003"]
