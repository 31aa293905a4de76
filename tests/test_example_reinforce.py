"""The plain-Gymnasium REINFORCE example runs a few iterations with nothing from our trainer."""

from __future__ import annotations

import ast
import importlib.util
import math
import pathlib

import gymnasium as gym

from tests._adapter_helpers import ensure_catalog

ensure_catalog()

EXAMPLE = pathlib.Path(__file__).resolve().parents[1] / "examples" / "reinforce_gymnasium.py"


def _load():
    spec = importlib.util.spec_from_file_location("reinforce_gymnasium", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_example_imports_only_third_party_stack():
    tree = ast.parse(EXAMPLE.read_text())
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            roots.add(node.module.split(".")[0])
    assert roots - {"__future__", "argparse", "math"} == {"gymnasium", "numpy", "torch", "llm_gym"}


def test_reinforce_runs_and_rewards_lie_in_the_cards_range():
    example = _load()
    history = example.train(num_envs=3, iterations=3, max_new_tokens=3, seed=0, log_every=0)
    low, high = gym.make("llm/Math-v0").unwrapped.source.card.reward_range
    assert len(history) == 3
    for record in history:
        assert math.isfinite(record["loss"])
        assert low - 1e-6 <= record["reward_min"] <= record["reward_max"] <= high + 1e-6
    # Unrestricted sampling (whole byte vocabulary) works too.
    history = example.train(num_envs=2, iterations=1, max_new_tokens=2, seed=1, log_every=0,
                            alphabet=None)
    assert math.isfinite(history[0]["loss"])
