"""Differential tests against the real Tinker cookbook (tinker-cookbook from PyPI) as the oracle.

They run in `make test-cookbook`'s venv (the cookbook pins an older transformers than `[train]`),
which sets LLM_GYM_REQUIRE_COOKBOOK=1 so a broken install fails instead of skipping; in the main
venv, where the cookbook is not installed, they skip.
"""

from __future__ import annotations

import os

import pytest


def require_cookbook():
    """The `tinker_cookbook` package, or skip (fail under LLM_GYM_REQUIRE_COOKBOOK=1)."""
    if os.environ.get("LLM_GYM_REQUIRE_COOKBOOK") == "1":
        import tinker_cookbook

        return tinker_cookbook
    return pytest.importorskip("tinker_cookbook")


@pytest.fixture
def cookbook():
    return require_cookbook()


@pytest.fixture(autouse=True)
def _needs_cookbook():
    """Every test here compares against the cookbook (or ports its sources): skip them all where
    it is not installed, so a test that forgets to ask cannot fail the main venv's run."""
    require_cookbook()
