"""The one-reply-per-turn game loop shared by the word and code games (`wordle`, `mastermind`,
`twenty_questions`): `TurnGameEnv` plays an intro, then per turn reads one reply and asks the
subclass's `judge(text) -> Turn` for a verdict (SOLVED +1 and the game ends, VALID 0, INVALID
`-invalid_penalty`); it owns the checks every game shares (out-of-vocabulary ids end the game,
truncated / over-long / unreadable replies are invalid turns), the `max_turns` bound, the
`max_context_tokens` cap (the game ends, stop reason "context_exceeded", rather than let an
observation grow past it) and the prefix property (`llm_gym.renderers.continuation.Continuation`).
`IntroCache` memoises first observations by intro text. The subclasses read replies through
their answer contracts (`answer_contract`, under `llm_gym.grading.POLICY`); `fold_reply` is the
strict text folding a scripted answerer reads questions with (NFKC, ASCII typography, nothing
outside printable ASCII).
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Any, cast

from llm_gym.model_input import ModelInput
from llm_gym.renderers import Message, ParseTermination, Renderer
from llm_gym.renderers.continuation import Continuation
from llm_gym.rl.types import Action, ActionExtra, Env, Observation, StepResult, StopCondition

SOLVED, VALID, INVALID = "solved", "valid", "invalid"


@dataclass(frozen=True)
class Turn:
    """A game's verdict on one reply: `kind` SOLVED (+1, the game ends), VALID (0) or INVALID
    (-invalid_penalty); `feedback` is the env's next user message; `status` names the reason
    (a metric-friendly word, logged as `guess_status`)."""

    kind: str
    feedback: str
    status: str = "ok"


class TurnGameEnv(Env):
    """One game: the intro, then per turn one reply judged by `judge`. Step metrics: `invalid`
    and, while the game goes on, the continuation's one-hot mode; on the last step `solved`,
    `turns`, `invalid_turns`, `context_exceeded` (log `stop_reason`: "solved", "out_of_turns",
    "malformed_tokens" or "context_exceeded")."""

    rules_reminder = "Reply with your guess only."

    def __init__(
        self, renderer: Renderer, intro: str, *, max_turns: int, invalid_penalty: float,
        max_context_tokens: int, max_reply_chars: int, continuation: Continuation | None = None,
        intro_ob: ModelInput | None = None,
    ) -> None:
        self.renderer = renderer
        self.intro = intro
        self.max_turns = max_turns
        self.invalid_penalty = invalid_penalty
        self.max_context_tokens = max_context_tokens
        self.max_reply_chars = max_reply_chars
        self.continuation = continuation or Continuation(renderer)
        self._intro_ob = intro_ob
        self._stop = renderer.get_stop_sequences()
        self._ob: ModelInput | None = None
        self._messages: list[Message] = []
        self.turns = 0
        self.invalid_turns = 0
        self.done = False

    @property
    def stop_condition(self) -> StopCondition:
        return cast(StopCondition, list(self._stop))  # a copy, of the same kind (str or int)

    @property
    def turns_left(self) -> int:
        return self.max_turns - self.turns

    async def judge(self, text: str) -> Turn:  # pragma: no cover - abstract
        raise NotImplementedError

    def final_logs(self) -> dict[str, Any]:
        """Extra logs for the last step (the secret, say)."""
        return {}

    async def initial_observation(self) -> tuple[Observation, StopCondition]:
        if self._intro_ob is None:
            self._intro_ob = self.continuation.first(self._intro_messages())
        self._ob = self._intro_ob
        return self._ob, self.stop_condition

    def _intro_messages(self) -> list[Message]:
        return [{"role": "user", "content": self.intro}]

    def _finish(self, reward: float, stop_reason: str, metrics: dict, logs: dict) -> StepResult:
        self.done = True
        metrics.update(
            solved=float(stop_reason == "solved"), turns=self.turns,
            invalid_turns=self.invalid_turns,
            context_exceeded=float(stop_reason == "context_exceeded"),
        )
        logs.update(self.final_logs(), stop_reason=stop_reason)
        return StepResult(reward, True, ModelInput.empty(), self.stop_condition, metrics, logs)

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        if self._ob is None or self.done:
            raise RuntimeError(
                f"{type(self).__name__}: call initial_observation() first; envs are single-use"
            )
        self.turns += 1
        message, termination = self.renderer.parse_response(action)
        text = str(message.get("content", ""))
        logs: dict[str, Any] = {"response": text[:1000]}
        if termination is ParseTermination.MALFORMED and self.renderer.has_invalid_ids(action):
            # out-of-vocabulary ids cannot be appended to the transcript: the game ends
            self.invalid_turns += 1
            logs["guess_status"] = "malformed_tokens"
            return self._finish(-self.invalid_penalty, "malformed_tokens", {"invalid": 1.0}, logs)
        if not termination.is_clean:
            turn = Turn(INVALID, f"Your reply was cut off. {self.rules_reminder}", "truncated")
        elif len(text) > self.max_reply_chars:
            turn = Turn(INVALID, f"Your reply is too long. {self.rules_reminder}", "too_long")
        elif "\ufffd" in text:
            turn = Turn(INVALID, f"Your reply is not readable text. {self.rules_reminder}",
                        "invalid_text")
        else:
            turn = await self.judge(text)
        logs["guess_status"] = turn.status
        metrics: dict[str, float | int] = {"invalid": float(turn.kind == INVALID)}
        if turn.kind == SOLVED:
            return self._finish(1.0, "solved", metrics, logs)
        reward = 0.0
        if turn.kind == INVALID:
            self.invalid_turns += 1
            reward = -self.invalid_penalty
        if self.turns >= self.max_turns:
            return self._finish(reward, "out_of_turns", metrics, logs)
        # the cap is checked before the action is appended, so a huge action costs no copy
        if self._ob.length + len(action) >= self.max_context_tokens:
            return self._finish(reward, "context_exceeded", metrics, logs)
        left = self.turns_left
        feedback = f"{turn.feedback} {left} {'turn' if left == 1 else 'turns'} left."
        self._messages = (self._messages or self._intro_messages()) + [
            message, {"role": "user", "content": feedback}
        ]
        step = self.continuation.next(self._ob, action, self._messages)
        if step.observation.length > self.max_context_tokens:
            return self._finish(reward, "context_exceeded", metrics, logs)
        metrics.update(step.metrics)
        self._ob = step.observation
        return StepResult(reward, False, self._ob, self.stop_condition, metrics, logs)


class IntroCache:
    """First observations by intro text (an intro holds a random worked example, so a source
    sees many distinct ones); bounded, cleared when full."""

    def __init__(self, continuation: Continuation, limit: int = 256) -> None:
        self.continuation, self.limit, self._obs = continuation, limit, {}

    def get(self, intro: str) -> ModelInput:
        ob = self._obs.get(intro)
        if ob is None:
            if len(self._obs) >= self.limit:
                self._obs.clear()
            ob = self._obs[intro] = self.continuation.first([{"role": "user", "content": intro}])
        return ob


_TYPOGRAPHY = str.maketrans({
    "\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "-",
    "\u00a0": " ",
})


def fold_reply(text: str) -> str | None:
    """`text` NFKC-folded (fullwidth letters become ASCII; curly quotes, en/em dashes and
    no-break spaces their ASCII forms) and stripped, or None when it still holds anything outside
    printable ASCII plus line breaks and tabs (look-alike letters, zero-width characters, invalid
    UTF-8)."""
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text.translate(_TYPOGRAPHY))
    text = text.strip()
    if not all(" " <= c <= "~" or c in "\n\t" for c in text):
        return None
    return text


__all__ = ["SOLVED", "VALID", "INVALID", "Turn", "TurnGameEnv", "IntroCache", "fold_reply"]
