"""The TextArena bridge against the real, pinned package: every registered `textarena/<Game>-v0`
passes `check_env` and a scripted game (random legal moves) to its end, the committed table
matches the package, the optimal opponents cannot be beaten, episodes are reproducible, the
observations never repeat history, and self-play runs both seats of one game through the rollout
code. Runs where textarena is installed (`make test`: .venv has [all]); skipped elsewhere."""

from __future__ import annotations

import gc
import asyncio
import importlib
import os
import random
import re
import warnings
from importlib import metadata

import gymnasium as gym
import numpy as np
import pytest

from tests._fast import sampled
from gymnasium.utils.env_checker import check_env

# make test sets LLM_GYM_REQUIRE_BRIDGES (.venv has [all]): a missing package fails, not skips.
ta = (importlib.import_module("textarena") if os.environ.get("LLM_GYM_REQUIRE_BRIDGES")
      else pytest.importorskip("textarena"))

import llm_gym  # noqa: E402,F401
from llm_gym.bridges import TEXTARENA  # noqa: E402
from llm_gym.bridges.textarena import TextArenaSelfPlay, random_move  # noqa: E402
from llm_gym.completers import TokenCompleter, TokensWithLogprobs  # noqa: E402
from llm_gym.renderers import get_renderer  # noqa: E402
from llm_gym.rl import do_group_rollout  # noqa: E402
from llm_gym.tokenizers import ByteTokenizer  # noqa: E402

TOK = ByteTokenizer()
IDS = list(TEXTARENA.entries)


def say(text: str) -> list[int]:
    return TOK.encode(text) + [260]


def play(env, seed: int, max_turns: int = 200):
    """A scripted agent: a random legal move for its seat each turn. Returns (return, turns, info)."""
    env.reset(seed=seed)
    rng = random.Random(seed)
    total, info = 0.0, {}
    for turn in range(1, max_turns + 1):
        game = env.unwrapped.current_env.string_env
        move = random_move(game.env, game.shown_to_agent(), rng)
        _, reward, terminated, truncated, info = env.step(say(move))
        total += reward
        if terminated or truncated:
            return total, turn, info
    raise AssertionError(f"no end after {max_turns} turns")


def test_pinned_version_and_the_committed_table_match_the_package():
    from textarena.envs.registration import ENV_REGISTRY

    assert metadata.version("textarena") == TEXTARENA.version
    base = {i for i in ENV_REGISTRY if re.fullmatch(r"[A-Za-z0-9]+-v\d+", i)}
    games = {e["game"] for e in TEXTARENA.entries.values()}
    assert games | set(TEXTARENA.skipped) == base and not games & set(TEXTARENA.skipped)


@pytest.mark.parametrize("env_id", sampled(IDS, 8))  # all in make test-all
def test_every_id_passes_check_env_and_a_scripted_game(env_id):
    env = gym.make(env_id)
    ob, _ = env.reset(seed=3)
    assert np.array_equal(ob, gym.make(env_id).reset(seed=3)[0])
    total, turns, info = play(env, seed=3)
    assert -1.0 <= total <= 1.0 and turns >= 1
    text = env.unwrapped.render() if env.unwrapped.render_mode else None
    assert text is None
    gc.collect()  # earlier tests' garbage: its ResourceWarnings are not this block's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(gym.make(env_id).unwrapped)
    assert [str(w.message) for w in caught] == []


def test_same_seed_same_game_and_the_seat_comes_from_the_seed():
    env = gym.make("textarena/ConnectFour-v0")
    first = play(env, seed=11)
    seats = set()
    for seed in range(8):
        env.reset(seed=seed)
        seats.add(env.unwrapped.current_env.string_env.agent)
    assert play(env, seed=11) == first and seats == {0, 1}


def test_history_is_not_repeated_in_the_conversation():
    env = gym.make("textarena/TicTacToe-v0", agent_player=0)
    _, info = env.reset(seed=0)
    intro = "You are Player 0 in Tic Tac Toe."
    rng = random.Random(0)
    for _ in range(3):
        game = env.unwrapped.current_env.string_env
        ob, _, terminated, *_ = env.step(say(random_move(game.env, game.shown_to_agent(), rng)))
        if terminated:
            break
    text = TOK.decode(list(ob))
    assert text.count(intro) == 1 and "[Player 0]" not in text  # own moves are the assistant turns


@pytest.mark.parametrize("game", ["TicTacToe-v0", "Nim-v0"])
@pytest.mark.slow
def test_the_optimal_opponent_is_never_beaten_by_random_play(game):
    env = gym.make(f"textarena/{game}", opponent="optimal")
    returns = [play(env, seed)[0] for seed in range(12)]
    assert max(returns) <= 0.0
    assert min(returns) == -1.0  # and it does win


def test_invalid_moves_and_bad_tokens_get_defined_rewards():
    env = gym.make("textarena/TicTacToe-v0", agent_player=0)
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step(say("I pass"))  # TextArena: a warning, then a loss
    assert reward == 0.0 and not terminated and "invalid move" in info["logs"]["observation"]
    _, reward, terminated, _, info = env.step(say("still no move"))
    assert reward == -1.0 and terminated and info["metrics"]["env/invalid_move"] == 1.0
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step([0xFF, 10**9])
    assert reward == -1.0 and terminated and info["metrics"]["invalid_action"] == 1.0
    with pytest.raises(ValueError, match="optimal"):
        gym.make("textarena/ConnectFour-v0", opponent="optimal")


class MovePolicy(TokenCompleter):
    """Plays the first move listed as available in the last observation (TicTacToe's format)."""

    async def __call__(self, model_input, stop, *, max_tokens=None):
        await asyncio.sleep(0)
        text = TOK.decode(model_input.to_ints())
        moves = re.findall(r"'\[(\d)\]'", text.rsplit("Available Moves:", 1)[-1])
        return TokensWithLogprobs(say(f"[{moves[0]}]" if moves else "[0]"), None)


def test_self_play_runs_both_seats_of_one_game():
    renderer = get_renderer(None, TOK)
    builder = TextArenaSelfPlay("TicTacToe-v0", seed=5, renderer=renderer, num_games=2)
    groups = asyncio.run(do_group_rollout(builder, MovePolicy()))
    returns = [sum(t.reward for t in traj.transitions) for traj in groups.trajectories_G]
    assert len(returns) == 4
    assert returns[0] == -returns[1] and returns[2] == -returns[3]  # zero-sum per game
    assert sorted(returns[:2]) == [-1.0, 1.0]  # "first free cell" play: player 1 completes a line
    with pytest.raises(ValueError, match="two-player"):
        TextArenaSelfPlay("GuessTheNumber-v0", seed=0, renderer=renderer)


def test_from_text_sends_textarenas_resent_history_once():
    """TextArena's own LLMObservationWrapper resends a seat's whole history every turn; FromText
    over it (a plain adapter, as a user would write) puts each message in the chat once."""
    from llm_gym.wrappers.from_text import FromText

    class WrappedTicTacToe:  # textarena.make("TicTacToe-v0") with its default wrappers, seat 0
        def reset(self, seed=None):
            self.env = ta.make("TicTacToe-v0")
            self.env.reset(num_players=2, seed=seed)
            return self.env.get_observation()[1], {}

        def step(self, action):
            done, _ = self.env.step(action)
            if not done:  # the opponent takes the lowest free cell
                _, obs = self.env.get_observation()
                free = re.findall(r"'\[(\d)\]'", obs.rsplit("Available Moves:", 1)[-1])
                done, _ = self.env.step(f"[{min(free)}]")
            if done:
                return "", float(self.env.close()[0][0]), True, False, {}
            return self.env.get_observation()[1], 0.0, False, False, {}

    env = FromText(WrappedTicTacToe())
    env.reset(seed=0)
    for cell in (4, 8, 2):
        ob, _, terminated, *_ = env.step(say(f"[{cell}]"))
        if terminated:
            break
    text = TOK.decode(list(ob))
    assert text.count("You are Player 0 in Tic Tac Toe.") == 1
    assert text.count("placed their symbol (O) in cell 4") == 1


# --- cards: a played example episode, every knob documented -------------------------------------
def _example_ok(card, max_chars=800):
    roles = [m["role"] for m in card.example_episode]
    assert roles and roles[0] == "user" and roles[-1] == "assistant", roles
    assert roles.count("assistant") >= 2 and card.multi_turn
    assert all(m["content"].strip() and len(m["content"]) <= max_chars for m in card.example_episode)


@pytest.mark.parametrize("env_id", sampled(IDS, 8))
def test_every_card_has_a_played_example_and_documents_every_knob(env_id):
    from llm_gym.checks.card import _card_problems
    from llm_gym.checks.common import _resolve_target

    env = gym.make(env_id)
    source = env.unwrapped.source
    state = random.getstate(), np.random.get_state()[1].tobytes()
    card = source.card
    assert (random.getstate(), np.random.get_state()[1].tobytes()) == state  # the card draws privately
    _example_ok(card)
    assert {"players", "opponent", "agent_player", "variant", "game_kwargs"} <= set(card.difficulty_knobs)
    assert _card_problems(env_id, source, _resolve_target(env_id)) == []
    # The example is the game's own text: its first user turn is a real first observation.
    game = TEXTARENA.entries[env_id]["game"]
    assert card.example_episode[0]["content"].startswith("[GAME]"), game


def test_the_example_is_reproducible_and_shows_the_system_prompt():
    from llm_gym.bridges import _example

    a = gym.make("textarena/TicTacToe-v0").unwrapped.source.card.example_episode
    _example._EXAMPLES.clear()
    b = gym.make("textarena/TicTacToe-v0").unwrapped.source.card.example_episode
    assert a == b and "Tic Tac Toe" in a[0]["content"]
    c = gym.make("textarena/TicTacToe-v0", system_prompt="Play well.").unwrapped.source.card
    assert c.example_episode[0] == {"role": "system", "content": "Play well."}
    assert c.example_episode[1:] == a


def test_knobs_are_validated():
    with pytest.raises(ValueError, match="players"):
        gym.make("textarena/TicTacToe-v0", players=1)
    with pytest.raises(ValueError, match="players"):
        gym.make("textarena/2048-v0", players=2)
    with pytest.raises(ValueError, match="agent_player"):
        gym.make("textarena/2048-v0", agent_player=1)
    with pytest.raises(ValueError, match="agent_player"):
        gym.make("textarena/TicTacToe-v0", agent_player=True)
    with pytest.raises(TypeError, match="game_kwargs"):
        gym.make("textarena/TicTacToe-v0", game_kwargs=[1])
    assert gym.make("textarena/2048-v0", agent_player=0).reset(seed=0)[1]["text"]


def test_an_invalid_move_is_not_taken_for_a_legal_one():
    """TextArena resets `made_invalid_move` before step returns: legality is read off
    `error_count` (a warned invalid move), so the random opponent no longer plays the first
    template it sees ('[<number>]') and forfeits before the agent moves."""
    from llm_gym.bridges.textarena import _is_legal

    game = ta.make("IteratedTwoThirdsAverage-v0-raw")
    game.reset(num_players=2, seed=0)
    assert not _is_legal(game, "[<number>]") and not _is_legal(game, "no move")
    assert _is_legal(game, "[50]")
    tic = ta.make("TicTacToe-v0-raw")
    tic.reset(num_players=2, seed=0)
    assert _is_legal(tic, "[4]") and not _is_legal(tic, "[9]")


def test_the_agent_sees_its_prompt_even_when_the_opponent_ends_the_game_first():
    from llm_gym.bridges.textarena import TextArenaGame

    ended_early = 0
    for seed in range(16):  # ColonelBlotto's random opponent rarely finds a legal allocation
        game = TextArenaGame("ColonelBlotto-v0", players=2, agent_player=1)
        obs, info = game.reset(seed=seed)
        assert obs.startswith("[GAME] You are Commander Beta")  # seat 1: its own intro
        if info["done_before_first_move"]:
            ended_early += 1
            _, reward, done, _, step_info = game.step("[A10 B5 C5]")  # the game is over: not played
            assert done and reward == 1.0 and step_info["turns"] == 1
    assert ended_early > 0


def test_a_reward_that_is_not_a_number_is_an_invalid_move():
    """Cryptarithm (textarena 0.7.4) passes set_invalid_move's arguments swapped: the 'reward' of
    its final invalid move is the reason's text."""
    env = gym.make("textarena/Cryptarithm-v0")
    env.reset(seed=0)
    for _ in range(3):
        _, reward, terminated, _, info = env.step(say("[Z 1]"))
        if terminated:
            break
    assert terminated and reward == -1.0
    assert info["metrics"]["env/reward_not_a_number"] == 1.0


def test_2048_seeds_reach_the_game_and_the_splits_share_no_start_board():
    """Each seed deals its own 2048 board (two tiles, 2 or 4, on 16 cells: ~480 boards, 120 of
    them carrying 97% of the probability), so 48 seeds a split would share about 9.5 boards by
    chance; the bridge redeals a board of the other split (`split_of_task` of the dealt game),
    so the splits share none, and each still sees many boards."""
    from llm_gym.bridges.textarena import split_of_task

    boards: dict[str, list[str]] = {}
    for split in ("train", "test"):
        env = gym.make("textarena/2048-v0", split=split)
        boards[split] = []
        for s in range(48):
            boards[split].append(env.reset(seed=s)[1]["text"])
            assert split_of_task(env.unwrapped.source.task_key(env.unwrapped.current_env)) == split
    for split in boards:
        assert len(set(boards[split])) >= 36  # ~42 expected: seeds reach the game
    assert not set(boards["train"]) & set(boards["test"])


def test_a_game_with_few_tasks_deals_disjoint_secrets_per_split():
    """GuessTheNumber has 20 secrets: each split gets its own half, none in both."""
    secrets = {}
    for split in ("train", "test"):
        env = gym.make("textarena/GuessTheNumber-v0", split=split)
        secrets[split] = set()
        for s in range(80):
            env.reset(seed=s)
            secrets[split].add(env.unwrapped.current_env.string_env.env.game_number)
    assert not secrets["train"] & secrets["test"]
    assert len(secrets["train"]) >= 7 and len(secrets["test"]) >= 7
    assert secrets["train"] | secrets["test"] <= set(range(1, 21))


def test_a_game_fixed_by_design_is_not_split_and_says_why():
    from llm_gym.bridges.textarena import TextArenaSource

    firsts = {split: gym.make("textarena/Countdown-v0", split=split).reset(seed=0)[1]["text"]
              for split in ("train", "test")}
    assert firsts["train"] == firsts["test"]  # TextArena registers one puzzle
    source = gym.make("textarena/Countdown-v0").unwrapped.source
    assert isinstance(source, TextArenaSource) and "fixed numbers" in source.fixed_task_reason()
    drawn = gym.make("textarena/Countdown-v0", game_kwargs={"numbers": None, "target": None})
    assert drawn.unwrapped.source.fixed_task_reason() is None  # then the game draws its puzzle
