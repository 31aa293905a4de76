"""Single-turn question/answer environments: `ProblemEnv` and `ProblemGroupBuilder`.

Subclasses supply the question, an answer checker, a format checker and the reference answer; the
base class renders the prompt, parses the response and scores it as
`format_coef * (format_ok - 1) + correct` (so a well-formed wrong answer scores 0, a correct one 1,
and a malformed one loses `format_coef`). This is the cookbook's `ProblemEnv` -- same defaults
(`require_stop_sequence_for_format=True`: only a response that ended on the renderer's stop
sequence earns the format credit, an EOS-ended one does not), same metrics (`format`, `correct`)
-- with one addition: grading is bounded by default. `check_format`/`check_answer` run through
`llm_gym.grading.bounded.acall_bounded` with `grader_timeout_s` (10 s): in the calling thread for a
short budget (a hung pure-Python grader is interrupted there), then in a killable forked worker for
the rest; a grader that does not answer in time scores as a malformed wrong answer, adds the
metric `grader_timeout` = 1 (the key appears only then, so metrics equal the cookbook's whenever
grading finishes) and leaves no thread or process behind. `grader_timeout_s=None` calls the
checkers inline with no bound, as the cookbook does; so does a subclass's `_quick_grade` for
the responses it knows grade in microseconds whatever they hold (`MathEnv`: a bare integer).
"""

from __future__ import annotations

import logging
import math
from abc import abstractmethod
from dataclasses import dataclass
from typing import Callable, Sequence

from llm_gym.grading.bounded import acall_bounded_value
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


logger = logging.getLogger(__name__)  # the cookbook's name; recipe envs import it

DEFAULT_GRADER_TIMEOUT_S = 10.0


class ProblemEnv(Env):
    """One question, one answer, one reward. `step` never raises on bad model output.

    - `format_ok` is 1 when the response ended on the renderer's stop sequence
      (`ParseTermination.is_stop_sequence`; any clean end, EOS included, with
      `require_stop_sequence_for_format=False`) and `check_format` accepts it.
    - `grader_timeout_s` (default 10 s; None = call the checkers inline with no bound, as the
      cookbook does): the most seconds grading one response may take (see the module docstring).
    - `grader_isolation`: `"inline"` (default: the calling thread first, a worker process if that
      runs out) or `"process"` (always a forked worker: for graders that may block inside one C
      call -- `time.sleep`, I/O, a subprocess -- which no thread can interrupt).
    A grader that raises is an env bug and propagates (from a worker process as a RuntimeError
    naming the original error).
    """

    def __init__(
        self,
        renderer: Renderer,
        convo_prefix: list[Message] | None = None,
        format_coef: float = 0.1,
        require_stop_sequence_for_format: bool = True,
        grader_timeout_s: float | None = DEFAULT_GRADER_TIMEOUT_S,
        grader_isolation: str = "inline",
    ) -> None:
        # (The identity tests skip the checks for the defaults: one env is made per episode.)
        if grader_timeout_s is not DEFAULT_GRADER_TIMEOUT_S and grader_timeout_s is not None and not (
            isinstance(grader_timeout_s, (int, float)) and 0 < grader_timeout_s < math.inf
        ):
            raise ValueError(
                f"grader_timeout_s must be a positive number of seconds or None, got "
                f"{grader_timeout_s!r}"
            )
        if grader_isolation != "inline" and grader_isolation != "process":
            raise ValueError(
                f"grader_isolation must be 'inline' or 'process', got {grader_isolation!r}"
            )
        self.grader_isolation = grader_isolation
        self.renderer = renderer
        self.convo_prefix = list(convo_prefix) if convo_prefix else []
        self.format_coef = format_coef
        self.require_stop_sequence_for_format = require_stop_sequence_for_format
        self.grader_timeout_s = grader_timeout_s

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

    def _grade(self, content: str, well_formed: bool) -> tuple[float, float]:
        format_ok = float(well_formed and bool(self.check_format(content)))
        correct = float(self.check_answer(content))
        return format_ok, correct

    def _quick_grade(self, content: str, well_formed: bool) -> tuple[float, float] | None:
        """`_grade(content, well_formed)` when it is known to take microseconds whatever
        `content` holds, so `step` needs no bound for it (a watchdog arm/disarm is most of a fast
        grade's cost); else None, and `step` grades under the bound. Always None here: a
        subclass answers for its own grader, for inputs whose cost it can bound (`MathEnv`)."""
        return None

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        message, termination = self.renderer.parse_response(action)
        content = get_text_content(message)
        well_formed = (
            termination.is_stop_sequence
            if self.require_stop_sequence_for_format
            else termination.is_clean
        )
        timed_out = False
        quick = self._quick_grade(content, well_formed) if self.grader_isolation == "inline" else None
        if quick is not None:
            format_ok, correct = quick
        elif self.grader_timeout_s is None:
            format_ok, correct = self._grade(content, well_formed)
        else:
            graded, outcome = await acall_bounded_value(
                self._grade, content, well_formed,
                timeout_s=self.grader_timeout_s, isolation=self.grader_isolation,
            )
            if outcome is None:
                format_ok, correct = graded
            elif outcome.ok:
                format_ok, correct = outcome.value
            elif outcome.timed_out:
                format_ok, correct = 0.0, 0.0
                timed_out = True
            elif outcome.exception is not None:
                raise outcome.exception
            else:
                raise RuntimeError(f"{type(self).__name__}'s grader failed in its worker "
                                   f"process: {outcome.error}")
        reward = self.format_coef * (format_ok - 1.0) + correct
        metrics = {"format": format_ok, "correct": correct}
        if timed_out:
            metrics["grader_timeout"] = 1.0
        return StepResult(
            reward=reward,
            episode_done=True,
            next_observation=ModelInput.empty(),
            next_stop_condition=self.stop_condition,
            metrics=metrics,
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
