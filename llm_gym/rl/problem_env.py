"""Single-turn question/answer environments: `ProblemEnv` and `ProblemGroupBuilder`.

Subclasses supply the question, an answer checker, a format checker and the reference answer; the
base class renders the prompt, parses the response and scores it as
`format_coef * (format_ok - 1) + correct` (so a well-formed wrong answer scores 0, a correct one 1,
and a malformed one loses `format_coef`). This is the cookbook's `ProblemEnv`.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from typing import Callable, Sequence

from llm_gym.model_input import ModelInput
from llm_gym.renderers.base import Message, Renderer, get_text_content
from llm_gym.rl.types import (
    Action,
    ActionExtra,
    Env,
    EnvGroupBuilder,
    Observation,
    StepResult,
    StopCondition,
)


class ProblemEnv(Env):
    """One question, one answer, one reward. `step` never raises on bad model output."""

    def __init__(
        self,
        renderer: Renderer,
        convo_prefix: list[Message] | None = None,
        format_coef: float = 0.1,
    ) -> None:
        self.renderer = renderer
        self.convo_prefix = list(convo_prefix or [])
        self.format_coef = format_coef

    @property
    def stop_condition(self) -> StopCondition:
        return self.renderer.get_stop_sequences()

    @abstractmethod
    def get_question(self) -> str: ...

    @abstractmethod
    def check_answer(self, sample_str: str) -> bool: ...

    @abstractmethod
    def check_format(self, sample_str: str) -> bool: ...

    @abstractmethod
    def get_reference_answer(self) -> str: ...

    def get_reference_response(self) -> str:
        """A complete, well-formatted assistant response that scores full reward (for SFT warm
        starts and verifier tests). Defaults to the reference answer itself."""
        return self.get_reference_answer()

    def conversation(self) -> list[Message]:
        return self.convo_prefix + [Message(role="user", content=self.get_question())]

    async def initial_observation(self) -> tuple[Observation, StopCondition]:
        return self.renderer.build_generation_prompt(self.conversation()), self.stop_condition

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        message, termination = self.renderer.parse_response(action)
        content = get_text_content(message)
        format_ok = float(bool(termination) and self.check_format(content))
        correct = float(self.check_answer(content))
        reward = self.format_coef * (format_ok - 1.0) + correct
        return StepResult(
            reward=reward,
            episode_done=True,
            next_observation=ModelInput.empty(),
            next_stop_condition=self.stop_condition,
            metrics={"format": format_ok, "correct": correct},
            logs={"response": content, "reference": self.get_reference_answer(),
                  "termination": termination.value},
        )


@dataclass(frozen=True)
class ProblemGroupBuilder(EnvGroupBuilder):
    """`num_envs` copies of one problem (from `env_thunk`), for GRPO-style group centring.
    `env_thunk` must be picklable (a module-level function or a `functools.partial`)."""

    env_thunk: Callable[[], ProblemEnv]
    num_envs: int
    dataset_name: str = "problems"

    async def make_envs(self) -> Sequence[Env]:
        return [self.env_thunk() for _ in range(self.num_envs)]

    def logging_tags(self) -> list[str]:
        return [self.dataset_name]
