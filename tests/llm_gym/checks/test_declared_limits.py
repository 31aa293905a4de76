"""What a source may declare about itself, and how `llm-gym check` holds it to the declaration: a
task fixed by design (`fixed_task_reason`: determinism and split skip with the reason, never a
pass), episodes that follow the hash seed because of a bridged library (`hash_seed_reason`: a skip
only when a rerun with the same hash seed agrees), and envs too slow to reset 48 times within the
time limit (the rows sample less and say so instead of failing on the clock). Sources are
registered in-process outside the llm/ namespace, as in test_cli_check."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

import llm_gym
from llm_gym.checks import check_env_id
from tests.llm_gym.cli.test_cli_check import EchoEnv, EchoSource, _card

_HASH_SALT = hash("llm-gym check")  # a str hash: follows PYTHONHASHSEED


class FixedTaskSource(EchoSource):
    """Every episode, on both splits, is "repeat 42": declared."""

    card = _card("test/DeclFixedTask-v0")

    def make_env(self, rng: np.random.Generator) -> EchoEnv:
        rng.integers(self.high)  # draws, but the task ignores it
        return EchoEnv(self.renderer, 42)

    def fixed_task_reason(self) -> str | None:
        return "the puzzle has one start position"


class UndeclaredFixedTaskSource(FixedTaskSource):
    card = _card("test/DeclFixedTaskUndeclared-v0")

    def fixed_task_reason(self) -> str | None:
        return None


class HashSeedSource(EchoSource):
    """The task depends on a str hash (PYTHONHASHSEED), as a library iterating a set of words
    would; declared."""

    card = _card("test/DeclHashSeed-v0")
    salt = _HASH_SALT

    def hash_seed_reason(self) -> str | None:
        return "the word list is a set"


class UndeclaredHashSeedSource(HashSeedSource):
    card = _card("test/DeclHashSeedUndeclared-v0")

    def hash_seed_reason(self) -> str | None:
        return None


class PidDeclaredHashSeedSource(HashSeedSource):
    """Declares the hash seed, but the task follows the process id: the declaration must not
    cover it."""

    card = _card("test/DeclPidHashSeed-v0")
    salt = _HASH_SALT + os.getpid()


class SlowResetSource(EchoSource):
    card = _card("test/DeclSlowReset-v0")

    def make_env(self, rng: np.random.Generator) -> EchoEnv:
        time.sleep(0.5)  # a generated game whose reset takes seconds, scaled down
        return super().make_env(rng)


_SOURCES = {cls.card.id: cls for cls in (
    FixedTaskSource, UndeclaredFixedTaskSource, HashSeedSource, UndeclaredHashSeedSource,
    PidDeclaredHashSeedSource, SlowResetSource)}


@pytest.fixture(autouse=True, scope="module")
def _registered():
    import gymnasium as gym

    for env_id, cls in _SOURCES.items():
        llm_gym.register_env(env_id, f"{__name__}:{cls.__name__}")
    yield
    for env_id in _SOURCES:
        gym.registry.pop(env_id, None)


def rows_of(env_id: str, **kwargs):
    return {row.name: row for row in check_env_id(env_id, **kwargs)}


def test_a_declared_fixed_task_skips_determinism_and_split_with_the_reason():
    rows = rows_of("test/DeclFixedTask-v0", only=["determinism", "split"])
    for name in ("determinism", "split"):
        assert rows[name].status == "skip", rows[name].detail
        assert "the puzzle has one start position" in rows[name].detail
    assert "agree across processes" in rows["determinism"].detail


def test_an_undeclared_fixed_task_still_fails_determinism():
    row = rows_of("test/DeclFixedTaskUndeclared-v0", only=["determinism"])["determinism"]
    assert row.status == "fail"
    assert "the task does not depend on the seed" in row.detail


def test_a_declared_hash_seed_dependence_is_a_skip_once_an_equal_hash_seed_agrees():
    row = rows_of("test/DeclHashSeed-v0", only=["determinism"])["determinism"]
    assert row.status == "skip", row.detail
    assert "depend on PYTHONHASHSEED" in row.detail and "the word list is a set" in row.detail
    assert row.data["same_hash_seed_disagree"] == 0


def test_an_undeclared_hash_seed_dependence_fails():
    row = rows_of("test/DeclHashSeedUndeclared-v0", only=["determinism"])["determinism"]
    assert row.status == "fail" and "two processes disagree" in row.detail


def test_the_hash_seed_declaration_does_not_cover_other_nondeterminism():
    row = rows_of("test/DeclPidHashSeed-v0", only=["determinism"])["determinism"]
    assert row.status == "fail", row.detail
    assert row.data["same_hash_seed_disagree"] > 0


def test_a_slow_env_is_fuzzed_and_split_on_fewer_episodes_and_the_rows_say_so():
    rows = rows_of("test/DeclSlowReset-v0", only=["fuzz", "split"], timeout_s=10)
    fuzz, split = rows["fuzz"], rows["split"]
    assert fuzz.status == "pass", fuzz.detail
    assert "a slow env: cut at 5 s, 48 planned" in fuzz.detail
    assert 2 <= fuzz.data["episodes"] < 48
    assert split.status != "fail" or "time limit" not in split.detail, split.detail
    assert 2 <= split.data["seeds"] < 48, split.detail


def test_fast_envs_keep_the_full_sample():
    rows = rows_of("test/DeclHashSeed-v0", only=["fuzz"])
    assert "a slow env" not in rows["fuzz"].detail
    assert rows["fuzz"].data["steps"] == 48
