"""Atomic checkpoints of a GRPO run: model, optimizer, scheduler, RNG states, step, data index.

A checkpoint is a directory `<run_dir>/checkpoints/step_000010/` holding `model_state.pt` (the
policy's full state dict, adapters included, for exact resumption), `model/` (a `save_pretrained`
copy for loading with HF tools) and `trainer_state.pt` (optimizer, scheduler, RNG states, step, the
next data index and any extra records). It is written into a temporary sibling directory and
renamed into place, so a crash mid-write never leaves a half checkpoint that `--resume` would read.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

_STEP_DIR = re.compile(r"^step_(\d+)$")


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


def save_checkpoint(
    run_dir: str | Path,
    step: int,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    extra: dict[str, Any] | None = None,
    keep_last: int = 2,
) -> Path:
    """Write checkpoint `step` atomically and keep only the `keep_last` newest ones."""
    ckpt_root = Path(run_dir) / "checkpoints"
    ckpt_root.mkdir(parents=True, exist_ok=True)
    final = ckpt_root / f"step_{step:06d}"
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp_step_{step:06d}_", dir=ckpt_root))
    try:
        torch.save(model.state_dict(), tmp / "model_state.pt")
        if hasattr(model, "save_pretrained"):
            model.save_pretrained(tmp / "model")
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
        if final.exists():  # re-saving the same step (e.g. the final save): replace it
            shutil.rmtree(final)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    for old in list_checkpoints(run_dir)[:-keep_last] if keep_last > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
    return final


def list_checkpoints(run_dir: str | Path) -> list[Path]:
    """Complete checkpoints of a run, oldest first."""
    root = Path(run_dir) / "checkpoints"
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if (m := _STEP_DIR.match(p.name))]
    return [p for _, p in sorted(found)]


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    ckpts = list_checkpoints(run_dir)
    return ckpts[-1] if ckpts else None


def load_checkpoint(
    path: str | Path,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler: Any = None,
    restore_rng: bool = True,
) -> dict[str, Any]:
    """Load a checkpoint into `model` (and optimizer/scheduler); return its trainer state."""
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
