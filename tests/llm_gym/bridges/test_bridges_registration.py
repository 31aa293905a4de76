"""Bridge registration, in any venv: ids register exactly when the library is importable, `import
llm_gym` never imports a bridged library, the committed tables are well formed, the bridge modules
import without their library, and the catalog page lists every bridge id."""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys

import gymnasium as gym
import pytest

import llm_gym  # noqa: F401
from llm_gym import bridges
from llm_gym.bridges import BRIDGES
from llm_gym.registration import TEXT_ENV_ENTRY_POINT

MODULES = {"reasoning-gym": "reasoning_gym", "textarena": "textarena", "gem": "gem", "skyrl-gym": "skyrl"}


def test_ids_are_registered_exactly_when_the_library_is_installed():
    for bridge in BRIDGES.values():
        installed = importlib.util.find_spec(bridge.module) is not None
        registered = [i for i in bridge.entries if i in gym.registry]
        assert registered == (list(bridge.entries) if installed else []), bridge.name
        for env_id in registered:
            assert gym.spec(env_id).entry_point == TEXT_ENV_ENTRY_POINT


def test_import_llm_gym_imports_no_bridged_library():
    code = ("import sys, llm_gym; print([m for m in ('reasoning_gym', 'textarena', 'gem', 'skyrl_gym', "
            "'llm_gym.bridges.reasoning_gym', 'llm_gym.wrappers.from_text') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_spec_functions_return_nothing_without_the_library(monkeypatch):
    monkeypatch.setattr(bridges.Bridge, "installed", lambda self: False)
    assert all(f() == [] for f in (bridges.reasoning_gym_specs, bridges.textarena_specs,
                                   bridges.gem_specs, bridges.skyrl_specs))
    monkeypatch.setattr(bridges.Bridge, "installed", lambda self: True)
    specs = bridges.textarena_specs()
    assert len(specs) == len(bridges.TEXTARENA.entries) and all("turns" not in s["kwargs"] for s in specs)


def test_tables_are_well_formed():
    seen = set()
    for name, bridge in BRIDGES.items():
        prefix = {"reasoning-gym": "rg/", "textarena": "textarena/", "gem": "gem/", "skyrl-gym": "skyrl/"}[name]
        assert bridge.entries and bridge.version.count(".") == 2
        for env_id, entry in bridge.entries.items():
            assert env_id.startswith(prefix) and ":" not in env_id  # gym.make treats ':' as module:id
            assert entry["turns"] in ("single", "multi")
            assert env_id not in seen
            seen.add(env_id)
            ns, name_, version = gym.envs.registration.parse_env_id(env_id)
            assert ns == prefix[:-1] and name_
        assert all(reason for reason in bridge.skipped.values())


@pytest.mark.parametrize("bridge", sorted(MODULES))
def test_bridge_modules_import_without_their_library(bridge):
    module = importlib.import_module(f"llm_gym.bridges.{MODULES[bridge].replace('-', '_')}")
    source = BRIDGES[bridge].source.partition(":")[2]
    assert hasattr(module, source)


def test_catalog_page_lists_every_bridge_id():
    from envs_catalog.catalog import CATALOG_PATH

    page = CATALOG_PATH.read_text(encoding="utf-8")
    for bridge in BRIDGES.values():
        assert f"`{bridge.distribution}=={bridge.version}`" in page
        for env_id in bridge.entries:
            assert f"| `{env_id}` |" in page
        for name in bridge.skipped:
            assert f"- `{name}`:" in page
