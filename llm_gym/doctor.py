"""`llm-gym doctor` as a library: what this environment has installed, and why an id is missing.

Each check is a function that returns plain, JSON-ready data: `extras_status` (the packages of
each extra, read from llm-gym's own package metadata, with installed versions), `torch_status`
(version, CUDA, devices; the only check that imports torch), `sandbox_status` (the bwrap binaries
`llm_gym.sandbox` would use and whether its backend really isolates, probed by running one
sandboxed `print`), and `envs_status` (per source -- the native catalog, each bridge, any
third-party catalog -- the ids registered and every id that is not, with what it needs and the
extra that installs it; from `llm_gym.registration.catalog_specs` and the bridges' tables).
`diagnose()` runs them all and adds `problems`: what `pip install "llm-gym[all]"` promises but is
missing here, each with its install command. The command, `llm-gym doctor`, is
`llm_gym.cli.doctor`: it only parses flags and prints this report. Nothing here touches the
network.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import warnings
from importlib import metadata
from typing import Any, Sequence

__all__ = [
    "diagnose",
    "envs_status",
    "extra_of",
    "extras_status",
    "sandbox_status",
    "torch_status",
]

DISTRIBUTION = "llm-gym"


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


# --- extras -------------------------------------------------------------------------------------


def _parse_requirement(text: str) -> dict[str, Any] | None:
    """One `Requires-Dist` line as {name, specifier, extras (of a self-reference), extra (the
    extra it belongs to), applies (its other markers hold here)}; None for a core dependency.
    Uses `packaging` when installed; without it, platform markers are taken to hold and versions
    go unchecked."""
    extra_match = re.search(r"""extra\s*==\s*['"]([^'"]+)['"]""", text)
    if extra_match is None:
        return None
    extra = extra_match.group(1)
    try:
        from packaging.requirements import Requirement
    except ImportError:  # a bare install: read the line by hand
        head = text.partition(";")[0]
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?\s*(.*)", head)
        name, extras, specifier = match.groups() if match else (head.strip(), "", "")
        return {"name": name, "specifier": specifier.strip(), "extra": extra, "applies": True,
                "extras": [e.strip() for e in (extras or "").split(",") if e.strip()]}
    req = Requirement(text)
    return {"name": req.name, "specifier": str(req.specifier), "extras": sorted(req.extras),
            "extra": extra, "applies": req.marker is None or req.marker.evaluate({"extra": extra})}


def _declared_extras() -> dict[str, list[dict[str, Any]]]:
    """llm-gym's extras from its installed metadata, in declaration order: extra -> requirements."""
    dist = metadata.distribution(DISTRIBUTION)
    extras: dict[str, list[dict[str, Any]]] = {
        e: [] for e in dist.metadata.get_all("Provides-Extra") or []}
    for text in dist.requires or []:
        req = _parse_requirement(text)
        if req is not None:
            extras.setdefault(req["extra"], []).append(req)
    return extras


def _expand(extra: str, declared: dict[str, list[dict[str, Any]]], seen: set[str]) -> list[str]:
    """`extra` and the extras it names through `llm-gym[...]`, depth first, each once."""
    if extra in seen or extra not in declared:
        return []
    seen.add(extra)
    out = [extra]
    for req in declared[extra]:
        if _normalize(req["name"]) == DISTRIBUTION:
            for inner in req["extras"]:
                out += _expand(inner, declared, seen)
    return out


def extra_of(import_name: str) -> str | None:
    """The smallest llm-gym extra that installs the package imported as `import_name` (its
    distribution is taken to be named alike: `math_verify` -> math-verify), or None."""
    try:
        declared = _declared_extras()
    except metadata.PackageNotFoundError:
        return None
    wanted = _normalize(import_name)
    holders = [(len(reqs), extra) for extra, reqs in declared.items()
               if any(_normalize(r["name"]) == wanted for r in reqs)]
    return min(holders)[1] if holders else None


def _package_row(name: str, specifier: str, *, optional: bool = False) -> dict[str, Any]:
    version = _version(name)
    ok = version is not None
    if version is not None and specifier:
        try:
            from packaging.specifiers import SpecifierSet

            ok = SpecifierSet(specifier).contains(version, prereleases=True)
        except ImportError:
            pass
    return {"name": name, "version": version, "wants": specifier, "ok": ok, "optional": optional}


def extras_status(extras: Sequence[str] | None = None) -> dict[str, Any]:
    """The packages of llm-gym's extras, with installed versions.

    Returns `{"all": [the extras [all] installs], "extras": {extra: {"in_all": bool, "packages":
    [{"name", "version" (None: not installed), "wants" (the specifier), "ok" (installed and
    satisfying it), "optional"}]}}}` for `extras` (default: those [all] installs, then any other
    extra that provides what a catalog spec `requires`, e.g. textworld). Requirements whose
    platform markers do not hold here are left out. Raises `importlib.metadata.PackageNotFoundError`
    when llm-gym itself is not installed (run from a source tree without `pip install -e .`).
    """
    declared = _declared_extras()
    named = set(_expand("all", declared, set())) - {"all"}
    in_all = [e for e in declared if e in named]  # in declaration order
    if extras is None:
        extras = list(in_all)
        for spec in _required_specs():
            extra = extra_of(spec["requires"].partition("/")[0])
            if extra is not None and extra not in extras:
                extras.append(extra)
    out: dict[str, Any] = {}
    for extra in extras:
        rows = [_package_row(r["name"], r["specifier"]) for r in declared.get(extra, [])
                if r["applies"] and _normalize(r["name"]) != DISTRIBUTION]
        out[extra] = {"in_all": extra in in_all, "packages": rows}
    return {"all": in_all, "extras": out}


# --- torch and the sandbox ----------------------------------------------------------------------


def torch_status() -> dict[str, Any]:
    """`{"installed", "version", "cuda_available", "device_count", "cuda_version", "devices",
    "error"}`; `error` says why an installed torch failed to import (else None). Imports torch
    (seconds) only when it is installed; never initialises anything else."""
    out: dict[str, Any] = {"installed": False, "version": None, "cuda_available": False,
                           "device_count": 0, "cuda_version": None, "devices": [], "error": None}
    try:
        import torch
    except ModuleNotFoundError as exc:
        if exc.name != "torch":  # torch is there, one of its own dependencies is not
            out["error"] = f"{type(exc).__name__}: {exc}"
        return out
    except Exception as exc:  # noqa: BLE001 - a broken install (CUDA libraries, ABI): say so
        out["error"] = f"{type(exc).__name__}: {exc}"
        return out
    cuda = bool(torch.cuda.is_available())
    count = torch.cuda.device_count() if cuda else 0
    out.update(installed=True, version=torch.__version__, cuda_available=cuda,
               device_count=count, cuda_version=torch.version.cuda,
               devices=[torch.cuda.get_device_name(i) for i in range(count)])
    return out


def sandbox_status() -> dict[str, Any]:
    """Which bwrap binaries `llm_gym.sandbox` finds and the backend it ends up with here, probed
    by running one `print` in it: `{"bwrap": [paths], "backend": "bwrap" | "rlimit" | None,
    "isolated": bool, "namespaces": bool (bwrap runs here), "detail": str}`."""
    from llm_gym.sandbox import Sandbox, SandboxError
    from llm_gym.sandbox.bwrap import find_bwrap

    found = find_bwrap()
    out: dict[str, Any] = {"bwrap": found, "backend": None, "isolated": False,
                           "namespaces": False, "detail": ""}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with Sandbox() as sandbox:
                info = sandbox.describe()
        except (SandboxError, OSError) as exc:
            out["detail"] = f"no backend runs here: {exc}"
            return out
    out.update(backend=info["sandbox"], isolated=bool(info["isolated"]),
               namespaces=info["sandbox"] == "bwrap")
    if info["sandbox"] == "bwrap":
        out["detail"] = info.get("bwrap", "")
    else:
        out["detail"] = "; ".join(str(w.message) for w in caught) or "bwrap is not used"
    return out


# --- environment ids ----------------------------------------------------------------------------


def _required_specs() -> list[dict[str, Any]]:
    from llm_gym.registration import catalog_specs

    return [s for specs in catalog_specs().values() for s in specs if s.get("requires")]


def _why_missing(requires: str | None) -> dict[str, Any]:
    """For an unregistered spec: `{"reason": what it needs, in words; "extra": the llm-gym extra
    that installs that package, or None; "fix": what to do}`."""
    if not requires:
        return {"reason": "it failed to register", "extra": None,
                "fix": "see the RuntimeWarning that `import llm_gym` gives"}
    module, _, pattern = requires.partition("/")
    extra = extra_of(module)
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        return {"reason": f"needs the module {module!r}, which is not installed", "extra": extra,
                "fix": f"pip install 'llm-gym[{extra}]'" if extra else f"pip install {module}"}
    version = _version(module) or _version(_normalize(module))
    installed = f"{module} {version}" if version else module
    if pattern:
        return {"reason": f"needs a file {pattern!r} inside the package {module!r}, which the "
                f"installed {installed} does not carry", "extra": extra,
                "fix": f"a release of {module} that carries it"
                + "".join(f"; {dist} requires {req}" for dist, req in _required_by(module))}
    return {"reason": f"needs {requires!r}", "extra": extra, "fix": "pip install it"}


def _required_by(name: str) -> list[tuple[str, str]]:
    """(installed distribution, its requirement) for each that depends on distribution `name`:
    who holds a package at its version. Reads every installed distribution's metadata (~0.3 s)."""
    wanted = _normalize(name)
    out = []
    for dist in metadata.distributions():
        for text in dist.requires or []:
            head = text.partition(";")[0].strip()
            match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", head)
            if match and _normalize(match.group(0)) == wanted and "extra ==" not in text:
                out.append((dist.metadata["Name"], head))
    return sorted(set(out))


def envs_status() -> dict[str, Any]:
    """Registered ids per source and every listed id that is not registered, with the reason.

    Returns `{"sources": {source: {"registered": n, "unregistered": n}}, "unregistered": [{"id",
    "source", "reason", "extra", "fix"}]}`; sources are the `llm_gym.envs` entry points by name
    (`catalog` is llm-gym's own, the bridges are named after their library) plus any bridge whose
    entry point is missing. A bridge whose library is not installed lists its whole id table.
    """
    import gymnasium as gym

    import llm_gym  # noqa: F401 - registers the ids
    from llm_gym.bridges import BRIDGES
    from llm_gym.registration import catalog_specs

    sources: dict[str, Any] = {}
    unregistered: list[dict[str, Any]] = []
    listed = {name: [(s["id"], s.get("requires")) for s in specs]
              for name, specs in catalog_specs().items()}
    for name, bridge in BRIDGES.items():
        listed[name] = [(env_id, bridge.module) for env_id in bridge.entries]
    why: dict[str | None, dict[str, Any]] = {}  # one lookup per distinct requirement
    for name, entries in listed.items():
        bridge = BRIDGES.get(name)
        missing = [(env_id, requires) for env_id, requires in entries if env_id not in gym.registry]
        sources[name] = {"registered": len(entries) - len(missing), "unregistered": len(missing)}
        for env_id, requires in missing:
            if bridge is not None:
                row = {"reason": f"needs the module {bridge.module!r}, which is not installed",
                       "extra": bridge.extra, "fix": f"pip install 'llm-gym[{bridge.extra}]'"}
            else:
                if requires not in why:
                    why[requires] = _why_missing(requires)
                row = why[requires]
            unregistered.append({"id": env_id, "source": name, **row})
    return {"sources": sources, "unregistered": unregistered}


# --- all together -------------------------------------------------------------------------------


def diagnose(*, torch: bool = True, sandbox: bool = True) -> dict[str, Any]:
    """Every check, plus `problems` (one line each: what [all] promises that is missing here, with
    the command that installs it, or a torch that fails to import) and `ok` (no problems). A
    sandbox that runs only the weaker rlimit backend, or ids that need more than [all] installs,
    are reported but are no problem: installing an extra cannot change them. `torch=False` /
    `sandbox=False` skip those checks."""
    from llm_gym import __version__

    report: dict[str, Any] = {
        "llm_gym": __version__,
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "core": {name: _version(name) for name in ("gymnasium", "numpy")},
    }
    problems: list[str] = []
    try:
        report["extras"] = extras_status()
    except metadata.PackageNotFoundError:
        report["extras"] = None
        problems.append(f"llm-gym is importable but not installed as the distribution "
                        f"{DISTRIBUTION!r}, so its extras cannot be checked: "
                        f"pip install -e '.[all]'")
    else:
        for extra, info in report["extras"]["extras"].items():
            if not info["in_all"]:
                continue
            for pkg in info["packages"]:
                if pkg["ok"] or pkg["optional"]:
                    continue
                state = ("is not installed" if pkg["version"] is None
                         else f"is {pkg['version']}, [{extra}] wants {pkg['wants']}")
                problems.append(f"{pkg['name']} {state}: pip install 'llm-gym[{extra}]'")
    report["torch"] = torch_status() if torch else None
    if report["torch"] is not None and report["torch"]["error"]:
        problems.append(f"torch is installed but fails to import: {report['torch']['error']}")
    report["sandbox"] = sandbox_status() if sandbox else None
    report["envs"] = envs_status()
    report["problems"] = problems
    report["ok"] = not problems
    return report
