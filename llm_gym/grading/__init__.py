"""Answer extraction and grading for verifiable environments.

`extract_answer` pulls one candidate answer out of a model response (a unique `\\boxed{...}`, an
`Answer: X` line, or a bare response) and refuses gaming attempts; `parse_number` normalises a
numeric string to an exact `Fraction`; `grade_numeric` combines the two into a `Grade`.
`grade_with_timeout` / `agrade_with_timeout` guard expensive graders with a wall-clock limit.
Catalog envs use these; nothing here imports an environment.
"""

from __future__ import annotations

from llm_gym.grading.answers import (
    MAX_RESPONSE_CHARS,
    AnswerStatus,
    Extraction,
    extract_answer,
    extract_single_integer,
)
from llm_gym.grading.numeric import Grade, grade_numeric, parse_number
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
