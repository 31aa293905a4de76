"""The answer policy of issue 21, class by class, on generated replies (`llm_gym.grading`).

The reply's answer is its final answer; any other value stated as an answer anywhere (any label,
any wording) means no credit; worked steps, true checks and prose stay allowed. Each class below
is generated from wordings x positions x values with a seeded RNG, for the numeric reader
(`grade_numeric`) and the games' reader (`extract_single_integer`), so that a new wording that
slips through is one more template, not one more example.
"""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from llm_gym.grading import answer_candidates, extract_answer, extract_single_integer, grade_numeric

RNG = random.Random(21)
VALUES = [(a, b) for a, b in ((75, 76), (2239, 2210), (12, 13), (-4, 4), (0, 1), (1000, 999))]
VALUES += [(RNG.randint(2, 5000), None) for _ in range(6)]
VALUES = [(a, b if b is not None else a + RNG.choice([-7, -1, 1, 3, 10])) for a, b in VALUES]

FINALS = ["Answer: {v}", "The answer is {v}.", "\\boxed{{{v}}}", "Final answer: **{v}**",
          "So my final answer is {v}", "{v}"]
# A second answer, in words a model might use, before or after the final one.
SECOND_AFTER = [
    "Backup: {w}", "Backup answer: {w}", "If not, {w}.", "If that's wrong, then {w}.",
    "Alternatively, {w}.", "The final result is {w}.", "Result = {w}", "Final: {w}",
    "{w} is also possible.", "Also {w} works.", "Second guess: {w}", "Or maybe {w}.",
    "Otherwise {w}.", "It could be {w} too.", "My backup answer would be {w}", "{w}",
    "= {w}", "\\boxed{{{w}}}", "(or {w})", "Plan B: {w}", "Hmm, perhaps {w}.", "Option B: {w}",
]
SECOND_BEFORE = [
    "Backup: {w}", "Alternatively, {w}.", "Answer: {w}", "\\boxed{{{w}}}", "{w}",
    "If that is wrong, {w}.", "My answer is {w}.", "Second guess: {w}",
]
# Worked steps and checks that must not cost the credit.
WORKING_BEFORE = [
    "Let me compute: {p} + {q} = {s}.", "{p} + {q} = {s}\n= {s}", "First {p} * 2 = {d}, then subtract.",
    "The answer is found by combining {p} and {q}.", "I think it is either {p} or {q}, let me see.",
    "Maybe {p}? No, let me compute it properly.", "Step 1: {p} - {q} = {r}",
]
WORKING_AFTER = [
    "Let me check: {v} - {p} = {vp}.", "Check: {p} + {vp} = {v}.", "Verify: {v} + {p} = {vpp}",
    "I double-checked this.", "That is the final answer.", "Let me verify: {v} = {v}.",
]


def _numbers(v: int) -> dict:
    p, q = RNG.randint(2, 90), RNG.randint(2, 90)
    return dict(p=p, q=q, s=p + q, d=2 * p, r=p - q, v=v, vp=v - p, vpp=v + p)


def _cases(kind: str):
    for v, w in VALUES:
        for final in FINALS:
            f = final.format(v=v)
            if kind == "second":
                for t in SECOND_AFTER:
                    yield v, f"{f}\n{t.format(w=w)}"
                for t in SECOND_BEFORE:
                    yield v, f"{t.format(w=w)}\n{f}"
            else:
                n = _numbers(v)
                for t in WORKING_BEFORE:
                    yield v, f"{t.format(**n)}\n{f}"
                for t in WORKING_AFTER:
                    yield v, f"{f}\n{t.format(**n)}"


SECOND = list(_cases("second"))
WORKING = list(_cases("working"))


def test_a_second_answer_in_any_wording_gets_no_credit():
    paid = [r for v, r in SECOND if grade_numeric(r, v).correct]
    assert not paid, f"{len(paid)}/{len(SECOND)} paid, e.g. {paid[:5]}"
    # the games' reader too: no guess is read when two are stated
    read = [r for v, r in SECOND if v > 0 and extract_single_integer(r)[0] == v]
    assert not read, f"{len(read)} read as a single guess, e.g. {read[:5]}"


def test_worked_steps_and_true_checks_keep_the_credit():
    denied = [r for v, r in WORKING if not grade_numeric(r, v).correct]
    assert not denied, f"{len(denied)}/{len(WORKING)} denied, e.g. {denied[:5]}"


@pytest.mark.parametrize("reply,value", [
    (".5", Fraction(1, 2)), ("Answer: .5", Fraction(1, 2)), ("Answer: 1 / 2", Fraction(1, 2)),
    ("Answer: **75**", 75), ("Answer: `75`", 75), ("Answer: 3000 metres", 3000),
    ("Answer: 12 km/h", 12), ("The answer is 75 cm^2.", 75), ("Answer: -.25", Fraction(-1, 4)),
])
def test_reasonable_formats_are_read(reply, value):
    assert extract_answer(reply).value == value


@pytest.mark.parametrize("reply", ["Answer: 75 percent", "Answer: 75 thousand", "Answer: 75 dozen",
                                   "Answer: 75 or so 76", "Answer: 75 times 2"])
def test_words_that_change_the_number_are_not_units(reply):
    assert extract_answer(reply).value != 75


def test_givens_quoted_after_the_answer_are_explanation_only_with_the_task():
    reply = "Answer: 75, as 3 boxes hold 25 each"
    assert grade_numeric(reply, 75, context="3 boxes hold 25 apples each. How many?").correct
    assert not grade_numeric(reply, 75).correct  # without the task, 3 and 25 are other values
    # a labelled second answer stays one even when it is a given
    assert not grade_numeric("Answer: 75\nBackup: 3", 75, context="3 boxes of 25").correct


def test_candidates_carry_roles_and_positions():
    text = "70 + 5 = 75, the answer is below.\nAnswer: 75\nBackup: 76"
    cands = answer_candidates(text)
    final = cands[0]
    assert final.role == "final" and final.value == 75 and text[final.start:final.end].startswith("Answer")
    assert any(c.role == "alternative" and c.value == 76 for c in cands)
    assert extract_answer(text).status.value == "conflicting"
