"""The one answer policy (`llm_gym.grading.POLICY`), rule by rule, on replies hypothesis builds from
parts (values x forms x positions x prose x disguises). Each test states the rule and computes the
expected verdict from how the reply was built, never from the reader:

1. the last declaration is graded, parsed completely;
2. text outside declarations -- prose with any numbers, hedges, corrections -- changes nothing;
3. a second declaration with another value voids the credit, one with the same value does not;
4. with no declaration, the last line stating a value is read;
5. a disguise that leaves what is shown unchanged leaves the verdict unchanged.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from llm_gym.grading import POLICY, IntegerAnswer, grade_numeric

VALUES = st.integers(-10**6, 10**6)
DECLARE = ["Answer: {x}", "The answer is {x}.", "\\boxed{{{x}}}", "**Final answer:** {x}", "My answer is {x}",
           "answer = {x}", "Final answer: $\\boxed{{{x}}}$"]
# Prose made of parts: openers x fillers with numbers and hedges. None holds the label word
# "answer" or a box, so none declares anything.
OPENERS = ["Maybe", "Or", "Actually,", "If that fails,", "Some would say", "I first thought of", "Hmm,",
           "Alternatively", "Wait,", "Or perhaps", "Backup:", "Option B:", "It could also be", "Not"]
FILLERS = ["{n}.", "{n} instead.", "it is {n}.", "{n}, or {m}.", "{n} + {m} = {s}.", "something else.",
           "{n} apples and {m} pears.", "the value {n}?"]


@st.composite
def prose(draw):
    n, m = draw(VALUES), draw(VALUES)
    opener, filler = draw(st.sampled_from(OPENERS)), draw(st.sampled_from(FILLERS))
    return f"{opener} {filler.format(n=n, m=m, s=n + m)}"


ZERO_WIDTH = st.sampled_from(["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad"])


def test_policy_is_two_sentences():
    sentences = [s for s in re.split(r"(?<=[.])\s+(?=[A-Z])", POLICY) if s]
    assert len(sentences) == 2, sentences


@settings(max_examples=300, deadline=None)
@given(VALUES, VALUES, st.sampled_from(DECLARE), st.lists(prose(), max_size=3), st.lists(prose(), max_size=3))
def test_prose_around_a_declaration_changes_nothing(gold, said, declare, before, after):
    reply = "\n".join(before + [declare.format(x=said)] + [""] + after)
    assert grade_numeric(reply, gold).correct is (said == gold), reply


@settings(max_examples=300, deadline=None)
@given(VALUES, VALUES, st.sampled_from(DECLARE), st.sampled_from(DECLARE), st.booleans(),
       st.lists(prose(), max_size=2))
def test_a_second_declared_value_voids_the_credit(gold, other, first, second, other_first, between):
    lines = [first.format(x=gold), *between, second.format(x=other)]
    if other_first:
        lines = [first.format(x=other), *between, second.format(x=gold)]
    grade = grade_numeric("\n".join(lines), gold)
    assert grade.correct is (other == gold), lines
    if other != gold:
        assert grade.status == "conflicting"


_ATTACHED = [("{x} thousand", 1000), ("{x} million", 10**6), ("{x}%", None), ("at least {x}", None),
             ("{x} or more", None), ("~{x}", None), ("{x} or {y}", None), ("{x}, not {y}", None),
             ("{x} (or {y})", None), ("about {x}", None), ("{x}+", None), ("{x} metres", None),
             ("{x} widgets", None), ("not {x}", None), ("{x}-{y}", None), ("{x} to {y}", None)]


@settings(max_examples=300, deadline=None)
@given(VALUES.filter(lambda v: v != 0), VALUES, st.sampled_from(_ATTACHED), st.sampled_from(DECLARE[:2]))
def test_the_slot_is_parsed_completely(gold, other, attached, declare):
    template, factor = attached
    reply = declare.format(x=template.format(x=gold, y=other if other != gold else gold + 1))
    grade = grade_numeric(reply, gold)
    assert not grade.correct, reply
    if factor is not None:  # a scale word is read: the value is scaled, not dropped
        assert grade.value == gold * factor


@settings(max_examples=200, deadline=None)
@given(VALUES, VALUES, st.lists(prose(), max_size=2), st.sampled_from(["{x}", "Total: {x}", "So it is {x}.",
                                                                       "**{x}**", "${x}$"]))
def test_with_no_declaration_the_last_value_line_is_read(gold, said, before, last):
    reply = "\n".join(before + [last.format(x=said)])
    assert grade_numeric(reply, gold).correct is (said == gold), reply
    # a value-bearing prose line after it becomes the line read
    after = grade_numeric(reply + f"\nOr maybe {gold + 1}.", gold)
    assert not after.correct


@settings(max_examples=200, deadline=None)
@given(VALUES, VALUES, st.sampled_from(DECLARE), ZERO_WIDTH, st.integers(0, 5))
def test_invisible_characters_change_nothing(gold, said, declare, zw, at):
    reply = declare.format(x=said)
    at = min(at, len(reply) - 1)
    disguised = reply[:at] + zw + reply[at:]
    assert grade_numeric(disguised, gold).correct is grade_numeric(reply, gold).correct


@settings(max_examples=200, deadline=None)
@given(VALUES, VALUES)
def test_a_disguised_second_label_is_still_a_declaration(gold, other):
    lookalike = "\u0410nsw\u0435r"  # Cyrillic A and e
    reply = f"Answer: {gold}\n{lookalike}: {other}"
    assert grade_numeric(reply, gold).correct is (other == gold)


def test_a_lead_in_must_name_the_value_with_the_tasks_words():
    task = "Tom has 26 apples and buys 49 more. How many apples does Tom have?"
    contract = IntegerAnswer(context=task, nouns=["apples"])
    for reply in ("Tom has 75 apples.", "The number of apples is 75.", "26 + 49 = 75", "Total: 75",
                  "There are 75 apples.", "So Tom has 75 apples in total."):
        assert contract.grade(reply, 75).correct, reply
    for reply in ("I doubt it is 75.", "It is not 75.", "Nobody would say 75.", "Wrong guess: 75",
                  "76 is too big; 75"):
        assert not contract.grade(reply, 75).correct, reply
