"""Puzzles part A: llm/Countdown-v0, llm/Sudoku-v0, llm/NQueens-v0, llm/GraphColoring-v0.

The answer contracts (what each reads and refuses under the one answer policy, the prompt's
instruction taken from the contract), each verifier against brute force (every valid answer
accepted, nothing else), the scripted gold/adversarial cases on both splits and renderers, the
generated attack audit, bad output through the env, determinism, split disjointness, knob
validation and the cards' examples."""

from __future__ import annotations

import asyncio
import itertools
import re
from fractions import Fraction

import gymnasium as gym
import numpy as np
import pytest

import llm_gym  # noqa: F401 - registers the catalog ids
from envs_catalog.puzzles import countdown, graph_coloring, nqueens, sudoku
from envs_catalog.puzzles._grid import IndexedListAnswer
from envs_catalog.puzzles.countdown import CountdownSource, check_expression, solve
from envs_catalog.puzzles.graph_coloring import GraphColoringSource, check_coloring, find_coloring
from envs_catalog.puzzles.nqueens import NQueensSource, all_solutions, check_placement
from envs_catalog.puzzles.sudoku import (
    SudokuAnswer, SudokuSource, check_grid, count_solutions, puzzle_string, random_solution,
)
from llm_gym import get_renderer, load_tokenizer
from llm_gym.authoring import split_of
from llm_gym.checks.attacks import audit_source
from llm_gym.grading import ArithmeticExpressionAnswer, GridAnswer, SequenceAnswer
from llm_gym.scripted import reply_tokens, run_scripted_case

TOK = load_tokenizer()
RENDERERS = {"chatml": get_renderer("chatml", TOK), "role_colon": get_renderer("role_colon", TOK)}
CHATML = RENDERERS["chatml"]
IM_END = TOK.convert_tokens_to_ids("<|im_end|>")
SOURCES = [CountdownSource, SudokuSource, NQueensSource, GraphColoringSource]
IDS = ["llm/Countdown-v0", "llm/Sudoku-v0", "llm/NQueens-v0", "llm/GraphColoring-v0"]


def play(env, tokens):
    async def go():
        await env.initial_observation()
        return await env.step(tokens)

    return asyncio.run(go())


def make(cls, seed=0, split="train", renderer=CHATML, **knobs):
    return cls(renderer=renderer, split=split, **knobs).make_env(np.random.default_rng(seed))


# --- the answer contracts ---------------------------------------------------------------------
CD = countdown.CountdownEnv(CHATML, [3, 7, 8], 29, "3*7+8")


@pytest.mark.parametrize("text,status", [
    ("Answer: 3*7+8", "ok"),
    ("**Answer:** `3*7+8`", "ok"),
    ("final answer: 3*7+8", "ok"),
    ("Answer\uff1a 3*7+8", "ok"),  # fullwidth colon (NFKC)
    ("Ans\u200bwer: 3*7+8", "ok"),  # zero-width space dropped
    ("Answer:\n```\n3*7+8\n```", "ok"),
    ("\\boxed{3*7+8}", "ok"),
    ("Answer: $3 \\times 7 + 8$", "ok"),
    ("Answer: 3 \u00d7 7 + 8", "ok"),
    ("Answer: 3x7+8", "ok"),
    ("The answer is 3*7+8 = 29.", "ok"),  # the expression with its value
    ("So the answer is 3*7+8 because 21+8=29.", "ok"),  # a trailing explanation comes off
    ("3*7+8", "ok"),  # undeclared: the last line stating an expression
    ("3*7 = 21 and 21 + 8 = 29.\nAnswer: 3*7+8", "ok"),  # working is not read
    ("The answer is 3*7+8.\nAnswer: 8 + 7*3", "ok"),  # two declarations, one value
    ("Answer: 3*7+8\nCheck: 3*7+8 = 29, correct.", "ok"),
    ("Answer: 3*7+8\nIf not, 3*8+7", "ok"),  # prose after the declaration is never read
    ("Option A: 3*8+7\nOption B:\nAnswer: 3*7+8", "ok"),  # "Option A:" declares nothing
    ("8*3+7\n\nAnswer: 3*7+8", "ok"),
    ("Answer: 3+7\nAnswer: 3*7+8", "conflicting"),
    ("Answer: 2+2\n\u0410nswer: 3*7+8", "conflicting"),  # a look-alike label is a label
    ("My answers: 3*8+7\nAnswer: 3*7+8", "conflicting"),
    ("Answer: 3*7+8\nMy backup answer is 3*8+7.", "conflicting"),
    ("Answer: 3*7+8\nThe answer is 29.", "conflicting"),  # 29 is another expression
    ("Answer: 3*7+8 or 3*8+7", "malformed"),  # a second value in the slot
    ("Answer: (3*7+8)//1", "malformed"),
    ("Answer: 3**7", "malformed"),
    ("Answer: 3 7 8", "malformed"),
    ("Answer: __import__('os').getpid() or 29", "malformed"),
    ("I think 3*7+8 or 3*8+7.", "malformed"),  # undeclared, and not one expression
    ("Answer: 3*7+8\ufffd", "invalid_text"),
    ("\u202eAnswer: 3*7+8", "confusable"),
    ("no idea", "no_answer"),
    ("", "empty"),
    ("x" * 5000 + "\nAnswer: 3*7+8", "too_long"),
    # read, then refused by the rules
    ("Answer: -(-(3*7+8))", "illegal_operator"),
    ("Answer: 3*7+8+8-8", "number_reused"),
    ("Answer: 29", "number_not_given"),
    ("Answer: 3*7", "wrong_value"),
])
def test_countdown_reads_one_declared_expression(text, status):
    verdict = CD.judge(text)
    assert verdict.status == status
    assert verdict.correct == (status == "ok")
    assert verdict.format_ok == (status not in ("conflicting", "malformed", "invalid_text", "confusable",
                                                "no_answer", "empty", "too_long"))


def test_countdown_contract_gold_and_instruction():
    env = CountdownSource(renderer=CHATML).make_env(np.random.default_rng(3))
    contract = env.answer_contract
    assert isinstance(contract, ArithmeticExpressionAnswer)
    assert contract.numbers == tuple(env.numbers) and contract.target == env.target
    assert env.gold_answer.value == env.target and contract.matches(env.gold_answer, env.gold_answer)
    assert env.get_question().endswith("\nMake the target using + - * / and brackets, each number at most "
                                       "once. End with one line: Answer: <expression>")
    assert contract.instruction() == "End with one line: Answer: <expression>"


LIST = IndexedListAnswer(count=5, what="the values")


@pytest.mark.parametrize("text,expected", [
    ("Answer: 2 4 1 3 5", (2, 4, 1, 3, 5)), ("Answer: 2, 4, 1, 3, 5", (2, 4, 1, 3, 5)),
    ("Answer: [2,4,1,3,5]", (2, 4, 1, 3, 5)), ("Answer: 2 4 1 3 5.", (2, 4, 1, 3, 5)),
    ("Answer: (2, 4, 1, 3, 5)", (2, 4, 1, 3, 5)), ("Answer: 2; 4; 1; 3; 5", (2, 4, 1, 3, 5)),
    ("**Answer:** `2 4 1 3 5`", (2, 4, 1, 3, 5)), ("\\boxed{2, 4, 1, 3, 5}", (2, 4, 1, 3, 5)),
    ("Answer:\n- 2\n- 4\n- 1\n- 3\n- 5", (2, 4, 1, 3, 5)), ("2 4 1 3 5", (2, 4, 1, 3, 5)),
    ("Answer: (1, 2), (2, 4), (3, 1), (4, 3), (5, 5)", (2, 4, 1, 3, 5)),
    ("Answer: [(1,2), (2,4), (3,1), (4,3), (5,5)]", (2, 4, 1, 3, 5)),
    ("Answer: [[5, 5], [1, 2], [3, 1], [2, 4], [4, 3]]", (2, 4, 1, 3, 5)),  # pairs in any order
    ("Answer: 1:2 2:4 3:1 4:3 5:5", (2, 4, 1, 3, 5)),
    ("Answer: 2 4 1 3", (2, 4, 1, 3)),  # another length is a (wrong) answer: the env refuses it
    ("Answer: 2 4 1 3 5\nAnswer: 2, 4, 1, 3, 5", (2, 4, 1, 3, 5)),
    ("Answer: 2 4 1 3 5\n\nAnswer: 1 3 5 2 4", "conflicting"),
    ("Answer: 2 4 1 3\n\nAnswer: 2 4 1 3 5", "conflicting"),
    ("Answer: (1, 2), (2, 4), (3, 1), (4, 3)", "malformed"),  # pairs must cover 1..5
    ("Answer: (1, 2), (1, 4), (3, 1), (4, 3), (5, 5)", "malformed"),
    ("Answer: 3 1<|pad|>4 2 5", "malformed"),  # special-token text is a line break
    ("Answer: 2 4 1 3 5 or 1 3 5 2 4", "no_answer"), ("Answer: 2 4 1 3 x", "no_answer"),
    ("Answer: 2,,4,1,3,5", "no_answer"), ("Answer: (2, 4, 1, 3, 5", "no_answer"),
    ("Answer: 1-2 2-4 3-1 4-3 5-5", "no_answer"), ("Answer: 2 4 1 3 5, 1 3 5 2 4", "no_answer"),
    ("Answer: [2, 4, 1, 3, 5], [1, 3, 5, 2, 4]", "no_answer"),
])
def test_indexed_list_contract(text, expected):
    reading = LIST.read(text)
    if isinstance(expected, tuple):
        assert reading.ok and reading.value == expected, reading
    else:
        assert reading.status == expected, reading


def test_indexed_list_is_a_sequence_contract_with_the_prompts_wording():
    assert isinstance(LIST, SequenceAnswer) and LIST.multiline
    assert LIST.instruction() == "End with one line: Answer: the values, separated by spaces."
    assert LIST.instruction(brief=True).startswith("Reply with just")
    env = NQueensSource(renderer=CHATML).make_env(np.random.default_rng(0))
    assert env.get_question().endswith("End with one line: Answer: the column of the queen in each row, "
                                       "rows 1 to 7, separated by spaces.")
    assert env.get_question().endswith(env.answer_contract.instruction())
    env = GraphColoringSource(renderer=CHATML).make_env(np.random.default_rng(0))
    assert env.get_question().endswith("End with one line: Answer: the colour of each node, nodes 1 to 6, "
                                       "separated by spaces.")
    assert env.get_question().endswith(env.answer_contract.instruction())


# --- Countdown --------------------------------------------------------------------------------
@pytest.mark.parametrize("expr,status", [
    ("3*7+8", "ok"), ("(3*7)+8 = 29", "ok"), ("8+7*3.", "ok"), ("3\u00d77+8", "ok"),
    ("(8-3)*7-6", "number_not_given"), ("29", "number_not_given"),
    ("3*7+8+8-8", "number_reused"), ("3*7+8 = 30", "wrong_value"), ("3*7", "wrong_value"),
    ("3**7", "illegal_operator"),
    ("9**9**9**9**9", "illegal_operator"), ("(3*7+8)//1", "illegal_operator"),
    ("-(-(3*7+8))", "illegal_operator"), ("(3)(7)", "illegal_operator"),
])
def test_countdown_verifier_rules(expr, status):
    parsed, got = check_expression(expr, [3, 7, 8], 29)
    assert parsed and got == status


@pytest.mark.parametrize("expr", [
    "3 7 8", "1_0", "0x1d", "3*7+8 or 2", "__import__('os').getpid()", "3.0*7+8", "3e1",
    "07*3+8", "(" * 150 + "3" + ")" * 150, "3*7+8 == 29", "lambda: 29", "[3, 7, 8]", "",
    "3*7+8\n2", "29%30", "3*7+8, 8+3*7", "3*7+8 = 29 = 29",
])
def test_countdown_verifier_refuses_non_expressions(expr):
    assert check_expression(expr, [3, 7, 8], 29) == (False, "malformed")


def test_countdown_use_all_and_fraction_intermediates():
    assert check_expression("3*7+8", [3, 7, 8, 2], 29, use_all=True) == (True, "unused_number")
    assert check_expression("3*7+8+2-2", [3, 7, 8, 2, 2], 29, use_all=True) == (True, "ok")
    assert check_expression("(1/3+1)*6", [1, 3, 1, 6], 8) == (True, "ok")  # 4/3 * 6
    assert check_expression("7/(3-3)+8", [3, 3, 7, 8], 29) == (True, "division_by_zero")
    assert check_expression("7/(3-3)+8", [3, 7, 8], 29) == (True, "number_reused")  # checked first


def test_countdown_verifier_matches_an_independent_evaluation():
    """Random legal expressions over the given numbers: the verifier's value is Python's value
    (an oracle on digits, + - * / and brackets only), and only the true value is accepted."""
    rng = np.random.default_rng(1)
    for _ in range(300):
        nums = rng.integers(1, 13, size=4).tolist()
        expr = str(nums[0])
        for x in nums[1:]:
            op = "+-*/"[int(rng.integers(4))]
            expr = f"({expr}{op}{x})" if rng.random() < 0.5 else f"{expr}{op}{x}"
        value = Fraction(eval(expr.replace("/", "*Fraction(1)/")))  # noqa: S307 - test oracle
        if value.denominator == 1:
            assert check_expression(expr, nums, int(value)) == (True, "ok"), expr
            assert check_expression(expr, nums, int(value) + 1) == (True, "wrong_value")
        assert check_expression(expr, nums[1:], 10**6)[1] in ("number_not_given",
                                                             "number_reused", "wrong_value")


def test_countdown_tasks_are_solvable_and_witness_verifies():
    for split in ("train", "test"):
        src = CountdownSource(renderer=CHATML, split=split, num_numbers=4, max_number=12,
                              max_target=100)
        for seed in range(30):
            env = src.make_env(np.random.default_rng(seed))
            assert 10 <= env.target <= 100 and env.target not in env.numbers
            assert check_expression(env.witness, env.numbers, env.target) == (True, "ok")
            found = solve(env.numbers, env.target)
            assert found and check_expression(found, env.numbers, env.target) == (True, "ok")
    assert solve([2, 3], 7) is None  # 2+3, 2*3, 3-2, ... never 7


# --- Sudoku -----------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [4, 9])
def test_random_solutions_are_valid_and_varied(n):
    rng = np.random.default_rng(0)
    grids = set()
    for _ in range(30):
        grid = random_solution(rng, n)
        assert check_grid(grid, [[0] * n for _ in range(n)]) == "ok"
        grids.add(puzzle_string(grid))
    assert len(grids) >= 25


def test_sudoku_verifier_accepts_exactly_the_valid_completions():
    """Brute force over every filling of the holes of 4x4 puzzles: the verifier accepts a filling
    iff the solver's exhaustive count says it is one of the completions."""
    rng = np.random.default_rng(2)
    for _ in range(6):
        solution = random_solution(rng, 4)
        puzzle = [row[:] for row in solution]
        holes = rng.permutation(16)[:6].tolist()
        for i in holes:
            puzzle[i // 4][i % 4] = 0
        accepted = 0
        for digits in itertools.product(range(1, 5), repeat=len(holes)):
            grid = [row[:] for row in puzzle]
            for i, d in zip(holes, digits):
                grid[i // 4][i % 4] = d
            accepted += check_grid(grid, puzzle) == "ok"
        assert accepted == count_solutions(puzzle, limit=10**6)[0] >= 1


def test_sudoku_unique_knob_gives_unique_puzzles():
    for size, holes in ((4, 10), (9, 40)):
        src = SudokuSource(renderer=CHATML, size=size, holes=holes, unique=True)
        for seed in range(3):
            env = src.make_env(np.random.default_rng(seed))
            assert count_solutions(env.puzzle, limit=2)[0] == 1
            assert 1 <= sum(v == 0 for row in env.puzzle for v in row) <= holes


def test_sudoku_non_unique_puzzles_accept_every_solution():
    src = SudokuSource(renderer=CHATML, holes=12)
    several = 0
    for seed in range(20):
        env = src.make_env(np.random.default_rng(seed))
        count, _ = count_solutions(env.puzzle, limit=10**6)
        several += count > 1
        _, first = count_solutions(env.puzzle, 1)
        _, last = count_solutions(env.puzzle, 1, descending=True)
        for grid in (first, last):
            assert grid is not None
            text = "Answer:\n" + "\n".join("".join(map(str, r)) for r in grid)
            assert env.judge(text).correct
    assert several  # the knob really produces puzzles with several answers


SD_CONTRACT = SudokuAnswer(n=4)
SD_ROWS = ("1234", "3412", "2143", "4321")


@pytest.mark.parametrize("payload,ok", [
    ("1234\n3412\n2143\n4321", True), ("1234341221434321", True), ("1 2 3 4\n3 4 1 2\n2 1 4 3\n4 3 2 1", True),
    ("12|34\n34|12\n--+--\n21|43\n43|21", True), ("1234 3412 2143 4321", True),
    ("1\t2\t3\t4\n3\t4\t1\t2\n2\t1\t4\t3\n4\t3\t2\t1", True),  # tabs
    ("| 1 | 2 | 3 | 4 |\n|---|---|---|---|\n| 3 | 4 | 1 | 2 |\n| 2 | 1 | 4 | 3 |\n| 4 | 3 | 2 | 1 |", True),
    ("**1234**\n**3412**\n**2143**\n**4321**", True), ("[1, 2, 3, 4]\n[3, 4, 1, 2]\n[2, 1, 4, 3]\n[4, 3, 2, 1]", True),
    ("Row 1: 1234\nRow 2: 3412\nRow 3: 2143\nRow 4: 4321", True), ("[[1,2,3,4],[3,4,1,2],[2,1,4,3],[4,3,2,1]]", True),
    ("```\n1234\n3412\n2143\n4321\n```", True),
    ("1234\n3412\n2143", False), ("1234\n3412\n2143\n4321\n1234", False), ("1234\n3412\n21.3\n4321", False),
    ("1234\n3412\n2103\n4321", False), ("1234\n3412\n2143\n432", False), ("1234 3412 2143 4321 or so", False),
    ("1234\n3412\n2143\n4351", False),  # 5 is no cell of a 4x4 Sudoku
    ("12\n34\n\n34\n12", False), ("123412341234123", False),
])
def test_sudoku_contract_parses_complete_grids_only(payload, ok):
    assert (SD_CONTRACT.parse(payload) == SD_ROWS) == ok, payload
    assert isinstance(SD_CONTRACT, GridAnswer) and SD_CONTRACT.alphabet == "1234"
    assert SD_CONTRACT.instruction() == "End with 'Answer:' and the full grid, one row of 4 digits per line."


SD_PUZZLE = [[1, 0, 3, 0], [0, 4, 1, 2], [2, 0, 4, 3], [0, 3, 0, 1]]
SD = sudoku.SudokuEnv(CHATML, SD_PUZZLE, [[1, 2, 3, 4], [3, 4, 1, 2], [2, 1, 4, 3], [4, 3, 2, 1]])
SD_GOLD = "1234\n3412\n2143\n4321"
SD_OFF = "1234\n3412\n2143\n4312"


@pytest.mark.parametrize("text,status", [
    (f"Answer:\n{SD_GOLD}", "ok"),
    ("Answer: 1234\n3412\n2143\n4321", "ok"),  # the first row on the label's line
    (f"The puzzle:\n1.3.\n.412\n2.43\n.3.1\nAnswer:\n{SD_GOLD}", "ok"),  # the puzzle echoed
    (f"Row 1 must be 1234.\nAnswer:\n{SD_GOLD}\nEvery row, column and box holds 1-4.", "ok"),
    (f"Answer:\n{SD_GOLD}\n\nAnswer:\n{SD_GOLD}", "ok"),
    (f"First attempt:\n{SD_OFF}\n\nAnswer:\n{SD_GOLD}", "ok"),  # working is not read
    (f"Answer:\n{SD_GOLD}\nAlternatively:\n{SD_OFF}", "ok"),  # prose after the block is not read
    (f"Answer:\n{SD_GOLD}\n\n{SD_OFF}", "ok"),
    (SD_GOLD, "ok"),  # undeclared: the last block stating a grid
    (f"{SD_OFF}\n\n{SD_GOLD}", "ok"),
    (f"{SD_GOLD}\n\n{SD_OFF}", "givens_changed"),  # the last block is read
    (f"Answer:\n{SD_OFF}\n\nAnswer:\n{SD_GOLD}", "conflicting"),
    (f"First answer:\n{SD_OFF}\n\nAnswer:\n{SD_GOLD}", "conflicting"),
    (f"Answer:\n{SD_GOLD}\n{SD_OFF}", "malformed"),  # eight rows
    ("Answer:\n1234\n3412\n2143\n4321 (or 4312)", "malformed"),  # a row missing once the hedge is cut
    ("Answer:\n1.3.\n.412\n2.43\n.3.1", "no_answer"),  # the puzzle echoed: holes are no cells
    ("Answer:\n1234\n3412\n2143\n4321\n", "ok"),
    ("Answer:\n2143\n3412\n1234\n4321", "givens_changed"),
])
def test_sudoku_reads_one_declared_grid(text, status):
    assert SD.judge(text).status == status
    assert SD.judge(text).correct == (status == "ok")


# --- N-Queens ---------------------------------------------------------------------------------
def test_nqueens_solution_counts_are_the_known_ones():
    assert [len(all_solutions(n)) for n in range(4, 10)] == [2, 10, 4, 40, 92, 352]


@pytest.mark.parametrize("n,given", [(5, ()), (5, ((0, 0),)), (6, ((1, 3), (4, 2))), (6, ((0, 0),))])
def test_nqueens_verifier_accepts_exactly_the_solutions(n, given):
    """Brute force over all n^n column lists, with an independent attack check."""
    def independent(cols):
        queens = [(r, c) for r, c in enumerate(cols)]
        for (r1, c1), (r2, c2) in itertools.combinations(queens, 2):
            if c1 == c2 or abs(r1 - r2) == abs(c1 - c2):
                return False
        return all(cols[r] == c for r, c in given)

    accepted = {cols for cols in itertools.product(range(n), repeat=n)
                if check_placement([c + 1 for c in cols], n, given) == "ok"}
    assert accepted == {cols for cols in itertools.product(range(n), repeat=n) if independent(cols)}
    assert accepted == {s for s in all_solutions(n) if all(s[r] == c for r, c in given)}


def test_nqueens_statuses():
    given = ((2, 3),)
    assert check_placement([3, 1, 4, 2, 5], 5, given) == "ok"
    assert check_placement([3, 1, 5, 2, 4], 5, given) == "givens_moved"
    assert check_placement([3, 3, 4, 2, 5], 5, given) == "same_column"
    assert check_placement([1, 2, 4, 3, 5], 5, given) == "same_diagonal"
    assert check_placement([0, 1, 4, 2, 5], 5, given) == "out_of_range"
    assert check_placement([6, 1, 4, 2, 5], 5, given) == "out_of_range"


def test_nqueens_empty_split_is_a_clear_error_and_big_boards_sample():
    with pytest.raises(ValueError, match="no 'test' task exists with n=4"):
        NQueensSource(renderer=CHATML, split="test", n=4, preplaced=1)
    for split in ("train", "test"):
        env = make(NQueensSource, seed=3, split=split, n=10, preplaced=3)
        assert len(env.given) == 3 and check_placement(
            [c + 1 for c in env.solution], 10, env.given) == "ok"


# --- graph colouring --------------------------------------------------------------------------
def test_graph_coloring_verifier_matches_brute_force_and_planted_is_proper():
    src = GraphColoringSource(renderer=CHATML, nodes=6, colors=3)
    for seed in range(8):
        env = src.make_env(np.random.default_rng(seed))
        assert check_coloring(env.planted, 3, env.edges) == "ok"
        assert sorted(set(env.planted)) == [1, 2, 3]
        assert all(0 <= u < v < 6 for u, v in env.edges) and env.edges
        for colours in itertools.product(range(1, 4), repeat=6):
            proper = all(colours[u] != colours[v] for u, v in env.edges)
            assert (check_coloring(list(colours), 3, env.edges) == "ok") == proper
    assert check_coloring([1, 2, 4], 3, [(0, 1)]) == "color_out_of_range"
    assert check_coloring([0, 2, 1], 3, [(0, 1)]) == "color_out_of_range"
    assert check_coloring([1, 1, 2], 3, [(0, 1)]) == "edge_conflict"
    assert find_coloring(3, 2, [(0, 1), (1, 2), (0, 2)]) is None  # a triangle needs 3 colours
    assert find_coloring(3, 3, [(0, 1), (1, 2), (0, 2)]) is not None


def test_graph_coloring_knobs_shape_the_graph():
    dense = make(GraphColoringSource, nodes=12, colors=4, edge_prob=1.0)
    # every pair of differently planted nodes is joined: the graph is complete k-partite
    expected = {(u, v) for u in range(12) for v in range(u + 1, 12)
                if dense.planted[u] != dense.planted[v]}
    assert set(dense.edges) == expected
    assert "colours 1-4" in dense.get_question() and "nodes 1-12" in dense.get_question()


# --- every source: scripted cases, env behaviour ----------------------------------------------
@pytest.mark.parametrize("renderer_name", ["chatml", "role_colon"])
@pytest.mark.parametrize("split", ["train", "test"])
@pytest.mark.parametrize("cls", SOURCES)
def test_scripted_cases_gold_max_and_adversarial_no_credit(cls, split, renderer_name):
    src = cls(renderer=RENDERERS[renderer_name], split=split)
    cases = src.scripted_cases()
    assert sum(c.kind == "gold" for c in cases) >= 2 and sum(c.kind == "adversarial" for c in cases) >= 6
    for case in cases:
        for seed in range(3):
            outcome = run_scripted_case(src, case, seed)
            assert outcome.ok, (case.name, seed, outcome.episode_return, outcome.replies)
            if case.kind == "gold":
                assert outcome.episode_return == 1.0
            else:
                assert outcome.episode_return <= 0.0


@pytest.mark.parametrize("cls,knobs", [
    (CountdownSource, {"num_numbers": 5, "max_number": 25, "max_target": 200, "use_all": True}),
    (SudokuSource, {"size": 9, "holes": 30}),
    (NQueensSource, {"n": 8, "preplaced": 3}),
    (GraphColoringSource, {"nodes": 10, "colors": 4, "edge_prob": 0.7}),
])
def test_scripted_cases_hold_at_harder_knobs(cls, knobs):
    src = cls(renderer=CHATML, **knobs)
    for case in src.scripted_cases():
        outcome = run_scripted_case(src, case, 5)
        assert outcome.ok, (case.name, outcome.episode_return, outcome.replies)


@pytest.mark.parametrize("cls", SOURCES)
def test_bad_output_is_a_defined_reward_with_metrics(cls):
    def result(tokens, seed=4):
        return play(make(cls, seed), tokens)

    env = make(cls, 4)
    gold = env.get_reference_response()
    ok = result(TOK.encode(gold) + [IM_END])
    assert ok.reward == 1.0 and ok.metrics["parse_error"] == 0.0 and ok.logs["answer_status"] == "ok"
    long = result(TOK.encode(gold + " " + "x" * 5000) + [IM_END])
    assert long.reward == pytest.approx(-0.1) and long.metrics["too_long"] == 1.0
    bad_utf8 = result(TOK.encode(gold)[:9] + [0xFF, 0xFE] + TOK.encode(gold)[9:] + [IM_END])
    assert bad_utf8.reward == pytest.approx(-0.1) and bad_utf8.logs["answer_status"] == "invalid_text"
    oov = result(TOK.encode(gold) + [10**9, -5, IM_END])
    assert oov.metrics["format"] == 0.0 and -0.1 <= oov.reward <= 1.0
    truncated = result(TOK.encode(gold))  # no end of turn: graded, loses the format credit
    assert truncated.reward == pytest.approx(0.9) and truncated.metrics["correct"] == 1.0
    empty = result([IM_END])
    assert empty.reward == pytest.approx(-0.1) and empty.logs["answer_status"] == "empty"
    for metrics in (ok.metrics, long.metrics, empty.metrics):
        assert {"format", "correct", "parse_error", "too_long", "rule_violation"} <= set(metrics)


def test_rule_violation_metric_separates_wrong_from_unreadable():
    env = make(GraphColoringSource, 1)
    wrong = play(env, reply_tokens(CHATML, "Answer: " + " ".join(["1"] * env.nodes)))
    assert wrong.reward == 0.0 and wrong.metrics["rule_violation"] == 1.0
    assert wrong.metrics["parse_error"] == 0.0 and wrong.logs["answer_status"] == "edge_conflict"


def _key(env) -> str:
    if isinstance(env, countdown.CountdownEnv):
        return countdown.task_key(env.numbers, env.target)
    if isinstance(env, sudoku.SudokuEnv):
        return "sudoku:" + puzzle_string(env.puzzle)
    if isinstance(env, nqueens.NQueensEnv):
        return nqueens.task_key(env.n, env.given)
    return graph_coloring.task_key(env.nodes, env.colors, env.edges)


@pytest.mark.parametrize("cls", SOURCES)
def test_determinism_and_variety(cls):
    src = cls(renderer=CHATML)
    question = lambda seed: src.make_env(np.random.default_rng(seed)).get_question()  # noqa: E731
    assert question(17) == question(17)
    assert len({question(seed) for seed in range(40)}) >= 20


@pytest.mark.parametrize("cls", SOURCES)
def test_splits_are_disjoint_and_follow_the_hash(cls):
    train = {_key(make(cls, seed, "train")) for seed in range(150)}
    test = {_key(make(cls, seed, "test")) for seed in range(60)}
    assert train and test and not train & test
    assert all(split_of(k) == "test" for k in test) and all(split_of(k) == "train" for k in train)


@pytest.mark.parametrize("cls,knob,value,exc", [
    (CountdownSource, "num_numbers", 1, ValueError), (CountdownSource, "num_numbers", 7, ValueError),
    (CountdownSource, "max_number", "10", TypeError), (CountdownSource, "max_target", 5, ValueError),
    (CountdownSource, "use_all", 1, ValueError), (CountdownSource, "format_coef", 2.0, ValueError),
    (SudokuSource, "size", 6, ValueError), (SudokuSource, "holes", 0, ValueError),
    (SudokuSource, "holes", 17, ValueError), (SudokuSource, "unique", "yes", ValueError),
    (NQueensSource, "n", 3, ValueError), (NQueensSource, "n", 11, ValueError),
    (NQueensSource, "preplaced", 7, ValueError), (NQueensSource, "n", 5.0, TypeError),
    (GraphColoringSource, "nodes", 2, ValueError), (GraphColoringSource, "colors", 7, ValueError),
    (GraphColoringSource, "edge_prob", 0.0, ValueError), (GraphColoringSource, "colors", True, TypeError),
])
def test_knob_validation(cls, knob, value, exc):
    with pytest.raises(exc, match=knob):
        cls(renderer=CHATML, **{knob: value})
    with pytest.raises(TypeError, match="unexpected keyword argument 'sizee'"):
        cls(renderer=CHATML, sizee=3)


@pytest.mark.parametrize("env_id", IDS)
def test_gym_make_reset_and_step(env_id):
    env = gym.make(env_id)
    ob, _ = env.reset(seed=5)
    ob2, _ = gym.make(env_id).reset(seed=5)
    assert np.array_equal(ob, ob2)
    text = TOK.decode(list(ob))
    assert "Answer:" in text
    _, reward, terminated, _, info = env.step(np.array(TOK.encode("no idea") + [IM_END]))
    assert terminated and reward == pytest.approx(-0.1)
    assert info["logs"]["answer_status"] == "no_answer"
    env.close()


def test_prompts_are_short_at_default_knobs():
    for cls in SOURCES:
        for seed in range(20):
            env = make(cls, seed)
            ob = asyncio.run(env.initial_observation())[0]
            assert ob.length <= 400, (cls.__name__, ob.length)
            assert len(env.get_reference_response()) <= 40


def test_card_examples_are_real_episodes():
    cd, sd, nq, gc = (cls.card.example_episode for cls in SOURCES)
    numbers_line = re.search(r"Numbers: ([\d ]+)", cd[0]["content"])
    target_line = re.search(r"Target: (\d+)", cd[0]["content"])
    assert numbers_line and target_line
    numbers = [int(x) for x in numbers_line.group(1).split()]
    target = int(target_line.group(1))
    assert countdown.CountdownEnv(CHATML, numbers, target, "0").judge(cd[1]["content"]).correct

    rows = [ln for ln in sd[0]["content"].split("\n") if re.fullmatch(r"[1-4.]{4}", ln)]
    puzzle = [[0 if ch == "." else int(ch) for ch in row] for row in rows]
    assert sum(v == 0 for r in puzzle for v in r) == SudokuSource.DEFAULTS["holes"]
    assert sudoku.SudokuEnv(CHATML, puzzle, puzzle).judge(sd[1]["content"]).correct

    n = NQueensSource.DEFAULTS["n"]
    board = [ln for ln in nq[0]["content"].split("\n") if re.fullmatch(r"[.Q]+", ln)]
    given = tuple((r, row.index("Q")) for r, row in enumerate(board) if "Q" in row)
    assert len(board) == n and len(given) == NQueensSource.DEFAULTS["preplaced"]
    assert nqueens.NQueensEnv(CHATML, n, given, tuple(range(n))).judge(nq[1]["content"]).correct

    edge_line = gc[0]["content"].split("Edges:")[1].split("\n")[0]
    edges = [(int(u) - 1, int(v) - 1) for u, v in re.findall(r"(\d+)-(\d+)", edge_line)]
    assert edges and graph_coloring.GraphColoringEnv(CHATML, 6, 3, edges, [1] * 6).judge(gc[1]["content"]).correct
    # the examples show what the envs really prompt
    assert cd[0]["content"].split("\n")[2] == make(CountdownSource).get_question().split("\n")[2]
    assert nq[0]["content"] == make(NQueensSource, 0).get_question()


@pytest.mark.parametrize("cls", SOURCES)
def test_prompt_instruction_is_the_contracts(cls):
    for seed in range(5):
        env = make(cls, seed)
        assert env.get_question().endswith(env.answer_contract.instruction())
        assert env.answer_contract.read(env.get_reference_response()).value == env.gold_answer
        assert env.check(env.gold_answer) == "ok"


@pytest.mark.parametrize("cls", SOURCES)
def test_generated_attacks_get_their_verdicts(cls):
    """The generated attack suite (`llm_gym.checks.attacks`) through real episodes: every reply
    built to earn credit does, none built not to does."""
    report = audit_source(lambda knobs: cls(renderer=CHATML, split="train", **knobs), [0, 1], per_seed=150)
    assert report.runs >= 300 and not report.skipped
    assert (report.false_credits, report.false_denials) == (0, 0), report.findings[:5]


@pytest.mark.parametrize("cls", SOURCES)
def test_random_replies_never_raise_and_only_valid_answers_score(cls):
    """Random splices of the gold reply with junk (digits, operators, labels, look-alikes,
    special-token text): the verdict is always defined, and credit only goes to a reply whose
    declared answer the contract reads and the puzzle's own rules accept."""
    rng = np.random.default_rng(11)
    junk = ["Answer:", "answer is", "\u0410nswer:", " or ", "\n", "<|pad|>", "**", "0", "9", "-",
            "*", "/", "(", ")", ",", " ", "\u200b", "\ufffd", "\u00b2", "x", ".", "12", "Answer: 1"]
    env = make(cls, 2)
    gold = env.get_reference_response()
    credited = 0
    for _ in range(300):
        text = gold
        for _ in range(int(rng.integers(1, 4))):
            i = int(rng.integers(len(text) + 1))
            text = text[:i] + junk[int(rng.integers(len(junk)))] + text[i + int(rng.integers(0, 3)):]
        verdict = env.judge(text)
        assert isinstance(verdict.status, str) and verdict.format_ok in (True, False)
        if verdict.correct:
            credited += 1
            reading = env.answer_contract.read(text)
            assert reading.ok and env.check(reading.value) == "ok"
    assert 0 < credited < 300  # some splices keep a valid answer (e.g. junk in the working)
