"""Metrics sinks of a GRPO run: `metrics.jsonl` always, TensorBoard and W&B when asked.

One JSON object per line, `{"step": N, "time": ..., <name>: value, ...}`; training steps log
`reward`, `correct`, `loss`, `entropy`, `kl`, `clip_frac`, `grad_norm`, `tokens_per_s`,
`step_seconds`, `empty_steps` (how many steps so far trained on no datum), ..., the episodes'
final metrics as `env/<name>` (a curriculum's `env/curriculum/level` among them) and, with
`credit="turn"`, `turn_credit/{reward_mean,advantage_abs_mean}/turn_<t>`; evaluations log
`eval/accuracy` (and `eval/reward`) at the step they ran.
On resume the file is cut back to the checkpoint's step so the curve has no duplicates (also when
`--resume` falls back to an older checkpoint), and a torn line (a crash in mid-write leaves a last
line that is not JSON) is dropped with a warning instead of blocking the resume; `read_metrics`
skips such a line too, so `llm-gym plot` works on a run that is still writing. Optional sinks
are imported only when enabled and fail with the install command when missing.
"""

from __future__ import annotations

import json
import math
import os
import time
import warnings
from pathlib import Path
from typing import Any


class MetricsLogger:
    def __init__(
        self,
        run_dir: str | Path,
        *,
        enabled: bool = True,
        tensorboard: bool = False,
        wandb_project: str | None = None,
        config: dict[str, Any] | None = None,
        resume_step: int | None = None,
    ) -> None:
        self.enabled = enabled
        self.path = Path(run_dir) / "metrics.jsonl"
        self._tb = None
        self._wandb = None
        if not enabled:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if resume_step is None:
            self.path.write_text("")
        elif self.path.exists():
            kept = [line for line, record in _parse_lines(self.path, warn=True)
                    if record.get("step", 0) <= resume_step]
            tmp = self.path.with_name(self.path.name + ".tmp")
            tmp.write_text("".join(line + "\n" for line in kept))
            os.replace(tmp, self.path)  # a crash here leaves the old file, never half of it
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as exc:  # pragma: no cover
                raise ImportError("tensorboard logging needs `pip install tensorboard`") from exc
            self._tb = SummaryWriter(str(Path(run_dir) / "tb"))
        if wandb_project:
            try:
                # optional dependency (`pip install wandb`), not installed in the dev venv
                import wandb  # pyright: ignore[reportMissingImports]
            except ImportError as exc:
                raise ImportError(
                    "--wandb-project needs Weights & Biases: `pip install wandb` (or drop the flag)"
                ) from exc
            self._wandb = wandb.init(project=wandb_project, name=Path(run_dir).name, config=config)

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        if not self.enabled:
            return
        record = {"step": step, "time": time.time()}
        record.update({k: _jsonable(v) for k, v in metrics.items()})
        with self.path.open("a") as f:
            f.write(json.dumps(record) + "\n")
        numeric = {k: v for k, v in record.items()
                   if isinstance(v, (int, float)) and k not in ("step", "time")}
        if self._tb is not None:
            for k, v in numeric.items():
                self._tb.add_scalar(k, v, step)
        if self._wandb is not None:
            self._wandb.log(numeric, step=step)

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()


def _jsonable(v: Any) -> Any:
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else (1e308 if v > 0 else -1e308)
    return v


def read_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    """The records of `<run_dir>/metrics.jsonl`, skipping lines that are not JSON objects."""
    path = Path(run_dir) / "metrics.jsonl"
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: is {str(run_dir)!r} a run directory of `llm-gym train`?")
    return read_records(path)


def read_records(path: str | Path, warn: bool = False) -> list[dict[str, Any]]:
    """The JSON-object lines of a `.jsonl` file (none if it is missing); other lines (a torn last
    line) are skipped, with a warning naming the line when `warn`."""
    path = Path(path)
    return [record for _, record in _parse_lines(path, warn)] if path.exists() else []


def _parse_lines(path: Path, warn: bool) -> list[tuple[str, dict[str, Any]]]:
    """(line, record) for each line of `path` that is a JSON object; others are skipped (with a
    warning naming the line when `warn`)."""
    out = []
    lines = path.read_text().splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if not isinstance(record, dict):
            if warn:
                where = "its torn last line" if number == len(lines) else f"line {number}"
                warnings.warn(f"{path}: dropping {where}, which is not a JSON record: "
                              f"{line[:60]!r}", stacklevel=3)
            continue
        out.append((line, record))
    return out
