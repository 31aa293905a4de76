"""Answer extraction and grading for verifiable environments.

`extract_answer` finds the one answer a model response commits to, or says why there is none;
`parse_number` reads one numeral as an exact `Fraction`; `grade_numeric` combines them into a
`Grade` for a numeric target; `extract_single_integer` is the games' reader (GuessNumber's guess,
TicTacToe's cell). `grade_with_timeout` / `agrade_with_timeout` guard expensive graders with a
wall-clock limit. Catalog envs use these; nothing here imports an environment.

The answer policy (every catalog card points here):

1. **Limits first.** A response over `max_chars` (4096) characters is `too_long` before any
   regex runs; one containing U+FFFD (invalid UTF-8) is `invalid_text`; a blank one is `empty`.
2. **Visible text.** The text is NFKC-normalised (fullwidth and mathematical digits and letters
   become ASCII). Format characters (zero-width space/joiners, soft hyphen, BOM, tag
   characters) are dropped; bidirectional overrides make the response `confusable`, since they
   reorder what is shown. Letters of Cyrillic, Greek, Armenian and Cherokee that pass for Latin
   ones are read as Latin in words made only of such look-alikes or mixing them with Latin
   letters ("Аnswer" with a Cyrillic А is a marker); a mixed word keeping an unmapped one is
   `confusable`. Accents and other marks on letters are dropped; a mark on a digit, a
   private-use or unassigned character makes that spot unreadable. Superscripts and subscripts
   stay apart from the digits before them ("7⁵" is not 75). Decimal digits of other scripts
   (Arabic-Indic, Devanagari, ...; anything numeric NFKC leaves non-ASCII) are not read: the
   response is `unsupported_digits` (several look like other ASCII digits). Special-token text
   (`<|pad|>`, `<|im_end|>`, `</s>`, ...) and control characters are line breaks, so
   "7<|pad|>5" is two numbers, never 75.
3. **Every candidate, across all forms.** Each `\\boxed{...}` / `\\fbox{...}` (balanced braces;
   an unclosed one is `malformed`); each answer marker — the word answer, guess or move (any case,
   with any words before it: "My answer", "Final answer", "The answer to this is") followed by
   `:`, `=`, `is`, `->`, "would be" — with the rest of its sentence (a `\\boxed{}` in it counts
   separately, so "Answer: 75 \\boxed{76}" shows two answers); each line that is just a number
   (markdown, `$`, a bullet or a leading `=` allowed); and, after the first of those, each number
   introduced by a correction or hedge ("actually", "correction", "no wait", "I mean", "rather",
   "or", "maybe", "let me check", ...; a calculation there counts as its stated result). Other
   numbers in prose ("2+3=5 so the answer is 5") are working, not answers. Only when none of
   these exists is the whole response the candidate.
4. **Exactly one distinct value.** Candidates are compared as numbers (75, 75.0 and
   "seventy-five" agree); two different ones are `conflicting`, no credit. A single candidate that
   is not one number ("5 or 6", "0,075") gets no credit either.
5. **Numbers.** ASCII digits with an optional sign, decimals, `a/b` fractions and thousands
   separators in the strict `1,234,567` form only (`0,075`, `1,23` and the decimal comma `75,0`
   are not numbers), or English cardinals ("seven", "one hundred and five", "minus three").
   No scientific notation, no percentages. The games (`extract_single_integer`) also read a
   candidate sentence that holds exactly one number and no negation ("My guess is 7.").
"""

from __future__ import annotations

from llm_gym.grading.answers import (
    MAX_RESPONSE_CHARS,
    AnswerStatus,
    Extraction,
    Grade,
    extract_answer,
    extract_single_integer,
    grade_numeric,
)
from llm_gym.grading.numeric import parse_number
from llm_gym.grading.timeout import TimedGrade, agrade_with_timeout, grade_with_timeout

__all__ = [
    "MAX_RESPONSE_CHARS",
    "AnswerStatus",
    "Extraction",
    "Grade",
    "TimedGrade",
    "agrade_with_timeout",
    "extract_answer",
    "extract_single_integer",
    "grade_numeric",
    "grade_with_timeout",
    "parse_number",
]
