"""Atomic, checksummed checkpoints of a GRPO run: model, optimizer, scheduler, RNG states, step.

A checkpoint is a directory `<run_dir>/checkpoints/step_000010/` holding `model_state.pt` (the
policy's full state dict, adapters included, for exact resumption), `model/` (a `save_pretrained`
copy for loading with HF tools), `trainer_state.pt` (optimizer, scheduler, RNG states, step, the
next data index and any extra records) and, written last, `manifest.json`: the size and sha256 of
every other file. The directory is written under a temporary name (`.tmp_step_*`) and renamed into
place; re-saving an existing step moves the old copy aside (`.old_step_*`) before the rename and
deletes it only after, so at every instant a complete copy of the step exists. `clean_leftovers`
finishes or undoes what a crash interrupted, and `latest_intact_checkpoint` (what `--resume`
uses) checks every file against its manifest and falls back, with a warning naming the bad file,
to the newest checkpoint that passes. A checkpoint without a manifest (a copy torn by hand, or one
written before manifests existed) is not intact: nothing else proves that it is complete.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from trainers.grpo.config import ConfigError

MANIFEST = "manifest.json"
_STEP_DIR = re.compile(r"^step_(\d+)$")
_TMP_DIR = re.compile(r"^\.tmp_step_\d+_")
_OLD_DIR = re.compile(r"^\.old_(step_\d+)$")


class CheckpointError(ConfigError):
    """No checkpoint of a run can be resumed from; the message names each one's defect."""


def rng_states() -> dict[str, Any]:
    states: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def set_rng_states(states: dict[str, Any]) -> None:
    random.setstate(states["python"])
    np.random.set_state(states["numpy"])
    torch.set_rng_state(states["torch"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


# --- writing -------------------------------------------------------------------------------------
def save_checkpoint(
    run_dir: str | Path,
    step: int,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    extra: dict[str, Any] | None = None,
    keep_last: int = 2,
) -> Path:
    """Write checkpoint `step` atomically (with its manifest) and keep the `keep_last` newest.

    Older checkpoints beyond `keep_last` are deleted; checkpoints *newer* than `step` (left by an
    earlier segment of the run) are never deleted here, nor is the one just written."""
    ckpt_root = Path(run_dir) / "checkpoints"
    ckpt_root.mkdir(parents=True, exist_ok=True)
    clean_leftovers(run_dir)
    final = ckpt_root / f"step_{step:06d}"
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp_step_{step:06d}_", dir=ckpt_root))
    try:
        torch.save(model.state_dict(), tmp / "model_state.pt")
        if hasattr(model, "save_pretrained"):  # a Hugging Face / PEFT model (not in nn.Module's type)
            save_pretrained: Callable[..., Any] = getattr(model, "save_pretrained")
            save_pretrained(tmp / "model")
        torch.save(
            {
                "step": step,
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict() if scheduler is not None else None,
                "rng": rng_states(),
                "extra": extra or {},
            },
            tmp / "trainer_state.pt",
        )
        _write_manifest(tmp, step)
        _replace_dir(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    older = [p for p in list_checkpoints(run_dir) if checkpoint_step(p) < step]
    for old in older[: max(len(older) - (keep_last - 1), 0)] if keep_last > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
    return final


def _replace_dir(new: Path, final: Path) -> None:
    """Rename `new` to `final`; an existing `final` is moved aside first and deleted last."""
    if not final.exists():
        os.replace(new, final)
        return
    aside = final.with_name(f".old_{final.name}")
    if aside.exists():  # a previous swap's leftover whose final copy is in place
        shutil.rmtree(aside)
    os.replace(final, aside)
    os.replace(new, final)
    shutil.rmtree(aside, ignore_errors=True)


def _write_manifest(ckpt: Path, step: int) -> None:
    files = {}
    for path in sorted(p for p in ckpt.rglob("*") if p.is_file()):
        files[path.relative_to(ckpt).as_posix()] = {"size": path.stat().st_size,
                                                    "sha256": _sha256(path, sync=True)}
    with (ckpt / MANIFEST).open("w") as f:
        json.dump({"format": 1, "step": step, "files": files}, f, indent=1)
        f.flush()
        os.fsync(f.fileno())


def _sha256(path: Path, sync: bool = False) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
        if sync:  # the bytes we hashed are on disk before the manifest vouches for them
            os.fsync(f.fileno())
    return digest.hexdigest()


def clean_leftovers(run_dir: str | Path) -> None:
    """Finish or undo what a crash during `save_checkpoint` left behind.

    `.tmp_step_*` (a checkpoint still being written) is deleted. `.old_step_N` (the previous copy
    of a step being re-saved) is deleted when `step_N` is in place (the new copy was renamed in,
    and a rename is all-or-nothing) and renamed back to `step_N` when it is not (the crash fell
    between moving the old copy aside and renaming the new one in)."""
    root = Path(run_dir) / "checkpoints"
    if not root.is_dir():
        return
    for path in root.iterdir():
        if _TMP_DIR.match(path.name):
            shutil.rmtree(path, ignore_errors=True)
        elif m := _OLD_DIR.match(path.name):
            final = root / m.group(1)
            if final.exists():
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.replace(path, final)


# --- finding and checking ------------------------------------------------------------------------
def list_checkpoints(run_dir: str | Path) -> list[Path]:
    """Checkpoint directories of a run (intact or not: see `verify_checkpoint`), oldest first."""
    root = Path(run_dir) / "checkpoints"
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir()
             if (m := _STEP_DIR.match(p.name)) and p.is_dir()]
    return [p for _, p in sorted(found)]


def checkpoint_step(path: str | Path) -> int:
    m = _STEP_DIR.match(Path(path).name)
    if m is None:
        raise ValueError(f"{path} is not a checkpoint directory (step_NNNNNN)")
    return int(m.group(1))


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The newest checkpoint directory, unchecked; `--resume` uses `latest_intact_checkpoint`."""
    ckpts = list_checkpoints(run_dir)
    return ckpts[-1] if ckpts else None


def verify_checkpoint(path: str | Path) -> str | None:
    """None if every file of the checkpoint matches its manifest (size and sha256), else what is
    wrong, naming the file."""
    path = Path(path)
    manifest_path = path / MANIFEST
    if not manifest_path.is_file():
        return f"{manifest_path} is missing (the checkpoint is incomplete or predates checksums)"
    try:
        files = json.loads(manifest_path.read_text())["files"]
        entries = [(name, int(e["size"]), str(e["sha256"])) for name, e in files.items()]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return f"{manifest_path} is unreadable ({type(exc).__name__}: {exc})"
    names = {name for name, _, _ in entries}
    for required in ("model_state.pt", "trainer_state.pt"):
        if required not in names:
            return f"{manifest_path} does not list {required}"
    for name, size, sha in entries:
        file = path / name
        if not file.is_file():
            return f"{file} is missing"
        actual = file.stat().st_size
        if actual != size:
            return f"{file} has {actual} bytes, the manifest says {size} (truncated or replaced)"
        if _sha256(file) != sha:
            return f"{file} does not match its sha256 in the manifest (corrupted)"
    return None


def latest_intact_checkpoint(run_dir: str | Path) -> Path | None:
    """The newest checkpoint that passes `verify_checkpoint`; None when the run has none at all.

    Each newer checkpoint that fails is reported with a `UserWarning` naming the bad file and
    renamed to `step_N.corrupt`: kept for inspection, but never resumed from again, and not
    counted among the newest by `save_checkpoint`'s clean-up (which could otherwise delete the
    good one and keep the bad). When checkpoints exist and none is intact, nothing is renamed and
    `CheckpointError` lists each one's defect."""
    ckpts = list_checkpoints(run_dir)
    bad: list[tuple[Path, str]] = []
    for ckpt in reversed(ckpts):
        problem = verify_checkpoint(ckpt)
        if problem is None:
            for newer, why in bad:
                aside = newer.with_name(newer.name + ".corrupt")
                warnings.warn(f"not resuming from {newer.name}: {why}; falling back to "
                              f"{ckpt.name} (the bad copy is kept as {aside.name})", stacklevel=2)
                shutil.rmtree(aside, ignore_errors=True)
                os.replace(newer, aside)
            return ckpt
        bad.append((ckpt, problem))
    if bad:  # nothing is renamed, so a second attempt reports the same
        raise CheckpointError(
            f"no intact checkpoint to resume from under {Path(run_dir) / 'checkpoints'}: "
            + "; ".join(why for _, why in bad)
            + ". Start the run again with --overwrite (or a new --run-name)"
        )
    return None


def load_checkpoint(
    path: str | Path,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler: Any = None,
    restore_rng: bool = True,
) -> dict[str, Any]:
    """Load a checkpoint into `model` (and optimizer/scheduler); return its trainer state.

    Loads what is there: check it first with `verify_checkpoint` (as `--resume` does)."""
    path = Path(path)
    model.load_state_dict(torch.load(path / "model_state.pt", map_location="cpu", weights_only=True))
    state = torch.load(path / "trainer_state.pt", map_location="cpu", weights_only=False)
    if optimizer is not None:
        optimizer.load_state_dict(state["optimizer"])
    if scheduler is not None and state.get("scheduler") is not None:
        scheduler.load_state_dict(state["scheduler"])
    if restore_rng:
        set_rng_states(state["rng"])
    return state
