"""The distribution as a user gets it: `python -m build` makes an sdist and, from that sdist, a
wheel; the wheel carries every file of the three packages (the runtime data files found by a rule
over the source tree, not a hand list); installed (not editable) into a clean venv with only its
base dependencies it makes, steps, checks and lists envs; `llm-gym new` run from that install
scaffolds packages that install against the built wheel and pass their own tests; and with the
`[train]` extra in a venv of its own, `llm-gym train` runs two steps. Every test is `slow` (it
builds, creates venvs and installs packages: minutes, not seconds); all of it happens in temporary
directories that are removed afterwards, with the current directory outside the repository so
nothing is imported from the source tree by accident.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("llm_gym", "envs_catalog", "trainers")
TORCH_VERSION = "2.13.0"  # the Makefile's pin, installed the Makefile's way (scripts/install_torch.py)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("venv") is None
                       or importlib.util.find_spec("ensurepip") is None,
                       reason="`python -m venv` with pip is unavailable in this Python "
                              "(on Debian/Ubuntu: apt-get install python3-venv)"),
]


# --- helpers -----------------------------------------------------------------------------------
def _clean_env() -> dict[str, str]:
    """The environment for commands in a clean venv: nothing that points back at ours."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP", "PIP_USER")
           and not k.startswith("LLM_GYM_REQUIRE_")}  # those describe the dev venv's extras
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONNOUSERSITE="1", OMP_NUM_THREADS="1",
               TOKENIZERS_PARALLELISM="false")
    return env


def _run(args, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(a) for a in args], cwd=cwd, env=_clean_env(), capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, (
        f"{' '.join(map(str, args))} exited {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}"
        f"\n--- stderr\n{proc.stderr[-4000:]}")
    return proc


def _source_files(root: Path, *under: str) -> list[str]:
    """The source tree's files (posix paths relative to `root`): tracked plus untracked-but-not-
    ignored when `root` is a git work tree, else every file outside caches and build outputs."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z", "--", *under], cwd=root,
            capture_output=True, check=True, timeout=60).stdout.decode().split("\0")
        # -c lists a tracked file deleted in the work tree too; the tree is what gets built.
        return sorted(p for p in listed if p and (root / p).is_file())
    except (OSError, subprocess.CalledProcessError):
        skip_dirs = {".git", "__pycache__", "build", "dist", "runs", ".hypothesis", ".pytest_cache"}
        found = []
        for base in (root / u for u in under) if under else (root,):
            for dirpath, dirnames, filenames in os.walk(base):
                dirnames[:] = [d for d in dirnames if d not in skip_dirs
                               and not d.startswith(".venv") and not d.endswith(".egg-info")]
                found += [(Path(dirpath) / f).relative_to(root).as_posix() for f in filenames
                          if not f.endswith((".pyc", ".pyo"))]
        return sorted(found)


def _make_venv(path: Path) -> Path:
    """A fresh venv at `path` (no system site-packages); returns its bin directory."""
    _run([sys.executable, "-m", "venv", path], cwd=path.parent, timeout=300)
    return path / "bin"


def _pip_install(bin_dir: Path, *args, cwd: Path, timeout: float = 900):
    # --no-compile: installs are faster and the few modules a test imports compile on import.
    return _run([bin_dir / "python", "-m", "pip", "install", "-q", "--no-compile", *args],
                cwd=cwd, timeout=timeout)


# --- fixtures ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def workdir():
    """One temporary directory for the module's builds and venvs, removed at the end."""
    path = Path(tempfile.mkdtemp(prefix="llm-gym-dist-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def dist(workdir) -> dict[str, Path]:
    """sdist and wheel built with `python -m build` (sdist first, the wheel from the sdist) from a
    copy of the source tree, so the repository gets no build/ or egg-info of ours."""
    if importlib.util.find_spec("build") is None:
        pytest.fail("the `build` package is missing from this venv: it is in the [dev] extra "
                    "(pip install -e '.[dev]')")
    src, out = workdir / "src", workdir / "dist"
    for rel in _source_files(REPO):
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, src / rel)
    # --no-isolation: the build backend is this venv's setuptools (no download per run).
    _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", out, src], cwd=workdir)
    wheels, sdists = sorted(out.glob("*.whl")), sorted(out.glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, sorted(out.iterdir())
    return {"dir": out, "wheel": wheels[0], "sdist": sdists[0]}


@pytest.fixture(scope="module")
def base_venv(workdir, dist) -> Path:
    """A clean venv with the built wheel and only its base dependencies; its bin directory."""
    bin_dir = _make_venv(workdir / "venv-base")
    _pip_install(bin_dir, dist["wheel"], cwd=workdir)
    return bin_dir


# --- tests -------------------------------------------------------------------------------------
def test_the_wheel_and_the_sdist_carry_every_runtime_file(dist):
    """Rule: every file under a package directory in the source tree is part of the package (the
    .py modules and whatever else sits there: CATALOG.md, py.typed, data files), so the wheel
    must carry it; the sdist must carry it too, plus the build inputs and the tests."""
    import llm_gym

    package_files = _source_files(REPO, *PACKAGES)
    data_files = [p for p in package_files if not p.endswith(".py")]
    assert "envs_catalog/CATALOG.md" in data_files and "llm_gym/py.typed" in data_files

    with zipfile.ZipFile(dist["wheel"]) as wheel:
        wheel_names = set(wheel.namelist())
        info = f"llm_gym-{llm_gym.__version__}.dist-info"
        metadata = wheel.read(f"{info}/METADATA").decode()
        entry_points = wheel.read(f"{info}/entry_points.txt").decode()
    missing = sorted(set(package_files) - wheel_names)
    assert not missing, f"files under {PACKAGES} missing from the wheel: {missing}"
    assert not [n for n in wheel_names if "__pycache__" in n or n.endswith((".pyc", ".pyo"))]
    assert {n.split("/")[0] for n in wheel_names} == {*PACKAGES, info}  # no tests/, no docs/
    assert f"Version: {llm_gym.__version__}\n" in metadata
    assert "Requires-Dist: gymnasium" in metadata and "Requires-Dist: numpy" in metadata
    assert '[llm_gym.envs]\ncatalog = envs_catalog:ALL_SPECS' in entry_points
    assert "[console_scripts]\nllm-gym = llm_gym.cli:main" in entry_points

    with tarfile.open(dist["sdist"]) as sdist:
        sdist_names = {n.split("/", 1)[1] for n in sdist.getnames() if "/" in n}
    tests = _source_files(REPO, "tests")
    missing = sorted({*package_files, *tests, "pyproject.toml", "README.md"} - sdist_names)
    assert not missing, f"files missing from the sdist: {missing}"


def test_the_wheel_works_in_a_clean_venv(base_venv, workdir):
    """Import, make, reset, step with the reference answer (reward 1.0), `llm-gym check`,
    `llm-gym list`: the installed wheel, nothing from the source tree, and no torch."""
    smoke = """
import importlib.util, sys
import gymnasium as gym
import llm_gym
from llm_gym.authoring import split_of
assert llm_gym.__file__.startswith(sys.prefix), llm_gym.__file__
assert importlib.util.find_spec("torch") is None, "base install pulled torch"
env = gym.make("llm/Math-v0")
obs, info = env.reset(seed=0)
tok = env.unwrapped.tokenizer
answer = env.unwrapped.current_env.get_reference_response()
action = tok.encode(answer) + [tok.convert_tokens_to_ids("<|im_end|>")]
obs, reward, terminated, truncated, info = env.step(action)
assert reward == 1.0 and terminated and not truncated, (reward, terminated, truncated, info)
assert split_of("llm-gym") in ("train", "test")
print("SMOKE OK", llm_gym.__version__)
"""
    import llm_gym

    proc = _run([base_venv / "python", "-c", smoke], cwd=workdir)
    assert f"SMOKE OK {llm_gym.__version__}" in proc.stdout
    proc = _run([base_venv / "llm-gym", "check", "llm/Math-v0"], cwd=workdir)
    assert "=> ok" in proc.stdout
    proc = _run([base_venv / "llm-gym", "list"], cwd=workdir)
    assert "llm/Math-v0" in proc.stdout.split()
    proc = _run([base_venv / "llm-gym", "--version"], cwd=workdir)
    assert proc.stdout.strip() == f"llm-gym {llm_gym.__version__}"


def test_a_scaffold_installs_against_the_wheel_and_passes_its_tests(base_venv, dist, workdir):
    """`llm-gym new` from the installed wheel (its templates ship in it); the packages install
    into the clean venv against the built wheel, register their ids, pass `llm-gym check` and
    their own generated tests."""
    import llm_gym

    kits = {"dist-count": ("text", []), "dist-guess": ("games", ["--multi-turn"])}
    root = workdir / "scaffolds"
    root.mkdir()
    for name, (family, flags) in kits.items():
        _run([base_venv / "llm-gym", "new", name, "--family", family, "--out", root / name,
              *flags], cwd=root)

    # The generated dependency on llm-gym is satisfied by the built wheel alone (no index).
    requirement = tomllib.loads((root / "dist-count" / "pyproject.toml").read_text())[
        "project"]["dependencies"]
    assert requirement == [f"llm-gym>={llm_gym.__version__}"]
    proc = _run([base_venv / "python", "-m", "pip", "install", "--dry-run", "--ignore-installed",
                 "--no-deps", "--no-index", "--find-links", dist["dir"], "--report", "-", "-q",
                 *requirement], cwd=root)
    report = json.loads(proc.stdout)
    assert [item["metadata"]["version"] for item in report["install"]] == [llm_gym.__version__]

    _pip_install(base_venv, "--find-links", dist["dir"], *(root / n for n in kits), "pytest",
                 cwd=root)
    proc = _run([base_venv / "python", "-c", "import importlib.metadata as m, llm_gym, sys; "
                 "print(m.version('llm-gym'), llm_gym.__file__.startswith(sys.prefix))"], cwd=root)
    assert proc.stdout.split() == [llm_gym.__version__, "True"]  # still the built wheel
    _run([base_venv / "python", "-m", "pip", "check"], cwd=root)

    ids = ["llm/DistCount-v0", "llm/DistGuess-v0"]
    proc = _run([base_venv / "llm-gym", "check", *ids, "--json"], cwd=root)
    results = json.loads(proc.stdout)
    assert results["ok"] and [r["env_id"] for r in results["results"]] == ids
    for name in kits:
        proc = _run([base_venv / "python", "-m", "pytest", "-q", "-p", "no:cacheprovider",
                     "tests"], cwd=root / name)
        assert " passed" in proc.stdout and "failed" not in proc.stdout


def test_two_training_steps_from_the_wheel_with_the_train_extra(dist, workdir):
    """torch as the Makefile installs it (the CPU build without a GPU), then the wheel with
    `[train]`, into a venv of its own; `llm-gym train` runs SFT + two GRPO steps of the tiny preset
    on llm/Math-v0."""
    bin_dir = _make_venv(workdir / "venv-train")
    _run([sys.executable, REPO / "scripts" / "install_torch.py", "--python", bin_dir / "python",
          "--version", TORCH_VERSION], cwd=workdir, timeout=1200)
    _pip_install(bin_dir, f"{dist['wheel']}[train]", cwd=workdir, timeout=1200)
    out = workdir / "runs"
    proc = _run([bin_dir / "llm-gym", "train", "--steps", "2", "--sft-steps", "2",
                 "--sft-batch-size", "4", "--eval-problems", "4", "--group-size", "2",
                 "--groups-per-batch", "2", "--max-tokens", "4", "--output-dir", out,
                 "--run-name", "dist", "--no-progress"], cwd=workdir, timeout=900)
    assert "SFT source: reference responses" in proc.stdout + proc.stderr
    summary = json.loads((out / "dist" / "summary.json").read_text())
    assert summary["steps"] == 2 and summary["env"] == "llm/Math-v0"
    assert summary["model"] == "tiny" and summary["sft_steps_run"] == 2
