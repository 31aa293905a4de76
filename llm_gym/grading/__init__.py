"""Answer contracts and the one answer policy every environment is graded under.

**The policy** (`POLICY`, implemented once in `llm_gym.grading.policy`): a reply is graded on one
declared answer -- its last `Answer:` line (any label holding the word "answer", or a game's
"Move:"/"Guess:"), `\\boxed{}`, or "the answer is ..." sentence; when it declares none, its last
line stating a value -- parsed *completely* under the environment's answer contract, so a scale,
bound, unit or second value attached to the value makes it not that value. Nothing else in the
reply is read: working, hedges and second thoughts can neither earn nor cost credit, except that
a second declaration with a different value voids the credit.

**Contracts** (`llm_gym.grading.contracts`): one typed object per env says what an answer is --
`IntegerAnswer`, `NumberAnswer` (units converted exactly, a tolerance), `SequenceAnswer`,
`MappingAnswer`, `GridAnswer`, `JsonAnswer`, `TokenAnswer` (a word or move), `ArithmeticExpressionAnswer`,
`ExactTextAnswer`, `ProgramAnswer`, `FreeTextAnswer` -- and generates the prompt's answer
instruction (`instruction()`), the card's line (`describe()`) and the reader (`read`/`grade`) from
the same object, so what the model is told and what is read cannot drift.

Text is read as shown (`llm_gym.grading.normalize`: NFKC, zero-width and format characters
dropped, look-alike letters mapped, bidirectional overrides refused, special-token text a line
break); values by `llm_gym.grading.quantity` (numbers, exact scale words, units of
`llm_gym.grading.units`). The number readers of earlier versions -- `grade_numeric`,
`extract_answer`, `extract_single_integer`, `answer_candidates` -- read through number
contracts under the same policy (`llm_gym.grading.answers`). `grade_with_timeout` /
`agrade_with_timeout` guard expensive graders with a wall-clock limit. Nothing here imports an
environment.
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
from llm_gym.grading.contracts import (
    AnswerContract,
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
from llm_gym.grading.policy import POLICY, Reading
from llm_gym.grading.numeric import parse_number
from llm_gym.grading.timeout import TimedGrade, agrade_with_timeout, grade_with_timeout

__all__ = [
    "MAX_RESPONSE_CHARS",
    "POLICY",
    "AnswerContract",
    "ArithmeticExpressionAnswer",
    "ExactTextAnswer",
    "FreeTextAnswer",
    "GridAnswer",
    "IntegerAnswer",
    "JsonAnswer",
    "MappingAnswer",
    "NumberAnswer",
    "ProgramAnswer",
    "Reading",
    "SequenceAnswer",
    "TokenAnswer",
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
