"""llm/ConnectFour-v0 and llm/Nim-v0: rules against brute force, the move contracts (what each
accepts and refuses under the one answer policy), the generated attack audit, scripted cases,
rewards, prefix property, determinism, splits and knobs."""

from __future__ import annotations

import asyncio
import functools
import itertools
import random

import numpy as np
import pytest

import envs_catalog.games.two_player as two_player
from envs_catalog.games.connect_four import C4State, ConnectFourRules, ConnectFourSource
from envs_catalog.games.nim import (
    NIM_MOVE, NimMove, NimSource, NimState, legal_nim_moves, mover_wins, parse_nim_move, start_positions,
    take, winning_moves,
)
from envs_catalog.games.two_player import MAX_REPLY_CHARS
from llm_gym import TokensWithLogprobs, get_renderer, load_tokenizer
from llm_gym.checks.attacks import audit_source
from llm_gym.completers import TokenCompleter
from llm_gym.rl import do_single_rollout, trajectory_to_data
from llm_gym.scripted import reply_tokens, run_scripted_case

TOK = load_tokenizer()
RENDERERS = {"chatml": get_renderer("chatml", TOK), "role_colon": get_renderer("role_colon", TOK)}
CHATML = RENDERERS["chatml"]


class Oracle(TokenCompleter):
    """Replies with `fn(env)` for the env it plays (the scripted cases' oracle shape)."""

    def __init__(self, renderer, env, fn):
        self.renderer, self.env, self.fn = renderer, env, fn

    async def __call__(self, model_input, stop, *, max_tokens=None):
        tokens = reply_tokens(self.renderer, self.fn(self.env))
        return TokensWithLogprobs(tokens, [0.0] * len(tokens))


def play_out(src, seed, fn, renderer=CHATML):
    env = src.make_env(np.random.default_rng(seed))
    traj = asyncio.run(do_single_rollout(Oracle(renderer, env, fn), env))
    return env, traj


def first_step(src, seed, text):
    env = src.make_env(np.random.default_rng(seed))

    async def go():
        await env.initial_observation()
        return await env.step(reply_tokens(CHATML, text) if isinstance(text, str) else text)

    return env, asyncio.run(go())


# --- Connect Four rules vs a naive board -------------------------------------------------------
def naive_grid(rules, state):
    grid = {}
    for c in range(rules.cols):
        for r in range(rules.rows):
            bit = 1 << (c * rules.h + r)
            grid[c, r] = 0 if state.pieces[0] & bit else 1 if state.pieces[1] & bit else None
    return grid


def naive_four(rules, grid, seat, through=None):
    """Whether `seat` has four in a line (one that covers cell `through`, when given)."""
    starts = (itertools.product(range(rules.cols), range(rules.rows)) if through is None else
              [(through[0] - k * dc, through[1] - k * dr) for k in range(4)
               for dc, dr in ((1, 0), (0, 1), (1, 1), (1, -1))])
    for c, r in starts:
        for dc, dr in ((1, 0), (0, 1), (1, 1), (1, -1)):
            line = [(c + k * dc, r + k * dr) for k in range(4)]
            if all(grid.get(cell) == seat for cell in line) and (through is None or through in line):
                return True
    return False


@pytest.mark.parametrize("shape", [(6, 7), (4, 4), (5, 9)])
def test_bitboard_wins_and_threats_match_a_naive_scan(shape):
    rules = ConnectFourRules(*shape)
    rng = random.Random(0)
    for _ in range(3):
        state = rules.initial()
        while rules.result(state) is None:
            state = rules.apply(state, rng.choice(rules.legal_moves(state)))
            grid = naive_grid(rules, state)
            for seat in (0, 1):
                assert rules.wins(state.pieces[seat]) == naive_four(rules, grid, seat)
                threats = set()
                for cell, v in grid.items():
                    if v is None and naive_four(rules, {**grid, cell: seat}, seat, cell):
                        threats.add(cell)
                bits = rules.threats(state.pieces[seat], state.mask)
                assert {cell for cell in grid if bits >> (cell[0] * rules.h + cell[1]) & 1} == threats
        assert rules.result(state) in (0, 1, "draw")
        assert rules.result(state) == "draw" or naive_four(rules, naive_grid(rules, state), rules.result(state))


def test_connect_four_rendering_drops_and_full_columns():
    rules = ConnectFourRules()
    state = rules.apply(rules.apply(rules.initial(), 4), 3)
    assert rules.render(state).splitlines()[0] == "1 2 3 4 5 6 7"
    assert rules.render(state).splitlines()[-1] == ". . O X . . ."
    assert rules.to_move(state) == 0 and state.last == 3
    for _ in range(6):
        state = rules.apply(state, 1)
    assert 1 not in rules.legal_moves(state)
    assert rules.parse_move("1", state) == (None, "full_column")
    with pytest.raises(ValueError):
        rules.apply(state, 1)
    assert rules.parse_move("8", state) == (None, "out_of_range")
    for text in ("My move: 5", "five", "Column: 5", "column 5", "I'll play column 5.", "\\boxed{5}",
                 "Column 2 looks weak.\n\nMove: 5\n\nNext time 3.", "3\n5"):
        assert rules.parse_move(text, state) == (5, "ok"), text
    for text, status in [("3 or 4", "malformed"), ("1, 2, 3, 4", "malformed"), ("", "empty"),
                         ("Move: 3\nMy backup move is 4.", "conflicting"), ("2.5", "not_an_integer"),
                         ("Column 2 is weak, so I play 4.", "malformed"), ("4\ufffd", "invalid_text")]:
        assert rules.parse_move(text, state) == (None, status), text
    assert rules.contract.instruction() == "Reply with the number of the column (1-7) you play."
    assert rules.intro(state, 0, None).endswith("\n" + rules.contract.instruction())
    assert ConnectFourRules(5, 9).contract.instruction() == "Reply with the number of the column (1-9) you play."


def test_scripted_players_win_and_block():
    rules = ConnectFourRules()
    state = rules.initial()
    for col in (1, 7, 2, 7, 3):  # X has 1-2-3 on the bottom row, O to move
        state = rules.apply(state, col)
    assert rules.win_block_moves(state) == [4]  # block
    assert rules.best_moves(state, 3) == [4]
    state = rules.apply(state, 6)  # O ignores it: X wins at once on 4
    assert rules.win_block_moves(state) == [4] and rules.best_moves(state, 1) == [4]
    assert rules.result(rules.apply(state, 4)) == 0


def test_minimax_opponent_is_stronger_than_random():
    def score(opponent):
        src = ConnectFourSource(renderer=CHATML, opponent=opponent, agent_first=True, depth=3)
        total = 0.0
        for seed in range(12):  # the agent plays the leftmost open column that is not full
            _, traj = play_out(src, seed, lambda env: str(env.rules.legal_moves(env.state)[0]))
            total += traj.transitions[-1].reward
        return total

    assert score("minimax") == -12.0 and score("win_block") == -12.0
    assert score("random") > -12.0


# --- Connect Four env --------------------------------------------------------------------------
CASES_C4 = {c.name: c for c in ConnectFourSource(renderer=CHATML).scripted_cases()}


@pytest.mark.parametrize("renderer_name", ["chatml", "role_colon"])
@pytest.mark.parametrize("split", ["train", "test"])
def test_connect_four_scripted_cases(renderer_name, split):
    src = ConnectFourSource(renderer=RENDERERS[renderer_name], split=split)
    cases = src.scripted_cases()
    assert sum(c.kind == "gold" for c in cases) >= 1 and sum(c.kind == "adversarial" for c in cases) >= 8
    for case in cases:
        seeds = range(6) if case.kind == "gold" else range(3)
        for seed in seeds:
            outcome = run_scripted_case(src, case, seed)
            assert outcome.ok, (case.name, seed, outcome.episode_return, outcome.replies)
            if case.kind == "adversarial":
                assert outcome.episode_return <= -1.0


def test_full_column_case_reaches_the_full_column():
    src = ConnectFourSource(renderer=CHATML, opponent="random")
    case = CASES_C4["full column"]
    statuses = []
    for seed in range(6):
        env = src.make_env(np.random.default_rng(seed))
        traj = asyncio.run(do_single_rollout(Oracle(CHATML, env, lambda e: case.reply(e, "")), env))
        statuses.append(traj.transitions[-1].logs["move_status"])
        assert sum(t.reward for t in traj.transitions) == -1.0
    assert statuses.count("full_column") >= 4  # the rest lost first


@pytest.mark.parametrize("renderer_name", ["chatml", "role_colon"])
def test_connect_four_prefix_property_and_one_datum(renderer_name):
    src = ConnectFourSource(renderer=RENDERERS[renderer_name], rows=5, cols=5)
    for seed in range(4):
        _, traj = play_out(src, seed, lambda env: str(env.rules.best_moves(env.state, 2)[0]),
                           RENDERERS[renderer_name])
        assert traj.transitions[-1].episode_done and len(traj.transitions) >= 2
        for before, after in zip(traj.transitions, traj.transitions[1:]):
            prefix = before.ob.to_ints() + before.ac.tokens
            assert after.ob.to_ints()[: len(prefix)] == prefix
            assert before.metrics["continuation/extended"] == 1.0
        assert len(trajectory_to_data(traj, 1.0)) == 1


@pytest.mark.parametrize(
    "action,status",
    [(TOK.encode("3"), "length"), ([10**9, 260], "malformed"),
     ("4" + " " * MAX_REPLY_CHARS, "too_long"), ("0", "out_of_range"), ("\ufffd", "invalid_text"),
     (list(range(5000)), "too_long")],
)
def test_connect_four_bad_replies_end_the_game_at_illegal_reward(action, status):
    src = ConnectFourSource(renderer=CHATML, illegal_reward=-0.5)
    env, result = first_step(src, 0, action)
    assert result.episode_done and result.reward == -0.5
    assert result.metrics["illegal_move"] == 1.0 and result.logs["move_status"] == status
    assert src.reward_range == (-1.0, 1.0)


def test_connect_four_max_turns_cuts_the_game_at_zero():
    src = ConnectFourSource(renderer=CHATML, max_turns=2, agent_first=True)
    _, traj = play_out(src, 0, lambda env: str(env.rules.legal_moves(env.state)[0]))
    assert len(traj.transitions) == 2 and traj.transitions[-1].reward == 0.0
    assert traj.transitions[-1].metrics["unfinished"] == 1.0


def test_connect_four_determinism_splits_and_variety():
    src = ConnectFourSource(renderer=CHATML, opponent="win_block")

    def transcript(source, seed):
        _, traj = play_out(source, seed, lambda env: str(env.rules.legal_moves(env.state)[-1]))
        return [tuple(t.ob.to_ints()) for t in traj.transitions], [t.reward for t in traj.transitions]

    assert transcript(src, 5) == transcript(src, 5)
    assert len({transcript(src, s)[0][0] for s in range(12)}) >= 3  # both sides, several openings
    seeds = {"train": [], "test": []}
    original = two_player.VersusEnv.__init__

    def spy(self, *args, **kwargs):
        seeds["test" if kwargs["seed"] % 2 else "train"].append(kwargs["seed"])
        original(self, *args, **kwargs)

    two_player.VersusEnv.__init__ = spy
    try:
        for s in range(10):
            ConnectFourSource(renderer=CHATML).make_env(np.random.default_rng(s))
            ConnectFourSource(renderer=CHATML, split="test").make_env(np.random.default_rng(s))
    finally:
        two_player.VersusEnv.__init__ = original
    assert len(seeds["train"]) == len(seeds["test"]) == 10  # train seeds even, test seeds odd


@pytest.mark.parametrize(
    "knobs,pattern",
    [({"opponent": "perfect"}, r"opponent must be one of \['random', 'win_block', 'minimax'\]"),
     ({"rows": 3}, r"rows must be in \[4, 9\], got 3"), ({"cols": 10}, r"cols must be in \[4, 9\]"),
     ({"depth": 0}, r"depth must be in \[1, 5\]"), ({"rows": "6"}, r"rows must be an integer"),
     ({"agent_first": 1}, r"agent_first must be one of"), ({"max_turns": 22}, r"max_turns must be in \[1, 21\]"),
     ({"illegal_reward": 0.5}, r"illegal_reward must be in \[-1.0, 0.0\]"),
     ({"heaps": 3}, r"unexpected keyword argument 'heaps'")],
)
def test_connect_four_bad_knobs_are_named(knobs, pattern):
    with pytest.raises((ValueError, TypeError), match=pattern):
        ConnectFourSource(renderer=CHATML, **knobs)


# --- Nim rules ---------------------------------------------------------------------------------
@functools.cache
def brute_mover_wins(heaps, misere):
    if not any(heaps):
        return misere  # the previous player took the last stone
    return any(not brute_mover_wins(tuple(sorted(take(heaps, m))), misere) for m in legal_nim_moves(heaps))


@pytest.mark.parametrize("misere", [False, True])
def test_nim_theory_matches_brute_force(misere):
    for n in range(1, 4):
        for heaps in itertools.product(range(5), repeat=n):
            wins = brute_mover_wins(tuple(sorted(heaps)), misere)
            assert mover_wins(heaps, misere) == wins, heaps
            assert bool(winning_moves(heaps, misere)) == (wins and any(heaps)), heaps


@pytest.mark.parametrize(
    "text,expected",
    [("2 3", (2, 3)), ("2, 3", (2, 3)), ("2:3", (2, 3)), (" heap 2 take 3 ", (2, 3)),
     ("Heap 2, take 3.", (2, 3)), ("Move: 2 3", (2, 3)), ("my move is 2 3", (2, 3)),
     ("ANSWER: 1 1", (1, 1)), ("3 5\n", (3, 5)), ("**2 3**", (2, 3)), ("2 3 stones", (2, 3)),
     ("I take 3 from heap 2", (2, 3)), ("take 3 stones from heap 2", (2, 3)), ("I'll take 3 from heap 2.", (2, 3)),
     ("My move is heap 2, take 3.", (2, 3)), ("２ ３", (2, 3)), ("2\u200b 3", (2, 3)),  # read as shown
     # text outside the declaration is not read; with none, the last line stating a move is
     ("Heap 2 has 4 stones; taking 3 leaves 1.\nMove: 2 3", (2, 3)),
     ("2 3\nThat leaves a nim-sum of 0.", (2, 3)), ("Move: 2 3\nor maybe 3 1", (2, 3)),
     ("2 3 because it is best", (2, 3)), ("1 1\n2 3", (2, 3))],
)
def test_nim_contract_reads_the_move_forms(text, expected):
    move, status = parse_nim_move(text, (3, 4, 5))
    assert (move, status) == (expected, "ok") and isinstance(move, NimMove)


@pytest.mark.parametrize(
    "text,status",
    [("2 3 or 1 1", "malformed"), ("2 3 4", "malformed"), ("Move: 2 3\nMove: 1 1", "conflicting"),
     ("Heap 2: 3", "malformed"),  # the board's notation of a heap's size is not a move
     ("23", "no_answer"), ("2", "no_answer"), ("heap count", "no_answer"), ("2 0", "zero"),
     ("0 1", "out_of_range"), ("4 1", "out_of_range"), ("1 1", "empty_heap"), ("2 5", "too_many"),
     ("", "empty"), ("   ", "empty"), ("\ufffd", "invalid_text"), ("2<|pad|>3", "no_answer"),
     ("-2 3", "malformed"), ("2.5 3", "malformed"), ("at least 2 3", "malformed"),
     ("\u0662 \u0663", "unsupported_digits"), ("2 3" + " " * 5000, "too_long")],
)
def test_nim_contract_refuses_everything_else(text, status):
    assert parse_nim_move(text, (0, 4, 5)) == (None, status)


def test_nim_prompt_comes_from_the_contract():
    instruction = "Reply with the heap number and how many stones to take, e.g. '2 3' takes 3 stones from heap 2."
    assert NIM_MOVE.instruction() == instruction and str(NimMove(2, 3)) == NIM_MOVE.format(NimMove(2, 3)) == "2 3"
    from envs_catalog.games.nim import NimRules

    assert NimRules().intro(NimState((3, 4, 5)), 0, None).endswith("\n" + instruction)
    assert NimRules().answer_contract(NimState((3, 4, 5))) is NIM_MOVE


def test_nim_rules_result_normal_and_misere():
    from envs_catalog.games.nim import NimRules

    for misere, winner in ((False, 0), (True, 1)):
        rules = NimRules(misere)
        state = rules.apply(NimState((2,)), (1, 2))  # seat 0 takes the last stone
        assert rules.result(state) == winner
        assert rules.result(NimState((1, 0))) is None
    assert "Heap 2: 0" in NimRules().render(NimState((1, 0)))


def test_nim_start_positions_split_and_winning():
    train = set(start_positions(3, 5, False, "winning", "train"))
    test = set(start_positions(3, 5, False, "winning", "test"))
    assert train and test and not train & test
    assert all(mover_wins(h, False) for h in train | test)
    allpos = set(start_positions(3, 5, False, "any", "train")) | set(start_positions(3, 5, False, "any", "test"))
    assert len(allpos) == 35 and train | test < allpos
    for split, positions in (("train", train), ("test", test)):
        src = NimSource(renderer=CHATML, split=split)
        for s in range(30):
            heaps = src.make_env(np.random.default_rng(s)).state.heaps
            assert tuple(sorted(heaps)) in positions
    with pytest.raises(ValueError, match="no 'test' start position|no 'train' start position"):
        for split in ("train", "test"):
            NimSource(renderer=CHATML, split=split, num_heaps=1, max_heap=1)


# --- Nim env -----------------------------------------------------------------------------------
@pytest.mark.parametrize("renderer_name", ["chatml", "role_colon"])
@pytest.mark.parametrize("split", ["train", "test"])
def test_nim_scripted_cases(renderer_name, split):
    base = NimSource(renderer=RENDERERS[renderer_name], split=split)
    cases = base.scripted_cases()
    assert sum(c.kind == "gold" for c in cases) >= 2 and sum(c.kind == "adversarial" for c in cases) >= 8
    for case in cases:
        src = NimSource(renderer=RENDERERS[renderer_name], split=split, **case.knobs)
        for seed in range(8 if case.kind == "gold" else 3):
            outcome = run_scripted_case(src, case, seed)
            assert outcome.ok, (case.name, seed, outcome.episode_return, outcome.replies)


def test_nim_illegal_statuses_reach_the_env():
    src = NimSource(renderer=CHATML)
    for text, status in (("1 0", "zero"), ("9 1", "out_of_range"), ("1 99", "too_many"),
                         ("Move: 1 1\nMove: 2 1", "conflicting"), ("1 1 or 2 1", "malformed")):
        env, result = first_step(src, 0, text)
        assert result.episode_done and result.reward == -1.0 and result.logs["move_status"] == status
    env, result = first_step(src, 0, TOK.encode("1 1"))
    assert result.logs["move_status"] == "length"


def test_optimal_opponent_wins_every_lost_start():
    src = NimSource(renderer=CHATML, opponent="optimal", start="any")
    lost = 0
    for seed in range(20):
        env, traj = play_out(src, seed, lambda env: "{} 1".format(
            next(i + 1 for i, h in enumerate(env.state.heaps) if h)))
        start = tuple(int(line.split(": ")[1]) for line in
                      TOK.decode(traj.transitions[0].ob.to_ints()).splitlines() if line.startswith("Heap "))
        if not mover_wins(start, False):
            lost += 1
            assert traj.transitions[-1].reward == -1.0 and traj.transitions[-1].metrics["loss"] == 1.0
    assert lost >= 2


def test_nim_prefix_property_determinism_and_prompt():
    src = NimSource(renderer=RENDERERS["role_colon"], misere=True)
    ob, _ = asyncio.run(src.make_env(np.random.default_rng(1)).initial_observation())
    text = TOK.decode(ob.to_ints())
    assert "whoever takes the last stone loses" in text and "'2 3' takes 3 stones from heap 2" in text

    def run(seed):
        env = src.make_env(np.random.default_rng(seed))
        def fn(e):
            return "{} {}".format(*(winning_moves(e.state.heaps, True) or legal_nim_moves(e.state.heaps))[0])

        traj = asyncio.run(do_single_rollout(Oracle(RENDERERS["role_colon"], env, fn), env))
        return traj

    a, b = run(4), run(4)
    assert [t.ob.to_ints() for t in a.transitions] == [t.ob.to_ints() for t in b.transitions]
    assert a.transitions[-1].reward == 1.0
    for before, after in zip(a.transitions, a.transitions[1:]):
        prefix = before.ob.to_ints() + before.ac.tokens
        assert after.ob.to_ints()[: len(prefix)] == prefix
    assert len({tuple(run(s).transitions[0].ob.to_ints()) for s in range(10)}) >= 4


@pytest.mark.parametrize(
    "knobs,pattern",
    [({"opponent": "greedy"}, r"opponent must be one of \['random', 'optimal'\]"),
     ({"num_heaps": 0}, r"num_heaps must be in \[1, 6\]"), ({"max_heap": 16}, r"max_heap must be in \[1, 15\]"),
     ({"misere": 1}, r"misere must be one of \[False, True\]"), ({"start": "losing"}, r"start must be one of"),
     ({"max_turns": 9}, r"max_turns must be in \[1, 8\]"),
     ({"agent_first": False}, r"unexpected keyword argument 'agent_first'")],
)
def test_nim_bad_knobs_are_named(knobs, pattern):
    with pytest.raises((ValueError, TypeError), match=pattern):
        NimSource(renderer=CHATML, **knobs)


def test_cards_are_complete():
    for cls in (ConnectFourSource, NimSource):
        card = cls.card
        assert card.family == "games" and card.multi_turn and card.reward_range == (-1.0, 1.0)
        roles = [m["role"] for m in card.example_episode]
        assert roles == ["user", "assistant", "user", "assistant"]
        assert {"opponent", "illegal_reward", "max_turns"} <= set(card.difficulty_knobs)
        assert card.answer_contract and "POLICY" in card.description
    c4 = ConnectFourRules()
    assert c4.parse_move(ConnectFourSource.card.example_episode[1]["content"], C4State((0, 0), 0, 0))[0] == 4


@pytest.mark.parametrize("renderer_name", ["chatml", "role_colon"])
def test_observations_stay_under_the_stated_context_bound(renderer_name):
    """Every reply as long as the reader allows (a legal move padded to MAX_REPLY_CHARS)."""
    renderer = RENDERERS[renderer_name]
    for src, move in (
        (ConnectFourSource(renderer=renderer, agent_first=True),
         lambda env: str(env.rules.legal_moves(env.state)[-1])),
        (NimSource(renderer=renderer, num_heaps=6, max_heap=15, start="any"),
         lambda env: "{} 1".format(next(i + 1 for i, h in enumerate(env.state.heaps) if h))),
    ):
        def padded(env, move=move):
            return move(env).ljust(MAX_REPLY_CHARS, " ")

        _, traj = play_out(src, 0, padded, renderer)
        assert len(traj.transitions) >= 4 and traj.transitions[-1].logs["move_status"] == "ok"
        longest = max(t.ob.length for t in traj.transitions)
        assert longest <= src.max_context_tokens


@pytest.mark.parametrize("cls", [ConnectFourSource, NimSource])
def test_the_generated_attacks_get_no_false_credit_or_denial(cls):
    """`llm_gym.checks.attacks` through real games: the gold player's last move replaced by each
    sampled attack (the env's `answer_contract` at that turn), scored against its verdict."""
    report = audit_source(lambda knobs: cls(renderer=CHATML, **knobs), [0, 1], per_seed=100)
    assert report.runs >= 200 and not report.skipped, report.skipped
    assert (report.false_credits, report.false_denials) == (0, 0), report.findings[:5]
    env = cls(renderer=CHATML).make_env(np.random.default_rng(0))
    assert env.answer_contract is env.rules.answer_contract(env.state)
