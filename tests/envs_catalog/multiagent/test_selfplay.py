"""Self-play board games (llm/SelfPlayTicTacToe-v0, llm/SelfPlayConnectFour-v0, llm/SelfPlayNim-v0):
the rules protocol (with its answer contract), group rollouts of two scripted policies, zero-sum
rewards, the illegal-move rule, bounded waiting, determinism, the dataset, the Gymnasium fallback
and the generated attack audit through it."""

from __future__ import annotations

import asyncio
import pickle
import random

import gymnasium as gym
import numpy as np
import pytest

import llm_gym  # noqa: F401  (registers the catalog)
from envs_catalog.games import tictactoe as ttt
from envs_catalog.games.connect_four import C4State, ConnectFourRules
from envs_catalog.games.nim import (
    NimRules, NimState, legal_nim_moves, mover_wins, start_positions, winning_moves,
)
from envs_catalog.games.tictactoe import TicTacToeRules
from envs_catalog.games.two_player import SeatEnv, SelfPlayDataset, SelfPlayGroupBuilder, VersusEnv
from envs_catalog.multiagent.selfplay import (
    SelfPlayConnectFourSource, SelfPlayNimSource, SelfPlayTicTacToeSource,
)
from llm_gym import TokensWithLogprobs, get_renderer, load_tokenizer
from llm_gym.checks.attacks import audit_source
from llm_gym.completers import TokenCompleter
from llm_gym.rl import RolloutLimits, do_group_rollout, trajectory_to_data
from llm_gym.scripted import reply_tokens, run_scripted_case

TOK = load_tokenizer()
RENDERERS = {"chatml": get_renderer("chatml", TOK), "role_colon": get_renderer("role_colon", TOK)}
CHATML = RENDERERS["chatml"]
SOURCES = (SelfPlayTicTacToeSource, SelfPlayConnectFourSource, SelfPlayNimSource)


def move_text(move) -> str:
    return f"{move[0]} {move[1]}" if isinstance(move, tuple) else str(move)


# --- the protocol ------------------------------------------------------------------------------
@pytest.mark.parametrize("rules,state", [
    (TicTacToeRules(), ttt.EMPTY_BOARD), (ConnectFourRules(4, 5), ConnectFourRules(4, 5).initial()),
    (NimRules(False), NimState((2, 3, 4))), (NimRules(True), NimState((1, 2, 2))),
])
def test_rules_protocol_random_playouts(rules, state):
    rng = random.Random(0)
    for _ in range(30):
        s, bound, seat = state, rules.max_moves(state), 0
        for _ in range(bound + 1):
            if rules.result(s) is not None:
                break
            assert rules.to_move(s) == seat
            legal = list(rules.legal_moves(s))
            assert legal
            move = rng.choice(legal)
            assert rules.parse_move(move_text(move), s) == (move, "ok")
            reading = rules.answer_contract(s).read(f"Move: {move_text(move)}")
            assert reading.ok and reading.value == move
            others = [m for m in legal if m != move]
            if others:  # a hedge between two legal moves is no move
                assert rules.parse_move(f"{move_text(move)} or {move_text(others[0])}", s)[0] is None
            s, seat = rules.apply(s, move), 1 - seat
        assert rules.result(s) in (0, 1, "draw")
        assert isinstance(rules.render(s), str) and rules.intro(s, 1, None) and rules.update(s, 0, move)
        for opponent in rules.opponents:
            assert rules.opponent_move(state, random.Random(1), opponent) in rules.legal_moves(state)


def test_tictactoe_adapter_follows_tictactoe_rules():
    rules = TicTacToeRules()
    board = ttt.play(ttt.play(ttt.EMPTY_BOARD, 5, "X"), 1, "O")
    assert rules.to_move(board) == 0 and rules.apply(board, 9) == ttt.play(board, 9, "X")
    assert rules.result("XXXOO    ") == 0 and rules.result("XX OOOX  ") == 1
    assert rules.result("XOXXOOOXX") == "draw" and rules.result(board) is None
    assert rules.parse_move("5", board) == (None, "occupied")
    assert rules.parse_move("10", board) == (None, "out_of_range")
    assert rules.render(board) == ttt.render_board(board)
    assert rules.opponent_move("XX OO    ", random.Random(0), "optimal") == 3


# --- scripted policies through the group builder -------------------------------------------------
class BySeat(TokenCompleter):
    """Two scripted policies in one completer: the seat is read off the first prompt (only seat
    1's opens with the opponent's move, before its "Reply with ..." line). Each policy maps the
    observation text to a reply."""

    def __init__(self, seat0, seat1, renderer=CHATML):
        self.policies, self.renderer, self.calls = (seat0, seat1), renderer, []

    async def __call__(self, model_input, stop, *, max_tokens=None):
        text = TOK.decode(model_input.to_ints())
        seat = 1 if "\nOpponent " in text.split("Reply with", 1)[0] else 0
        reply = self.policies[seat](text)
        self.calls.append((seat, reply))
        tokens = reply_tokens(self.renderer, reply)
        return TokensWithLogprobs(tokens, [0.0] * len(tokens))


def nim_heaps(text):
    """The heaps of the last board shown."""
    lines = ("Heap 1:" + text.rsplit("Heap 1:", 1)[1]).splitlines()
    heaps = []
    for line in lines:
        if not line.startswith("Heap "):
            break
        heaps.append(int(line.split(": ")[1]))
    return tuple(heaps)


def nim_optimal(text):
    heaps = nim_heaps(text)
    return move_text((winning_moves(heaps, False) or legal_nim_moves(heaps))[0])


def nim_first(text):
    heaps = nim_heaps(text)
    return move_text(legal_nim_moves(heaps)[0])


def test_nim_selfplay_optimal_first_seat_beats_a_weak_second_seat():
    src = SelfPlayNimSource(renderer=CHATML, start="winning")
    for seed in range(6):
        builder = pickle.loads(pickle.dumps(src.selfplay_group_builder(seed, num_games=2)))
        assert mover_wins(builder.initial_state.heaps, False)
        group = asyncio.run(do_group_rollout(builder, BySeat(nim_optimal, nim_first)))
        assert group.final_rewards_G == [1.0, -1.0, 1.0, -1.0]
        assert [m["seat"] for m in group.metrics_G] == [0.0, 1.0, 0.0, 1.0]
        for traj in group.trajectories_G:
            assert all(t.reward == 0.0 for t in traj.transitions)
            for before, after in zip(traj.transitions, traj.transitions[1:]):
                prefix = before.ob.to_ints() + before.ac.tokens
                assert after.ob.to_ints()[: len(prefix)] == prefix
            assert len(trajectory_to_data(traj, 1.0)) == 1


def c4_board(text):
    """(rules, state) rebuilt from the last board shown (7x6 default)."""
    rows = [line.split() for line in text.splitlines() if len(line.split()) == 7 and set(line.split()) <= set("XO.")]
    rows = rows[-6:]
    rules = ConnectFourRules()
    pieces, mask, moves = [0, 0], 0, 0
    for r, row in enumerate(reversed(rows)):
        for c, cell in enumerate(row):
            if cell != ".":
                bit = 1 << (c * rules.h + r)
                pieces["XO".index(cell)] |= bit
                mask |= bit
                moves += 1
    return rules, C4State((pieces[0], pieces[1]), mask, moves)


def c4_strong(text):
    rules, state = c4_board(text)
    return str(rules.best_moves(state, 3)[0])


def c4_leftmost(text):
    rules, state = c4_board(text)
    return str(rules.legal_moves(state)[0])


@pytest.mark.parametrize("renderer_name", ["chatml", "role_colon"])
def test_connect_four_selfplay_strong_beats_weak_from_either_seat(renderer_name):
    renderer = RENDERERS[renderer_name]
    src = SelfPlayConnectFourSource(renderer=renderer)
    group = asyncio.run(do_group_rollout(src.selfplay_group_builder(0), BySeat(c4_strong, c4_leftmost, renderer)))
    assert group.final_rewards_G == [1.0, -1.0]
    policy = BySeat(c4_leftmost, c4_strong, renderer)
    group = asyncio.run(do_group_rollout(src.selfplay_group_builder(0), policy))
    assert group.final_rewards_G == [-1.0, 1.0]
    seats = [seat for seat, _ in policy.calls]
    assert seats == [k % 2 for k in range(len(seats))]  # strictly alternating turns
    assert sum(group.final_rewards_G) == 0.0


def ttt_optimal(text):
    rows = [line for line in text.splitlines() if len(line) == 5 and line[1] == line[3] == "|"][-3:]
    board = "".join(c if c in "XO" else " " for c in "".join(rows).replace("|", ""))
    mark = "X" if board.count("X") == board.count("O") else "O"
    return str(ttt.optimal_moves(board, mark)[0])


def test_tictactoe_selfplay_optimal_players_draw_zero_sum():
    builder = SelfPlayTicTacToeSource(renderer=CHATML).selfplay_group_builder(num_games=3)
    group = asyncio.run(do_group_rollout(builder, BySeat(ttt_optimal, ttt_optimal)))
    assert len(group.trajectories_G) == 6 and group.final_rewards_G == [0.0] * 6
    assert all(m["draw"] == 1.0 for m in group.metrics_G)


@pytest.mark.parametrize("source_cls,legal,illegal", [
    (SelfPlayTicTacToeSource, "5", "5"), (SelfPlayConnectFourSource, "4", "9"),
    (SelfPlayNimSource, "1 1", "1 0"),
])
def test_an_illegal_move_loses_and_rewards_are_zero_sum(source_cls, legal, illegal):
    builder = pickle.loads(pickle.dumps(source_cls(renderer=CHATML).selfplay_group_builder(1, num_games=2)))
    policy = BySeat(lambda t: legal, lambda t: illegal)
    group = asyncio.run(do_group_rollout(builder, policy))
    assert group.final_rewards_G == [1.0, -1.0, 1.0, -1.0]
    assert [m["illegal_move"] for m in group.metrics_G] == [0.0, 1.0, 0.0, 1.0]
    assert all(t.transitions[-1].episode_done for t in group.trajectories_G)


def test_an_illegal_opening_ends_the_second_seat_without_a_turn():
    builder = SelfPlayConnectFourSource(renderer=CHATML).selfplay_group_builder(0)
    policy = BySeat(lambda t: "3 or 4", lambda t: "4")
    group = asyncio.run(do_group_rollout(builder, policy))
    assert group.final_rewards_G == [-1.0, 1.0]
    seat1 = group.trajectories_G[1]
    assert len(seat1.transitions) == 1 and seat1.transitions[0].ac.tokens == []
    assert seat1.transitions[0].metrics["game_over_before_first_move"] == 1.0
    assert [seat for seat, _ in policy.calls] == [0]  # seat 1 was never asked to move


def test_an_abandoned_game_times_out_instead_of_deadlocking():
    builder = SelfPlayNimSource(renderer=CHATML).selfplay_group_builder(0, move_timeout_s=0.2)
    group = asyncio.run(asyncio.wait_for(
        do_group_rollout(builder, BySeat(nim_first, nim_first), limits=RolloutLimits(max_turns=1)), 20
    ))
    assert group.final_rewards_G == [0.0, 0.0]
    assert all(m["abandoned"] == 1.0 for m in group.metrics_G)


def test_selfplay_is_deterministic_and_seeds_vary():
    src = SelfPlayNimSource(renderer=CHATML)

    def run(seed):
        rng = random.Random(seed)  # a seeded random policy, shared by both seats in call order
        policy = BySeat(*(lambda t: move_text(rng.choice(legal_nim_moves(nim_heaps(t)))),) * 2)
        group = asyncio.run(do_group_rollout(src.selfplay_group_builder(seed, num_games=2), policy))
        return policy.calls, group.final_rewards_G, [[t.ob.to_ints() for t in tr.transitions]
                                                     for tr in group.trajectories_G]

    a = run(3)
    assert a == run(3)
    for k in range(0, 4, 2):
        assert a[1][k] == -a[1][k + 1] and a[1][k] in (1.0, -1.0)  # Nim has no draws
    starts = {src.selfplay_group_builder(s).initial_state.heaps for s in range(12)}
    assert len(starts) >= 6


def test_builder_shape_validation_and_split():
    src = SelfPlayNimSource(renderer=CHATML, split="test")
    builder = src.selfplay_group_builder(5, num_games=3)
    envs = asyncio.run(builder.make_envs())
    assert [e.seat for e in envs] == [0, 1] * 3 and len(envs) % 2 == 0
    assert envs[0].match is envs[1].match and envs[0].match is not envs[2].match
    assert tuple(sorted(builder.initial_state.heaps)) in start_positions(3, 5, False, "any", "test")
    with pytest.raises(ValueError, match="num_games"):
        SelfPlayGroupBuilder(CHATML, NimRules(), NimState((1, 2)), num_games=0)
    with pytest.raises(ValueError, match="finished"):
        SelfPlayGroupBuilder(CHATML, NimRules(), NimState((0, 0)))


def test_selfplay_dataset_batches_are_reproducible():
    src = SelfPlayNimSource(renderer=CHATML)
    data = SelfPlayDataset(src, batch_size=4, n_batches=3, seed=7, num_games=2)
    assert len(data) == 3
    first = [b.initial_state for b in data.get_batch(1)]
    assert first == [b.initial_state for b in SelfPlayDataset(src, 4, 3, seed=7).get_batch(1)]
    assert all(b.num_games == 2 for b in data.get_batch(0))
    with pytest.raises(IndexError):
        data.get_batch(3)


# --- the Gymnasium face: a seat vs the scripted fallback ------------------------------------------
@pytest.mark.parametrize("source_cls", SOURCES)
@pytest.mark.parametrize("renderer_name", ["chatml", "role_colon"])
def test_fallback_scripted_cases(source_cls, renderer_name):
    base = source_cls(renderer=RENDERERS[renderer_name])
    assert isinstance(base.make_env(np.random.default_rng(0)), VersusEnv)
    cases = base.scripted_cases()
    assert any(c.kind == "gold" for c in cases) and sum(c.kind == "adversarial" for c in cases) >= 5
    for split in ("train", "test"):
        for case in cases:
            src = source_cls(renderer=RENDERERS[renderer_name], split=split, **case.knobs)
            for seed in range(3):
                outcome = run_scripted_case(src, case, seed)
                assert outcome.ok, (case.name, split, seed, outcome.episode_return, outcome.replies)


@pytest.mark.parametrize("env_id,policy", [
    ("llm/SelfPlayTicTacToe-v0", ttt_optimal), ("llm/SelfPlayConnectFour-v0", c4_leftmost),
    ("llm/SelfPlayNim-v0", nim_first),
])
def test_gym_make_plays_one_seat_against_the_fallback(env_id, policy):
    env = gym.make(env_id)
    assert env.unwrapped.source.card.family == "multiagent"
    for seed in range(3):
        obs, info = env.reset(seed=seed)
        total, done, steps = 0.0, False, 0
        while not done:
            text = TOK.decode(list(obs))  # the whole prompt, or at least the latest board
            obs, reward, terminated, truncated, info = env.step(np.array(reply_tokens(CHATML, policy(text))))
            total, done, steps = total + reward, terminated or truncated, steps + 1
            assert steps <= 21
        assert info["episode_metrics"]["return"] == total and total in (-1.0, 0.0, 1.0)
        assert env.unwrapped.current_env.rules.result(env.unwrapped.current_env.state) is not None  # played out
    env.close()


def test_fallback_opponent_knob_and_cards():
    strong = SelfPlayTicTacToeSource(renderer=CHATML, opponent="optimal", agent_first=True)
    assert strong.make_env(np.random.default_rng(0)).opponent == "optimal"
    with pytest.raises(ValueError, match=r"opponent must be one of \['random', 'optimal'\]"):
        SelfPlayTicTacToeSource(renderer=CHATML, opponent="minimax")
    with pytest.raises(TypeError, match="unexpected keyword argument 'rows'"):
        SelfPlayTicTacToeSource(renderer=CHATML, rows=3)
    assert SelfPlayNimSource(renderer=CHATML).start == "any"
    for cls in SOURCES:
        card = cls.card
        assert card.family == "multiagent" and card.id.startswith("llm/SelfPlay")
        assert "fallback" in card.description and "zero-sum" in card.reward_meaning
        assert [m["role"] for m in card.example_episode] == ["user", "assistant", "user", "assistant"]
        assert card.answer_contract and "llm_gym.grading.POLICY" in card.description


def test_both_seats_expose_the_rules_contract():
    builder = SelfPlayNimSource(renderer=CHATML).selfplay_group_builder(0)
    seats = asyncio.run(builder.make_envs())
    contract = builder.rules.answer_contract(builder.initial_state)
    assert all(isinstance(s, SeatEnv) and s.answer_contract is contract for s in seats) and len(seats) == 2
    assert contract.read("My move is heap 1, take 1.").value == (1, 1)


@pytest.mark.parametrize("source_cls", SOURCES)
def test_the_generated_attacks_get_no_false_credit_or_denial(source_cls):
    """`llm_gym.checks.attacks` through the fallback's real games (the gold player's last move
    replaced by each sampled attack), scored against each attack's verdict."""
    report = audit_source(lambda knobs: source_cls(renderer=CHATML, **knobs), [0, 1], per_seed=100)
    assert report.runs >= 200 and not report.skipped, report.skipped
    assert (report.false_credits, report.false_denials) == (0, 0), report.findings[:5]
