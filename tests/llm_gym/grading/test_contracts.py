"""Each answer contract (`llm_gym.grading.contracts`): what it accepts as one value and what it
refuses, the instruction and card line generated from it, and its bad-input errors."""

from __future__ import annotations

from fractions import Fraction

import pytest

from llm_gym.grading import (
    ArithmeticExpressionAnswer,
    ExactTextAnswer,
    FreeTextAnswer,
    GridAnswer,
    IntegerAnswer,
    JsonAnswer,
    MappingAnswer,
    NumberAnswer,
    ProgramAnswer,
    SequenceAnswer,
    TokenAnswer,
)
from llm_gym.grading.contracts.expression import parse_expression
from llm_gym.grading.quantity import read_quantity


def credited(contract, gold, replies):
    return [r for r in replies if contract.grade(r, gold).correct]


@pytest.mark.parametrize("text,value,unit", [
    ("75", 75, None), ("-75", -75, None), ("5 billion", 5 * 10**9, None), ("75 thousand", 75000, None),
    ("75%", Fraction(3, 4), None), ("5k", 5000, None), ("$75", 75, "USD"), ("-$5", -5, "USD"),
    ("0.085 km", Fraction(17, 200), "km"), ("seventy-five", 75, None), ("1,234", 1234, None),
    ("7.5e1", 75, None), ("7.5 x 10^1", 75, None), ("\\frac{3}{4}", Fraction(3, 4), None),
    ("1 1/2", Fraction(3, 2), None), ("75 in total", 75, None), ("2 dozen", 24, None),
    ("75{,}000", 75000, None), ("12 km/h", 12, "km/h"),
])
def test_read_quantity_reads_one_quantity(text, value, unit):
    q = read_quantity(text)
    assert q is not None and q.value == value and (q.unit.symbol if q.unit else None) == unit


@pytest.mark.parametrize("text", ["0,075", "75 or 76", "at least 75", "~75", "75+", "75 units", "1e999",
                                  "75 76", "five five", "75 km km", "$5 km", ""])
def test_read_quantity_refuses_anything_else(text):
    assert read_quantity(text) is None


def test_integer_answer_reads_natural_forms_and_refuses_attachments():
    c = IntegerAnswer(context="Tom has 26 apples and finds 49 more. How many apples does Tom have?",
                      nouns=["apples"])
    good = ["75", "Answer: 75", "26+49=75", "Total: 75", "The answer is 75.", "\\boxed{75}", "Tom has 75 apples.",
            "seventy-five", "Answer: 75 (seventy-five)", "Answer: 75 because 26 plus 49 is 75", "Answer: $75$",
            "**Final Answer:** 75", "### Answer\n75", "The answer is:\n\n75", "75\n\nHope this helps!",
            "There are 75 apples.", "Answer: 75 in total", "Answer: 75 apples", "Answer: 75 (= 26 + 49)"]
    bad = ["Answer: 75 thousand", "Answer: at least 75", "Answer: 75 or 76", "Answer: 75\nAnswer: 76",
           "Answer: 76\nAnswer: 75", "Answer: 75, or maybe 76.", "I think it's 75 or 76", "75\nor 76",
           "Answer: 75 (or 76)", "The answer is not 75.", "Answer: 75%", "Answer: ~75", "Answer: 75 oranges",
           "Answer: 75 m", "My backup answer is 76.\nAnswer: 75", "I doubt it is 75", "Answer: 75=76"]
    assert credited(c, 75, good) == good
    assert credited(c, 75, bad) == []


def test_number_answer_converts_the_asked_unit_and_applies_its_tolerance():
    c = NumberAnswer(unit="km", tolerance=0.001, context="Convert 85 metres to kilometres.")
    gold = Fraction(85, 1000)
    assert credited(c, gold, ["0.085", "Answer: 0.085 km", "Answer: 85 m", "about 0.085 km", "0.08505"]) == [
        "0.085", "Answer: 0.085 km", "Answer: 85 m", "about 0.085 km", "0.08505"]
    assert credited(c, gold, ["Answer: 0.085 metres", "Answer: 0.085 kg", "0.09", "0.085 kilometres per hour"]) == []
    exact = NumberAnswer()
    assert not exact.grade("about 75", 75).correct  # a range, for an exact answer
    with pytest.raises(ValueError, match="unknown unit"):
        NumberAnswer(unit="parsecs")
    with pytest.raises(ValueError, match="tolerance"):
        NumberAnswer(tolerance=-1)


def test_number_answer_variable_and_instructions():
    c = NumberAnswer(variable="x", context="Solve for x: 3x + 4 = 19.", name="the value of x")
    assert credited(c, 5, ["x = 5", "Answer: x = 5", "5"]) == ["x = 5", "Answer: x = 5", "5"]
    assert credited(c, 5, ["y = 5", "x == 5", "x = 5, x = 6"]) == []
    assert c.instruction(brief=True) == "Reply with just the value of x."
    assert IntegerAnswer().instruction() == "End with one line: Answer: <integer>"
    assert NumberAnswer(tolerance=0.001).instruction(brief=True) == "Reply with just the number (within 0.1%)."


def test_mapping_answer():
    c = MappingAnswer(keys=["Cora", "Ivy", "Otto"], values={"knight": True, "knave": False})
    gold = {"Cora": False, "Ivy": True, "Otto": False}
    good = ["Cora: knave\nIvy: knight\nOtto: knave", "Answer:\nCora: knave\nIvy: knight\nOtto: knave",
            "Cora is a knave, Ivy is a knight and Otto is a knave.",
            '{"Cora": "knave", "Ivy": "knight", "Otto": "knave"}',
            "| Name | Role |\n|---|---|\n| Cora | knave |\n| Ivy | knight |\n| Otto | knave |",
            "Reasoning...\n\nCora: knave\nIvy: knight\nOtto: knave\n\nHope this helps.",
            "- **Cora**: knave\n- **Ivy**: knight\n- **Otto**: knave", "Cora=knave, Ivy=knight, Otto=knave"]
    bad = ["Cora: knave\nIvy: knight", "Cora: knave\nIvy: knight\nOtto: knave (maybe knight)",
           "Answer:\nCora: knave\nIvy: knight\nOtto: knave\n\nAnswer:\nCora: knight\nIvy: knight\nOtto: knave",
           "Cora: knave\nIvy: knight\nOtto: knave\nOtto: knight"]
    assert credited(c, gold, good) == good
    assert credited(c, gold, bad) == []


def test_grid_answer():
    c = GridAnswer(alphabet="1234", rows=4, cols=4)
    gold = ("1432", "2314", "3241", "4123")
    good = ["Answer:\n1432\n2314\n3241\n4123", "1 4 3 2\n2 3 1 4\n3 2 4 1\n4 1 2 3",
            "[[1,4,3,2],[2,3,1,4],[3,2,4,1],[4,1,2,3]]", "```\n1432\n2314\n3241\n4123\n```",
            "Here is the grid:\n1432\n2314\n3241\n4123", "Answer:\n1432\n2314\n3241\n4123\nThis works.",
            "| 1 | 4 | 3 | 2 |\n| 2 | 3 | 1 | 4 |\n| 3 | 2 | 4 | 1 |\n| 4 | 1 | 2 | 3 |"]
    assert credited(c, gold, good) == good
    assert credited(c, gold, ["1432\n2314\n3241", "1432\n2314\n3241\n4123\n\n1111\n1111\n1111\n1111"]) == []


def test_sequence_answers():
    ints = SequenceAnswer(item="int", context="Sort these numbers: 21, 30, 26")
    good = ["3, 45, 49", "Answer: 3, 45, 49", "[3, 45, 49]", "3 45 49", "- 3\n- 45\n- 49",
            "The sorted list is 3, 45, 49.", "3, 45, and 49"]
    assert credited(ints, (3, 45, 49), good) == good
    assert credited(ints, (3, 45, 49), ["3, 45, 49, 50", "3, 45 or 49", "3, 49, 45"]) == []
    words = SequenceAnswer(item="word", spaces_separate=False)
    good = ["maple, video", "'maple', 'video'", '"maple", "video"', '["maple", "video"]']
    assert credited(words, ("maple", "video"), good) == good
    assert credited(words, ("maple", "video"), ["maple video"]) == []
    with pytest.raises(ValueError, match="item"):
        SequenceAnswer(item="colour")


def test_json_answer():
    c = JsonAnswer(top="array")
    gold = [{"a": 1}]
    good = ['[{"a": 1}]', '```json\n[{"a": 1.0}]\n```', 'Here is the JSON:\n[{"a": 1}]', '[{"a": 1}]\nThis is it.']
    assert credited(c, gold, good) == good
    assert credited(c, gold, ['[{"a": 2}]', '{"a": 1}', '[{"a": 1},]', '[{"a": 1}] [{"a": 1}]']) == []
    with pytest.raises(ValueError, match="top"):
        JsonAnswer(top="string")


def test_token_answer():
    c = TokenAnswer(pattern="[a-z]{5}", name="a 5-letter word", labels=("answer", "guess"), verbs=("guess", "try"))
    good = ["crane", "CRANE", "Guess: crane", "My guess is CRANE.", "I guess crane", "I'll try crane."]
    assert credited(c, "crane", good) == good
    assert credited(c, "crane", ["crane or slate", "Guess: crane\nGuess: slate", "cranes"]) == []


def test_expression_answer():
    c = ArithmeticExpressionAnswer(numbers=[2, 7, 7], target=14)
    gold = parse_expression("2*7")
    good = ["Answer: 2*7", "Answer: $2 \\times 7$", "Answer: 7+7", "7 + 7 = 14", "Answer: (7+7)", "Answer: 7 x 2"]
    assert credited(c, gold, good) == good
    assert credited(c, gold, ["Answer: 2*7*7", "Answer: 7+7 = 15", "Answer: 2*7 or 7+7", "Answer: 14",
                              "Answer: 7*2*1"]) == []


def test_exact_text_and_program_and_free_text():
    x = ExactTextAnswer(labels=("answer", "output"))
    gold = ("melon", "32", "17")
    good = ["melon\n32\n17", "```\nmelon\n32\n17\n```", "Output:\nmelon\n32\n17", "The output is:\nmelon\n32\n17"]
    assert credited(x, gold, good) == good
    assert credited(x, gold, ["melon\n32", "It prints:\nmelon\n32\n17", "melon\n32\n17\n18"]) == []
    p = ProgramAnswer(entry_point="solve")
    for reply in ("```python\ndef solve(x):\n    return x\n```", "def solve(x):\n    return x",
                  "```python\nfrom __future__ import annotations\ndef solve(x):\n    return x\n```",
                  "```python\n#!/usr/bin/env python3\n\"\"\"Doc.\"\"\"\ndef solve(x):\n    return x\n```",
                  "```python\ndef solve(x):\n    return x\n```\nUsage:\n```python\nprint(solve(3))\n```"):
        assert p.read(reply).ok, reply
    assert p.read("```python\ndef solve(x):\n    return x\n```\n```python\ndef solve(x):\n    return 0\n```"
                  ).status == "conflicting"
    assert not p.read("```python\ndef other(x):\n    return x\n```").ok
    f = FreeTextAnswer(rubric="follows every rule")
    assert f.read("Some text.").value == "Some text." and f.read("  ").status == "empty"
    assert f.instruction() == ""
