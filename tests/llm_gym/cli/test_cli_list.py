"""`llm-gym list`: every registered id with family, turns and package; `--json`; a filter; and the
bridges that are not installed named with their install command."""

from __future__ import annotations

import json
import subprocess
import sys

import gymnasium as gym

from llm_gym import cli
from llm_gym.bridges import BRIDGES
from llm_gym.registration import registered_envs


def test_list_json_has_every_registered_id(capsys):
    assert cli.main(["list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    ids = [r["id"] for r in rows]
    llm_ids = sorted(k for k in gym.registry if k.startswith("llm/"))
    assert set(llm_ids) <= set(ids) and len(ids) == len(set(ids))
    math = next(r for r in rows if r["id"] == "llm/Math-v0")
    assert math["family"] == "math" and math["turns"] == "single" and math["package"].startswith("llm-gym==")
    assert next(r for r in rows if r["id"] == "llm/TicTacToe-v0")["turns"] == "multi"
    for bridge in BRIDGES.values():
        mine = [r for r in rows if r["id"] in bridge.entries]
        assert len(mine) == (len(bridge.entries) if bridge.installed() else 0)
        assert all(r["family"] == bridge.name and bridge.version in r["package"] for r in mine)


def test_list_table_filter_and_install_hints(capsys):
    assert cli.main(["list", "tictac"]) == 0
    captured = capsys.readouterr()
    lines = captured.out.strip().splitlines()
    assert lines[0].split() == ["id", "family", "turns", "package"]
    assert any(line.startswith("llm/TicTacToe-v0") for line in lines[1:])
    assert all("tictac" in line.split()[0].lower() for line in lines[1:])
    for bridge in BRIDGES.values():
        hint = f"pip install 'llm-gym[{bridge.extra}]'"
        assert (hint in captured.err) == (not bridge.installed())


def test_listing_is_torch_free_and_imports_no_bridged_library():
    code = ("import sys; from llm_gym.registration import registered_envs; registered_envs(); "
            "print([m for m in ('torch', 'transformers', 'reasoning_gym', 'textarena', 'gem', "
            "'skyrl_gym') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    assert "list" in cli.COMMANDS and callable(cli.resolve("list"))
    assert all(set(r) == {"id", "family", "turns", "package", "source"} for r in registered_envs())


def test_listing_reads_the_installed_distributions_at_most_once(monkeypatch):
    # `packages_distributions()` reads every installed distribution's file list (seconds in a big
    # venv); once per catalog module made `llm-gym list` take 13 s. Ids whose module no known
    # distribution names share one call; the catalog's and the bridges' need none.
    from importlib import metadata

    import llm_gym.registration as registration

    calls = []

    def counting():
        calls.append(1)
        return {"fake_catalog_a": ["gymnasium"]}

    # the real registry, in a fresh process (here, earlier tests may have registered ids of
    # modules no distribution declares)
    probe = ("from importlib import metadata; calls = []; "
             "metadata.packages_distributions = lambda: calls.append(1) or {}; "
             "from llm_gym.registration import registered_envs; assert registered_envs(); print(len(calls))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "0", out.stderr[-2000:]
    monkeypatch.setattr(metadata, "packages_distributions", counting)
    assert registration.metadata is metadata
    modules = ("fake_catalog_a.envs", "fake_catalog_b.envs", "fake_catalog_a.more")
    for n, module in enumerate(modules):
        env_id = f"llm/FakeThirdParty{n}-v0"
        monkeypatch.setitem(gym.registry, env_id, gym.envs.registration.EnvSpec(
            env_id, entry_point="llm_gym.text_env:TextEnv", kwargs={"source": f"{module}:Src"}))
    rows = {r["id"]: r["package"] for r in registered_envs()}
    assert len(calls) == 1
    assert rows["llm/FakeThirdParty0-v0"] == f"gymnasium=={metadata.version('gymnasium')}"
    assert rows["llm/FakeThirdParty2-v0"] == rows["llm/FakeThirdParty0-v0"]
    assert rows["llm/FakeThirdParty1-v0"] == "fake_catalog_b"  # no distribution: the module
