"""llm/TicTacToe-v0: rules, minimax, rewards, prefix property, determinism, self-play groups, the
cell contract (`CELL`, what a move is under the one answer policy) and the generated attack audit."""

from __future__ import annotations

import asyncio
import pickle
import re

import numpy as np
import pytest

from envs_catalog.games.tictactoe import (
    EMPTY_BOARD,
    TicTacToeSelfPlayGroupBuilder,
    TicTacToeSource,
    _value,
    free_cells,
    optimal_moves,
    play,
    render_board,
    winner,
)
from llm_gym import TokensWithLogprobs, get_renderer, load_tokenizer
from llm_gym.completers import TokenCompleter
from llm_gym.rl import RolloutLimits, do_group_rollout, do_single_rollout, trajectory_to_data

TOK = load_tokenizer()
IM_END = TOK.convert_tokens_to_ids("<|im_end|>")
CHATML = get_renderer("chatml", TOK)


def reply(text: str) -> list[int]:
    return TOK.encode(text) + [IM_END]


def board_from_text(text: str) -> tuple[str, str]:
    """(board, my mark) read back from an observation's text (the last board shown)."""
    rows = re.findall(r"^([1-9XO])\|([1-9XO])\|([1-9XO])$", text, flags=re.MULTILINE)[-3:]
    cells = "".join("".join(r) for r in rows)
    mark = re.search(r"You are ([XO])", text).group(1)
    return "".join(c if c in "XO" else " " for c in cells), mark


class OptimalPlayer(TokenCompleter):
    """Reads the board from the observation and plays the first minimax-optimal cell."""

    async def __call__(self, model_input, stop, *, max_tokens=None):
        board, mark = board_from_text(TOK.decode(model_input.to_ints()))
        tokens = reply(str(optimal_moves(board, mark)[0]))
        return TokensWithLogprobs(tokens, [0.0] * len(tokens))  # training data needs logprobs


class Scripted(TokenCompleter):
    """Replies with the given texts in call order (shared by both self-play players)."""

    def __init__(self, texts):
        self.texts = list(texts)

    async def __call__(self, model_input, stop, *, max_tokens=None):
        return TokensWithLogprobs(reply(self.texts.pop(0)), None)


# --- rules ------------------------------------------------------------------------------------
def test_rules_and_rendering():
    board = play(play(EMPTY_BOARD, 5, "X"), 1, "O")
    assert render_board(board) == "O|2|3\n4|X|6\n7|8|9"
    assert free_cells(board) == [2, 3, 4, 6, 7, 8, 9]
    assert winner("XXX      ") == "X" and winner("O   O   O") == "O" and winner(board) is None
    assert _value(EMPTY_BOARD, "X") == 0  # perfect play draws
    # X to move can win at once on 3; minimax must see it
    assert optimal_moves("XX OO    ", "X") == (3,)
    # O must block X's row
    assert optimal_moves("XX  O    ", "O") == (3,)


# --- single agent -----------------------------------------------------------------------------
@pytest.mark.parametrize("agent_first", [True, False])
def test_optimal_agent_draws_optimal_opponent_and_never_loses_to_random(agent_first):
    for opponent in ("optimal", "random"):
        src = TicTacToeSource(renderer=CHATML, opponent=opponent, agent_first=agent_first)
        outcomes = []
        for seed in range(25):
            traj = asyncio.run(do_single_rollout(OptimalPlayer(), src.make_env(np.random.default_rng(seed))))
            assert traj.stop_reason is None
            for before, after in zip(traj.transitions, traj.transitions[1:]):
                prefix = before.ob.to_ints() + before.ac.tokens
                assert after.ob.to_ints()[: len(prefix)] == prefix
            assert len(trajectory_to_data(traj, 1.0)) == 1
            outcomes.append(sum(t.reward for t in traj.transitions))
        if opponent == "optimal":
            assert outcomes == [0.0] * 25
        else:
            assert min(outcomes) >= 0.0 and outcomes.count(1.0) >= 10


def test_losing_to_the_optimal_opponent_scores_minus_one():
    src = TicTacToeSource(renderer=CHATML, opponent="optimal", agent_first=True)

    class Worst(TokenCompleter):  # always the lowest free cell: loses to minimax
        async def __call__(self, model_input, stop, *, max_tokens=None):
            board, _ = board_from_text(TOK.decode(model_input.to_ints()))
            return TokensWithLogprobs(reply(str(free_cells(board)[0])), None)

    traj = asyncio.run(do_single_rollout(Worst(), src.make_env(np.random.default_rng(0))))
    assert traj.transitions[-1].reward == -1.0 and traj.transitions[-1].metrics["loss"] == 1.0


def _occupied(board: str) -> list[int]:
    return reply(str(board.index("X") + 1))


@pytest.mark.parametrize(
    "action,status",
    [(_occupied, "occupied"), (reply("10"), "out_of_range"), (reply("0"), "out_of_range"),
     (reply("3 or 4"), "malformed"), (reply("Move: 3\nMove: 4"), "conflicting"), (reply(""), "empty"),
     (reply("4.5"), "not_an_integer"), (TOK.encode("3"), "length"),
     ([10**9, IM_END], "malformed"), (reply("\ufffd"), "invalid_text")],
)
def test_illegal_moves_score_minus_one_and_end_the_game(action, status):
    src = TicTacToeSource(renderer=CHATML, opponent="optimal", agent_first=False)
    env = src.make_env(np.random.default_rng(0))

    async def go():
        await env.initial_observation()
        assert env.board.count("X") == 1  # the opponent opened
        return await env.step(action(env.board) if callable(action) else action)

    result = asyncio.run(go())
    assert result.episode_done and result.reward == -1.0
    assert result.metrics["illegal_move"] == 1.0 and result.logs["move_status"] == status
    assert src.reward_range == (-1.0, 1.0)


def test_prompt_shows_the_board_and_the_rules():
    src = TicTacToeSource(renderer=CHATML, agent_first=False)
    env = src.make_env(np.random.default_rng(0))
    ob, _ = asyncio.run(env.initial_observation())
    text = TOK.decode(ob.to_ints())
    assert "You are O, I am X" in text and "Reply with the number of the cell you take." in text
    board, mark = board_from_text(text)
    assert mark == "O" and board.count("X") == 1 and board == env.board


def test_same_seed_same_game_and_seeds_vary():
    src = TicTacToeSource(renderer=CHATML)  # random opponent, random side

    def transcript(seed):
        class FirstFree(TokenCompleter):
            async def __call__(self, model_input, stop, *, max_tokens=None):
                board, _ = board_from_text(TOK.decode(model_input.to_ints()))
                return TokensWithLogprobs(reply(str(free_cells(board)[0])), None)

        traj = asyncio.run(do_single_rollout(FirstFree(), src.make_env(np.random.default_rng(seed))))
        return [t.ob.to_ints() for t in traj.transitions], [t.reward for t in traj.transitions]

    assert transcript(3) == transcript(3)
    first_obs = {tuple(transcript(seed)[0][0]) for seed in range(20)}
    assert len(first_obs) >= 4  # both sides and several opponent openings


def test_splits_use_disjoint_opponent_seeds():
    """Train games seed the opponent with even seeds, test games with odd ones."""
    train = TicTacToeSource(renderer=CHATML, split="train")
    test = TicTacToeSource(renderer=CHATML, split="test")
    import envs_catalog.games.tictactoe as ttt

    captured = []
    original = ttt.TicTacToeEnv.__init__

    def spy(self, *args, **kwargs):
        captured.append(kwargs["seed"])
        original(self, *args, **kwargs)

    ttt.TicTacToeEnv.__init__ = spy
    try:
        for s in range(20):
            train.make_env(np.random.default_rng(s))
            test.make_env(np.random.default_rng(s))
    finally:
        ttt.TicTacToeEnv.__init__ = original
    assert {c % 2 for c in captured[0::2]} == {0} and {c % 2 for c in captured[1::2]} == {1}


@pytest.mark.parametrize(
    "knobs,pattern",
    [({"opponent": "perfect"}, r"opponent must be one of \['random', 'optimal'\], got 'perfect'"),
     ({"agent_first": 1}, r"agent_first must be one of \[True, False, 'random'\], got 1"),
     ({"illegal_reward": 1.0}, r"illegal_reward must be in \[-1.0, 0.0\], got 1.0"),
     ({"max_context_tokens": 100}, r"max_context_tokens must be in \[256, 1000000\], got 100"),
     ({"board_size": 4}, r"unexpected keyword argument 'board_size'; its knobs are")],
)
def test_bad_knobs_are_named(knobs, pattern):
    with pytest.raises((ValueError, TypeError), match=pattern):
        TicTacToeSource(renderer=CHATML, **knobs)


# --- self-play --------------------------------------------------------------------------------
def test_selfplay_known_game_x_wins():
    builder = TicTacToeSelfPlayGroupBuilder(CHATML)
    builder = pickle.loads(pickle.dumps(builder))
    # X: 1, O: 4, X: 2, O: 5, X: 3 (top row)
    group = asyncio.run(do_group_rollout(builder, Scripted(["1", "4", "2", "5", "3"])))
    assert group.final_rewards_G == [1.0, -1.0]
    assert group.metrics_G[0]["win"] == 1.0 and group.metrics_G[1]["loss"] == 1.0
    x_traj, o_traj = group.trajectories_G
    assert [len(x_traj.transitions), len(o_traj.transitions)] == [3, 2]
    o_last = TOK.decode(o_traj.transitions[-1].ob.to_ints())
    assert "I played 2.\nX|X|3\nO|5|6\n7|8|9\nYour move." in o_last
    for traj in group.trajectories_G:
        for before, after in zip(traj.transitions, traj.transitions[1:]):
            prefix = before.ob.to_ints() + before.ac.tokens
            assert after.ob.to_ints()[: len(prefix)] == prefix


def test_selfplay_optimal_players_draw_in_several_games():
    builder = TicTacToeSelfPlayGroupBuilder(CHATML, num_games=3)
    group = asyncio.run(do_group_rollout(builder, OptimalPlayer()))
    assert len(group.trajectories_G) == 6
    assert group.final_rewards_G == [0.0] * 6
    assert all(m["draw"] == 1.0 for m in group.metrics_G)


def test_selfplay_illegal_move_loses():
    # X: 5, O: 5 (occupied)
    group = asyncio.run(do_group_rollout(TicTacToeSelfPlayGroupBuilder(CHATML), Scripted(["5", "5"])))
    assert group.final_rewards_G == [1.0, -1.0]
    assert group.metrics_G[1]["illegal_move"] == 1.0


def test_selfplay_illegal_first_move_still_ends_both_episodes():
    group = asyncio.run(
        do_group_rollout(TicTacToeSelfPlayGroupBuilder(CHATML), Scripted(["nope", "anything"]))
    )
    assert group.final_rewards_G == [-1.0, 1.0]
    assert all(t.transitions[-1].episode_done for t in group.trajectories_G)


def test_selfplay_abandoned_game_times_out_instead_of_deadlocking():
    builder = TicTacToeSelfPlayGroupBuilder(CHATML, move_timeout_s=0.2)
    group = asyncio.run(asyncio.wait_for(
        do_group_rollout(builder, OptimalPlayer(), limits=RolloutLimits(max_turns=1)), 10
    ))
    assert group.final_rewards_G == [0.0, 0.0]
    assert all(m["abandoned"] == 1.0 for m in group.metrics_G)


def test_source_makes_selfplay_builders():
    builder = TicTacToeSource(renderer=CHATML).selfplay_group_builder(num_games=2)
    envs = asyncio.run(builder.make_envs())
    assert [e.seat for e in envs] == [0, 1, 0, 1]  # X, O, X, O
    assert envs[0].match is envs[1].match and envs[0].match is not envs[2].match
    assert builder.rules.intro(EMPTY_BOARD, 0, None).startswith("Tic-tac-toe. You are X, I am O.")
    with pytest.raises(ValueError, match="num_games"):
        TicTacToeSelfPlayGroupBuilder(CHATML, num_games=0)


# --- scripted cases and the context bound --------------------------------------------------------
from envs_catalog.games.tictactoe import TicTacToeEnv, minimax_move  # noqa: E402
from llm_gym.scripted import ScriptedCase, case_source, run_scripted_case  # noqa: E402

RENDERERS = {"chatml": CHATML, "role_colon": get_renderer("role_colon", TOK)}


def test_scripted_cases_are_declared_with_honest_ranges():
    cases = {c.name: c for c in TicTacToeSource(renderer=CHATML).scripted_cases()}
    assert all(isinstance(c, ScriptedCase) for c in cases.values())
    gold = {c.knobs["opponent"]: (c.low, c.high) for c in cases.values() if c.kind == "gold"}
    assert gold == {"optimal": (0.0, 0.0), "random": (0.0, 1.0)}
    adversarial = [c for c in cases.values() if c.kind == "adversarial"]
    assert len(adversarial) >= 8 and all((c.low, c.high) == (-1.0, -1.0) for c in adversarial)
    soft = TicTacToeSource(renderer=CHATML, illegal_reward=-0.25).scripted_cases()
    assert all(c.high == -0.25 for c in soft if c.kind == "adversarial")


@pytest.mark.parametrize("renderer_name", ["chatml", "role_colon"])
@pytest.mark.parametrize("split", ["train", "test"])
def test_scripted_cases_score_as_declared(renderer_name, split):
    cases = TicTacToeSource(renderer=CHATML, illegal_reward=-0.5).scripted_cases()
    wins = 0
    for case in cases:
        src = case_source(TicTacToeSource, case, RENDERERS[renderer_name], split,
                          illegal_reward=-0.5)
        for seed in range(6):  # both sides come up (agent_first is "random")
            outcome = run_scripted_case(src, case, seed)
            assert outcome.ok, (case.name, seed, outcome.episode_return, outcome.replies)
            if case.kind == "adversarial":
                assert outcome.episode_return == -0.5, case.name
            elif case.knobs["opponent"] == "random":
                wins += outcome.episode_return == 1.0
    assert wins >= 3  # the random-opponent range is not just "always a draw"


def test_minimax_move_wins_blocks_and_never_loses():
    assert minimax_move("XX OO    ", "X") == 3 and minimax_move("XX  O    ", "O") == 3
    # exhaustive: from every reachable position, minimax keeps the position's game value
    seen, frontier = set(), [EMPTY_BOARD]
    while frontier:
        board = frontier.pop()
        if board in seen or winner(board) or not free_cells(board):
            continue
        seen.add(board)
        mark = "X" if board.count("X") == board.count("O") else "O"
        assert -_value(play(board, minimax_move(board, mark), mark), "O" if mark == "X" else "X") \
            == _value(board, mark)
        frontier += [play(board, c, mark) for c in free_cells(board)]
    assert len(seen) > 4000


def _long_move(cell: int, chars: int) -> str:
    return f"Move: {cell}. " + "Thinking about the board carefully. " * (chars // 36)


def test_a_long_legal_reply_forfeits_instead_of_growing_past_the_bound():
    src = TicTacToeSource(renderer=CHATML, agent_first=True, max_context_tokens=256)
    assert src.max_context_tokens == 256  # the declared bound `llm-gym check` reads
    env = src.make_env(np.random.default_rng(0))

    async def go():
        ob, _ = await env.initial_observation()
        return ob, await env.step(reply(_long_move(5, 300)))

    ob, result = asyncio.run(go())
    assert ob.length < 256
    assert result.episode_done and result.reward == -1.0 and result.next_observation.length == 0
    assert result.metrics["context_exceeded"] == 1.0 and result.metrics["illegal_move"] == 0.0
    assert result.logs["move_status"] == "context_exceeded"
    # the same move in few words goes on
    env = src.make_env(np.random.default_rng(0))
    ok = asyncio.run(_first_step(env, reply("I take cell 5.")))
    assert not ok.episode_done and ok.next_observation.length <= 256


async def _first_step(env, action):
    await env.initial_observation()
    return await env.step(action)


def test_a_long_winning_reply_still_wins():
    env = TicTacToeEnv(CHATML, agent_first=True, opponent="random", seed=0, max_context_tokens=256)
    asyncio.run(env.initial_observation())
    env.board = "XX OO    "
    result = asyncio.run(env.step(reply(_long_move(3, 400))))
    assert result.episode_done and result.reward == 1.0 and result.metrics["win"] == 1.0
    assert result.metrics["context_exceeded"] == 0.0


@pytest.mark.parametrize("renderer_name", ["chatml", "role_colon"])
def test_no_observation_passes_max_context_tokens(renderer_name):
    renderer = RENDERERS[renderer_name]
    src = TicTacToeSource(renderer=renderer, max_context_tokens=400)

    class Padded(TokenCompleter):  # a legal move padded to ~100 characters
        async def __call__(self, model_input, stop, *, max_tokens=None):
            board, _ = board_from_text(TOK.decode(model_input.to_ints()))
            from llm_gym.scripted import reply_tokens
            tokens = reply_tokens(renderer, _long_move(free_cells(board)[0], 80), stop)
            return TokensWithLogprobs(tokens, None)

    stops = set()
    for seed in range(8):
        traj = asyncio.run(do_single_rollout(Padded(), src.make_env(np.random.default_rng(seed))))
        assert max(t.ob.length for t in traj.transitions) <= 400
        last = traj.transitions[-1]
        assert sum(last.metrics[k] for k in ("win", "draw", "loss", "illegal_move",
                                             "context_exceeded")) == 1.0
        assert src.reward_range[0] <= sum(t.reward for t in traj.transitions) <= src.reward_range[1]
        stops.add(last.logs["move_status"])
    assert "context_exceeded" in stops


# --- the cell contract and the generated attacks ----------------------------------------------------
from envs_catalog.games.tictactoe import CELL, TicTacToeRules, parse_move, read_cell  # noqa: E402
from envs_catalog.games.tictactoe import intro_text as ttt_intro  # noqa: E402
from llm_gym.checks.attacks import audit_source  # noqa: E402

BOARD = play(play(EMPTY_BOARD, 1, "X"), 2, "O")  # cells 1 and 2 taken


@pytest.mark.parametrize("text,cell", [
    ("5", 5), ("five", 5), ("Move: 5", 5), ("My move is cell 5.", 5), ("Cell: 5", 5), ("cell 5", 5),
    ("Answer: five", 5), ("\\boxed{5}", 5), ("I'll take 5", 5), ("I take cell 5.", 5), ("Let's go with 9", 9),
    ("The cell I take is 5", 5),  # the instruction's words may name the move
    ("Cell 1 is taken, so the centre.\n\nMove: 5\n\nThen 9 next.", 5),  # prose around is not read
    ("5 or 9\n9", 9),  # no declaration: the last line stating a number
])
def test_the_cell_contract_reads_one_cell(text, cell):
    assert read_cell(text, BOARD) == (cell, "ok")


@pytest.mark.parametrize("text,status", [
    ("5 or 9", "malformed"), ("5, then 9", "malformed"), ("5 9", "malformed"), ("Move: 5 (or 9)", "malformed"),
    ("Move: 5\nMy backup move is 9.", "conflicting"), ("Cell 3 is weak, so I take 9.", "malformed"),
    ("I am not sure.", "no_answer"), ("", "empty"), ("1", "occupied"), ("0", "out_of_range"),
    ("10", "out_of_range"), ("-5", "out_of_range"), ("5.5", "not_an_integer"), ("\u202e5", "confusable"),
])
def test_the_cell_contract_refuses_everything_else(text, status):
    assert read_cell(text, BOARD) == (None, status)


def test_a_special_token_inside_a_reply_is_a_line_break_not_a_digit():
    ids = TOK.encode("Move: 5") + [TOK.convert_tokens_to_ids("<|pad|>")] + TOK.encode("9") + [IM_END]
    assert parse_move(CHATML, ids, BOARD)[:2] == (5, "ok")  # the declared slot ends at the break: 5, never 59


def test_the_prompt_and_the_env_contract_come_from_cell():
    assert CELL.instruction() == "Reply with the number of the cell you take."
    assert ttt_intro("X", EMPTY_BOARD, None).endswith("\n" + CELL.instruction())
    env = TicTacToeSource(renderer=CHATML).make_env(np.random.default_rng(0))
    assert env.answer_contract is CELL and TicTacToeRules().answer_contract(EMPTY_BOARD) is CELL
    assert "POLICY" in TicTacToeSource.card.description and TicTacToeSource.card.answer_contract


def test_the_generated_attacks_get_no_false_credit_or_denial():
    report = audit_source(lambda knobs: TicTacToeSource(renderer=CHATML, **knobs), [0, 1], per_seed=100)
    assert report.runs == 400 and not report.skipped, report.skipped
    assert (report.false_credits, report.false_denials) == (0, 0), report.findings[:5]
