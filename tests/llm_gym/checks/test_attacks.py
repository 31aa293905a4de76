"""The generated attack suite (`llm_gym.checks.attacks`) against the answer contracts themselves.

Hypothesis draws gold values of every contract kind; the suite builds its replies from parts
with the verdict each must get under the policy; every contract must agree with every verdict.
A fixed-seed slice pins the suite's size and families (a regression in the generator shows up as
a smaller suite, not as silence), and the env-level audit is exercised on llm/Math-v0.
"""

from __future__ import annotations

import collections
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from llm_gym.checks.attacks import audit_source, generate
from llm_gym.grading import (
    ArithmeticExpressionAnswer,
    ExactTextAnswer,
    GridAnswer,
    IntegerAnswer,
    JsonAnswer,
    MappingAnswer,
    NumberAnswer,
    SequenceAnswer,
    TokenAnswer,
)
from llm_gym.grading.contracts.expression import parse_expression


def mismatches(contract, gold, seed, task=""):
    out = []
    for attack in generate(contract, gold, seed=seed, task=task or contract.context):
        got = contract.grade(attack.reply, gold).correct
        if got != attack.credit:
            out.append((attack.family, attack.variant, attack.reply[:120], attack.credit))
    return out


@settings(max_examples=40, deadline=None)
@given(st.integers(-10**12, 10**12), st.integers(0, 10**6))
def test_integer_contract_agrees_with_every_verdict(gold, seed):
    assert mismatches(IntegerAnswer(context="What is the total?"), gold, seed) == []


@settings(max_examples=30, deadline=None)
@given(st.fractions(min_value=-1000, max_value=1000, max_denominator=64), st.integers(0, 10**6),
       st.sampled_from([None, "km", "kg", "h", "L"]), st.sampled_from([0, 0.001, 0.01]))
def test_number_contract_agrees_with_every_verdict(gold, seed, unit, tolerance):
    contract = NumberAnswer(unit=unit, tolerance=tolerance, context="Convert it.")
    assert mismatches(contract, Fraction(gold), seed) == []


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(["knight", "knave"]), min_size=2, max_size=5), st.integers(0, 10**6))
def test_mapping_contract_agrees_with_every_verdict(roles, seed):
    names = ["Ann", "Bob", "Cal", "Dee", "Eve"][: len(roles)]
    contract = MappingAnswer(keys=names, values={"knight": "knight", "knave": "knave"})
    assert mismatches(contract, dict(zip(names, roles)), seed) == []


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 6), st.integers(1, 6), st.integers(0, 10**6), st.data())
def test_grid_contract_agrees_with_every_verdict(rows, cols, seed, data):
    grid = tuple("".join(data.draw(st.sampled_from("0123456789")) for _ in range(cols)) for _ in range(rows))
    for contract in (GridAnswer(), GridAnswer(rows=rows, cols=cols)):
        assert mismatches(contract, grid, seed) == []


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(-999, 999), min_size=1, max_size=8), st.integers(0, 10**6))
def test_sequence_contract_agrees_with_every_verdict(items, seed):
    assert mismatches(SequenceAnswer(item="int"), tuple(items), seed) == []


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(["maple", "video", "plant", "ocean", "coral", "metal"]), min_size=1, max_size=6,
                unique=True), st.integers(0, 10**6))
def test_word_sequence_contract_agrees_with_every_verdict(items, seed):
    assert mismatches(SequenceAnswer(item="word", spaces_separate=False), tuple(items), seed) == []


@settings(max_examples=20, deadline=None)
@given(st.lists(st.fixed_dictionaries({"name": st.sampled_from(["Yan", "Uma", "Fay"]),
                                       "id": st.integers(0, 999), "ok": st.booleans()}), min_size=1, max_size=3),
       st.integers(0, 10**6))
def test_json_contract_agrees_with_every_verdict(rows, seed):
    assert mismatches(JsonAnswer(top="array"), rows, seed) == []


@settings(max_examples=25, deadline=None)
@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=5, max_size=5), st.integers(0, 10**6))
def test_token_contract_agrees_with_every_verdict(word, seed):
    contract = TokenAnswer(pattern="[a-z]{5}", labels=("answer", "guess"), verbs=("guess",))
    assert mismatches(contract, word, seed) == []


@settings(max_examples=20, deadline=None)
@given(st.lists(st.text(alphabet="abcxyz0123 ", min_size=1, max_size=8).map(str.strip).filter(bool),
                min_size=1, max_size=4), st.integers(0, 10**6))
def test_exact_text_contract_agrees_with_every_verdict(lines, seed):
    assert mismatches(ExactTextAnswer(labels=("answer", "output")), tuple(lines), seed) == []


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 9), st.integers(1, 9), st.integers(1, 9), st.integers(0, 10**6))
def test_expression_contract_agrees_with_every_verdict(a, b, c, seed):
    gold = parse_expression(f"{a}+({b}*{c})")
    assert gold is not None
    contract = ArithmeticExpressionAnswer(numbers=[a, b, c], target=gold.value)
    assert mismatches(contract, gold, seed) == []


def test_a_fixed_seed_slice_keeps_its_size_and_families():
    attacks = generate(IntegerAnswer(context="23+45="), 68, seed=7, task="23+45=")
    families = collections.Counter(a.family for a in attacks)
    assert len(attacks) >= 250
    for family in ("natural form", "prose around", "wrong value", "second declaration", "second value in slot",
                   "bound", "approximation", "changed value", "doubted", "degenerate", "disguise: zero-width",
                   "disguise: look-alike letters", "breaker: bidi override", "breaker: special token"):
        assert families[family] > 0, family
    assert sum(a.credit for a in attacks) >= 60 and sum(not a.credit for a in attacks) >= 150
    assert generate(IntegerAnswer(), 68, seed=7) == generate(IntegerAnswer(), 68, seed=7)  # deterministic


def test_audit_plays_attacks_through_the_env():
    import gymnasium as gym

    import llm_gym  # noqa: F401

    source = gym.make("llm/Math-v0").unwrapped.source
    cls, renderer = type(source), source.renderer
    report = audit_source(lambda knobs: cls(renderer=renderer, **knobs), [0], per_seed=120, keep_records=True)
    assert report.runs >= 200 and report.false_credits == 0 and report.false_denials == 0, report.findings[:3]
    assert {r["family"] for r in report.records} >= {"natural form", "second declaration"}
    assert report.summary()["false_credit_rate"] == 0.0
