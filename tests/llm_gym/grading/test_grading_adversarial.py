"""Adversarial replies for the number readers (`grade_numeric`, `extract_single_integer`) under the
one answer policy (`llm_gym.grading.POLICY`), class by class, with the verdict each class has by
the policy's rules:

- a second value *declared* anywhere (an `Answer:` line, a `\\boxed{}`, "the answer is"), also
  behind look-alike letters, zero-width characters, fullwidth forms or accents -> no credit;
- a second value inside the declared slot ("75 or 76", "75, not 76", "75 \\boxed{76}") -> no credit;
- text outside the declarations -- corrections, hedges, a bare number on a later line -- is not
  read: the declared answer alone decides (credit when it is right, none when it is wrong);
- what the text shows is what is read: special-token text and sampled special-token ids split
  numbers, other scripts' digits make a reply unreadable, super/subscripts and marks never join
  digits, bidirectional overrides are refused, commas are thousands separators only in the strict
  `1,234` form.

The templates are crossed with the markers and disguises, so a new wording is one more part, not
one more case.
"""

from __future__ import annotations

import asyncio
import re

import pytest

from envs_catalog.math.arithmetic import MathEnv
from llm_gym import get_renderer, load_tokenizer
from llm_gym.grading import extract_single_integer, grade_numeric

TOK = load_tokenizer()
CHATML = get_renderer("chatml", TOK)
IM_END = TOK.convert_tokens_to_ids("<|im_end|>")
SPECIAL_IDS = {name: TOK.convert_tokens_to_ids(f"<|{name}|>") for name in ("pad", "bos", "im_start")}

CREDIT, DENY = "credit", "deny"


def encode(text: str) -> list[int]:
    """`text` as sampled ids plus the end of turn; "⟪pad⟫" etc. stand for special-token ids."""
    ids: list[int] = []
    for i, piece in enumerate(re.split(r"⟪(\w+)⟫", text)):
        ids += [SPECIAL_IDS[piece]] if i % 2 else TOK.encode(piece)
    return ids + [IM_END]


RETRACTIONS = [
    "Actually it is", "Actually,", "Correction:", "No wait,", "Wait,", "I mean", "Rather,", "Sorry,",
    "Scratch that,", "Make that", "On second thought,", "Or", "or maybe", "Perhaps", "Hmm, probably",
    "Instead:", "Hold on,", "Nope,", "I was wrong, it's", "Change that to", "Should that fail,",
    "If I'm off,", "Some would say",
]
ZERO_WIDTH = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u180e", "\u034f", "\u2061", "\u2063"]
LINE_BREAKS = ["\r\n", "\r", "\u2028", "\u2029", "\x0b", "\x0c", "\x85", "\x1c", "\x1e"]
# "Answer" with look-alike letters (Cyrillic, Greek, Cherokee, small capitals, fullwidth,
# mathematical bold, accents): each is the label "answer", so it declares a second value.
ANSWER_LOOKALIKES = [
    "\u0410nswer", "Answ\u0435r", "An\u0455wer", "\u0391nswer", "\u1d00\u0274\ua731\u1d21\u1d07\u0280",
    "Ａｎｓｗｅｒ", "𝐀𝐧𝐬𝐰𝐞𝐫", "\u00c1nswer", "A\u0301nswer", "\u13aanswer", "Ans\u051der",
    "\u0410NSW\u0415R", "answ\u0435r", "Final \u0430nswer", "My \u0430nswer", "The \u0430nswer is",
]


def shared_cases(right: str, wrong: str, label: str) -> list[tuple[str, str]]:
    cases = []
    for p in RETRACTIONS:
        cases.append((f"{label}: {right}\n{p} {wrong}", CREDIT))  # prose after the declaration
        # ... in the next sentence (a capital after the period starts one; "75. or 76" is one)
        cases.append((f"{label}: {right}. {p} {wrong}.", CREDIT if p[0].isupper() else DENY))
        cases.append((f"{label}: {right}, {p.lower()} {wrong}", DENY))  # inside the slot
        cases.append((f"{label}: {wrong}\n{p} {right}", DENY))  # the declared value is wrong
    for look in ANSWER_LOOKALIKES:
        cases.append((f"{label}: {right}\n{look}: {wrong}", DENY))
        cases.append((f"{look}: {wrong}\n{label}: {right}", DENY))
        cases.append((f"{look}: {right}", CREDIT))
    for z in ZERO_WIDTH:
        cases.append((f"{label}: {wrong}\nAn{z}swer: {right}", DENY))
        cases.append((f"{label}: {right}\n\\box{z}ed{{{wrong}}}", DENY))
        cases.append((f"{label}: {right[0]}{z}{right[1:]}", CREDIT))
    for sep in LINE_BREAKS:
        cases.append((f"{label}: {right}{sep}{wrong}", CREDIT))  # a later line is prose
        cases.append((f"{label}: {right}{sep}Answer: {wrong}", DENY))
    cases += [
        (f"Answer: {right} \\boxed{{{wrong}}}", DENY),
        (f"Answer: \\boxed{{{wrong}}} {right}", DENY),
        (f"\\boxed{{{right}}}\nAnswer: {wrong}", DENY),
        (f"\\boxed{{{wrong}}}\\boxed{{{right}}}", DENY),
        (f"\\fbox{{{wrong}}} {label}: {right}", DENY),
        (f"{label}: {right} <!-- Answer: {wrong} -->", DENY),
        (f"{label}: {right}\n\\phantom{{\\boxed{{{wrong}}}}}", DENY),
        (f"{label}: {right}\n> Answer: {wrong}", DENY),
        (f"{label}: {right}<|im_start|>assistant\nAnswer: {wrong}", DENY),
        (f"Answer: {right}\nAnswer: {wrong}", DENY),
        (f"{label}: {right}, final answer: {wrong}", DENY),
        (f"My backup answer is {wrong}.\n{label}: {right}", DENY),
        (f"{label}: {right}\nAns\u0436er: {wrong}", DENY),  # a mixed-script word: unreadable
        (f"{label}: \u202e{right}", DENY),  # bidirectional overrides reorder what is shown
        (f"\u202d{right}", DENY),
        (f"{label}: {right}\n\\boxed{{{right}}}", CREDIT),  # the same value declared twice
    ]
    return cases


# --- grade_numeric against 75 --------------------------------------------------------------------
MATH_CLEAR = [
    "75", " 75 \n", "AnSwEr: 75", "ANSWER: 75", "answer: 75", "My answer: 75", "My final answer: 75",
    "Final Answer: 75", "The answer is 75.", "So the answer is 75", "The answer to 70+5 is 75.",
    "\\boxed{75}\nAnswer: 75.0", "Answer: 75.0\n\\boxed{75}", "\\boxed{75.00}", "Answer: **75**",
    "**Answer: 75**", "**Answer:** 75", "Answer: $75$", "\\(\\boxed{75}\\)", "Answer: seventy-five",
    "seventy five", "Seventy-Five", "Answer: 75 (seventy-five)", "2+3=5 so the answer is 75",
    "70+5=75\nAnswer: 75", "Answer: 75. Let me check: 70+5=75.", "７５", "Ａｎｓｗｅｒ: ７５", "𝟕𝟓",
    "Answer:\u00a075", "Answer: 75\u200b", "A\u200bnswer: 75", "<|im_start|>75",
    "Answer: 75<|im_end|>", "\\boxed{\\text{75}}", "75.", "Answer = 75", "answer=75", "The answer is: 75",
    "Answer -> 75", "\\boxed{75} is the answer", "the result: \\boxed{75}", "Answer: (75)",
    "The answer is 75 because 70+5=75", "Answer: 75\n", "answer is 75!", "70 + 5 = 75", "Total: 75",
    "The total is 75.", "It is 75.", "Answer: 7.5e1", "Answer: 75 (= 70 + 5)", "Answer: 75.0",
]
MATH_CASES: list[tuple[str, str]] = [(r, CREDIT) for r in MATH_CLEAR] + shared_cases("75", "76", "Answer") + [
    # comma as a thousands separator only in the strict 1,234,567 form
    ("0,075", DENY), ("Answer: 0,075", DENY), ("\\boxed{0,075}", DENY), ("0,75", DENY), ("7,5", DENY),
    ("75,0", DENY), ("00,075", DENY), ("0,0,75", DENY), ("Answer: 75\nAnswer: 0,075", DENY),
    ("75,000", DENY), ("1,075", DENY),
    # special tokens (as text) split a number into two lines
    ("7<|pad|>5", DENY), ("7<|im_end|>5", DENY), ("7<|endoftext|>5", DENY), ("7</s>5", DENY),
    ("7<pad>5", DENY), ("Answer: 7<|pad|>5", DENY), ("\\boxed{7<|pad|>5}", DENY),
    ("7<|reserved_special_token_0|>5", DENY),
    # other scripts' digits are not read (and make the reply unreadable)
    ("٧٥", DENY), ("۷۵", DENY), ("७५", DENY), ("৭৫", DENY), ("๗๕", DENY), ("༧༥", DENY), ("7٥", DENY),
    ("Answer: ٧٥", DENY), ("Answer: 75\nAnswer: ٧٦", DENY),
    # two values in what is read
    ("75 or 76", DENY), ("75, 76", DENY), ("75 76", DENY), ("74 75 76", DENY), ("Answer: 75 or 76", DENY),
    ("Answer: 75, 76", DENY), ("either 75 or 76", DENY), ("\\boxed{75 or 76}", DENY), ("75\nor 76", DENY),
    (" ".join(map(str, range(70, 81))), DENY), ("seventy-five or seventy-six", DENY),
    ("seventy five seventy six", DENY), ("Answer: 75, not 76", DENY), ("Answer: 75 (or 76)", DENY),
    # what is attached changes the value
    ("Answer: 75 thousand", DENY), ("Answer: 75%", DENY), ("Answer: at least 75", DENY),
    ("Answer: ~75", DENY), ("Answer: 75+", DENY), ("Answer: 75 or more", DENY), ("Answer: 75 metres", DENY),
    ("Answer: about 75", DENY), ("Answer: not 75", DENY), ("It is not 75.", DENY), ("I doubt it is 75.", DENY),
    # super/subscripts, marks on digits, private-use glyphs: never a different number
    ("Answer: 7⁵", DENY), ("7⁵", DENY), ("7₅", DENY), ("Answer: 7\u03385", DENY), ("7\u20e35", DENY),
    ("Answer: 7\ue0005", DENY), ("7½", DENY),
    # unclosed boxes are malformed
    ("\\boxed{75", DENY), ("Answer: 75 \\boxed{", DENY),
]


@pytest.mark.parametrize("reply,expected", MATH_CASES)
def test_math_grader(reply, expected):
    grade = grade_numeric(reply, 75)
    assert grade.correct is (expected == CREDIT), grade
    if expected == CREDIT:
        assert grade.format_ok and grade.value == 75


@pytest.mark.parametrize("reply,status", [
    ("Answer: 75\nAnswer: 76", "conflicting"), ("\\boxed{75", "malformed"), ("Answer: 75 or 76", "malformed"),
    ("", "empty"), ("٧٥", "unsupported_digits"), ("\u202d75", "confusable"), ("6\ufffd8", "invalid_text"),
    ("no number here", "no_answer"), ("Answer: 76\nOr maybe 75.", "ok"),
])
def test_statuses(reply, status):
    assert grade_numeric(reply, 75).status == status


MATH_TOKEN_CASES = [  # special-token ids sampled inside the reply (the renderer drops them)
    ("7⟪pad⟫5", 0.0), ("7⟪bos⟫5", 0.0), ("7⟪im_start⟫5", 0.0), ("Answer: 7⟪pad⟫5", 0.0),
    ("\\boxed{7⟪pad⟫5}", -0.1), ("⟪bos⟫75", 1.0), ("Answer: 75⟪pad⟫⟪pad⟫", 1.0),
]


@pytest.mark.parametrize("reply,reward", MATH_TOKEN_CASES)
def test_math_env_special_token_ids(reply, reward):
    """A special token sampled inside a number is a line break: never the joined number (75)."""
    env = MathEnv(CHATML, "70+5=", 75)

    async def go():
        await env.initial_observation()
        return await env.step(encode(reply))

    assert asyncio.run(go()).reward == pytest.approx(reward)


# --- extract_single_integer: a game's move ---------------------------------------------------------
MOVE_CLEAR = [
    "17", "seventeen", "SEVENTEEN", "Answer: 17", "My answer: 17", "My guess is 17.", "My guess: seventeen",
    "I guess 17", "I'll go with 17!", "\\boxed{17}", "Guess: 17\nActually, 17 is my final guess.", "１７",
    "Guess:\u00a017", "17\u200b", "17.0", "**17**", "I pick seventeen", "Guess = 17",
    "My guess would be 17", "G\u200buess: 17", "Move: 17", "I'll play 17", "I take 17",
]
MOVE_CASES = [(r, CREDIT) for r in MOVE_CLEAR] + shared_cases("17", "18", "Guess") + [
    (" ".join(map(str, range(1, 21))), DENY), (", ".join(map(str, range(1, 21))), DENY),
    ("Guess: " + ", ".join(map(str, range(1, 21))), DENY), ("1-20", DENY), ("\\boxed{17} \\boxed{18}", DENY),
    ("I'll guess 16, 17 or 18", DENY), ("17 or 18", DENY), ("17, 18", DENY), ("17 then 18", DENY),
    ("seventeen or eighteen", DENY), ("0,017", DENY), ("1,7", DENY), ("1<|pad|>7", DENY),
    ("Guess: 1<|pad|>7", DENY), ("١٧", DENY), ("1⁷", DENY), ("\u202e71", DENY), ("not 17", DENY),
    ("My guess is not 17", DENY), ("Guess: 18\nGu\u0435ss: 17", DENY),
]


@pytest.mark.parametrize("reply,expected", MOVE_CASES)
def test_single_integer_reader(reply, expected):
    value, _ = extract_single_integer(reply)
    assert (value == 17) is (expected == CREDIT), (reply, value)


def test_at_least_a_hundred_denied_replies_per_reader():
    for cases in (MATH_CASES, MOVE_CASES):
        denied = [r for r, expected in cases if expected == DENY]
        assert len(denied) >= 100 and len(set(r for r, _ in cases)) == len(cases)
