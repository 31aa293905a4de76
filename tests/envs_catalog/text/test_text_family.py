"""The text family (llm/ReverseText, SortList, Dedupe, CsvToJson, InstructionFollowing,
Extraction): scripted gold/adversarial cases on both splits and renderers, the answer contracts
(what each accepts and refuses under the one answer policy), the generated attack audit per
env, the prompts' exact answer instructions, the free-text readers, every instruction checker
with passing, failing and vacuous replies, splits, determinism, knob validation and bad model
output."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

from envs_catalog.text.base import strict_json, visible_reply
from envs_catalog.text.csv_json import CsvToJsonSource, TableJsonAnswer, grade_table
from envs_catalog.text.extraction import (
    ExtractionSource,
    FieldsAnswer,
    extraction_contract,
    grade_fields,
    parse_value,
)
from envs_catalog.text.instructions import (
    CHECKS,
    CONFLICTS,
    InstructionFollowingSource,
    check_constraint,
    echoes_rules,
    grade_reply,
    make_constraint,
    solve,
)
from envs_catalog.text.lists import (
    DedupeSource,
    ReverseTextSource,
    SortListSource,
    list_contract,
    reversed_string_contract,
    reversed_words_contract,
)
from llm_gym import get_renderer, load_tokenizer
from llm_gym.authoring import split_of
from llm_gym.checks.attacks import audit_source
from llm_gym.scripted import case_source, reply_tokens, run_scripted_case

TOK = load_tokenizer()
RENDERERS = {"chatml": get_renderer("chatml", TOK), "role_colon": get_renderer("role_colon", TOK)}
CHATML = RENDERERS["chatml"]

# (source class, extra knobs): the registered defaults plus a harder or different setting each
CONFIGS = [
    (ReverseTextSource, {}), (ReverseTextSource, {"unit": "words", "length": 4}),
    (SortListSource, {}), (SortListSource, {"items": "words", "key": "length", "order": "descending"}),
    (SortListSource, {"items": "words", "length": 3}),
    (DedupeSource, {}), (DedupeSource, {"length": 10, "distinct": 3}),
    (CsvToJsonSource, {}), (CsvToJsonSource, {"rows": 1, "columns": 1, "types": "strings"}),
    (InstructionFollowingSource, {}), (InstructionFollowingSource, {"num_constraints": 4}),
    (ExtractionSource, {}), (ExtractionSource, {"num_fields": 3, "distractors": False}),
]
SOURCES = [ReverseTextSource, SortListSource, DedupeSource, CsvToJsonSource,
           InstructionFollowingSource, ExtractionSource]


def _config_id(config):
    cls, knobs = config
    return cls.__name__ + ("-" + "-".join(f"{k}={v}" for k, v in knobs.items()) if knobs else "")


def play(env, tokens):
    async def go():
        await env.initial_observation()
        return await env.step(tokens)
    return asyncio.run(go())


@pytest.mark.parametrize("config", CONFIGS, ids=_config_id)
@pytest.mark.parametrize("renderer_name", ["chatml", "role_colon"])
@pytest.mark.parametrize("split", ["train", "test"])
def test_scripted_cases_gold_max_and_adversarial_no_credit(config, renderer_name, split):
    cls, knobs = config
    renderer = RENDERERS[renderer_name]
    base = cls(renderer=renderer, split=split, **knobs)
    cases = base.scripted_cases()
    kinds = {c.kind for c in cases}
    assert kinds == {"gold", "adversarial"} and sum(c.kind == "adversarial" for c in cases) >= 5
    for case in cases:
        source = case_source(cls, case, renderer, split, **knobs)
        for seed in range(3):
            outcome = run_scripted_case(source, case, seed)
            assert outcome.ok, (case.name, seed, outcome.episode_return, outcome.replies)
            if case.kind == "gold":
                assert outcome.episode_return == pytest.approx(1.0)
            else:
                assert outcome.episode_return <= 0.0


# --- the free-text readers (InstructionFollowing) ----------------------------------------------
def test_visible_reply_refuses_unreadable_text():
    assert visible_reply("  abc \n") == ("abc", "ok")
    assert visible_reply("")[1] == "empty" and visible_reply(" \n\t")[1] == "empty"
    assert visible_reply("x" * 5000)[1] == "too_long"
    assert visible_reply("ab\ufffd")[1] == "invalid_text"
    for trick in ("t\u0435nalp", "\uff54enalp", "ten\u200balp", "tenalp\u00a0"):  # Cyrillic, fullwidth, ZWSP, NBSP
        assert visible_reply(trick)[1] == "non_ascii", trick


def test_strict_json_reader():
    assert strict_json('[{"a": 1}]') == ([{"a": 1}], "ok")
    assert strict_json('```json\n{"a": 1}\n```') == ({"a": 1}, "ok")
    assert strict_json('  {"a": [1, 2]}  \n') == ({"a": [1, 2]}, "ok")
    for bad in ('{"a": 1} {"a": 2}', '{"a": 1}\nAlso: {"a": 2}', 'Here: {"a": 1}', '{"a": NaN}',
                '{"a": Infinity}', '{"a": 1, "a": 2}', "{\u201ca\u201d: 1}", "", "{'a': 1}",
                '```json\n{"a": 1}\n``` and more', "[1, 2", "[" * 5000):
        assert strict_json(bad)[0] is None, bad


# --- list tasks --------------------------------------------------------------------------------
def test_list_tasks_are_solved_by_brute_force_and_never_echo():
    for seed in range(200):
        rng = np.random.default_rng(seed)
        env = ReverseTextSource(renderer=CHATML).make_env(rng)
        assert env.answer == env.task["input"][::-1] != env.task["input"]
        src = SortListSource(renderer=CHATML, items="words", key="length")
        env = src.make_env(np.random.default_rng(seed))
        items = env.task["input"]
        assert env.task["answer_items"] == sorted(items, key=lambda w: (len(w), w)) != items
        env = SortListSource(renderer=CHATML, order="descending").make_env(np.random.default_rng(seed))
        assert env.task["answer_items"] == sorted(env.task["input"], reverse=True)
        env = DedupeSource(renderer=CHATML).make_env(np.random.default_rng(seed))
        seen, want = set(), []
        for w in env.task["input"]:
            if w not in seen:
                seen.add(w)
                want.append(w)
        assert env.task["answer_items"] == want and len(want) == 4 < len(env.task["input"])


def _status(contract, gold, reply):
    """'credit', 'wrong' or the policy's status for `reply` under `contract`."""
    grade = contract.grade(reply, gold)
    return "credit" if grade.correct else ("wrong" if grade.format_ok else grade.status)


def test_reversed_string_contract_accepts_and_refuses():
    c = reversed_string_contract("qwxbe", "Reverse the letters of this string: qwxbe\n"
                                          "Reply with just the reversed string.")
    assert c.instruction(brief=True) == "Reply with just the reversed string."
    for good in ["ebxwq", "Answer: ebxwq", "**ebxwq**", '"ebxwq"', "The reversed string is ebxwq.",
                 "\\boxed{ebxwq}", "Let me reverse it.\n\nAnswer: `ebxwq`\n\nMaybe qwxbe?",
                 "\u0435bxwq",  # a Cyrillic look-alike e is read as the e it shows
                 "Working: the answer is below.\nAnswer: ebxwq"]:
        assert _status(c, "ebxwq", good) == "credit", good
    for wrong in ["qwxbe", "EBXWQ", "Ebxwq", "Answer: bexwq"]:
        assert _status(c, "ebxwq", wrong) == "wrong", wrong
    refused = {"ebxwq or qwxbe": "malformed", "ebxw": "no_answer", "": "empty", "ebxwqq": "no_answer",
               "Answer: ebxwq\nThe answer is qwxbe.": "conflicting", "Answer: not ebxwq": "malformed",
               "Answer: ebxwq (or qwxbe)": "malformed", "\u202eebxwq": "confusable"}
    for reply, status in refused.items():
        assert _status(c, "ebxwq", reply) == status, reply


def test_word_and_number_list_contracts_accept_and_refuse():
    words = ["tiger", "apple", "tiger", "lamp"]
    dedupe = list_contract(words, "the list", "Remove the duplicates from this list")
    assert dedupe.instruction() == "Reply with the list on one line, separated by commas."
    gold = ("tiger", "apple", "lamp")
    # the previous audit's false denials: quoted items are items
    for good in ["tiger, apple, lamp", "'tiger', 'apple', 'lamp'", '"tiger", "apple", "lamp"',
                 '["tiger", "apple", "lamp"]', "tiger, apple and lamp", "- tiger\n- apple\n- lamp",
                 "TIGER, Apple, lamp", "The list is tiger, apple, lamp.", "Answer: tiger, apple, lamp\n\nDone."]:
        assert _status(dedupe, gold, good) == "credit", good
    assert _status(dedupe, gold, "tiger, lamp, apple") == "wrong"
    assert _status(dedupe, gold, "tiger, apple") == "wrong"
    for bad in ["tiger apple lamp", "tiger, apple, lamp or tiger, lamp, apple", "tiger, apple, lamps",
                "Answer: tiger, apple, lamp\nAnswer: tiger, lamp, apple"]:
        assert _status(dedupe, gold, bad) != "credit", bad
    numbers = list_contract([42, 7, 19], "the sorted list")
    assert numbers.instruction() == "Reply with the sorted list on one line, separated by commas."
    for good in ["7, 19, 42", "[7, 19, 42]", "7 19 42", "07, 19, 42", '["7", "19", "42"]', "1. 7\n2. 19\n3. 42"]:
        assert _status(numbers, (7, 19, 42), good) == "credit", good
    for bad in ["7, 19 or 42", "7, 19, 42, 42", "7, 19, 42.5", "seven, nineteen, forty-two"]:
        assert _status(numbers, (7, 19, 42), bad) != "credit", bad
    reverse = reversed_words_contract(["apple", "river", "stone"])
    assert reverse.instruction(brief=True) == "Reply with just the words in reverse order, separated by spaces."
    for good in ["stone river apple", "stone, river, apple", "Answer: stone river apple"]:
        assert _status(reverse, ("stone", "river", "apple"), good) == "credit", good
    assert _status(reverse, ("stone", "river", "apple"), "apple river stone") == "wrong"
    assert _status(reverse, ("stone", "river", "apple"), "stone river apple or apple") == "no_answer"
    assert _status(reverse, ("stone", "river", "apple"), "Answer: stone river apple or apple") == "no_answer"


EXACT_PROMPTS = {  # seed 0, train split, registered knobs: the prompts training results were measured on
    ReverseTextSource: "Reverse the letters of this string: wqnhi\nReply with just the reversed string.",
    SortListSource: "Sort these numbers in ascending order: 61, 50, 26, 30, 81\n"
                    "Reply with the sorted list on one line, separated by commas.",
    DedupeSource: "Remove the duplicates from this list, keeping the first occurrence of each word in order: "
                  "heart, mirror, heart, umbra, cocoa, heart\nReply with the list on one line, separated by commas.",
    CsvToJsonSource: "Convert this CSV table to JSON: a list with one object per row, using the header names as "
                     "keys. Write integers and decimals as JSON numbers, true/false as JSON booleans and everything "
                     "else as strings. Reply with only the JSON.\n\nname,price,score\nMax,61.05,97.0\nSara,63.59,54.3",
    ExtractionSource: "Read this document.\n\nSITE INSPECTION REPORT\nSite: Port Yard\nInspector: Georg Smith\n"
                      "Inspection date: 2023-11-15\nNext inspection: 2024-05-13\nIssues found: 14\n"
                      "Issues resolved on the day: 10\nNotes: Georg Smith was shown around by the site manager "
                      "Dana Nagy. The previous visit was to Hill Station, where no issues were found.\n\n"
                      "Give the inspection date as YYYY-MM-DD.\nReply with exactly this line:\n"
                      "inspection_date: <value>",
}


@pytest.mark.parametrize("cls", list(EXACT_PROMPTS), ids=lambda c: c.__name__)
def test_prompts_are_unchanged_and_the_env_declares_its_contract(cls):
    env = cls(renderer=CHATML).make_env(np.random.default_rng(0))
    assert env.question == EXACT_PROMPTS[cls]
    assert env.answer_contract is not None and env.gold_answer is not None
    assert env.answer_contract.grade(env.answer, env.gold_answer).correct
    assert env.answer_contract.instruction() in env.question or env.answer_contract.instruction(
        brief=True) in env.question
    assert cls.card.answer_contract


def _mismatches(report):
    """The runs whose score disagrees with the attack's verdict by construction."""
    return [(r["family"], r["variant"], r["reply"][:80], r["got"]) for r in report.records
            if (r["got"] >= r["gold_return"] - 1e-6) != r["credit"]]


AUDITED = [(ReverseTextSource, {}), (ReverseTextSource, {"unit": "words", "length": 4}),
           (SortListSource, {}), (SortListSource, {"items": "words", "length": 3}),
           (DedupeSource, {}), (CsvToJsonSource, {}), (ExtractionSource, {}),
           (ExtractionSource, {"doc_type": "personnel"})]


@pytest.mark.parametrize("config", AUDITED, ids=_config_id)
def test_generated_attack_audit_finds_no_false_credit_or_denial(config):
    cls, knobs = config
    report = audit_source(lambda k: cls(renderer=CHATML, split="train", **{**knobs, **k}), [0, 1],
                          per_seed=150, keep_records=True)
    assert report.runs >= 300 and not report.skipped
    assert _mismatches(report) == [], report.findings[:5]
    assert report.false_credits == 0 and report.false_denials == 0


def test_card_examples_are_graded_correct():
    assert "qwxbe"[::-1] == ReverseTextSource.card.example_episode[-1]["content"]
    assert SortListSource.card.example_episode[-1]["content"] == ", ".join(
        map(str, sorted([42, 7, 19, 88, 3])))
    csv_reply = CsvToJsonSource.card.example_episode[-1]["content"]
    rows = [{"name": "Anna", "age": 34, "active": True}, {"name": "Bo", "age": 27, "active": False}]
    assert grade_table(csv_reply, ["name", "age", "active"], rows).score == 1.0
    rules = [make_constraint("no_commas"), make_constraint("starts_with", ("Once",))]
    reply = InstructionFollowingSource.card.example_episode[-1]["content"]
    assert grade_reply(reply, rules, "all").score == 1.0
    question = InstructionFollowingSource.card.example_episode[0]["content"]
    assert all(rule.description in question for rule in rules)
    assert grade_reply(reply, rules, "all", "a quiet harbor").score == 1.0
    assert grade_reply("Once upon a time.", rules, "all", "a quiet harbor").score == 0.0


# --- CSV to JSON -------------------------------------------------------------------------------
def test_csv_grader_types_are_strict():
    header = ["name", "age", "score", "active"]
    rows = [{"name": "Anna", "age": 34, "score": 72.5, "active": True}]

    def grade(obj):
        return grade_table(json.dumps(obj) if not isinstance(obj, str) else obj, header, rows)
    assert grade(rows).score == 1.0
    assert grade('[{"active":true,"score":72.50,"age":34,"name":"Anna"}]').score == 1.0
    assert grade([{**rows[0], "score": 72.5}]).score == 1.0
    assert grade([{**rows[0], "age": 34.0}]).score == 1.0  # a JSON number: 34.0 is 34
    for wrong in ([{**rows[0], "age": "34"}], [{**rows[0], "active": "true"}],
                  [{**rows[0], "active": 1}], [{**rows[0], "name": "anna"}], [{**rows[0], "extra": 1}],
                  [{k: v for k, v in rows[0].items() if k != "age"}], rows * 2, [],
                  [{**rows[0], "score": 72.4}], [{**rows[0], "age": True}], [{**rows[0], "active": None}]):
        g = grade(wrong)
        assert g.score == 0.0 and g.format_ok, wrong
    for unreadable in ("not json", json.dumps(rows[0]), '[{"name": "Anna", "name": "Anna"}]',
                       '[{"name": NaN}]', json.dumps(rows) + "\n" + json.dumps(rows * 2)):
        assert grade(unreadable).format_ok is False, unreadable


def test_table_json_contract_accepts_and_refuses():
    c = TableJsonAnswer(context="Convert this CSV table to JSON.")
    assert c.instruction() == "Reply with only the JSON."
    gold = [{"name": "Anna", "age": 34}]
    text = json.dumps(gold)
    for good in [text, "```json\n" + json.dumps(gold, indent=2) + "\n```", "Here is the JSON: " + text,
                 "JSON:\n" + text, "Answer: " + text + "\nIt has one object per row.",
                 "Answer:\n" + text + "\n\nSome might prefer:\n[]", '[{"age": 34.0, "name": "Anna"}]']:
        assert _status(c, gold, good) == "credit", good
    assert _status(c, gold, '[{"name": "Anna", "age": 35}]') == "wrong"
    assert _status(c, gold, '[{"name": "Anna", "age": true}]') == "wrong"
    refused = {text + "\n" + text.replace("34", "35"): "malformed", text + " " + text: "malformed",
               "Answer: " + text + "\n\nThe answer is " + text.replace("34", "35"): "conflicting",
               '[{"name": "Anna", "age": 34, "age": 35}]': "malformed", '[{"name": "Anna", "age": NaN}]': "malformed",
               json.dumps(gold[0]): "malformed", "name,age\nAnna,34": "no_answer"}
    for reply, status in refused.items():
        assert _status(c, gold, reply) == status, reply


def test_csv_task_is_the_typed_table():
    src = CsvToJsonSource(renderer=CHATML, rows=3, columns=6)
    env = src.make_env(np.random.default_rng(5))
    lines = env.task["csv"].splitlines()
    assert len(lines) == 4 and lines[0].split(",") == env.task["header"]
    assert len(env.task["header"]) == 6 and env.task["header"][0] == "name"
    parsed = json.loads(env.answer)
    assert parsed == env.task["rows"]
    assert play(env, reply_tokens(CHATML, env.answer)).reward == 1.0


# --- instruction following ---------------------------------------------------------------------
PASS_FAIL = {
    ("min_words", (5,)): ("one two three four five", "one two three four"),
    ("max_words", (3,)): ("one two three", "one two three four"),
    ("include_keywords", ("apple", "river")): ("An apple by the River.", "Apples by the river."),
    ("forbidden_words", ("good",)): ("A fine day.", "A GOOD day."),
    ("lowercase", ()): ("all lower here.", "Not lower."),
    ("uppercase", ()): ("ALL UPPER HERE.", "ALL UPPER hERE."),
    ("bullets", (2,)): ("Intro\n- first point\n* second point", "- one\n- two\n- three"),
    ("json_keys", ("title", "mood")): ('{"title": "Sea", "mood": "calm"}',
                                       '{"title": "Sea", "mood": "calm"} ok'),
    ("ends_with", ("The end.",)): ("A story. The end.", "The end. A story."),
    ("starts_with", ("Today",)): ("today we walk.", "We walk today."),
    ("no_commas", ()): ("No commas here.", "Commas, here."),
    ("postscript", ()): ("Hi.\nP.S. see you", "Hi. PS see you"),
}
VACUOUS = ["", "   ", "...", "- \n- ", "!!!", "{}", "-", '""', "[]"]


def test_every_constraint_kind_has_unit_cases():
    assert {kind for kind, _ in PASS_FAIL} == set(CHECKS)


@pytest.mark.parametrize("kind_params", list(PASS_FAIL), ids=lambda kp: kp[0])
def test_constraint_checker_passes_fails_and_is_never_vacuous(kind_params):
    kind, params = kind_params
    good, bad = PASS_FAIL[kind_params]
    rule = make_constraint(kind, params)
    assert check_constraint(good, rule), good
    assert not check_constraint(bad, rule), bad
    for empty in VACUOUS:
        assert not check_constraint(empty, rule), (kind, empty)
    # look-alike letters make a reply unreadable, whatever the rule
    assert not check_constraint(good.replace("e", "\u0435").replace("E", "\u0415"), rule) or not (
        "e" in good or "E" in good)


def test_no_commas_and_lowercase_cannot_be_met_vacuously():
    assert not check_constraint("", make_constraint("no_commas"))
    assert not check_constraint("12 34", make_constraint("lowercase"))
    assert not check_constraint("12 34", make_constraint("uppercase"))
    assert not check_constraint("The end.", make_constraint("ends_with", ("The end.",)))
    assert not check_constraint("Hi.\nP.S.", make_constraint("postscript"))
    assert not check_constraint('{"title": "", "mood": " "}', make_constraint("json_keys", ("title", "mood")))
    assert not check_constraint('{"title": "a", "mood": 3}', make_constraint("json_keys", ("title", "mood")))
    assert not check_constraint("- \n- \n- one", make_constraint("bullets", (3,)))


def test_listing_the_rules_passes_nothing():
    rules = [make_constraint("include_keywords", ("apple", "river")), make_constraint("no_commas"),
             make_constraint("min_words", (5,))]
    listing = "\n".join(r.description for r in rules)
    assert echoes_rules(listing, rules)
    assert echoes_rules("I will " + rules[1].description.lower().rstrip(".") + " today", rules)
    assert not echoes_rules("An apple fell into the river today.", rules)
    for mode in ("all", "fraction"):
        g = grade_reply(listing, rules, mode)
        assert g.score == 0.0 and g.details["echo"] == 1.0
        assert grade_reply("An apple fell into the river today.", rules, mode).score == 1.0
    assert grade_reply("An apple fell, into the river today.", rules, "fraction").score == pytest.approx(2 / 3)
    assert grade_reply("An apple fell, into the river today.", rules, "all").score == 0.0


def test_conflicts_are_symmetric_and_the_solver_satisfies_every_drawn_task():
    for kind, others in CONFLICTS.items():
        for other in others:
            assert kind in CONFLICTS[other]
    for n in range(1, 6):
        src = InstructionFollowingSource(renderer=CHATML, num_constraints=n)
        for seed in range(40):
            env = src.make_env(np.random.default_rng(seed))
            rules = env.task["constraints"]
            assert len(rules) == n and len({r.kind for r in rules}) == n
            assert all(check_constraint(env.answer, r) for r in rules)
            assert not any(b.kind in CONFLICTS[a.kind] for a in rules for b in rules)
            assert all(r.description in env.question for r in rules)
            assert solve(env.task["topic"], rules) == env.answer


def test_fraction_reward_counts_rules():
    src = InstructionFollowingSource(renderer=CHATML, num_constraints=3, reward="fraction",
                                     kinds=["no_commas", "lowercase", "min_words", "postscript"])
    env = src.make_env(np.random.default_rng(1))
    kinds = {r.kind for r in env.task["constraints"]}
    broken = env.answer.replace(" ", ", ", 1) if "no_commas" in kinds else env.answer.upper()
    result = play(env, reply_tokens(CHATML, broken))
    assert 0.0 < result.reward < 1.0 and result.metrics["constraints_met"] == pytest.approx(result.reward)


# --- extraction --------------------------------------------------------------------------------
FIELDS = {"total": ("number", "85.25", "77.50", ""), "due_date": ("date", "2024-04-04", "2024-03-05", ""),
          "customer": ("text", "Dana Smith", "Acme Supplies", ""), "salary": ("number", "52300", "50000", ""),
          "issues_found": ("number", "7", "3", "")}


def test_extraction_values_are_read_by_kind():
    assert parse_value("total", "number", "$85.25") == parse_value("total", "number", "85.25") is not None
    assert parse_value("salary", "number", "52,300") == 52300
    assert parse_value("total", "number", "85.25 or 77.50") is None
    assert parse_value("total", "number", "85.25 EUR") is None
    assert parse_value("issues_found", "number", "7 issues") == 7
    assert parse_value("issues_found", "number", "$7") is None  # a count is not money
    assert parse_value("due_date", "date", "2024-04-04") == "2024-04-04"
    assert parse_value("due_date", "date", "04/04/2024") is None
    assert parse_value("customer", "text", ' "Dana   SMITH" ') == "dana smith"
    assert parse_value("customer", "text", "INV-48213") == "inv-48213"
    assert parse_value("customer", "text", "Dana Smith or Acme Supplies") is None
    assert parse_value("customer", "text", "The customer is Dana Smith") is None
    assert parse_value("customer", "text", "") is None


def test_extraction_one_field_contract():
    def grade(reply, field="total"):
        return grade_fields(reply, [field], FIELDS)

    contract = extraction_contract(["total"], FIELDS)
    assert contract.instruction() == "Reply with exactly this line:\ntotal: <value>"
    for good in ["total: 85.25", "85.25", "$85.25", "Answer: 85.25", "- **total:** $85.25", "The total is 85.25.",
                 "The total is the last line of the invoice.\n\n**85.25**", "total: 85.25\nCheck: 77.50 + 7.75.",
                 "total: 85.25\nOr maybe 77.50?"]:  # prose after the declared line is not read
        assert grade(good).score == 1.0, good
    assert grade("Dana Smith\n\nI read it off the Bill to line.", "customer").score == 1.0
    assert grade("customer: dana SMITH", "customer").score == 1.0
    assert grade("customer: Acme Supplies", "customer").status == "wrong"
    assert grade("2024-03-05", "due_date").status == "wrong"
    for bad, status in [("total: 85.25\ntotal: 77.50", "conflicting"),   # the previous audit's false credit
                        ("total: 77.50\nAnswer: 85.25", "conflicting"),
                        ("total: 85.25 or 77.50", "malformed"), ("85.25 EUR", "malformed"), ("", "empty"),
                        ("total:", "no_answer")]:
        g = grade(bad)
        assert (g.score, g.format_ok, g.status) == (0.0, False, status), bad


def test_extraction_document_quoted_back_is_not_an_answer():
    src = ExtractionSource(renderer=CHATML)
    for seed in range(120):
        env = src.make_env(np.random.default_rng(seed))
        for reply in (env.task["document"], env.question, "\n".join(env.task["document"].split("\n")[-4:])):
            assert env.grader(reply).score == 0.0, (seed, env.task["asked"], reply[-80:])
    # a single document line chosen as the answer is a statement of it; two quoted lines are not
    contract = extraction_contract(["due_date"], FIELDS, context="Give the due date as YYYY-MM-DD.",
                                   document="Issued: 2024-03-05\nDue: 2024-04-04")
    assert contract.read("Due: 2024-04-04").value == "2024-04-04"
    assert contract.read("Issued: 2024-03-05\nDue: 2024-04-04").status == "no_answer"
    assert contract.read("Issued: 2024-03-05\nDue: 2024-04-04\n\n2024-04-04").value == "2024-04-04"


def test_extraction_several_fields_contract():
    both = ["total", "customer"]
    contract = extraction_contract(both, FIELDS)
    assert isinstance(contract, FieldsAnswer)
    assert contract.instruction() == "Reply with exactly these lines:\ntotal: <value>\ncustomer: <value>"
    for good in ["total: 85.25\ncustomer: Dana Smith", "Customer: dana smith\nTOTAL: $85.25",
                 "- **total:** 85.25\n- customer: Dana Smith",
                 "Here are the fields:\ntotal: 85.25\ncustomer: Dana Smith",
                 "Answer:\n```\ntotal: 85.25\ncustomer: Dana Smith\n```",
                 "The total is the subtotal plus tax.\n\ntotal: 85.25\ncustomer: Dana Smith\n\nDone."]:
        g = grade_fields(good, both, FIELDS)
        assert g.score == 1.0 and g.details["fields_correct"] == 1.0, good
    g = grade_fields("total: 77.50\ncustomer: Dana Smith", both, FIELDS)
    assert (g.score, g.format_ok, g.details["fields_correct"]) == (0.0, True, 0.5)
    for bad in ["total: 85.25", "total: 85.25\ntotal: 77.50\ncustomer: Dana Smith",
                "customer: Dana Smith\n\ntotal: 85.25",  # the last block is read: it lacks a field
                "due_date: 2024-04-04\ntotal: 85.25\ncustomer: Dana Smith",
                "total: 85.25 or 77.50\ncustomer: Dana Smith", "85.25\nDana Smith", "total:\ncustomer:",
                "The total is the last line.\ntotal: 85.25\ncustomer: Dana Smith", ""]:
        g = grade_fields(bad, both, FIELDS)
        assert g.score == 0.0 and g.format_ok is False, bad


def test_extraction_documents_hold_answer_and_distractor():
    src = ExtractionSource(renderer=CHATML, num_fields=4)
    for seed in range(60):
        env = src.make_env(np.random.default_rng(seed))
        doc = env.task["document"]
        for key, (kind, value, distractor, _) in env.task["fields"].items():
            assert value in doc.replace(",", "") or value in doc
            assert (distractor in doc or distractor in doc.replace(",", "")), (key, distractor)
            assert parse_value(key, kind, value) != parse_value(key, kind, distractor)
            assert parse_value(key, kind, value) is not None and parse_value(key, kind, distractor) is not None


# --- shared contract: splits, determinism, knobs, bad output -----------------------------------
@pytest.mark.parametrize("cls", SOURCES, ids=lambda c: c.__name__)
def test_splits_are_disjoint_and_tasks_deterministic(cls):
    keys = {}
    for split in ("train", "test"):
        src = cls(renderer=CHATML, split=split)
        keys[split] = set()
        for seed in range(60):
            env = src.make_env(np.random.default_rng(seed))
            assert split_of(env.task["key"]) == split
            keys[split].add(env.task["key"])
            again = src.make_env(np.random.default_rng(seed))
            assert (again.question, again.answer) == (env.question, env.answer)
        assert len(keys[split]) > 20  # varied tasks
    assert not keys["train"] & keys["test"]


@pytest.mark.parametrize("cls,knob,value", [
    (ReverseTextSource, "unit", "lines"), (ReverseTextSource, "length", 1),
    (ReverseTextSource, "length", "5"), (SortListSource, "order", "up"),
    (SortListSource, "key", "length"), (SortListSource, "length", 21),
    (DedupeSource, "distinct", 6), (DedupeSource, "length", 2),
    (CsvToJsonSource, "rows", 0), (CsvToJsonSource, "types", "ints"), (CsvToJsonSource, "columns", 11),
    (InstructionFollowingSource, "num_constraints", 6), (InstructionFollowingSource, "reward", "any"),
    (InstructionFollowingSource, "kinds", ["no_commas", "rhymes"]),
    (ExtractionSource, "doc_type", "memo"), (ExtractionSource, "num_fields", 5),
    (ExtractionSource, "distractors", 1), (ReverseTextSource, "format_coef", 2.0),
])
def test_bad_knobs_raise_naming_the_knob(cls, knob, value):
    with pytest.raises((ValueError, TypeError), match=knob if knob != "key" else "key="):
        cls(renderer=CHATML, **{knob: value})
    with pytest.raises(TypeError, match="unexpected keyword"):
        cls(renderer=CHATML, not_a_knob=1)


@pytest.mark.parametrize("cls", SOURCES, ids=lambda c: c.__name__)
def test_bad_model_output_is_a_defined_reward(cls):
    src = cls(renderer=CHATML)
    end = TOK.convert_tokens_to_ids("<|im_end|>")
    for seed in range(3):
        answer = src.make_env(np.random.default_rng(seed)).answer
        cases = {
            "invalid utf-8": TOK.encode(answer)[:1] + [0xFF, 0xFE] + TOK.encode(answer)[1:] + [end],
            "huge": TOK.encode(answer + " " + "x" * 5000) + [end],
            "no end of turn": TOK.encode(answer),
            "empty": [end],
            "special token inside": TOK.encode(answer[:2]) + [end] + TOK.encode(answer[2:]) + [end],
        }
        for name, tokens in cases.items():
            result = play(src.make_env(np.random.default_rng(seed)), tokens)
            lo, hi = src.reward_range
            assert lo <= result.reward <= hi and result.episode_done
            if name != "no end of turn":  # the reply ends at the first end of turn: a prefix
                assert result.reward <= 0.0, (name, result.reward)
            else:
                assert result.reward == pytest.approx(0.9)  # right answer, format penalty


TEXT_IDS = ["llm/ReverseText-v0", "llm/SortList-v0", "llm/Dedupe-v0", "llm/CsvToJson-v0",
            "llm/InstructionFollowing-v0", "llm/Extraction-v0"]


@pytest.mark.parametrize("env_id", TEXT_IDS)
def test_gym_face_gives_full_reward_to_the_reference(env_id):
    import gymnasium as gym

    import llm_gym  # noqa: F401  (registers the ids)

    env = gym.make(env_id)
    for seed in range(3):
        env.reset(seed=seed)
        episode = env.unwrapped.current_env  # type: ignore[attr-defined]
        _, reward, terminated, _, info = env.step(np.array(reply_tokens(CHATML, episode.answer)))
        assert terminated and reward == 1.0 and info["metrics"]["correct"] == 1.0
        env.reset(seed=seed)
        _, reward, *_ = env.step(np.array(reply_tokens(CHATML, episode.task.get("csv", "no"))))
        assert float(reward) <= 0.0
    env.close()
