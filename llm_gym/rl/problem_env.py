"""Single-turn question/answer environments: `ProblemEnv` and `ProblemGroupBuilder`.

Subclasses supply the question, an answer checker, a format checker and the reference answer; the
base class renders the prompt, parses the response and scores it as
`format_coef * (format_ok - 1) + correct` (so a well-formed wrong answer scores 0, a correct one 1,
and a malformed one loses `format_coef`). This is the cookbook's `ProblemEnv`, with one addition:
`grader_timeout_s` runs the checkers in a daemon thread and scores a grader that does not answer in
time as a malformed wrong answer (metric `grader_timeout` = 1) instead of blocking the event loop.
"""

from __future__ import annotations

import asyncio
import threading
from abc import abstractmethod
from dataclasses import dataclass
from typing import Any, Callable, Sequence

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
    """One question, one answer, one reward. `step` never raises on bad model output.

    - `format_ok` is 1 when the response ended cleanly (`ParseTermination.is_clean`; only
      `is_stop_sequence` when `require_stop_sequence_for_format=True`, the cookbook's strict mode)
      and `check_format` accepts it.
    - `grader_timeout_s` (None = call the checkers inline, as the cookbook does): run
      `check_format`/`check_answer` in a daemon thread and give up after that many seconds.
    """

    def __init__(
        self,
        renderer: Renderer,
        convo_prefix: list[Message] | None = None,
        format_coef: float = 0.1,
        require_stop_sequence_for_format: bool = False,
        grader_timeout_s: float | None = None,
    ) -> None:
        if grader_timeout_s is not None and grader_timeout_s <= 0:
            raise ValueError(f"grader_timeout_s must be positive or None, got {grader_timeout_s!r}")
        self.renderer = renderer
        self.convo_prefix = list(convo_prefix or [])
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

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        message, termination = self.renderer.parse_response(action)
        content = get_text_content(message)
        well_formed = (
            termination.is_stop_sequence
            if self.require_stop_sequence_for_format
            else termination.is_clean
        )
        metrics: dict[str, float] = {}
        if self.grader_timeout_s is None:
            format_ok, correct = self._grade(content, well_formed)
        else:
            try:
                format_ok, correct = await _call_in_daemon_thread(
                    self._grade, self.grader_timeout_s, content, well_formed
                )
                metrics["grader_timeout"] = 0.0
            except TimeoutError:
                format_ok, correct = 0.0, 0.0
                metrics["grader_timeout"] = 1.0
        reward = self.format_coef * (format_ok - 1.0) + correct
        return StepResult(
            reward=reward,
            episode_done=True,
            next_observation=ModelInput.empty(),
            next_stop_condition=self.stop_condition,
            metrics={"format": format_ok, "correct": correct, **metrics},
            logs={"response": content, "reference": self.get_reference_answer(),
                  "termination": termination.value},
        )


async def _call_in_daemon_thread(fn: Callable[..., Any], timeout_s: float, *args: Any) -> Any:
    """Run `fn(*args)` in a fresh daemon thread; raise TimeoutError after `timeout_s`.

    A daemon thread (not the loop's default executor) so that a grader stuck forever neither
    blocks the event loop nor keeps the process from exiting; the stuck thread is abandoned."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future = loop.create_future()

    def settle(ok: bool, value: Any) -> None:
        if not future.done():
            (future.set_result if ok else future.set_exception)(value)

    def run() -> None:
        try:
            value, ok = fn(*args), True
        except BaseException as exc:  # noqa: BLE001 - re-raised in the event loop
            value, ok = exc, False
        try:
            loop.call_soon_threadsafe(settle, ok, value)
        except RuntimeError:  # the loop closed while the grader ran
            pass

    threading.Thread(target=run, name="llm-gym-grader", daemon=True).start()
    return await asyncio.wait_for(future, timeout_s)


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
