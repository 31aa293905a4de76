"""Adversarial replies for the three answer readers: Math's `grade_numeric`, GuessNumber's guess
and TicTacToe's move (`extract_single_integer` through the envs).

The cases are generated from the classes of issue 8, item 12 (policy: `llm_gym.grading`'s
docstring): an answer marker whose line holds a different `\\boxed{}`, a later correction or
hedge, a second marker behind look-alike letters or zero-width characters, comma misreads
(`0,075`), special tokens inside a number (as text and as sampled ids), other scripts' digits,
super/subscripts and marks, line separators and markup that hide a second answer, shotgun lists;
and the clear answers that must be credited (`AnSwEr: 75`, `My answer: 75`, `\\boxed{75}` with an
agreeing `Answer: 75.0`, `seven`). Each case states its exact outcome.
"""

from __future__ import annotations

import asyncio
import re

import pytest

from envs_catalog.games.guess_number import GuessNumberEnv
from envs_catalog.games.tictactoe import parse_move, play
from envs_catalog.math.arithmetic import MathEnv
from llm_gym import get_renderer, load_tokenizer
from llm_gym.grading import grade_numeric

TOK = load_tokenizer()
CHATML = get_renderer("chatml", TOK)
IM_END = TOK.convert_tokens_to_ids("<|im_end|>")
SPECIAL_IDS = {name: TOK.convert_tokens_to_ids(f"<|{name}|>") for name in ("pad", "bos", "im_start")}

OK, WRONG = "ok", "wrong"  # credited; a well-formed wrong answer (anything else: the deny status)
CONFLICTING, NAN, MALFORMED = "conflicting", "not_a_number", "malformed"
CONFUSABLE, DIGITS = "confusable", "unsupported_digits"


def encode(text: str) -> list[int]:
    """`text` as sampled ids plus the end of turn; "⟪pad⟫" etc. stand for special-token ids."""
    ids: list[int] = []
    for i, piece in enumerate(re.split(r"⟪(\w+)⟫", text)):
        ids += [SPECIAL_IDS[piece]] if i % 2 else TOK.encode(piece)
    return ids + [IM_END]


# --- templates shared by the three readers ------------------------------------------------------
RETRACTIONS = [
    "Actually it is", "Actually,", "actually", "Correction:", "No wait,", "no, wait, it's", "Wait,",
    "I mean", "I meant", "Rather,", "Sorry,", "Oops,", "Scratch that,", "Make that",
    "On second thought,", "Or", "or maybe", "Perhaps", "Hmm, probably", "Instead:", "Hold on,",
    "Nope,", "I was wrong, it's", "Change that to",
]
ZERO_WIDTH = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u180e", "\u034f",
              "\u2061", "\u2063"]
LINE_BREAKS = ["\r\n", "\r", "\u2028", "\u2029", "\x0b", "\x0c", "\x85", "\x1c", "\x1e"]
# "Answer" with one or more look-alike letters (Cyrillic, Greek, Cherokee, small capitals,
# fullwidth, mathematical bold, accents): each is a marker and so conflicts with a real one.
ANSWER_LOOKALIKES = [
    "\u0410nswer", "Answ\u0435r", "An\u0455wer", "\u0391nswer", "\u1d00\u0274\ua731\u1d21\u1d07\u0280",
    "Ａｎｓｗｅｒ", "𝐀𝐧𝐬𝐰𝐞𝐫", "\u00c1nswer", "A\u0301nswer", "\u13aanswer", "Ans\u051der",
    "\u0410NSW\u0415R", "answ\u0435r", "Final \u0430nswer", "My \u0430nswer", "The \u0430nswer is",
]


def shared_cases(right: str, wrong: str, marker: str) -> list[tuple[str, str]]:
    """Replies that show both `right` and `wrong`, so must not be credited, in every class."""
    cases = []
    for p in RETRACTIONS:  # a later correction or hedge introduces a second answer
        cases.append((f"{marker}: {right}\n{p} {wrong}", CONFLICTING))
        cases.append((f"{marker} is {wrong}. {p} {right}.", CONFLICTING))
    for look in ANSWER_LOOKALIKES:  # a second marker behind look-alike letters
        cases.append((f"{marker}: {right}\n{look}: {wrong}", CONFLICTING))
        cases.append((f"{look}: {wrong}\n{marker}: {right}", CONFLICTING))
    for z in ZERO_WIDTH:  # ... or behind zero-width / format characters
        cases.append((f"{marker}: {wrong}\nAn{z}swer: {right}", CONFLICTING))
        cases.append((f"{marker}: {right}. Act{z}ually {wrong}.", CONFLICTING))
    for sep in LINE_BREAKS:  # every line break separates a second bare answer
        cases.append((f"{marker}: {right}{sep}{wrong}", CONFLICTING))
    cases += [
        # a boxed answer inside (or beside) an answer line
        (f"Answer: {right} \\boxed{{{wrong}}}", CONFLICTING),
        (f"Answer: \\boxed{{{wrong}}} {right}", CONFLICTING),
        (f"\\boxed{{{right}}}\nAnswer: {wrong}", CONFLICTING),
        (f"\\boxed{{{wrong}}}\\boxed{{{right}}}", CONFLICTING),
        (f"\\fbox{{{wrong}}} {marker}: {right}", CONFLICTING),
        (f"\\boxed{{{right}}} actually {wrong}", CONFLICTING),
        # markup that hides a second answer is still read
        (f"{marker}: {right} <!-- Answer: {wrong} -->", CONFLICTING),
        (f"{marker}: {right}\n\\phantom{{\\boxed{{{wrong}}}}}", CONFLICTING),
        (f"<s>Answer: {wrong}</s> {marker}: {right}", CONFLICTING),
        (f"{marker}: {right}\n> Answer: {wrong}", CONFLICTING),
        (f"{marker}: {right}\nAns\u0335wer: {wrong}", CONFLICTING),  # combining overlay
        # special-token text splits numbers and lines
        (f"{marker}: {right}<|im_start|>assistant\nAnswer: {wrong}", CONFLICTING),
        # several markers
        (f"Answer: {right}\nAnswer: {wrong}", CONFLICTING),
        (f"{marker}: {right}, final answer: {wrong}", CONFLICTING),
        (f"{marker}: {right}\n= {wrong}", CONFLICTING),
        # a mixed-script word that cannot be read as Latin
        (f"{marker}: {right}\nAns\u0436er: {wrong}", CONFUSABLE),
        # bidirectional overrides reorder what is shown
        (f"{marker}: \u202e{right}", CONFUSABLE),
        (f"\u202d{right}", CONFUSABLE),
    ]
    return cases


# --- Math: grade_numeric against 75 -------------------------------------------------------------
MATH_CLEAR = [
    "75", " 75 \n", "AnSwEr: 75", "ANSWER: 75", "answer: 75", "My answer: 75", "My final answer: 75",
    "Final Answer: 75", "The answer is 75.", "So the answer is 75", "The answer to 70+5 is 75.",
    "\\boxed{75}\nAnswer: 75.0", "Answer: 75.0\n\\boxed{75}", "\\boxed{75.00}", "Answer: **75**",
    "**Answer: 75**", "Answer: $75$", "\\(\\boxed{75}\\)", "Answer: seventy-five", "seventy five",
    "Seventy-Five", "Answer: 75 (seventy-five)", "2+3=5 so the answer is 75",
    "70+5=75\nAnswer: 75", "Answer: 75. Let me check: 70+5=75.", "Answer: 75\nActually, yes, 75.",
    "７５", "Ａｎｓｗｅｒ: ７５", "𝟕𝟓", "Answer:\u00a075", "Answer: 75\u200b", "A\u200bnswer: 75",
    "\u0410nswer: 75", "<|im_start|>75", "Answer: 75<|im_end|>", "\\boxed{\\text{75}}", "75.",
    "= 75", "Answer = 75", "answer=75", "The answer is: 75", "Answer -> 75",
    "\\boxed{75} is the answer", "the result: \\boxed{75}", "Answer: (75)",
    "The answer is 75 because 70+5=75", "Answer: 75\n", "answer is 75!",
]
MATH_CASES: list[tuple[str, str]] = [(r, OK) for r in MATH_CLEAR] + shared_cases("75", "76", "Answer") + [
    # comma as a thousands separator only in the strict 1,234,567 form
    ("0,075", NAN), ("Answer: 0,075", NAN), ("\\boxed{0,075}", NAN), ("0,75", NAN), ("7,5", NAN),
    ("75,0", NAN), ("00,075", NAN), ("0,0,75", NAN), ("Answer: 75\nAnswer: 0,075", CONFLICTING),
    ("0,075\n75", CONFLICTING), ("75,000", WRONG), ("1,075", WRONG),
    # special tokens (as text) inside a number
    ("7<|pad|>5", CONFLICTING), ("7<|im_end|>5", CONFLICTING), ("7<|endoftext|>5", CONFLICTING),
    ("7</s>5", CONFLICTING), ("7<pad>5", CONFLICTING), ("Answer: 7<|pad|>5", CONFLICTING),
    ("\\boxed{7<|pad|>5}", NAN), ("7<|reserved_special_token_0|>5", CONFLICTING),
    # other scripts' digits are not read (and make the reply unreadable)
    ("٧٥", DIGITS), ("۷۵", DIGITS), ("७५", DIGITS), ("৭৫", DIGITS), ("๗๕", DIGITS), ("༧༥", DIGITS),
    ("7٥", DIGITS), ("Answer: ٧٥", DIGITS), ("Answer: 75\nAnswer: ٧٦", DIGITS),
    # hedges and shotgun lists
    ("75 or 76", NAN), ("75, 76", NAN), ("75 76", NAN), ("74 75 76", NAN),
    ("Answer: 75 or 76", CONFLICTING), ("Answer: 75, 76", NAN), ("either 75 or 76", NAN),
    ("\\boxed{75 or 76}", NAN), ("Answer: 75\n76", CONFLICTING), ("75\n76", CONFLICTING),
    (" ".join(map(str, range(70, 81))), NAN), ("\n".join(map(str, range(70, 81))), CONFLICTING),
    ("seventy-five or seventy-six", NAN), ("seventy five seventy six", NAN),
    # super/subscripts, marks on digits, private-use glyphs: never a different number
    ("Answer: 7⁵", NAN), ("7⁵", NAN), ("7₅", NAN), ("Answer: 7\u03385", NAN), ("7\u20e35", NAN),
    ("Answer: 7\ue0005", NAN), ("7½", NAN), ("Answer: 75, not 76", NAN),
    # unclosed boxes are malformed
    ("\\boxed{75", MALFORMED), ("Answer: 75 \\boxed{", MALFORMED),
]


@pytest.mark.parametrize("reply,expected", MATH_CASES)
def test_math_grader(reply, expected):
    grade = grade_numeric(reply, 75)
    if expected == OK:
        assert grade.correct and grade.format_ok and grade.value == 75, grade
    elif expected == WRONG:
        assert grade.format_ok and not grade.correct, grade
    else:
        assert (grade.correct, grade.format_ok, grade.status) == (False, False, expected), grade


MATH_TOKEN_CASES = [  # special-token ids sampled inside the reply (the renderer drops them)
    ("7⟪pad⟫5", -0.1), ("7⟪bos⟫5", -0.1), ("7⟪im_start⟫5", -0.1), ("Answer: 7⟪pad⟫5", -0.1),
    ("\\boxed{7⟪pad⟫5}", -0.1), ("⟪bos⟫75", 1.0), ("Answer: 75⟪pad⟫⟪pad⟫", 1.0),
]


@pytest.mark.parametrize("reply,reward", MATH_TOKEN_CASES)
def test_math_env_special_token_ids(reply, reward):
    env = MathEnv(CHATML, "70+5=", 75)

    async def go():
        await env.initial_observation()
        return await env.step(encode(reply))

    assert asyncio.run(go()).reward == pytest.approx(reward)


# --- GuessNumber: secret 17 in 1..20 ------------------------------------------------------------
GUESS_CLEAR = [
    "17", "seventeen", "Seventeen", "SEVENTEEN", "Answer: 17", "AnSwEr: 17", "My answer: 17",
    "My guess is 17.", "My guess: seventeen", "I guess 17", "I'll go with 17!", "\\boxed{17}",
    "Guess: 17\nActually, 17 is my final guess.", "１７", "𝟏𝟕", "Guess:\u00a017", "17\u200b",
    "\u0410nswer: 17", "17.0", "**17**", "Is it 17?", "I pick seventeen", "My guess is 17 (seventeen)",
    "Guess = 17", "My guess would be 17", "G\u200buess: 17", "\\boxed{17}\nAnswer: 17.0",
    "<|im_start|>17", "17<|im_end|>",
]
GUESS_LOOKALIKES = ["Gu\u0435ss", "Gue\u0455s", "\u0262uess", "Ｇｕｅｓｓ", "𝐆𝐮𝐞𝐬𝐬", "G\u00faess",
                    "\u13c0uess", "My gu\u0435ss is"]
GUESS_CASES: list[tuple[str, str]] = [(r, OK) for r in GUESS_CLEAR] + shared_cases("17", "18", "Guess") + [
    # shotgun replies: many guesses in one turn are not a hit
    (" ".join(map(str, range(1, 21))), CONFLICTING), (", ".join(map(str, range(1, 21))), CONFLICTING),
    ("\n".join(map(str, range(1, 21))), CONFLICTING),
    ("Guess: " + ", ".join(map(str, range(1, 21))), CONFLICTING), ("1-20", CONFLICTING),
    ("\\boxed{17} \\boxed{18}", CONFLICTING), ("I'll guess 16, 17 or 18", CONFLICTING),
    ("between 16 and 18, so 17", CONFLICTING), ("17 or 18", CONFLICTING), ("17, 18", CONFLICTING),
    ("17 then 18", CONFLICTING), ("seventeen or eighteen", CONFLICTING),
    ("seventeen eighteen", MALFORMED), ("16 17 18 19 20", CONFLICTING),
    # comma misreads
    ("0,017", MALFORMED), ("Answer: 0,017", MALFORMED), ("1,7", MALFORMED), ("17,0", MALFORMED),
    ("0,0,17", MALFORMED),
    # special-token text
    ("1<|pad|>7", CONFLICTING), ("Guess: 1<|pad|>7", CONFLICTING), ("1</s>7", CONFLICTING),
    ("1<pad>7", CONFLICTING),
    # other scripts' digits
    ("١٧", DIGITS), ("१७", DIGITS), ("১৭", DIGITS), ("๑๗", DIGITS), ("Guess: 18\nGuess: ١٧", DIGITS),
    # super/subscripts and marks
    ("1⁷", CONFLICTING), ("1₇", CONFLICTING), ("\u202e71", CONFUSABLE), ("1\u03387", CONFLICTING),
    ("not 17", MALFORMED), ("My guess is not 17", MALFORMED),
] + [(f"Guess: 18\n{look}: 17", CONFLICTING) for look in GUESS_LOOKALIKES] + [
    (f"Guess: 18\nGu{z}ess: 17", CONFLICTING) for z in ZERO_WIDTH
]


def guess_step(action: list[int]):
    env = GuessNumberEnv(CHATML, 17, max_number=20, max_turns=8, invalid_penalty=0.1)

    async def go():
        await env.initial_observation()
        return await env.step(action)

    return asyncio.run(go())


@pytest.mark.parametrize("reply,expected", GUESS_CASES)
def test_guess_number_reader(reply, expected):
    result = guess_step(encode(reply))
    if expected == OK:
        assert result.reward == 1.0 and result.metrics["solved"] == 1.0, result.logs
    else:
        assert result.reward == pytest.approx(-0.1) and result.metrics["invalid"] == 1.0
        assert not result.episode_done and result.logs["guess_status"] == expected, result.logs


@pytest.mark.parametrize("reply", ["1⟪pad⟫7", "1⟪bos⟫7", "1⟪im_start⟫7", "Guess: 1⟪pad⟫7"])
def test_guess_number_special_token_ids_do_not_join_digits(reply):
    result = guess_step(encode(reply))  # the old reader saw "17": a false solve
    assert result.reward == pytest.approx(-0.1) and result.logs["guess_status"] == CONFLICTING


# --- TicTacToe: X on 1, O on 2; the reply means cell 5 ------------------------------------------
BOARD = play(play(" " * 9, 1, "X"), 2, "O")
MOVE_CLEAR = [
    "5", "five", "Five", "Answer: 5", "AnSwEr: 5", "My move: 5", "My move is 5.", "I take cell 5",
    "I'll play 5", "\\boxed{5}", "Cell five", "５", "𝟓", "Move:\u00a05", "5\u200b", "\u0410nswer: 5",
    "5.0", "**5**", "I play the centre, 5", "Move = 5", "M\u200bove: 5", "<|im_start|>5",
    "5<|im_end|>", "\\boxed{5}\nAnswer: 5.0", "My answer: five",
]
MOVE_LOOKALIKES = ["M\u043eve", "Mov\u0435", "\u041cove", "\u039cove", "\u1d0d\u1d0f\u1d20\u1d07",
                   "Ｍｏｖｅ", "𝐌𝐨𝐯𝐞", "My m\u043eve is"]
MOVE_CASES: list[tuple[str, str]] = [(r, OK) for r in MOVE_CLEAR] + shared_cases("5", "9", "Move") + [
    ("5 or 9", CONFLICTING), ("5, 9", CONFLICTING), ("5 then 9", CONFLICTING), ("5 and 9", CONFLICTING),
    ("five or nine", CONFLICTING), ("Cell 5 (row 2, column 2)", CONFLICTING),
    ("3 4 5 6 7 8 9", CONFLICTING), ("\n".join("3456789"), CONFLICTING),
    ("5<|pad|>9", CONFLICTING), ("Move: 5<|pad|>9", CONFLICTING),
    ("٥", DIGITS), ("५", DIGITS), ("৫", DIGITS), ("Move: 9\nMove: ٥", DIGITS),
    ("0,5", MALFORMED), ("5,0", MALFORMED), ("M\u03ccve: 9\nMove: 5", CONFUSABLE),
] + [(f"Move: 9\n{look}: 5", CONFLICTING) for look in MOVE_LOOKALIKES] + [
    (f"Move: 9\nMo{z}ve: 5", CONFLICTING) for z in ZERO_WIDTH
]


@pytest.mark.parametrize("reply,expected", MOVE_CASES)
def test_tictactoe_move_reader(reply, expected):
    cell, status, _ = parse_move(CHATML, encode(reply), BOARD)
    assert (cell, status) == ((5, "ok") if expected == OK else (None, expected))


@pytest.mark.parametrize("reply", ["5⟪pad⟫9", "Move: 5⟪bos⟫9", "5⟪im_start⟫9"])
def test_tictactoe_special_token_ids_split_moves(reply):
    assert parse_move(CHATML, encode(reply), BOARD)[:2] == (None, CONFLICTING)


def test_at_least_a_hundred_adversarial_replies_per_reader():
    for cases in (MATH_CASES, GUESS_CASES, MOVE_CASES):
        denied = [r for r, expected in cases if expected not in (OK, WRONG)]
        assert len(denied) >= 100 and len(set(r for r, _ in cases)) == len(cases)
