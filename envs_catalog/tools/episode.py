"""What `llm/Retrieval-v0` and `llm/SQL-v0` add to `base.ToolTaskSource`: per-episode tools and
answers that may be names.

Their tools are bound to data generated for the episode (a knowledge base, a database), so the
source builds them in `make_env` from a `Task` (question, answer, tools, a canonical key for the
split) instead of returning one fixed list from `tools()`. The reward is the family's
(`base.final_answer_reward`: 1 for a correct final answer minus `tool_call_cost` per call, credit
only after a successful call with `require_tool`, -0.1 for malformed tool calls or a conversation
past `max_context_tokens`), with the answer read by the task's contract (`task_answer_spec`:
`base.FinalNumberAnswer` for a number; Retrieval's names have a contract of their own) under the
one answer policy (`llm_gym.grading.POLICY`). Both envs default to `require_tool=True`: their facts
are generated per episode, so a correct answer without looking is a guess.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from envs_catalog.tools.base import (
    CONTEXT_OVERFLOW_REWARD,
    FAILED_PARSE_REWARD,
    MAX_GENERATION_TOKENS,
    ToolTaskSource,
    final_answer_reward,
)
from llm_gym.grading.contracts import AnswerContract
from llm_gym.renderers import Message, Renderer
from llm_gym.rl.tool_env import build_agent_tool_env
from llm_gym.rl.types import Env

__all__ = ["EpisodeToolSource", "Task", "normalize_name", "tool_knob_docs"]


def normalize_name(text: str) -> str:
    """NFKC, case-folded, whitespace collapsed: the form two names are compared in."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


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

    def task_answer_spec(self, task: Task) -> tuple[AnswerContract, Any]:
        """The contract of `task`'s final answer and its gold value (`answer_spec`: a number)."""
        return self.answer_spec(task.question, task.answer)

    def make_env(self, rng: np.random.Generator) -> Env:
        task = self.draw_in_split(rng)
        cost, require = self.tool_call_cost, self.require_tool
        contract, gold = self.task_answer_spec(task)

        def reward_fn(messages: list[Message]) -> tuple[float, dict[str, float]]:
            return final_answer_reward(messages, contract, gold, tool_call_cost=cost, require_tool=require)

        env = build_agent_tool_env(
            self.renderer, task.tools, self.initial_messages(task.question), reward_fn,
            max_turns=self.max_turns, max_tool_calls=self.max_tool_calls,
            failed_parse_reward=FAILED_PARSE_REWARD, context_overflow_reward=CONTEXT_OVERFLOW_REWARD,
            max_trajectory_tokens=self.max_context_tokens + MAX_GENERATION_TOKENS,
            max_generation_tokens=MAX_GENERATION_TOKENS,
            max_tool_output_chars=self.MAX_TOOL_OUTPUT_CHARS,
        )
        # for logs, scripted policies and the audit: attributes of this family, not of the env's class
        env.question, env.answer, env.task = (  # pyright: ignore[reportAttributeAccessIssue]
            task.question, task.answer, task)
        env.answer_contract, env.gold_answer = contract, gold  # pyright: ignore[reportAttributeAccessIssue]
        return env
