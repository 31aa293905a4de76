"""`llm-gym train` and `llm-gym plot`: the command-line face of the GRPO trainer.

`train` builds a `GRPOConfig` from defaults, then `--config FILE.yaml|json`, then flags (each
`GRPOConfig` field is a flag: `group_size` -> `--group-size`; booleans also have `--no-...`), and
runs `trainers.grpo.train`. Fields the user did not set are first fitted to the env
(`trainers.grpo.fit.fit_to_env`: `max_tokens` covers the env's own longest answer,
`loss_reduction` is `token_mean` where completions are long) and printed as
`Defaults fitted to ...`; on a multi-turn env an unset `lr` is fitted later, to the warm start's
held-out accuracy (`trainers.grpo.fit.fit_lr_to_warm_start`, printed as `Fitted to the warm
start ...`). With no arguments it trains the tiny preset on `llm/Math-v0` and writes
`runs/<name>/summary.json`. Before training it prints one line, `SFT source: ...`, saying what the
SFT warm start learns from: the env's reference responses (single-turn envs), gold scripted
episodes (multi-turn envs whose source declares a gold `ScriptedCase`), or none (`--no-sft`).
`plot RUN_DIR` writes `RUN_DIR/train_curve.png` (or `--out`).
Every configuration error -- a bad flag or flag value, an unreadable or malformed config file, a
value `GRPOConfig.validate` refuses (which also builds the env) -- prints one line
`llm-gym train: ...` saying what to change and exits with status 2, before torch is imported.
The env is built once for the whole command (`trainers.grpo.fit.run_env`, kept on the config):
validation, fitting, the `SFT source` line and the training itself share it.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import os
import math
import sys
from pathlib import Path
from typing import Any, Sequence

from trainers.grpo.config import ConfigError, GRPOConfig, field_docs, load_config_file
from trainers.grpo.fit import SFT_NONE, SFT_REFERENCE, fit_to_env, run_env

_JSON_FIELDS = {"env_kwargs"}
_OPTIONAL_TYPES = {"max_turns": int, "run_name": str, "advantage_scale": str,
                   "clip_eps_high": float, "wandb_project": str,
                   "resume_override": str}


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are `ConfigError`s (one line, with a close flag for an
    unknown one) instead of a usage block and `SystemExit`; `--help` still exits 0."""

    def error(self, message: str):  # type: ignore[override]
        hint = ""
        if message.startswith("unrecognized arguments:"):
            flags = [o for a in self._actions for o in a.option_strings]
            for word in message.split(":", 1)[1].split():
                close = difflib.get_close_matches(word.split("=")[0], flags, n=1)
                if word.startswith("--") and close:
                    hint = f" Did you mean {close[0]!r}?"
                    break
        raise ConfigError(f"{message}.{hint} (`{self.prog} --help` lists the flags)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="llm-gym train",
        description="SFT warm start + GRPO on an llm-gym environment. Flags override --config.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        argument_default=argparse.SUPPRESS,
    )
    parser.add_argument("--config", help="YAML or JSON file of config keys (flags override it)")
    parser.add_argument("--no-sft", action="store_const", const=0, dest="sft_steps",
                        help="skip the SFT warm start (same as --sft-steps 0)")
    docs = field_docs()
    for f in dataclasses.fields(GRPOConfig):
        flag = "--" + f.name.replace("_", "-")
        default = GRPOConfig().__getattribute__(f.name)
        help_text = docs.get(f.name, "") + f" (default: {default!r})"
        help_text = help_text.replace("%", "%%")
        if f.name in _JSON_FIELDS:
            parser.add_argument(flag, type=_json_dict, help=help_text + " [JSON]")
        elif isinstance(default, bool):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, help=help_text)
        elif isinstance(default, tuple):
            parser.add_argument(flag, type=float, nargs=len(default), help=help_text)
        elif default is None:
            parser.add_argument(flag, type=_OPTIONAL_TYPES.get(f.name, str), help=help_text)
        else:
            parser.add_argument(flag, type=type(default), help=help_text)
    return parser


def _json_dict(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON ({exc}); e.g. '{{\"digits\": 2}}'")
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object, e.g. '{\"digits\": 2}'")
    return value


def config_from_args(argv: Sequence[str]) -> GRPOConfig:
    """Defaults < --config file < flags. Raises `ConfigError` for a bad flag, file or value
    type (ranges and the env are `GRPOConfig.validate`'s)."""
    return config_and_explicit(argv)[0]


def config_and_explicit(argv: Sequence[str]) -> tuple[GRPOConfig, set[str]]:
    """`config_from_args` and the set of fields the user set (in the file or as flags): the
    others are defaults, which `train_main` fits to the env (`fit_to_env`)."""
    ns = vars(build_parser().parse_args(list(argv)))
    values: dict[str, Any] = {}
    if "config" in ns:
        values.update(load_config_file(ns.pop("config")))
    values.update(ns)
    return GRPOConfig.from_dict(values), set(values)


def _config_error(exc: Exception) -> int:
    message = " ".join(str(exc).splitlines())  # one line, whatever the message holds
    # Under `accelerate launch` every rank reaches the same verdict; one of them says it.
    if os.environ.get("RANK", "0") == "0":
        print(f"llm-gym train: {message}", file=sys.stderr)
    return 2


def sft_choice(cfg: GRPOConfig) -> str:
    """One line saying what the SFT warm start learns from (`GRPOConfig.sft_source`): the env's
    reference responses, gold scripted episodes (naming the case, and warning when its turns are
    longer than `max_tokens` lets the policy sample), or none."""
    kind = cfg.sft_source()
    if kind == SFT_NONE:
        return "SFT source: none (sft_steps=0: RL only)"
    resume = " (skipped when --resume continues from a checkpoint)" if cfg.resume else ""
    if kind == SFT_REFERENCE:
        return f"SFT source: reference responses (the env's train split){resume}"
    line = "SFT source: gold scripted episodes"
    try:
        summary = run_env(cfg).gold_case_summary(cfg.seed)  # played once: fitting asked first
    except Exception as exc:  # noqa: BLE001 - the warm start itself reports a broken case
        summary = None
        line += f" (the gold case did not play: {type(exc).__name__}: {exc})"
    if summary is not None:
        name, longest = summary
        line += f" (case {name!r}, played token-exact on train tasks)"
        if longest > cfg.max_tokens:
            line += (f"; note: its turns run to {longest} tokens but max_tokens={cfg.max_tokens}, "
                     f"so the policy cannot say them whole: pass --max-tokens {longest} or more")
    return line + resume


def train_main(argv: Sequence[str]) -> int:
    try:
        cfg, explicit = config_and_explicit(argv)
        cfg.validate()
        # A resumed run must see the config it was started with: fitting is deterministic given
        # the env, so the same flags give the same fitted values, and --resume compares them.
        fitted = fit_to_env(cfg, explicit)
        cfg.validate(check_env=False)
        choice = sft_choice(cfg)
    except ConfigError as exc:
        return _config_error(exc)
    if os.environ.get("RANK", "0") == "0":
        if fitted:
            print(f"Defaults fitted to {cfg.env} (set the flag to override): " + "; ".join(fitted),
                  flush=True)
        print(choice, flush=True)
    from trainers.grpo.trainer import train

    try:
        summary = train(cfg)
    except (ConfigError, ValueError) as exc:
        # The model's vocabulary can only be checked once it is loaded.
        if "vocab" in str(exc) or isinstance(exc, ConfigError):
            return _config_error(exc)
        raise
    keys = ("eval_before_sft", "eval_before_rl", "eval_after_rl", "eval_after_rl_ci95",
            "eval_distinct_episodes", "steps", "empty_steps", "wall_seconds")
    print(json.dumps({k: summary[k] for k in keys if k in summary}))
    print(f"summary: {cfg.run_dir / 'summary.json'}")
    return 0


def plot_main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="llm-gym plot",
                                     description="Plot a run's training reward and eval accuracy.")
    parser.add_argument("run_dir", help="a run directory written by `llm-gym train`")
    parser.add_argument("--out", help="PNG path (default: RUN_DIR/train_curve.png)")
    args = parser.parse_args(list(argv))
    try:
        out = plot_run(args.run_dir, args.out)
    except FileNotFoundError as exc:
        print(f"llm-gym plot: {exc}", file=sys.stderr)
        return 2
    print(out)
    return 0


def plot_run(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Training reward/accuracy per step and held-out accuracy at each evaluation, as a PNG."""
    fig = _run_figure(run_dir)  # selects the Agg backend before pyplot is imported
    import matplotlib.pyplot as plt

    out = Path(out) if out else Path(run_dir) / "train_curve.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    return out


def _run_figure(run_dir: str | Path):
    """The figure `plot_run` saves: y-range fitted to the data, title within the figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from trainers.grpo.logging import read_metrics

    records = read_metrics(run_dir)
    train = [r for r in records if "reward" in r]
    evals = [r for r in records if r.get("eval/accuracy") is not None]
    fig, ax = plt.subplots(figsize=(7, 4), dpi=120)
    plotted: list[float] = []
    if train:
        steps = [r["step"] for r in train]
        rewards = [r["reward"] for r in train]
        accuracy = _smooth([r["correct"] for r in train])
        ax.plot(steps, rewards, alpha=0.35, label="train reward")
        ax.plot(steps, accuracy, label="train accuracy (smoothed)")
        plotted += rewards + accuracy
    if evals:
        accuracy = [r["eval/accuracy"] for r in evals]
        ax.plot([r["step"] for r in evals], accuracy, "o-", color="black",
                label="held-out accuracy (greedy)")
        plotted += accuracy
    ax.set(xlabel="RL step", ylabel="reward / accuracy", ylim=_y_limits(plotted))
    ax.set_title(_plot_title(run_dir), fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    return fig


def _plot_title(run_dir: str | Path, width: int = 75) -> str:
    """Two lines at most, each shortened to fit a 7-inch figure: the run's name, then its env and
    held-out accuracy before -> after RL (from summary.json, when there is one)."""
    lines = [_clip(Path(run_dir).resolve().name, width)]
    summary_path = Path(run_dir) / "summary.json"
    if summary_path.exists():
        s = json.loads(summary_path.read_text())
        before, after = s.get("eval_before_rl"), s.get("eval_after_rl")
        line = str(s.get("env", ""))
        if isinstance(before, (int, float)) and isinstance(after, (int, float)):
            line += f": held-out accuracy {before:.2f} → {after:.2f}"
        lines.append(_clip(line, width))
    return "\n".join(line for line in lines if line)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _y_limits(values: list[float]) -> tuple[float, float]:
    """[0, 1] widened to every finite value plotted (rewards may be negative, e.g. -1 for an
    illegal move), with a 5% margin on each side."""
    finite = [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    low, high = min([0.0, *finite]), max([1.0, *finite])
    margin = 0.05 * (high - low)
    return low - margin, high + margin


def _smooth(values: list[float], k: int = 5) -> list[float]:
    out = []
    for i in range(len(values)):
        window = values[max(0, i - k + 1): i + 1]
        out.append(sum(window) / len(window))
    return out


if __name__ == "__main__":  # pragma: no cover
    sys.exit(train_main(sys.argv[1:]))
