"""Answer extraction and grading for verifiable environments.

`extract_answer` finds the final answer a model response commits to, or says why there is none
(`answer_candidates` lists every answer it states, with its position and role); answers that are
not numbers follow the same policy through `llm_gym.grading.final` (one-line answers read by an
env's own strict reader) and `llm_gym.grading.blocks` (grids, assignments, lists);
`parse_number` reads one numeral as an exact `Fraction`; `grade_numeric` combines them into a
`Grade` for a numeric target (`grade_numeric_quick`: its bare-integer path alone, which
needs no time bound); `extract_single_integer` is the games' reader (GuessNumber's guess,
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
   an unclosed one is `malformed`); each answer marker — the word answer, guess, move, backup,
   fallback or alternative (any case, with any words before it: "My answer", "Final answer",
   "The answer to this is") followed by `:`, `=`, `is`, `->`, "would be" — with the rest of its
   sentence (a `\\boxed{}` in it counts separately, so "Answer: 75 \\boxed{76}" shows two
   answers); each line that is just a number (markdown, `$`, a bullet or a leading `=` allowed);
   each number a correction or hedge introduces ("actually", "no wait", "or", "maybe", "also",
   "if not", "alternatively", ...; a calculation there counts as its result); and each number
   written in digits *after* the final answer. Only when none of these exists is the whole
   response the candidate.
4. **The final answer, and nothing else stated as one.** The final answer is the last box or
   marker with a value, else the last bare-number line. It is graded; credit needs every other
   candidate to have its value (75, 75.0 and "seventy-five" agree), else `conflicting`. What is
   *working*, not another answer: prose numbers before the final answer ("2+3=5 so the answer
   is 75"), a "= 2210" line before it, a marker followed by prose ("The answer is found by
   ..."), hedges before any answer is given ("either 70 or 80, let me see") — except the strong
   ones ("alternatively", "if not", "second guess") —, a check whose calculation holds ("Let me
   check: 75 - 49 = 26") and, after the final answer, calculations that hold or are worth the
   final value, the value said again, a unit's power ("m^2"), number words ("the first one"),
   and numbers of the task itself when the grader is given its text (`context`). A single
   candidate that is not one number ("5 or 6", "0,075") gets no credit either.
5. **Numbers.** ASCII digits with an optional sign, decimals (`.5` too), `a/b` and `a / b`
   fractions, a number followed by up to three unit words ("3000 metres", "12 km/h"; not
   "percent", "dozen", "thousand", ...), and thousands
   separators in the strict `1,234,567` form only (`0,075`, `1,23` and the decimal comma `75,0`
   are not numbers), or English cardinals ("seven", "one hundred and five", "minus three").
   No scientific notation, no percentages. The games (`extract_single_integer`) also read a
   candidate sentence that holds exactly one number and no negation ("My guess is 7.").
"""

from __future__ import annotations

from llm_gym.grading.answers import (
    MAX_RESPONSE_CHARS,
    AnswerCandidate,
    AnswerStatus,
    Extraction,
    answer_candidates,
    Grade,
    extract_answer,
    extract_single_integer,
    grade_numeric,
    grade_numeric_quick,
)
from llm_gym.grading.numeric import parse_number
from llm_gym.grading.timeout import TimedGrade, agrade_with_timeout, grade_with_timeout

__all__ = [
    "MAX_RESPONSE_CHARS",
    "AnswerCandidate",
    "AnswerStatus",
    "Extraction",
    "Grade",
    "TimedGrade",
    "agrade_with_timeout",
    "answer_candidates",
    "extract_answer",
    "extract_single_integer",
    "grade_numeric",
    "grade_numeric_quick",
    "grade_with_timeout",
    "parse_number",
]
