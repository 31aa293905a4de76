"""Port a Tinker-cookbook module to llm_gym by the README's mechanical import switch, at import time.

`import_ported("tinker_cookbook.recipes.math_rl.arithmetic_env")` reads that module's *source* from
the installed cookbook, applies `port_source` (below) and executes the result as a new module named
`ported.tinker_cookbook.recipes.math_rl.arithmetic_env`. The original is untouched and can be
imported side by side, so a differential test runs the same environment code on both libraries.

The switch (`port_source`), line by line so tracebacks keep the original line numbers:

* `tinker_cookbook.recipes...` -> `ported.tinker_cookbook.recipes...`: a recipe's imports of its own
  package (siblings such as `math_rl.math_grading`, `text_arena.tictactoe`) are the author's code,
  not the library, so they resolve to the *ported* sibling, as a user's own package would after the
  switch. Relative imports resolve there too, because a ported module's `__package__` is ported.
* every other `tinker_cookbook` (dotted names, `from tinker_cookbook import`, `import
  tinker_cookbook`, strings such as `mock.patch("tinker_cookbook.x")`) -> `llm_gym`.
* `tinker.types.ModelInput` / `tinker.ModelInput` -> `llm_gym.ModelInput`; in `from tinker import
  ...` the name `ModelInput` comes from `llm_gym` instead; `from tinker import types` followed by
  `types.ModelInput` is the same name spelled differently and becomes `ModelInput` from llm_gym.
* `import tinker` becomes `import llm_gym` when every remaining use of `tinker.` was one of the
  names above; it is *kept* (with `import llm_gym` added on the same line) when the module still
  uses out-of-scope service names (`tinker.ServiceClient`, sampling clients), which the issue leaves
  out: those code paths are not exercised by the differential tests.

Only `ModelInput` is switched among tinker's names: it is the one type the issue lists, and the
only one an environment author touches in the seven recipes (others are service or training types).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

PORT_PREFIX = "ported"
ORIGINAL_ROOT = "tinker_cookbook"
# Packages whose modules are "the author's code" (ported along), not library (switched to llm_gym).
OWN_PACKAGES = ("tinker_cookbook.recipes",)

_IMPORT_TINKER = re.compile(r"^(\s*)import tinker\s*$")
_FROM_TINKER = re.compile(r"^(\s*)from tinker import (.+)$")
_TINKER_ATTR = re.compile(r"\btinker\.(?!types\.ModelInput\b|ModelInput\b)")


def _switch_cookbook_names(line: str) -> str:
    for own in OWN_PACKAGES:
        line = re.sub(rf"(?<![\w.]){re.escape(own)}\b", f"{PORT_PREFIX}.{own}", line)
    # A word boundary that is not preceded by "ported." (already handled above).
    return re.sub(rf"(?<![\w.]){ORIGINAL_ROOT}\b", "llm_gym", line)


def port_source(source: str) -> str:
    """The mechanical import switch applied to one module's source text (see the module docstring)."""
    lines = source.split("\n")
    types_from_tinker = any(
        (m := _FROM_TINKER.match(line)) and "types" in _names(m.group(2)) for line in lines
    )
    out: list[str] = []
    for line in lines:
        line = _switch_cookbook_names(line)
        line = line.replace("tinker.types.ModelInput", "llm_gym.ModelInput")
        line = re.sub(r"\btinker\.ModelInput\b", "llm_gym.ModelInput", line)
        if types_from_tinker:
            line = re.sub(r"(?<![\w.])types\.ModelInput\b", "ModelInput", line)
        if m := _FROM_TINKER.match(line):
            line = _port_from_tinker(m.group(1), m.group(2), types_from_tinker)
        out.append(line)
    still_uses_tinker = any(_TINKER_ATTR.search(line) for line in out if not _IMPORT_TINKER.match(line))
    for i, line in enumerate(out):
        if m := _IMPORT_TINKER.match(line):
            indent = m.group(1)
            out[i] = f"{indent}import tinker; import llm_gym" if still_uses_tinker else f"{indent}import llm_gym"
    return "\n".join(out)


def _names(import_list: str) -> list[str]:
    return [n.strip() for n in import_list.strip().strip("()").split(",") if n.strip()]


def _port_from_tinker(indent: str, import_list: str, types_from_tinker: bool) -> str:
    names = _names(import_list)
    ours = [n for n in names if n == "ModelInput"]
    if types_from_tinker and "types" in names:
        names.remove("types")  # its only in-scope use, types.ModelInput, was rewritten above
        if "ModelInput" not in ours:
            ours.append("ModelInput")
    theirs = [n for n in names if n not in ours]
    parts = []
    if theirs:
        parts.append(f"from tinker import {', '.join(theirs)}")
    if ours:
        parts.append(f"from llm_gym import {', '.join(ours)}")
    return indent + ("; ".join(parts) if parts else "pass")


def _original_location(original: str) -> tuple[Path | None, bool]:
    """(source file or None for a namespace package, is_package) of a cookbook module, without
    importing it."""
    root_spec = importlib.util.find_spec(ORIGINAL_ROOT)
    if root_spec is None or not root_spec.submodule_search_locations:
        raise ModuleNotFoundError(f"{ORIGINAL_ROOT} is not installed; cannot port {original!r}")
    base = Path(list(root_spec.submodule_search_locations)[0])
    parts = original.split(".")[1:]
    path = base.joinpath(*parts)
    if path.is_dir():
        init = path / "__init__.py"
        return (init if init.exists() else None), True
    if path.with_suffix(".py").exists():
        return path.with_suffix(".py"), False
    raise ModuleNotFoundError(f"no module named {original!r} in the installed {ORIGINAL_ROOT}")


class _PortedLoader(importlib.abc.Loader):
    def __init__(self, original: str, path: Path | None) -> None:
        self.original = original
        self.path = path

    def create_module(self, spec):
        return None

    def get_source(self, fullname: str) -> str:
        return port_source(self.path.read_text()) if self.path else ""

    def exec_module(self, module: ModuleType) -> None:
        if self.path is None:
            return
        code = compile(self.get_source(module.__name__), str(self.path), "exec")
        exec(code, module.__dict__)


class PortFinder(importlib.abc.MetaPathFinder):
    """Serves `ported.<cookbook module>` names from the cookbook's ported source."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname == PORT_PREFIX:
            spec = importlib.machinery.ModuleSpec(fullname, _PortedLoader("", None), is_package=True)
            spec.submodule_search_locations = []
            return spec
        if not fullname.startswith(PORT_PREFIX + "."):
            return None
        original = fullname[len(PORT_PREFIX) + 1:]
        if original != ORIGINAL_ROOT and not original.startswith(ORIGINAL_ROOT + "."):
            return None
        file, is_package = _original_location(original)
        if is_package and not any(original.startswith(own + ".") for own in OWN_PACKAGES):
            # Library packages (`tinker_cookbook`, `tinker_cookbook.rl`, ...) are only containers
            # here: their `__init__` belongs to the library being replaced, not to the author.
            file = None
        spec = importlib.machinery.ModuleSpec(
            fullname, _PortedLoader(original, file), origin=str(file) if file else None,
            is_package=is_package,
        )
        if file is not None:
            spec.has_location = True  # sets __file__: recipes read data files next to themselves
        if is_package:
            spec.submodule_search_locations = []  # submodules are found by this finder, not on disk
        return spec


_FINDER = PortFinder()


def install() -> None:
    """Put the finder first on `sys.meta_path` (idempotent)."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


def ported_name(original: str) -> str:
    return f"{PORT_PREFIX}.{original}"


def import_ported(original: str) -> ModuleType:
    """Import the ported twin of cookbook module `original` (e.g. "tinker_cookbook.rl.preference_envs")."""
    install()
    return importlib.import_module(ported_name(original))
