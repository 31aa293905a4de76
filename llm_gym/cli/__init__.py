"""The `llm-gym` command: a thin, torch-free dispatcher to subcommands.

Each subcommand is a string `"module:function"` in `COMMANDS`, imported only when it runs, so
`llm-gym --help` (and `import llm_gym.cli`) never imports torch or transformers. A subcommand
function takes the remaining argv list and returns an exit code; llm-gym's own commands are the
modules of this package (`check`, `list`, `new`, `doctor`), each only parsing flags, calling the
library (`llm_gym.checks`, `llm_gym.doctor`, ...) and printing. A command whose third-party
dependencies are missing (`train` without torch) prints one line naming the missing module and
the extra in `EXTRAS` that installs it, and exits 2; a missing module of llm-gym's own packages
is a bug and raises.
"""

from __future__ import annotations

import importlib
import sys
from typing import Callable, Sequence

COMMANDS: dict[str, str] = {
    "train": "trainers.cli_train:train_main",
    "plot": "trainers.cli_train:plot_main",
    "export": "llm_gym.adapters.datasets_export:main",
    "list": "llm_gym.cli.list:list_main",
    "check": "llm_gym.cli.check:check_main",
    "new": "llm_gym.cli.new:new_main",
    "doctor": "llm_gym.cli.doctor:doctor_main",
}

# The extra that installs what a command needs beyond llm-gym itself.
EXTRAS: dict[str, str] = {"train": "train", "plot": "train", "export": "train"}
_OWN_PACKAGES = ("llm_gym", "envs_catalog", "trainers")

SUMMARIES: dict[str, str] = {
    "train": "SFT warm start + GRPO on an llm/ environment (no arguments: tiny model, llm/Math-v0)",
    "plot": "write a PNG reward/accuracy curve of a run: llm-gym plot RUN_DIR",
    "export": "write an env's tasks as a dataset (jsonl/arrow) for SFT or eval: llm-gym export ENV_ID --n N --out PATH",
    "list": "list the registered env ids (family, turns, source package); --json for JSON",
    "check": "check envs: check_env, seeding, fuzz, card, scripted cases, split, context, speed: "
             "llm-gym check ENV_ID|--all [--kwargs JSON]",
    "new": "scaffold an installable env package (source, card, scripted cases, tests): llm-gym new NAME --family F",
    "doctor": "what is installed (extras, torch/CUDA, sandbox), ids registered per source and why any is not; --json",
}


def _usage() -> str:
    width = max(map(len, COMMANDS))
    lines = ["usage: llm-gym <command> [options]", "", "commands:"]
    for name in COMMANDS:
        lines.append(f"  {name:<{width}}  {SUMMARIES.get(name, '')}")
    lines.append("")
    lines.append("`llm-gym <command> --help` shows a command's options.")
    return "\n".join(lines)


def resolve(name: str) -> Callable[[list[str]], int | None]:
    """Import and return the function behind subcommand `name`."""
    module_name, _, func_name = COMMANDS[name].partition(":")
    return getattr(importlib.import_module(module_name), func_name)


def main(argv: Sequence[str] | None = None) -> int:
    # No builtin `list` in this module: once `llm-gym list` has run, the name is the
    # `llm_gym.cli.list` submodule here (importing a submodule sets it on its package).
    args = [*(sys.argv[1:] if argv is None else argv)]
    if not args or args[0] in ("-h", "--help"):
        print(_usage())
        return 0
    if args[0] in ("-V", "--version"):
        from llm_gym import __version__

        print(f"llm-gym {__version__}")
        return 0
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        import difflib

        close = difflib.get_close_matches(name, [*COMMANDS], n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        print(f"llm-gym: unknown command {name!r}.{hint}\n\n{_usage()}", file=sys.stderr)
        return 2
    try:
        result = resolve(name)(rest)
    except ImportError as exc:
        missing = _missing_dependency(exc)
        if missing is None or name not in EXTRAS:
            raise
        extra = EXTRAS[name]
        print(f"llm-gym {name}: needs the [{extra}] extra ({missing}): "
              f"pip install 'llm-gym[{extra}]'", file=sys.stderr)
        return 2
    return int(result or 0)


def _missing_dependency(exc: ImportError) -> ModuleNotFoundError | None:
    """The ModuleNotFoundError behind `exc` (itself, or the one an ImportError with an install
    hint was raised from) when the missing module is a third-party one, else None."""
    cause = exc if isinstance(exc, ModuleNotFoundError) else exc.__cause__
    if not isinstance(cause, ModuleNotFoundError) or not cause.name:
        return None
    if cause.name.partition(".")[0] in _OWN_PACKAGES:
        return None
    return cause
