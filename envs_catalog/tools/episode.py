"""What `llm/Retrieval-v0` and `llm/SQL-v0` add to `base.ToolTaskSource`: per-episode tools and
answers that may be names.

Their tools are bound to data generated for the episode (a knowledge base, a database), so the
source builds them in `make_env` from a `Task` (question, answer, tools, a canonical key for the
split) instead of returning one fixed list from `tools()`. The reward is the family's
(`base.final_answer_reward`'s rules: 1 for a correct final answer minus `tool_call_cost` per call,
credit only after a successful call with `require_tool`, -0.1 for malformed tool calls or a
conversation past `max_context_tokens`), with the answer read by `grade_answer`: numbers through
`llm_gym.grading.grade_numeric` (the answer policy of `llm/Math-v0`), names through the strict
`read_name` below. Both envs default to `require_tool=True`: their facts are generated per
episode, so a correct answer without looking is a guess.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Sequence

import numpy as np

from envs_catalog.tools.base import (
    CONTEXT_OVERFLOW_REWARD,
    FAILED_PARSE_REWARD,
    MAX_GENERATION_TOKENS,
    ToolTaskSource,
)
from llm_gym.grading import grade_numeric
from llm_gym.renderers import Message, Renderer, get_text_content
from llm_gym.rl.tool_env import build_agent_tool_env
from llm_gym.rl.types import Env

__all__ = ["EpisodeToolSource", "Task", "grade_answer", "normalize_name", "read_name",
           "tool_knob_docs"]

MAX_NAME_REPLY_CHARS = 200
_PREFIX = re.compile(r"^(?:the\s+)?(?:final\s+)?answer(?:\s+is\b|\s*[:=])\s*", re.IGNORECASE)
_WRAPPERS = ("**", "__", '"', "'", "`", "*")


def normalize_name(text: str) -> str:
    """NFKC, case-folded, whitespace collapsed: the form two names are compared in."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def read_name(reply: str) -> tuple[str | None, str]:
    """The one name a reply commits to, normalised, or None with the reason.

    Accepted: the name alone, optionally after "Answer:" / "Final answer:" / "The answer is",
    wrapped once in ** or quotes, with one trailing period. Rejected: more than
    `MAX_NAME_REPLY_CHARS` characters (`too_long`), U+FFFD (`invalid_text`), an empty reply,
    several lines, or a reply carrying any of ``,;/|()[]{}<>`` (a list, a hedge in brackets)
    (`not_one_name`). The caller compares the result with the gold name exactly, so "A or B" and
    "A and B" are simply wrong."""
    if len(reply) > MAX_NAME_REPLY_CHARS:
        return None, "too_long"
    if "\ufffd" in reply:
        return None, "invalid_text"
    text = unicodedata.normalize("NFKC", reply).strip()
    if not text:
        return None, "empty"
    if "\n" in text or any(c in text for c in ",;/|()[]{}<>\\"):
        return None, "not_one_name"
    text = _PREFIX.sub("", text, count=1).strip()
    for w in _WRAPPERS:
        if len(text) > 2 * len(w) and text.startswith(w) and text.endswith(w):
            text = text[len(w):-len(w)].strip()
            break
    if text.endswith("."):
        text = text[:-1].rstrip()
    if not text or not any(c.isalpha() for c in text):
        return None, "not_one_name"
    return normalize_name(text), "ok"


def grade_answer(reply: str, answer: int | Fraction | str, context: str | None = None
                 ) -> tuple[bool, bool]:
    """(format_ok, correct) for a final reply: a numeric answer through `grade_numeric` (with
    the episode's other text as its `context`), a name through `read_name`."""
    if isinstance(answer, str):
        name, _ = read_name(reply)
        return name is not None, name == normalize_name(answer)
    grade = grade_numeric(reply, answer, context=context)
    return grade.format_ok, grade.correct


def answer_reward(messages: Sequence[Message], answer: int | Fraction | str, *,
                  tool_call_cost: float, require_tool: bool) -> tuple[float, dict[str, float]]:
    """`base.final_answer_reward` with `grade_answer` as the reader."""
    calls = sum(1 for m in messages if m.get("role") == "tool")
    ok_calls = sum(1 for m in messages
                   if m.get("role") == "tool" and not get_text_content(m).startswith("Error:"))
    last = next((m for m in reversed(messages) if m.get("role") == "assistant"), None)
    answered = last is not None and not last.get("tool_calls") and not last.get("unparsed_tool_calls")
    context = "\n".join(get_text_content(m) for m in messages if m is not last)
    format_ok, correct = (grade_answer(get_text_content(last), answer, context)
                          if answered and last is not None else (False, False))
    used_tool = ok_calls > 0
    credited = correct and (used_tool or not require_tool)
    reward = float(credited) - tool_call_cost * calls
    return reward, {"correct": float(correct), "credited": float(credited),
                    "answered": float(answered), "format": float(format_ok),
                    "used_tool": float(used_tool)}


@dataclass
class Task:
    key: str  # canonical, for the split
    question: str
    answer: int | Fraction | str
    tools: list
    extra: dict[str, Any] = field(default_factory=dict)  # for scripted policies and logs


def tool_knob_docs(defaults: dict[str, Any]) -> dict[str, str]:
    """The family's common knob docs with this env's defaults."""
    return {
        "max_turns": f"assistant turns allowed (tool turns and the answer), 1-20 (default "
        f"{defaults['max_turns']})",
        "max_tool_calls": f"tool calls allowed per episode; one more ends it, 0-20 (default "
        f"{defaults['max_tool_calls']})",
        "tool_call_cost": f"subtracted from the reward per tool call made, 0-1 (default "
        f"{defaults['tool_call_cost']})",
        "require_tool": "a correct answer scores only after a successful tool call (default "
        f"{defaults['require_tool']})",
        "max_context_tokens": "episode ends with -0.1 rather than let the conversation pass this "
        "many tokens plus 1024 for the next reply, 1024-1000000 (default "
        f"{defaults['max_context_tokens']})",
    }


class EpisodeToolSource(ToolTaskSource):
    """A `ToolTaskSource` whose subclasses implement `draw_episode(rng) -> Task` (tools
    included); `COMMON_OVERRIDES` changes the family's common defaults for this env."""

    COMMON_OVERRIDES: dict[str, Any] = {"require_tool": True}
    MAX_TOOL_OUTPUT_CHARS = 4000
    MAX_DRAWS = 1000

    def __init__(self, *, renderer: Renderer, split: str = "train", **knobs: Any) -> None:
        for k, v in self.COMMON_OVERRIDES.items():
            knobs.setdefault(k, v)
        super().__init__(renderer=renderer, split=split, **knobs)

    def draw_episode(self, rng: np.random.Generator) -> Task:
        raise NotImplementedError

    def tools(self) -> list:  # per episode: see draw_episode
        return []

    def draw_task(self, rng: np.random.Generator) -> tuple[str, Any]:
        task = self.draw_episode(rng)
        return task.question, task.answer

    def draw_in_split(self, rng: np.random.Generator) -> Task:
        from llm_gym.authoring import split_of

        for _ in range(self.MAX_DRAWS):
            task = self.draw_episode(rng)
            if split_of(task.key) == self.split:
                return task
        raise RuntimeError(f"{type(self).__name__}: no {self.split!r} task in {self.MAX_DRAWS} "
                           "draws; widen the knobs")

    def make_env(self, rng: np.random.Generator) -> Env:
        task = self.draw_in_split(rng)
        cost, require, answer = self.tool_call_cost, self.require_tool, task.answer

        def reward_fn(messages: list[Message]) -> tuple[float, dict[str, float]]:
            return answer_reward(messages, answer, tool_call_cost=cost, require_tool=require)

        env = build_agent_tool_env(
            self.renderer, task.tools, self.initial_messages(task.question), reward_fn,
            max_turns=self.max_turns, max_tool_calls=self.max_tool_calls,
            failed_parse_reward=FAILED_PARSE_REWARD, context_overflow_reward=CONTEXT_OVERFLOW_REWARD,
            max_trajectory_tokens=self.max_context_tokens + MAX_GENERATION_TOKENS,
            max_generation_tokens=MAX_GENERATION_TOKENS,
            max_tool_output_chars=self.MAX_TOOL_OUTPUT_CHARS,
        )
        # for logs and scripted policies: attributes of this family, not of the env's class
        env.question, env.answer, env.task = (  # pyright: ignore[reportAttributeAccessIssue]
            task.question, task.answer, task)
        return env
