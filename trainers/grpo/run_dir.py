"""The run directory of a GRPO run: one run per directory, and resumes that match it.

`plan_run_dir(cfg)` decides, before any model work, what a `train(cfg)` call may do with
`cfg.run_dir`: start a fresh run (refused when the directory already holds one, unless
`--overwrite`), resume from the newest intact checkpoint (refused when the config differs from the
saved `config.json` beyond `--resume-override`), or do nothing for a run that already finished.
The trainer (`trainers.grpo.trainer`) acts on the returned `RunPlan`; checkpoints themselves are
`trainers.grpo.checkpoint`'s. The saved `config.json` is never rewritten: each resume appends a
record (with any overrides) to `resumes.jsonl`.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, cast

from trainers.grpo.checkpoint import checkpoint_step, clean_leftovers, latest_intact_checkpoint
from trainers.grpo.config import ConfigError, GRPOConfig
from trainers.grpo.logging import read_records

# Config fields that describe an invocation, not the run, so they may differ on --resume without
# --resume-override: where the run lives (a copied or moved run directory resumes), this
# invocation's switches, and extra metric sinks. None of them changes what is trained.
PER_INVOCATION_FIELDS = frozenset({"resume", "resume_override", "overwrite", "progress",
                                   "output_dir", "run_name", "tensorboard", "wandb_project"})
# Their presence means a directory holds a run; --overwrite removes these and _RUN_OUTPUTS.
_RUN_MARKERS = ("config.json", "metrics.jsonl", "summary.json", "checkpoints")
_RUN_OUTPUTS = _RUN_MARKERS + ("resumes.jsonl", "tb", "train_curve.png")
# Overrides the restored optimizer/scheduler state would otherwise silently ignore.
SCHEDULE_FIELDS = frozenset({"lr", "weight_decay", "steps", "warmup_steps", "lr_schedule"})


@dataclass
class RunPlan:
    """What `train` does with its run directory, decided before any model is built."""

    checkpoint: Path | None = None  # resume from it (None: a new run)
    clear: bool = False  # remove the files of the run that was there first
    overrides: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # field: (saved, new)
    finished: dict[str, Any] | None = None  # the summary of a finished run: nothing to do


def plan_run_dir(cfg: GRPOConfig) -> RunPlan:
    """Check `cfg.run_dir` against `cfg` and say how to start; raise `ConfigError` (one line
    naming the directory and the fix) for a new run into a directory holding one, or a resume
    whose config differs from the run's in fields not named by `resume_override`.

    Writes nothing, except that a resume first tidies the checkpoints directory (`clean_leftovers`,
    and corrupt checkpoints newer than the one resumed from are renamed aside)."""
    run_dir = cfg.run_dir
    existing = [name for name in _RUN_MARKERS if (run_dir / name).exists()]
    if cfg.resume and cfg.overwrite:
        raise ConfigError("--resume continues a run and --overwrite replaces it: pass only one")
    if not cfg.resume:
        if existing and not cfg.overwrite:
            raise ConfigError(
                f"{run_dir} already holds a run ({', '.join(existing)}): continue it with "
                "--resume, replace it with --overwrite, or start another with --run-name NEW"
            )
        return RunPlan(clear=bool(existing))
    allowed = override_names(cfg.resume_override)
    overrides = _check_resume_config(cfg, run_dir, allowed)
    clean_leftovers(run_dir)
    ckpt = latest_intact_checkpoint(run_dir)
    if ckpt is None:
        print(f"--resume: no checkpoint under {run_dir / 'checkpoints'}; starting fresh")
        return RunPlan(clear=bool(existing))
    step = checkpoint_step(ckpt)
    if step > cfg.steps:
        raise ConfigError(
            f"--resume: {ckpt} is at step {step}, past --steps {cfg.steps}; pass --steps {step} or "
            "more (with --resume-override steps)"
        )
    summary = None
    if step == cfg.steps and (run_dir / "summary.json").is_file():
        try:
            summary = json.loads((run_dir / "summary.json").read_text())
        except ValueError:
            summary = None  # torn: the resume rewrites it
        if not isinstance(summary, dict) or summary.get("steps") != step:
            summary = None  # a summary of an earlier, shorter segment
    return RunPlan(checkpoint=ckpt, overrides=overrides, finished=summary)


def saved_run_config(run_dir: Path) -> dict[str, Any] | None:
    """The config a run is training with: its `config.json` with the overrides of each resume
    recorded in `resumes.jsonl` applied in order; None if the run has no `config.json`."""
    path = run_dir / "config.json"
    if not path.is_file():
        return None
    try:
        saved = json.loads(path.read_text())
    except ValueError as exc:
        raise ConfigError(
            f"{path} is not valid JSON ({exc}); fix it or start over with --overwrite") from exc
    if not isinstance(saved, dict):
        raise ConfigError(f"{path} does not hold a config; fix it or start over with --overwrite")
    for record in read_records(run_dir / "resumes.jsonl"):
        saved.update(record.get("overrides") or {})
    return saved


def config_changes(saved: dict[str, Any], cfg: GRPOConfig) -> dict[str, tuple[Any, Any]]:
    """`{field: (saved value, cfg's value)}` for each field (outside `PER_INVOCATION_FIELDS`)
    where `cfg` differs from a saved config; a field the saved config lacks (added to
    `GRPOConfig` since) counts as its default."""
    new = _json_config(cfg)
    defaults = _json_config(GRPOConfig())
    changes = {}
    for name, value in new.items():
        old = saved.get(name, defaults[name])
        if name not in PER_INVOCATION_FIELDS and old != value:
            changes[name] = (old, value)
    return changes


def _json_config(cfg: GRPOConfig) -> dict[str, Any]:
    return json.loads(json.dumps(cfg.to_dict(), default=str))  # tuples -> lists, as on disk


def _check_resume_config(cfg: GRPOConfig, run_dir: Path,
                         allowed: set[str]) -> dict[str, tuple[Any, Any]]:
    saved = saved_run_config(run_dir)
    if saved is None:
        return {}
    changes = config_changes(saved, cfg)
    refused = {k: v for k, v in changes.items() if k not in allowed}
    if refused:
        listed = ", ".join(f"{k}: {json.dumps(old)} -> {json.dumps(new)}"
                           for k, (old, new) in refused.items())
        raise ConfigError(
            f"--resume: this config differs from {run_dir / 'config.json'} in {listed}; resume "
            f"with the run's values, or allow the change with --resume-override {','.join(changes)}"
        )
    return changes


def override_names(text: str | None) -> set[str]:
    """The field names of `--resume-override a,b` (dashes or underscores); unknown names raise."""
    import difflib

    names = {n.strip().replace("-", "_") for n in (text or "").split(",") if n.strip()}
    fields = GRPOConfig.field_names()
    for name in sorted(names):
        if name not in fields:
            close = difflib.get_close_matches(name, fields, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"--resume-override: unknown config field {name!r}{hint}")
    return names


def decided_on_main(accelerator, decide: Callable[[], RunPlan]) -> RunPlan:
    """`decide()` on the main process only (it reads and tidies the run directory), its result or
    its `ConfigError` given to every process, so all ranks go the same way without racing."""
    outcome: list[Any] = [None]
    failure: BaseException | None = None
    if accelerator.is_main_process:
        try:
            outcome[0] = ("plan", decide())
        except ConfigError as exc:
            outcome[0] = ("error", exc)
        except Exception as exc:  # the other ranks must not wait for a plan that never comes
            failure, outcome[0] = exc, ("crash", f"{type(exc).__name__}: {exc}")
    if accelerator.num_processes > 1:
        from accelerate.utils import broadcast_object_list

        broadcast_object_list(outcome)
    kind, value = cast("tuple[str, Any]", outcome[0])  # ("plan", RunPlan), ("error", ConfigError), ("crash", str)
    if failure is not None:
        raise failure
    if kind == "error":
        raise value
    if kind == "crash":
        raise RuntimeError(f"the main process failed to check the run directory: {value}")
    return value


def clear_run_files(run_dir: Path) -> None:
    """Remove what `train` wrote into `run_dir` (other files are left alone)."""
    for name in _RUN_OUTPUTS:
        path = run_dir / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def record_resume(run_dir: Path, ckpt: Path, step: int,
                   overrides: dict[str, tuple[Any, Any]]) -> None:
    """One line per resume in `resumes.jsonl`; its overrides amend `config.json` for the next."""
    record = {"time": time.time(), "checkpoint": ckpt.name, "step": step,
              "overrides": {k: new for k, (_, new) in overrides.items()},
              "previous": {k: old for k, (old, _) in overrides.items()}}
    with (run_dir / "resumes.jsonl").open("a") as f:
        f.write(json.dumps(record) + "\n")


def retune_optimizer(optimizer, scheduler, cfg: GRPOConfig) -> None:
    """The checkpoint restored the saved lr, weight decay and schedule position; put the
    overridden values in their place (the schedule continues from its step, under `cfg`'s
    schedule)."""
    scheduler.base_lrs = [cfg.lr for _ in scheduler.base_lrs]
    for group, factor in zip(optimizer.param_groups, scheduler.lr_lambdas):
        group["initial_lr"] = cfg.lr
        group["lr"] = cfg.lr * factor(scheduler.last_epoch)
        group["weight_decay"] = cfg.weight_decay
    scheduler._last_lr = [group["lr"] for group in optimizer.param_groups]
