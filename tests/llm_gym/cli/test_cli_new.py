"""`llm-gym new`: the scaffolded packages (single- and multi-turn) install without touching the
shared venv (`pip install --no-deps --no-build-isolation --target`), register their id through
the `llm_gym.envs` entry point in a fresh process, pass `llm-gym check` and their own tests, and
(slow) train for two steps with `llm-gym train`. Bad NAME / family / DIR are one-line errors."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import llm_gym
from llm_gym import cli
from llm_gym.cli.new import FAMILIES, names_for, new_main

REPO = Path(__file__).resolve().parents[3]
KINDS = {  # NAME -> (family, multi-turn)
    "kit-count": ("text", False),
    "kit-guess": ("games", True),
}


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """Both scaffolds written with `llm-gym new` and installed into a private site dir."""
    root = tmp_path_factory.mktemp("scaffolds")
    for name, (family, multi) in KINDS.items():
        argv = ["new", name, "--family", family, "--out", str(root / name)]
        assert cli.main(argv + (["--multi-turn"] if multi else [])) == 0
    site = root / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--no-index", "--target", str(site), *(str(root / n) for n in KINDS)],
        check=True, capture_output=True, text=True, timeout=300)
    env = dict(os.environ, PYTHONPATH=str(site), OMP_NUM_THREADS="1",
               TOKENIZERS_PARALLELISM="false")
    return root, env


def run(args, env, cwd=REPO, timeout=300):
    return subprocess.run(args, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)


def test_names():
    assert names_for("kit-count") == {
        "__NAME__": "kit_count", "__PKG__": "llm_gym_kit_count", "__CLASS__": "KitCount",
        "__ENV_ID__": "llm/KitCount-v0", "__DIST__": "llm-gym-kit-count"}
    assert "text" in FAMILIES and "games" in FAMILIES


def test_the_layout_and_the_entry_point(installed):
    root, _ = installed
    for name, (family, multi) in KINDS.items():
        values = names_for(name)
        pkg = root / name
        pyproject = (pkg / "pyproject.toml").read_text()
        assert '[project.entry-points."llm_gym.envs"]' in pyproject
        assert f'{values["__NAME__"]} = "{values["__PKG__"]}:ENV_SPECS"' in pyproject
        env_py = (pkg / values["__PKG__"] / "env.py").read_text()
        assert "TASK LOGIC" in env_py and f'family="{family}"' in env_py
        assert ("Continuation" in env_py) == multi and ("ProblemEnv" in env_py) == (not multi)
        assert (pkg / "tests" / f"test_{values['__NAME__']}.py").is_file()
        assert "__" + "CLASS__" not in env_py and "__" + "PKG__" not in pyproject
        # Satisfiable by the wheel built from this repo (tests/project/test_distribution.py installs it).
        assert f'dependencies = ["llm-gym>={llm_gym.__version__}"]' in pyproject


def test_the_scaffolds_import_only_llm_gyms_public_api(installed):
    """Generated code imports third-party packages, its own package and public llm_gym modules:
    never envs_catalog, trainers or a private (underscore) module of ours."""
    root, _ = installed
    allowed_roots = {"__future__", "typing", "re", "asyncio", "numpy", "gymnasium", "pytest"}
    for name in KINDS:
        pkg = root / name
        own = names_for(name)["__PKG__"]
        checked = 0
        for path in sorted([*(pkg / own).glob("*.py"), *(pkg / "tests").glob("*.py")]):
            tree = ast.parse(path.read_text(), filename=str(path))
            modules = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                       for alias in node.names]
            modules += [node.module for node in ast.walk(tree)
                        if isinstance(node, ast.ImportFrom) and node.module]
            for module in modules:
                top, *rest = module.split(".")
                if top == "llm_gym":
                    assert not any(part.startswith("_") for part in rest), (path, module)
                    assert importlib.util.find_spec(module) is not None, (path, module)
                else:
                    assert top in allowed_roots | {own}, (path, module)
                checked += 1
        assert checked >= 10, checked  # the env module and its tests import plenty


def test_the_scaffolds_register_and_pass_llm_gym_check(installed):
    _, env = installed
    ids = [names_for(n)["__ENV_ID__"] for n in KINDS]
    proc = run([sys.executable, "-m", "llm_gym.cli", "check", *ids, "--json"], env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert report["ok"] and [r["env_id"] for r in report["results"]] == ids
    for result in report["results"]:
        status = {c["name"]: c["status"] for c in result["checks"]}
        assert status["scripted"] == status["card"] == status["determinism"] == "pass"
    multi = {c["name"]: c for c in report["results"][1]["checks"]}
    assert multi["context"]["status"] == "pass" and multi["context"]["data"]["declared_bound"]


def test_the_scaffolds_own_tests_pass(installed):
    root, env = installed
    for name in KINDS:
        proc = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
                   env, cwd=root / name)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
        assert " passed" in proc.stdout and "failed" not in proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("name", list(KINDS))
def test_two_training_steps_on_the_scaffold(name, installed, tmp_path):
    """The single-turn scaffold warm-starts on its reference answers; the multi-turn one has
    none, so it warm-starts on its gold scripted episodes; the CLI says which."""
    _, env = installed
    env_id = names_for(name)["__ENV_ID__"]
    multi = KINDS[name][1]
    proc = run([
        sys.executable, "-m", "llm_gym.cli", "train", "--env", env_id, "--steps", "2",
        "--sft-steps", "2", "--sft-batch-size", "4",
        "--eval-problems", "4", "--group-size", "2", "--groups-per-batch", "2",
        "--max-tokens", "4", "--output-dir", str(tmp_path), "--run-name", "kit", "--no-progress",
    ], env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    chosen = "SFT source: gold scripted episodes" if multi else "SFT source: reference responses"
    assert chosen in proc.stdout + proc.stderr
    summary = json.loads((tmp_path / "kit" / "summary.json").read_text())
    assert summary["steps"] == 2


@pytest.mark.parametrize("argv, message", [
    (["Bad Name", "--family", "text"], "bad NAME 'Bad Name'"),
    (["9lives", "--family", "text"], "bad NAME '9lives'"),
    (["fine", "--family", "gamez"], "unknown family 'gamez'. Did you mean 'games'?"),
    (["math", "--family", "math"], "'llm/Math-v0' is already registered"),
])
def test_bad_arguments_are_one_line(argv, message, tmp_path, capsys):
    assert new_main(argv + ["--out", str(tmp_path / "pkg")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err
    assert not (tmp_path / "pkg").exists()


def test_an_existing_directory_is_refused(tmp_path, capsys):
    (tmp_path / "taken").mkdir()
    assert new_main(["fine", "--family", "text", "--out", str(tmp_path / "taken")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "already exists" in err
    assert list((tmp_path / "taken").iterdir()) == []
