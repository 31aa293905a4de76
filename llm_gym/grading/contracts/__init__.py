"""Answer contracts: one typed object per env that says what an answer is (see `base`).

Every contract reads replies under the one answer policy of `llm_gym.grading.policy`."""

from __future__ import annotations

from llm_gym.grading.contracts.base import AnswerContract
from llm_gym.grading.contracts.expression import ArithmeticExpressionAnswer, Expression
from llm_gym.grading.contracts.numbers import IntegerAnswer, NumberAnswer, counted, format_number
from llm_gym.grading.contracts.program import ProgramAnswer
from llm_gym.grading.contracts.structured import GridAnswer, JsonAnswer, MappingAnswer, SequenceAnswer
from llm_gym.grading.contracts.text import ExactTextAnswer, FreeTextAnswer, TokenAnswer

__all__ = [
    "AnswerContract",
    "ArithmeticExpressionAnswer",
    "ExactTextAnswer",
    "Expression",
    "FreeTextAnswer",
    "GridAnswer",
    "IntegerAnswer",
    "JsonAnswer",
    "MappingAnswer",
    "NumberAnswer",
    "ProgramAnswer",
    "SequenceAnswer",
    "TokenAnswer",
    "counted",
    "format_number",
]
