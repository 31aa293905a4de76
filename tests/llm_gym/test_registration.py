"""Registration: entry-point discovery, lazy string entry points, `register_env`, `make` hints,
and broken third-party catalogs (a warning, never a failed `import llm_gym`)."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import gymnasium as gym
import pytest

import llm_gym
from llm_gym.registration import TEXT_ENV_ENTRY_POINT, register_catalogs, register_env

REPO = Path(__file__).resolve().parents[2]


def run_python(code: str, extra_path: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if extra_path:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [extra_path, env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
        cwd=REPO, timeout=120,
    )


def test_catalog_ids_are_registered_with_string_entry_points():
    from envs_catalog import ENV_SPECS

    assert ENV_SPECS, "the catalog declares no envs"
    for spec in ENV_SPECS:
        registered = gym.spec(spec["id"])
        assert registered.entry_point == TEXT_ENV_ENTRY_POINT
        assert registered.kwargs == {"source": spec["source"], **spec.get("kwargs", {})}
        assert isinstance(registered.kwargs["source"], str)
        assert json.loads(registered.to_json())["id"] == spec["id"]


def test_import_is_lazy_light_and_torch_free():
    out = run_python(
        """
        import sys, time
        t = time.perf_counter()
        import llm_gym
        elapsed = time.perf_counter() - t
        import gymnasium as gym
        assert any(k.startswith("llm/") for k in gym.registry)
        # Family packages and their data-only `specs*` modules are read; no env module is.
        env_modules = [
            m for m in sys.modules if m.startswith("envs_catalog.")
            and m.count(".") > 1 and not m.rsplit(".", 1)[1].startswith("specs")
        ]
        heavy = [m for m in ("torch", "transformers", "llm_gym.text_env") if m in sys.modules]
        print(elapsed, env_modules, heavy)
        """
    )
    assert out.returncode == 0, out.stderr
    _elapsed, rest = out.stdout.split(" ", 1)
    # No wall-clock assert (benchmarks/import_time.py times it): no env module, nothing heavy.
    assert rest.strip() == "[] []"


def test_make_with_module_prefix_needs_no_prior_import():
    out = run_python(
        """
        import gymnasium as gym
        env = gym.make("llm_gym:llm/Math-v0")
        obs, info = env.reset(seed=0)
        print(type(env.unwrapped).__name__, obs.dtype, "=" in info["text"])
        """
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["TextEnv", "int64", "True"]


def test_register_env_for_third_parties_and_json_round_trip():
    register_env("thirdparty/Add-v0", "tests._gym_sources:AddSource", max_episode_steps=3, high=4)
    spec = gym.spec("thirdparty/Add-v0")
    assert spec.kwargs == {"source": "tests._gym_sources:AddSource", "high": 4}
    assert spec.max_episode_steps == 3
    env = gym.make("thirdparty/Add-v0", tokenizer="byte", renderer="chatml")
    assert env.unwrapped.source.high == 4
    again = gym.spec(env.spec.id)
    assert json.loads(env.spec.to_json())["kwargs"]["tokenizer"] == "byte"
    assert again.id == "thirdparty/Add-v0"
    # Registering the identical spec again is silent.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        register_env("thirdparty/Add-v0", "tests._gym_sources:AddSource", max_episode_steps=3, high=4)


@pytest.mark.parametrize("source", ["tests._gym_sources.AddSource", "", None])
def test_register_env_rejects_non_string_sources(source):
    with pytest.raises(TypeError, match="module:SourceClass"):
        register_env("thirdparty/Bad-v0", source)


def test_make_suggests_close_matches():
    with pytest.raises(gym.error.NameNotFound, match="Did you mean: 'llm/Math-v0'"):
        llm_gym.make("llm/Maht-v0")
    env = llm_gym.make("llm/Math-v0")
    assert type(env.unwrapped).__name__ == "TextEnv"
    assert type(llm_gym.make("llm_gym:llm/Math-v0").unwrapped).__name__ == "TextEnv"


def _fake_distribution(root: Path) -> None:
    """A real installed-distribution layout (a .dist-info with entry_points.txt) on sys.path."""
    dist = root / "llm_gym_thirdparty-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: llm-gym-thirdparty\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[llm_gym.envs]\n"
        "missing = no_such_module_for_llm_gym_tests:SPECS\n"
        "not_a_list = tp_catalog_for_tests:NOT_A_LIST\n"
        "good = tp_catalog_for_tests:SPECS\n"
    )
    (root / "tp_catalog_for_tests.py").write_text(
        "NOT_A_LIST = 42\n"
        "SPECS = [\n"
        "    {'id': 'tptest/Add-v0', 'source': 'tests._gym_sources:AddSource', 'kwargs': {'high': 2}},\n"
        "    {'id': 'tptest/NoSource-v0'},\n"
        "]\n"
    )


def test_broken_third_party_catalogs_warn_and_the_rest_registers(tmp_path, monkeypatch):
    _fake_distribution(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.warns(RuntimeWarning) as record:
        ids = register_catalogs()
    messages = " | ".join(str(w.message) for w in record)
    assert "no_such_module_for_llm_gym_tests" in messages
    assert "NOT_A_LIST" in messages and "int" in messages
    assert "tptest/NoSource-v0" in messages
    assert "tptest/Add-v0" in ids and "llm/Math-v0" in ids
    assert gym.make("tptest/Add-v0").unwrapped.source.high == 2


def test_import_llm_gym_survives_a_broken_catalog(tmp_path):
    _fake_distribution(tmp_path)
    out = run_python(
        """
        import gymnasium as gym, llm_gym
        print("tptest/Add-v0" in gym.registry, "llm/Math-v0" in gym.registry)
        """,
        extra_path=str(tmp_path),
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True"]
    assert "no_such_module_for_llm_gym_tests" in out.stderr


def test_close_ids_search_the_whole_registry():
    from llm_gym.registration import close_env_ids

    assert close_env_ids("CartPol-v1")[0] == "CartPole-v1"  # Gymnasium's own ids
    assert close_env_ids("llm/math-v0")[0] == "llm/Math-v0"  # case-insensitive
    assert close_env_ids("Math-v0")[0] == "llm/Math-v0"  # the namespace left out
    register_env("closetest/Adder-v0", "tests._gym_sources:AddSource")
    try:
        assert "closetest/Adder-v0" in close_env_ids("closetest/Ader-v0")  # third-party namespaces
        with pytest.raises(gym.error.NameNotFound, match="Did you mean: 'closetest/Adder-v0'"):
            llm_gym.make("closetest/Ader-v0")
        from trainers.grpo.config import ConfigError
        from trainers.grpo.fit import check_env_id

        with pytest.raises(ConfigError, match="Did you mean: 'closetest/Adder-v0'"):
            check_env_id("closetest/Ader-v0")
    finally:
        del gym.registry["closetest/Adder-v0"]


def test_specs_with_requires_register_only_when_the_module_is_importable(tmp_path, monkeypatch):
    dist = tmp_path / "llm_gym_requires_test-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: llm-gym-requires-test\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[llm_gym.envs]\nreq = tp_requires_for_tests:SPECS\n")
    (tmp_path / "tp_requires_for_tests.py").write_text(
        "SRC = 'tests._gym_sources:AddSource'\n"
        "SPECS = [\n"
        "    {'id': 'reqtest/Present-v0', 'source': SRC, 'requires': 'json', 'kwargs': {'high': 3}},\n"
        "    {'id': 'reqtest/Missing-v0', 'source': SRC, 'requires': 'no_such_module_for_llm_gym'},\n"
        "    {'id': 'reqtest/MissingParent-v0', 'source': SRC, 'requires': 'no_such_pkg_llm_gym.sub'},\n"
        "    {'id': 'reqtest/Dotted-v0', 'source': SRC, 'requires': 'email.mime'},\n"
        "    {'id': 'reqtest/BadType-v0', 'source': SRC, 'requires': 42},\n"
        "    {'id': 'reqtest/Plain-v0', 'source': SRC},\n"
        "]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        gc.collect()  # earlier tests' garbage: its ResourceWarnings are not this block's
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            ids = register_catalogs()
        messages = [str(w.message) for w in record if "reqtest/" in str(w.message)]
        # A missing module skips its spec quietly; only the malformed 'requires' warns.
        assert len(messages) == 1 and "reqtest/BadType-v0" in messages[0] and "requires" in messages[0]
        assert {"reqtest/Present-v0", "reqtest/Dotted-v0", "reqtest/Plain-v0"} <= set(ids)
        for missing in ("reqtest/Missing-v0", "reqtest/MissingParent-v0", "reqtest/BadType-v0"):
            assert missing not in ids and missing not in gym.registry
        spec = gym.spec("reqtest/Present-v0")
        assert spec.kwargs == {"source": "tests._gym_sources:AddSource", "high": 3}  # no 'requires'
        assert gym.make("reqtest/Present-v0").unwrapped.source.high == 3
    finally:
        for env_id in [k for k in gym.registry if k.startswith("reqtest/")]:
            del gym.registry[env_id]


def test_register_spec_requires_is_optional_and_checked():
    from llm_gym.registration import _register_spec

    spec = {"id": "reqtest/Direct-v0", "source": "tests._gym_sources:AddSource"}
    try:
        assert _register_spec({**spec, "requires": "no_such_module_for_llm_gym"}, "test") is None
        assert "reqtest/Direct-v0" not in gym.registry
        for bad in ("", " json", ["json"]):
            with pytest.raises(TypeError, match="requires"):
                _register_spec({**spec, "requires": bad}, "test")
        assert _register_spec({**spec, "requires": "json"}, "test") == "reqtest/Direct-v0"
        assert "reqtest/Direct-v0" in gym.registry
    finally:
        gym.registry.pop("reqtest/Direct-v0", None)
