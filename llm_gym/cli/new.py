"""`llm-gym new NAME --family F [--multi-turn] [--out DIR]`: scaffold an installable env package.

Writes a separate package at DIR (default `./llm-gym-<name>`): `pyproject.toml` declaring the
`llm_gym.envs` entry point (so `pip install` registers the id with every `import llm_gym`) and a
dependency on `llm-gym>=` the running version (the generated code imports only llm-gym's public
API: `llm_gym.authoring`, `llm_gym.env_source`, `llm_gym.rl`, ...),
`llm_gym_<name>/__init__.py` with the spec list, `llm_gym_<name>/env.py` with a small, real,
working toy task -- a single-turn `ProblemEnv` (count a letter in a word; it has reference
answers, so `llm-gym train`'s SFT warm start works), or with `--multi-turn` a
`Continuation`-based game (guess a letter, "Earlier."/"Later.") -- with its `EnvSource`, card,
knobs, split and `scripted_cases()`, and `tests/test_<name>.py` (gold, adversarial, determinism,
split, knob tests). As generated it passes `llm-gym check llm/<Name>-v0` and its own tests; the
places to put the real task are marked `TASK LOGIC`. The templates are `llm_gym.templates`.

A bad NAME, an unknown family, an id that is already registered or an existing DIR is one line
on stderr and exit status 2. Torch-free.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from pathlib import Path
from typing import Sequence

__all__ = ["build_parser", "FAMILIES", "new_main", "scaffold", "names_for"]

# The catalog's families (envs_catalog/<family>/): a new env joins one of them.
FAMILIES = ("math", "games", "puzzles", "text", "code", "tools", "multiagent")
_NAME = re.compile(r"[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*")


class ScaffoldError(ValueError):
    """A one-line reason `llm-gym new` refuses (bad name, family or target directory)."""


def names_for(name: str) -> dict[str, str]:
    """The placeholder values for NAME: `word-count` -> package `llm_gym_word_count`, class
    `WordCount`, id `llm/WordCount-v0`, distribution `llm-gym-word-count`."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or len(name) > 40:
        raise ScaffoldError(
            f"bad NAME {name!r}: use lower-case letters and digits, words joined by '-' or '_', "
            "starting with a letter, at most 40 characters (e.g. word-count)")
    words = re.split(r"[-_]", name)
    snake = "_".join(words)
    camel = "".join(w[:1].upper() + w[1:] for w in words)
    return {"__NAME__": snake, "__PKG__": f"llm_gym_{snake}", "__CLASS__": camel,
            "__ENV_ID__": f"llm/{camel}-v0", "__DIST__": f"llm-gym-{'-'.join(words)}"}


def scaffold(name: str, family: str, *, multi_turn: bool = False,
             out: str | Path | None = None) -> Path:
    """Write the package for `name` and return its directory; raises `ScaffoldError`."""
    from llm_gym import __version__
    from llm_gym.templates import common, multi_turn as multi_template, render
    from llm_gym.templates import single_turn as single_template

    values = names_for(name)
    if family not in FAMILIES:
        close = difflib.get_close_matches(str(family), FAMILIES, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ScaffoldError(f"unknown family {family!r}.{hint} Families: {', '.join(FAMILIES)}")
    values["__FAMILY__"] = family
    values["__LLM_GYM_VERSION__"] = __version__
    _refuse_registered(values["__ENV_ID__"])
    target = Path(out) if out is not None else Path.cwd() / values["__DIST__"]
    if target.exists():
        raise ScaffoldError(f"{str(target)!r} already exists; pass --out DIR with a new directory")
    kind = multi_template if multi_turn else single_template
    files = {**common.FILES, **kind.FILES}
    rendered = {
        render(path, values): render(text.replace("__DEFAULT_KWARGS__", kind.DEFAULT_KWARGS)
                                     .replace("__TRAIN_FLAGS__", kind.TRAIN_FLAGS), values)
        for path, text in files.items()
    }
    try:
        target.mkdir(parents=True)
    except OSError as exc:
        raise ScaffoldError(f"cannot create {str(target)!r}: {exc.strerror or exc}") from None
    for rel, text in rendered.items():
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return target


def _refuse_registered(env_id: str) -> None:
    import gymnasium as gym

    import llm_gym  # noqa: F401 - registers the catalogs

    if env_id in gym.registry:
        raise ScaffoldError(f"{env_id!r} is already registered; choose another NAME")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="llm-gym new",
        description="Scaffold an installable llm-gym env package (source, card, scripted cases, "
        "tests) that passes `llm-gym check` as generated.",
    )
    parser.add_argument("name", metavar="NAME", help="short name, e.g. word-count (id llm/WordCount-v0)")
    parser.add_argument("--family", required=True, metavar="F",
                        help=f"the env's family: {', '.join(FAMILIES)}")
    parser.add_argument("--multi-turn", action="store_true",
                        help="a multi-turn game (Continuation-based) instead of a single-turn task")
    parser.add_argument("--out", metavar="DIR", help="where to write it (default ./llm-gym-NAME)")
    return parser


def new_main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        target = scaffold(args.name, args.family, multi_turn=args.multi_turn, out=args.out)
    except ScaffoldError as exc:
        print(f"llm-gym new: {exc}", file=sys.stderr)
        return 2
    values = names_for(args.name)
    print(f"wrote {target} ({values['__ENV_ID__']}, "
          f"{'multi-turn' if args.multi_turn else 'single-turn'}, family {args.family})")
    print("next:")
    print(f"  pip install -e {target}")
    print(f"  llm-gym check {values['__ENV_ID__']}")
    print(f"  cd {target} && python -m pytest -q tests")
    print(f"  llm-gym train --env {values['__ENV_ID__']}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(new_main())
