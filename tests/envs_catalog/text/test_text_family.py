"""The text family (llm/ReverseText, SortList, Dedupe, CsvToJson, InstructionFollowing,
Extraction): scripted gold/adversarial cases on both splits and renderers, the strict readers'
own unit tests, every instruction checker with passing, failing and vacuous replies, splits,
determinism, knob validation and bad model output."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

from envs_catalog.text.base import read_list, single_line, strict_json, visible_reply
from envs_catalog.text.csv_json import CsvToJsonSource, grade_table
from envs_catalog.text.extraction import ExtractionSource, grade_fields, normalise_value
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
from envs_catalog.text.lists import DedupeSource, ReverseTextSource, SortListSource
from llm_gym import get_renderer, load_tokenizer
from llm_gym.authoring import split_of
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


# --- the strict readers ------------------------------------------------------------------------
def test_visible_reply_refuses_unreadable_text():
    assert visible_reply("  abc \n") == ("abc", "ok")
    assert visible_reply("")[1] == "empty" and visible_reply(" \n\t")[1] == "empty"
    assert visible_reply("x" * 5000)[1] == "too_long"
    assert visible_reply("ab\ufffd")[1] == "invalid_text"
    for trick in ("t\u0435nalp", "\uff54enalp", "ten\u200balp", "tenalp\u00a0"):  # Cyrillic, fullwidth, ZWSP, NBSP
        assert visible_reply(trick)[1] == "non_ascii", trick


def test_single_line_reader():
    assert single_line("tenalp") == ("tenalp", "ok")
    assert single_line("Answer: tenalp") == ("tenalp", "ok")
    assert single_line("answer:`tenalp`") == ("tenalp", "ok")
    assert single_line('"tenalp"') == ("tenalp", "ok")
    assert single_line("tenalp\ntenalp")[1] == "multiple_lines"
    assert single_line("Answer:")[1] == "empty"
    assert single_line("''")[1] == "empty"
    assert single_line("The answer: tenalp") == ("The answer: tenalp", "ok")  # read, then wrong


def test_list_reader():
    assert read_list("1, 2,3") == (["1", "2", "3"], "ok")
    assert read_list("[a, b]") == (["a", "b"], "ok")
    assert read_list("a,,b")[1] == "malformed" and read_list("a, b,")[1] == "malformed"
    assert read_list("a, b\nc")[1] == "multiple_lines"
    assert read_list("a\uff0c b")[1] == "non_ascii"  # fullwidth comma


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
    for wrong in ([{**rows[0], "age": 34.0}], [{**rows[0], "age": "34"}], [{**rows[0], "active": "true"}],
                  [{**rows[0], "active": 1}], [{**rows[0], "name": "anna"}], [{**rows[0], "extra": 1}],
                  [{k: v for k, v in rows[0].items() if k != "age"}], rows * 2, rows[0], [],
                  [{**rows[0], "score": 72.4}], [{**rows[0], "age": True}]):
        g = grade(wrong)
        assert g.score == 0.0 and g.format_ok, wrong
    assert grade("not json").format_ok is False


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
def test_extraction_normalisation():
    assert normalise_value("number", "$1,234.50") == normalise_value("number", "1234.5")
    assert normalise_value("number", "85.25 or 77.50") is None
    assert normalise_value("number", "85.25.") is not None
    assert normalise_value("date", "2024-04-04.") == "2024-04-04"
    assert normalise_value("date", "04/04/2024") is None
    assert normalise_value("text", ' "Dana   SMITH". ') == "dana smith"
    assert normalise_value("text", "") is None


def test_extraction_reader():
    fields = {"total": ("number", "85.25", "77.50", ""), "due_date": ("date", "2024-04-04", "2024-03-05", ""),
              "customer": ("text", "Dana Smith", "Acme", "")}
    both = ["total", "customer"]
    assert grade_fields("total: 85.25\ncustomer: Dana Smith", both, fields).score == 1.0
    assert grade_fields("Customer: dana smith\n\nTOTAL: $85.250", both, fields).score == 1.0
    assert grade_fields("85.25", ["total"], fields).score == 1.0
    assert grade_fields("Answer: 85.25", ["total"], fields).score == 1.0
    # the answer policy (llm_gym.grading): working around the field lines, a restatement, markup
    for good in ["The total is the last line.\ntotal: 85.25\ncustomer: Dana Smith",
                 "total: 85.25\ncustomer: Dana Smith\nCheck: 77.50 + 7.75 = 85.25.",
                 "total: 85.25\ntotal: 85.25\ncustomer: Dana Smith", "**total: 85.25**\n- customer: Dana Smith"]:
        assert grade_fields(good, both, fields).score == 1.0, good
    for bad, fmt in [("total: 77.50\ncustomer: Dana Smith", True), ("total: 85.25", False),
                     ("total: 85.25\ntotal: 77.50\ncustomer: Dana Smith", False),
                     ("total: 85.25\ncustomer: Dana Smith\nOr maybe total: 77.50", False),
                     ("total: 85.25\ncustomer: Dana Smith\ndue_date: 2024-04-04", False),
                     ("total: 85.25 or 77.50\ncustomer: Dana Smith", False),
                     ("85.25\nDana Smith", False), ("", False)]:
        g = grade_fields(bad, both, fields)
        assert g.score == 0.0 and g.format_ok is fmt, bad
    assert grade_fields("2024-03-05", ["due_date"], fields).score == 0.0
    # one field, a bare value amid reasoning: read when every value-shaped line agrees
    assert grade_fields("The total is the last line of the invoice.\n\n**85.25**", ["total"], fields).score == 1.0
    assert grade_fields("Dana Smith\n\nI read it off the Bill to line.", ["customer"], fields).score == 1.0
    for bad in ["85.25\nDana Smith", "77.50\n\nActually, the total is this:\n85.25",
                "85.25\n\nOr maybe it is the subtotal."]:
        assert grade_fields(bad, ["total"], fields).status in ("conflicting", "hedged"), bad


def test_extraction_documents_hold_answer_and_distractor():
    src = ExtractionSource(renderer=CHATML, num_fields=4)
    for seed in range(60):
        env = src.make_env(np.random.default_rng(seed))
        doc = env.task["document"]
        for key, (kind, value, distractor, _) in env.task["fields"].items():
            assert value in doc.replace(",", "") or value in doc
            assert (distractor in doc or distractor in doc.replace(",", "")), (key, distractor)
            assert normalise_value(kind, value) != normalise_value(kind, distractor)


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
        episode = env.unwrapped.current_env
        _, reward, terminated, _, info = env.step(np.array(reply_tokens(CHATML, episode.answer)))
        assert terminated and reward == 1.0 and info["metrics"]["correct"] == 1.0
        env.reset(seed=seed)
        _, reward, *_ = env.step(np.array(reply_tokens(CHATML, episode.task.get("csv", "no"))))
        assert reward <= 0.0
    env.close()
