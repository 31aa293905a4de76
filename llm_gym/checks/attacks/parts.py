"""The parts attack replies are built from: how an answer is declared, what stands around it,
what joins a second value to it, what bounds or scales it, and how it can be disguised.

Each part says what it does to the verdict, so a reply built from parts carries its expected
verdict by construction (`llm_gym.checks.attacks.suite`), never by asking a reader:

- `DECLARATIONS`: templates that declare the slot `{x}` as the reply's answer under the policy of
  `llm_gym.grading.policy` (a label, a box, a sentence) -- the slot is what is graded;
- `STATEMENTS`: undeclared last lines that state the slot with a lead-in the policy's grammar
  admits ("Total: {x}") -- graded as the slot;
- `DOUBTED`: lead-ins that deny or doubt the value ("It is not {x}") -- never credit;
- `CONNECTIVES`: ways to offer a second value inside the slot ("{x} or {y}") -- never credit;
- `BOUND_PREFIXES`/`BOUND_SUFFIXES`: make a value a range ("at least {x}") -- never credit;
  `APPROX_PREFIXES`/`APPROX_SUFFIXES` ("about {x}") -- a range for an exact answer, the value for
  one graded within a tolerance;
- `WORKING` / `AFTERWORD`: prose before or after a declared answer, some of it holding other
  values and hedges -- text outside declarations, which the policy never reads;
- `DISGUISES`: rewrites a reader must see through (zero-width characters, look-alike letters,
  fullwidth digits, no-break spaces) -- the verdict of the undisguised reply; `BREAKERS`:
  rewrites that change what is shown (bidirectional overrides, a special token inside the
  value) -- never credit.
"""

from __future__ import annotations

import random
from typing import Callable

# A declaration of the slot {x}; "block" ones suit answers that span lines.
DECLARATIONS: dict[str, str] = {
    "answer line": "Answer: {x}",
    "final answer bold": "**Final answer:** {x}",
    "answer sentence": "The answer is {x}.",
    "my answer": "My final answer is {x}",
    "boxed": "\\boxed{{{x}}}",
    "answer boxed": "Final answer: $\\boxed{{{x}}}$",
    "answer heading": "### Answer\n{x}",
    "answer colon next line": "The answer is:\n\n{x}",
    "answer lower": "answer: {x}",
    "answer equals": "Answer = {x}",
}
BLOCK_DECLARATIONS: dict[str, str] = {
    "answer block": "Answer:\n{x}",
    "final answer block": "**Final answer:**\n{x}",
    "answer heading": "### Answer\n{x}",
    "answer fenced": "Answer:\n```\n{x}\n```",
}
# Undeclared last lines: {lead} is a word of the task or the contract ("Total", "Result").
STATEMENTS: dict[str, str] = {
    "bare": "{x}",
    "label": "{Lead}: {x}",
    "copula": "The {lead} is {x}.",
    "so copula": "So the {lead} is {x}.",
    "it is": "It is {x}.",
    "therefore": "Therefore, {x}.",
    "bold bare": "**{x}**",
    "math bare": "${x}$",
}
DOUBTED: dict[str, str] = {
    "not": "It is not {x}.",
    "isn't": "The {lead} isn't {x}.",
    "doubt": "I doubt it is {x}.",
    "cannot be": "It cannot be {x}.",
    "anything but": "Anything but {x}.",
    "question": "Could it be {x}?",
    "unsure": "Not sure, {x}?",
}
# Join a second value {y} to {x} inside one slot.
CONNECTIVES: dict[str, str] = {
    "or": "{x} or {y}",
    "or maybe": "{x}, or maybe {y}",
    "slash": "{x}/{y}",
    "and": "{x} and {y}",
    "comma": "{x}, {y}",
    "semicolon": "{x}; {y}",
    "parenthetical or": "{x} (or {y})",
    "if not": "{x}, if not {y}",
    "unless": "{x} unless it is {y}",
    "either": "either {x} or {y}",
    "otherwise": "{x}, otherwise {y}",
    "alternatively": "{x}; alternatively {y}",
    "arrow": "{x} -> {y}",
    "between": "between {x} and {y}",
    "to": "{x} to {y}",
    "then": "{x} then {y}",
    "versus": "{x} vs {y}",
    "probably": "{x}, probably {y}",
    "range dash": "{x}-{y}",
}
BOUND_PREFIXES = ("at least", "at most", "more than", "less than", "over", "under", "nearly", "almost",
                  "up to", "no more than", "no less than", "just over", "just under", ">=", "<=", ">", "<",
                  "≥", "≤", "±")
# (not "min": it is also the minute, a unit a contract may convert)
BOUND_SUFFIXES = ("or more", "or less", "+", "or fewer", "and up", "and above", "and below", "max",
                  "at most", "at least", "or higher", "or lower")
# Approximation marks: a range for an exact answer, the value itself within a tolerance.
APPROX_PREFIXES = ("about", "around", "roughly", "approximately", "approx.", "close to", "~", "≈")
APPROX_SUFFIXES = ("ish", "-ish", "or so", "give or take", "(approximately)", "(approx.)", "(rounded)")
NEGATIONS = ("not", "never", "definitely not", "no")

# Prose around a declared answer. {y} is another value of the kind, {x} the declared one.
WORKING: dict[str, str] = {
    "steps": "Let me work through this step by step.",
    "hedged guess": "Maybe {y}? Let me check that properly.",
    "options": "Option A: {y}. Option B: {x}. Let me decide.",
    "tried": "I first tried {y}, which did not work.",
    "either": "It could be either {y} or {x} at first sight.",
}
AFTERWORD: dict[str, str] = {
    "confident": "I am confident in this.",
    "hedge": "If that is wrong, {y} might work instead.",
    "alternative": "Alternatively, someone might say {y}.",
    "first thought": "{y} was my first thought, though.",
    "second thoughts": "Hmm, on second thought it could be {y}.",
    "backup": "Backup: {y}",
}
# Prose lines that never state a value (for answers read from the last value line).
QUIET_AFTERWORD = ("Hope this helps!", "Let me know if you need more.", "That is my final reply.")


# --- disguises -----------------------------------------------------------------------------------
_ZERO_WIDTH = ("\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad")
_CYRILLIC = {"A": "\u0410", "a": "\u0430", "e": "\u0435", "o": "\u043e", "p": "\u0440", "c": "\u0441",
             "E": "\u0415", "O": "\u041e", "x": "\u0445", "y": "\u0443"}


def _zero_width_in_words(text: str, rng: random.Random) -> str:
    out = []
    for i, c in enumerate(text):
        out.append(c)
        if c.isalnum() and i + 1 < len(text) and text[i + 1].isalnum() and rng.random() < 0.3:
            out.append(rng.choice(_ZERO_WIDTH))
    return "".join(out)


def _lookalike_letters(text: str, rng: random.Random) -> str:
    return "".join(_CYRILLIC[c] if c in _CYRILLIC and rng.random() < 0.5 else c for c in text)


def _fullwidth_digits(text: str, rng: random.Random) -> str:
    return "".join(chr(0xFF10 + int(c)) if c.isdigit() else c for c in text)


def _nbsp(text: str, rng: random.Random) -> str:
    return text.replace(" ", "\u00a0")


def _bidi(text: str, rng: random.Random) -> str:
    return "\u202e" + text + "\u202c"


DISGUISES: dict[str, Callable[[str, random.Random], str]] = {
    "zero-width": _zero_width_in_words,
    "look-alike letters": _lookalike_letters,
    "fullwidth digits": _fullwidth_digits,
    "no-break spaces": _nbsp,
}
BREAKERS: dict[str, Callable[[str, random.Random], str]] = {
    "bidi override": _bidi,
}
SPECIAL_TOKENS = ("<|pad|>", "<|im_end|>", "</s>", "<|endoftext|>")
