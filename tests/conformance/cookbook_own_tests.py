"""Run the Tinker cookbook's *own* unit tests against llm_gym: the cookbook as its own oracle.

The cookbook ships its unit tests next to its modules (`tinker_cookbook/rl/rollouts_test.py`, ...)
in its sdist. At test time `fetch_sdist` downloads that sdist from PyPI into a cache outside this
repository (`~/.cache/llm-gym/cookbook-sdist/`, reused when present), `extract_tests` copies the
in-scope test files into a temporary folder, rewriting each with `switch_imports` — the same
mechanical import switch a cookbook user makes (`tinker_cookbook.rl` -> `llm_gym.rl`, ...) — and
`run_tests` runs them with pytest in a subprocess and reads the per-test outcomes back from a JUnit
report. Nothing of the cookbook is ever copied into this repository; which files and tests are in
scope, and why the rest is not, lives in `test_cookbook_own_tests.py`.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import os
import re
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path

DIST = "tinker-cookbook"
ORIGINAL_ROOT = "tinker_cookbook"
# The extracted tests live in this package (a name nothing else uses), so the tests' own helper
# modules (`renderers/testing_utils.py`, `kimi_k25_test.py`) import from there, not the library.
TESTS_PACKAGE = "cookbook_tests"

# The cookbook modules whose API llm_gym mirrors under the same dotted name: an import of one of
# them (or of anything below it) is switched to `llm_gym.<same name>`. Everything else the tests
# import from the cookbook stays the real cookbook (helpers such as `utils.deprecation`).
MIRRORED_MODULES = (
    "rl",
    "renderers",
    "tokenizer_utils",
    "completers",
    "tool_use",
    "model_info",
    "exceptions",
    "preference",
    "utils.logtree",
    "utils.logtree_formatters",
    "utils.misc_utils",
)
# Cookbook modules that exist only for its tests: shipped along with the tests, imported from there.
TEST_SUPPORT_MODULES = ("renderers.testing_utils",)
# tinker (the service client library) types that llm_gym replaces: `tinker.ModelInput`,
# `tinker.types.EncodedTextChunk`, `from tinker import ModelInput` -> llm_gym's, as port.py does.
TINKER_REPLACED = {"ModelInput": "llm_gym.model_input", "EncodedTextChunk": "llm_gym.model_input"}


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "llm-gym" / "cookbook-sdist"


def installed_cookbook_version() -> str:
    """The tinker-cookbook version installed here: its tests are the ones that match llm_gym's
    mirrored API (override with LLM_GYM_COOKBOOK_TESTS_VERSION)."""
    return os.environ.get("LLM_GYM_COOKBOOK_TESTS_VERSION") or importlib.metadata.version(DIST)


class SdistUnavailable(RuntimeError):
    """The sdist is neither cached nor downloadable (offline, or the version is not on the index)."""


def fetch_sdist(version: str, cache_dir: Path | None = None, *, timeout_s: float = 300) -> Path:
    """Path of `tinker_cookbook-<version>.tar.gz`, downloaded with pip into `cache_dir` unless
    already there. Raises `SdistUnavailable` with pip's last lines when it cannot be had."""
    cache_dir = cache_dir or default_cache_dir()
    name = f"{ORIGINAL_ROOT}-{version}.tar.gz"
    target = cache_dir / name
    if target.is_file():
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", f"{DIST}=={version}", "--no-deps",
           "--no-binary", ":all:", "-q", "-d", str(cache_dir)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise SdistUnavailable(f"`{' '.join(cmd)}` took over {timeout_s:.0f}s") from None
    if proc.returncode != 0 or not target.is_file():
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        raise SdistUnavailable(f"`pip download {DIST}=={version}` failed (exit {proc.returncode}): {tail}")
    return target


# --- the import switch -------------------------------------------------------------------------

_MIRRORED = "|".join(re.escape(m) for m in sorted(MIRRORED_MODULES, key=len, reverse=True))
_SUPPORT = "|".join(re.escape(m) for m in TEST_SUPPORT_MODULES)
_ROOT = rf"(?<![\w.]){ORIGINAL_ROOT}"
_FROM_ROOT_IMPORT = re.compile(rf"^(\s*)from {ORIGINAL_ROOT} import (.+)$")
_IMPORT_TINKER = re.compile(r"^(\s*)import tinker(\.types)?\s*$")
_FROM_TINKER = re.compile(r"^(\s*)from tinker(\.types)? import (.+)$")


def _switch_test_support(source: str) -> str:
    """The tests' own helpers: `tinker_cookbook.renderers.testing_utils`, `...kimi_k25_test`."""
    return re.sub(rf"{_ROOT}\.((?:{_SUPPORT})|[\w.]*_test)\b", rf"{TESTS_PACKAGE}.\1", source)


def _switch_module_names(line: str) -> str:
    line = _switch_test_support(line)
    # The mirrored API; `\b(?!\.?\w)` keeps `rl` from matching `rl_foo` while allowing `rl.types`.
    return re.sub(rf"{_ROOT}\.((?:{_MIRRORED})(?![\w]))", r"llm_gym.\1", line)


def _switch_from_root(indent: str, import_list: str) -> str:
    """`from tinker_cookbook import a, b`: mirrored names come from llm_gym, the rest stay."""
    names = [n.strip() for n in import_list.strip().strip("()").split(",") if n.strip()]
    ours = [n for n in names if n.split(" as ")[0].strip() in MIRRORED_MODULES]
    theirs = [n for n in names if n not in ours]
    parts = ([f"from {ORIGINAL_ROOT} import {', '.join(theirs)}"] if theirs else []) + (
        [f"from llm_gym import {', '.join(ours)}"] if ours else [])
    return indent + "; ".join(parts)


def _switch_from_tinker(indent: str, types_suffix: str | None, import_list: str) -> str:
    names = [n.strip() for n in import_list.strip().strip("()").split(",") if n.strip()]
    ours = [n for n in names if n.split(" as ")[0].strip() in TINKER_REPLACED]
    theirs = [n for n in names if n not in ours]
    parts = [f"from tinker{types_suffix or ''} import {', '.join(theirs)}"] if theirs else []
    for n in ours:
        parts.append(f"from {TINKER_REPLACED[n.split(' as ')[0].strip()]} import {n}")
    return indent + "; ".join(parts)


def switch_imports(source: str) -> str:
    """The mechanical import switch a cookbook user makes, applied to one test file's source.

    Line by line (tracebacks keep the original line numbers):

    * `tinker_cookbook.<m>` for `m` in `MIRRORED_MODULES` (and anything below it) ->
      `llm_gym.<m>`, wherever it is spelled: imports, attribute chains, and strings such as
      `mock.patch("tinker_cookbook.rl.rollouts.x")`;
    * `from tinker_cookbook import <m>` -> `from llm_gym import <m>` for mirrored `m`;
    * the tests' helper modules (`TEST_SUPPORT_MODULES`, other `*_test` modules) ->
      `cookbook_tests.<m>`, the extracted copies;
    * tinker's `ModelInput` / `EncodedTextChunk` (as `tinker.X`, `tinker.types.X`, or imported
      from `tinker` / `tinker.types`) -> llm_gym's; `import tinker` stays (the tests still use
      tinker's service types, e.g. as `Mock(spec=tinker.SamplingClient)`) and gains
      `import llm_gym.model_input` on the same line.

    Every other cookbook import is left alone: those modules are outside the mirrored API.
    """
    out: list[str] = []
    for line in source.split("\n"):
        line = _switch_module_names(line)
        if m := _FROM_ROOT_IMPORT.match(line):
            line = _switch_from_root(m.group(1), m.group(2))
        if m := _FROM_TINKER.match(line):
            line = _switch_from_tinker(m.group(1), m.group(2), m.group(3))
        elif m := _IMPORT_TINKER.match(line):
            line = f"{line.rstrip()}; import llm_gym.model_input"
        for name, module in TINKER_REPLACED.items():
            line = re.sub(rf"(?<![\w.])tinker(?:\.types)?\.{name}\b", f"{module}.{name}", line)
        out.append(line)
    return "\n".join(out)


# --- extraction and the run --------------------------------------------------------------------

def sdist_test_files(sdist: Path) -> list[str]:
    """Paths (below `tinker_cookbook/`) of every `*_test.py` in the sdist."""
    prefix = _member_prefix(sdist)
    with tarfile.open(sdist) as tar:
        return sorted(
            m.name[len(prefix):] for m in tar.getmembers()
            if m.isfile() and m.name.startswith(prefix) and m.name.endswith("_test.py")
        )


def _member_prefix(sdist: Path) -> str:
    return sdist.name.removesuffix(".tar.gz") + f"/{ORIGINAL_ROOT}/"


def extract_tests(sdist: Path, dest: Path, files: list[str], *, switch: bool = True) -> list[Path]:
    """Write `files` (paths below `tinker_cookbook/`) and the test-support modules, import-switched
    (with `switch=False` only the helpers' imports, to collect the cookbook's own test ids), under
    `dest/cookbook_tests/`, with the `__init__.py` files that make it a package."""
    prefix = _member_prefix(sdist)
    support = [m.replace(".", "/") + ".py" for m in TEST_SUPPORT_MODULES]
    root = dest / TESTS_PACKAGE
    written = []
    with tarfile.open(sdist) as tar:
        for rel in [*files, *support]:
            member = tar.extractfile(prefix + rel)
            if member is None:
                raise FileNotFoundError(f"{rel} is not in {sdist.name}")
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            text = member.read().decode()
            path.write_text(switch_imports(text) if switch else _switch_test_support(text))
            if rel in files:
                written.append(path)
    for folder in [root, *(p for p in root.rglob("*") if p.is_dir())]:
        (folder / "__init__.py").touch()
    (dest / "pytest.ini").write_text(
        "[pytest]\npython_files = *_test.py\nmarkers =\n    slow\n    integration\n"
        "    downstream_compat\n    timeout\n    asyncio\n"
    )
    return written


@dataclasses.dataclass
class RunResult:
    # test id (relative to cookbook_tests/, e.g. "rl/x_test.py::test_y[1]") -> passed/failed/error/
    # skipped; a file that failed to import is one entry, "rl/x_test.py" -> "error".
    outcomes: dict[str, str]
    output: str

    def verdicts(self, collected: list[str]) -> dict[str, str]:
        """Each of the cookbook's own `collected` tests -> its outcome here: a test in a file that
        failed to import (or that the switched file no longer defines) counts as "error"."""
        return {
            t: self.outcomes.get(t) or self.outcomes.get(t.split("::")[0]) or "error" for t in collected
        }


def _pytest(dest: Path, args: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    """pytest over `dest` in a subprocess with this interpreter; the hub is offline so a test that
    would download a tokenizer fails or skips at once instead of reaching the network."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
           "--rootdir", str(dest), *args, TESTS_PACKAGE]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1", "PYTHONPATH": str(dest), "PYTHONDONTWRITEBYTECODE": "1"}
    for var in ("PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER", "PYTEST_CURRENT_TEST"):
        env.pop(var, None)
    return subprocess.run(cmd, cwd=dest, env=env, capture_output=True, text=True, timeout=timeout_s)


def collect_ids(dest: Path, *, timeout_s: float = 300) -> list[str]:
    """The test ids pytest collects under `dest` (relative to `dest/cookbook_tests/`). On the
    verbatim copy, run against the installed cookbook, these are the cookbook's own tests: the
    denominator, so a file that fails to import after the switch counts every test in it."""
    proc = _pytest(dest, ["--collect-only"], timeout_s)
    ids = [line.strip() for line in proc.stdout.splitlines() if "::" in line and " " not in line.strip()]
    if proc.returncode not in (0, 5) or not ids:
        raise RuntimeError(f"collecting the cookbook's tests failed (exit {proc.returncode}):\n"
                           f"{(proc.stdout + proc.stderr)[-4000:]}")
    return [i.removeprefix(TESTS_PACKAGE + "/") for i in ids]


def run_tests(dest: Path, deselect: list[str], *, timeout_s: float = 900) -> RunResult:
    """Run the (switched) tests under `dest`, except `deselect` (ids relative to cookbook_tests/)."""
    report = dest / "report.xml"
    args = [f"--junitxml={report}", "--continue-on-collection-errors"]
    for nodeid in deselect:
        args += ["--deselect", f"{TESTS_PACKAGE}/{nodeid}"]
    proc = _pytest(dest, args, timeout_s)
    output = proc.stdout + proc.stderr
    if not report.is_file():
        raise RuntimeError(f"pytest wrote no report (exit {proc.returncode}):\n{output[-4000:]}")
    return RunResult(_read_junit(report), output)


def _read_junit(report: Path) -> dict[str, str]:
    outcomes: dict[str, str] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        classname, name = case.get("classname", ""), case.get("name", "")
        kinds = {child.tag for child in case}
        if not classname:  # a collection error: name is the module, "cookbook_tests.rl.x_test"
            outcomes[name.removeprefix(TESTS_PACKAGE + ".").replace(".", "/") + ".py"] = "error"
            continue
        # classname is "cookbook_tests.rl.x_test[.Class]": rebuild "rl/x_test.py::[Class::]name"
        path = classname.removeprefix(TESTS_PACKAGE + ".").split(".")
        cut = next((i for i, p in enumerate(path) if p.endswith("_test")), len(path) - 1)
        nodeid = "/".join(path[: cut + 1]) + ".py::" + "::".join([*path[cut + 1:], name])
        outcome = ("failed" if "failure" in kinds else "error" if "error" in kinds
                   else "skipped" if "skipped" in kinds else "passed")
        if outcomes.get(nodeid) in ("failed", "error"):
            continue  # a teardown error after a failure: keep the first verdict
        outcomes[nodeid] = outcome
    return outcomes
