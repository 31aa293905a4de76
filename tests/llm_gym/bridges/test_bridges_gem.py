"""The GEM bridge against the real, pinned gem-llm: every registered `gem/<id>` passes `check_env`
and a scripted episode (GEM's own random actions) to its end, the committed table matches the
package, seeds that GEM itself rejects (>= 2**32) work, and episodes are reproducible although GEM
draws from the global generators. Runs where gem-llm is installed (`make test`: .venv has [all])."""

from __future__ import annotations

import gc
import importlib
import logging
import os
import random
import warnings
from importlib import metadata

import gymnasium as gym
import numpy as np
import pytest

from tests._fast import sampled
from gymnasium.utils.env_checker import check_env

# make test sets LLM_GYM_REQUIRE_BRIDGES (.venv has [all]): a missing package fails, not skips.
gem = (importlib.import_module("gem") if os.environ.get("LLM_GYM_REQUIRE_BRIDGES")
      else pytest.importorskip("gem"))
logging.disable(logging.INFO)  # `import gem` sets the root logger to INFO

import llm_gym  # noqa: E402,F401
from llm_gym.bridges import GEM  # noqa: E402
from llm_gym.tokenizers import ByteTokenizer  # noqa: E402

TOK = ByteTokenizer()
# Room generation takes up to ~30 s a reset, so check_env on these takes minutes (281 s and 82 s
# when last run, both passing): run them with LLM_GYM_ALL_BRIDGE_IDS=1.
SLOW = {"gem/Sokoban-v0-hard"}
_SLOW_MARKS = [pytest.mark.slow, pytest.mark.skipif(
    not os.environ.get("LLM_GYM_ALL_BRIDGE_IDS"), reason="minutes of room generation; set LLM_GYM_ALL_BRIDGE_IDS=1")]
IDS = [pytest.param(i, marks=_SLOW_MARKS) if i in SLOW else i for i in GEM.entries]


def say(text: str) -> list[int]:
    return TOK.encode(text) + [260]


def play(env, seed: int, max_turns: int = 200):
    env.reset(seed=seed)
    random.seed(seed)  # GEM's sample_random_action draws from the global generator
    total = 0.0
    for turn in range(1, max_turns + 1):
        try:
            action = env.unwrapped.current_env.string_env.env.sample_random_action()
        except NotImplementedError:
            action = "\\boxed{1}"
        _, reward, terminated, truncated, info = env.step(say(action))
        total += reward
        if terminated or truncated:
            return total, turn, info
    raise AssertionError(f"no end after {max_turns} turns")


def test_pinned_version_and_the_committed_table_match_the_package():
    from gem.envs.registration import ENV_REGISTRY

    assert metadata.version("gem-llm") == GEM.version
    games = {i for i in ENV_REGISTRY if i.startswith("game:")}
    ours = {e["gem_id"] for e in GEM.entries.values()}
    skipped = {k for k in GEM.skipped if k.startswith("game:")}
    assert ours | skipped == games and not ours & skipped
    assert all(not i.startswith("game:") for i in ENV_REGISTRY if i not in games
               if i.split(":")[0] not in ("rg", "math", "eval", "logic", "qa", "code"))


def test_gem_itself_rejects_big_seeds_and_the_bridge_does_not():
    with pytest.raises(ValueError, match="2\\*\\*32"):
        gem.make("game:GuessTheNumber-v0-easy").reset(seed=2**40)
    ob, _ = gym.make("gem/GuessTheNumber-v0-easy").reset(seed=2**40)
    assert len(ob) > 0


@pytest.mark.parametrize("env_id", sampled(IDS, 8))  # all in make test-all
def test_every_id_passes_check_env_and_a_scripted_episode(env_id):
    env = gym.make(env_id)
    ob, _ = env.reset(seed=5)
    assert np.array_equal(ob, gym.make(env_id).reset(seed=5)[0])
    first = play(env, seed=5)
    assert play(env, seed=5) == first  # reproducible, though GEM uses the global generators
    assert -0.1 - 1e-9 <= first[0] <= 1.0 * first[1]
    gc.collect()  # earlier tests' garbage: its ResourceWarnings are not this block's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(gym.make(env_id).unwrapped)
    assert [str(w.message) for w in caught] == []


def test_solving_scores_one_and_a_format_error_scores_gems_penalty():
    env = gym.make("gem/GuessTheNumber-v0-easy")
    env.reset(seed=1)
    secret = env.unwrapped.current_env.string_env.env.game_number
    low, high = 1, 10
    total, terminated = 0.0, False
    while not terminated:  # binary search, as a policy would
        guess = (low + high) // 2
        _, reward, terminated, _, info = env.step(say(f"My guess: \\boxed{{{guess}}}"))
        total += reward
        low, high = (guess + 1, high) if guess < secret else (low, guess - 1) if guess > secret else (guess, guess)
    assert total == 1.0
    env.reset(seed=1)
    _, reward, terminated, *_ = env.step(say("no box here"))
    assert reward == -0.1 and terminated
    env.reset(seed=1)
    _, reward, terminated, _, info = env.step([0xFF, 10**9])
    assert reward == -0.1 and terminated and info["metrics"]["invalid_action"] == 1.0


# --- cards: a played example episode -------------------------------------------------------------
@pytest.mark.parametrize("env_id", list(GEM.entries))
def test_every_card_has_a_played_example_and_documents_every_knob(env_id):
    from llm_gym.checks.card import _card_problems
    from llm_gym.checks.common import _resolve_target

    source = gym.make(env_id).unwrapped.source  # construction resets nothing (slow ids too)
    state = random.getstate(), np.random.get_state()[1].tobytes()
    card = source.card
    assert (random.getstate(), np.random.get_state()[1].tobytes()) == state  # drawn privately
    roles = [m["role"] for m in card.example_episode]
    assert roles[0] == "user" and roles[-1] == "assistant" and roles.count("assistant") == 2
    assert all(m["content"].strip() and len(m["content"]) <= 800 for m in card.example_episode)
    assert all("\\boxed{" in m["content"] for m in card.example_episode if m["role"] == "assistant")
    assert _card_problems(env_id, source, _resolve_target(env_id)) == []


@pytest.mark.parametrize("gem_id", sorted(__import__("llm_gym.bridges.gem", fromlist=["x"]).RECORDED_EXAMPLES))
@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("LLM_GYM_ALL_BRIDGE_IDS"),
                    reason="seconds to minutes of room generation; set LLM_GYM_ALL_BRIDGE_IDS=1")
def test_recorded_examples_are_what_the_pinned_gem_plays(gem_id):
    from llm_gym.bridges import gem as bridge

    source = gym.make("gem/" + gem_id.removeprefix("game:")).unwrapped.source
    recorded = bridge.RECORDED_EXAMPLES.pop(gem_id)
    try:
        assert source._example_episode() == recorded
    finally:
        bridge.RECORDED_EXAMPLES[gem_id] = recorded


def test_the_example_moves_are_the_games_own_and_the_env_answers_them():
    card = gym.make("gem/TowerofHanoi-v0-easy").unwrapped.source.card
    first, move, answer, _ = card.example_episode
    assert "Tower of Hanoi" in first["content"] and "\\boxed{A C}" in first["content"]
    assert move["content"] in {f"\\boxed{{{a} {b}}}" for a in "ABC" for b in "ABC" if a != b}
    assert answer["content"].startswith("At turn 1")
