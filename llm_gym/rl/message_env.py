"""Message-level environments (`MessageEnv`) and their token-level adapter (`EnvFromMessageEnv`).

Names and semantics follow the Tinker cookbook's `tinker_cookbook.rl.message_env`: a `MessageEnv`
sees whole chat messages (`list[Message]` in, one assistant `Message` per step) and never touches
tokens; `EnvFromMessageEnv(renderer, message_env)` renders its conversation into observations,
parses sampled tokens back into a message, and turns the failure cases into defined rewards:

* the sampler stopped on `length` (`extra["stop_reason"] == "length"`): `context_overflow_reward`,
  episode over, metrics `max_tokens_reached` and `stop/max_tokens` (or, with
  `terminate_on_length=False`, the truncated turn is kept when the env supports
  `observe_truncated_response`);
* the response did not parse cleanly (no stop sequence / EOS): `failed_parse_reward`, metric
  `parse_error` (and `stop/parse_error` when `terminate_on_parse_error` ends the episode);
* the next prompt plus `max_generation_tokens` would exceed `max_trajectory_tokens`:
  `context_overflow_reward`, episode over, metrics `context_overflow` and `stop/context_overflow`.

With a `ParseErrorPolicy` (`parse_error_policy=`, or pushed by the rollout runner through
`set_parse_error_policy`) a structural parse failure instead ends the episode with the policy's
`terminal_reward`, metrics `parse_error`, `stop/parse_error` (and `parse_error_masked` when the
policy masks error turns) and logs naming the failure; content failures (unparseable tool calls)
are the inner `MessageEnv`'s to retry, and the policy is forwarded to it when it has
`set_parse_error_policy`. `rollout_limits=` is advertised for the runner, which enforces it when
it is given no limits of its own; `set_max_tool_calls` forwards the runner's tool-call cap.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from llm_gym.completers import StopCondition
from llm_gym.model_input import ModelInput
from llm_gym.renderers import Message, ParseTermination, Renderer, classify_parse_failure
from llm_gym.rl import types
from llm_gym.rl.rollout_limits import ParseErrorPolicy, RolloutLimits
from llm_gym.rl.types import STOP_METRIC_PREFIX, InitialObservationOverflow, StopReason

logger = logging.getLogger(__name__)

_STOP_MAX_TOKENS = f"{STOP_METRIC_PREFIX}{StopReason.MAX_TOKENS}"
_STOP_CONTEXT_OVERFLOW = f"{STOP_METRIC_PREFIX}{StopReason.CONTEXT_OVERFLOW}"
_STOP_PARSE_ERROR = f"{STOP_METRIC_PREFIX}{StopReason.PARSE_ERROR}"


@dataclass
class MessageStepResult:
    """What `MessageEnv.step` returns: reward, whether the episode ended, the whole conversation
    so far (`next_messages`, rendered into the next observation), and an optional stop override."""

    reward: float
    episode_done: bool
    next_messages: list[Message]
    metrics: dict[str, float] = field(default_factory=dict)
    logs: types.Logs = field(default_factory=dict)
    next_stop_condition: StopCondition | None = None


class MessageEnv(ABC):
    """An episode at the level of chat messages. Single-use, like `Env`."""

    @abstractmethod
    async def initial_observation(self) -> list[Message]:
        """The conversation the policy answers first."""

    @abstractmethod
    async def step(self, message: Message) -> MessageStepResult:
        """Take the policy's (cleanly parsed) assistant message; return reward and next state."""

    async def observe_truncated_response(self, message: Message) -> list[Message] | None:
        """Record a response cut off by the per-turn token cap and return the updated conversation,
        or None (the default) when this env cannot, so the episode ends as on any `length` stop."""
        return None

    async def add_messages(self, messages: list[Message]) -> list[Message] | None:
        """Append externally injected messages; None (the default) when not supported."""
        return None


class EnvFromMessageEnv(types.Env):
    """A token-level `Env` driving a `MessageEnv` through `renderer` (see the module docstring)."""

    def __init__(
        self,
        renderer: Renderer,
        message_env: MessageEnv,
        failed_parse_reward: float = -1.0,
        terminate_on_parse_error: bool = True,
        max_trajectory_tokens: int | None = None,
        max_generation_tokens: int | None = None,
        context_overflow_reward: float = -0.1,
        terminate_on_length: bool = True,
        parse_error_policy: ParseErrorPolicy | None = None,
        rollout_limits: RolloutLimits | None = None,
    ):
        self.renderer = renderer
        self.message_env = message_env
        self.failed_parse_reward = failed_parse_reward
        self.terminate_on_parse_error = terminate_on_parse_error
        self.max_trajectory_tokens = max_trajectory_tokens
        self.max_generation_tokens = max_generation_tokens
        self.context_overflow_reward = context_overflow_reward
        self.terminate_on_length = terminate_on_length
        self.parse_error_policy = parse_error_policy
        # Budgets for the rollout runner, which reads them when it is given no limits of its own.
        self.rollout_limits = rollout_limits
        self._base_stop_condition = renderer.get_stop_sequences()
        self.example_id: str | None = getattr(message_env, "example_id", None)

    def close(self) -> None:
        """Release the message env's resources (its optional `close()`; see `release_env`)."""
        types.release_env(self.message_env)

    async def _render(self, messages: list[Message]) -> ModelInput:
        # Tokenising a long conversation is CPU work; a thread keeps other rollouts running.
        return await asyncio.to_thread(self.renderer.build_generation_prompt, messages)

    def _exceeds_context_limit(self, observation_length: int) -> bool:
        if self.max_trajectory_tokens is None:
            return False
        return observation_length + (self.max_generation_tokens or 0) > self.max_trajectory_tokens

    def _end(self, reward: float, metrics: types.Metrics, logs: types.Logs | None = None) -> types.StepResult:
        return types.StepResult(
            reward=reward,
            episode_done=True,
            next_observation=ModelInput.empty(),
            next_stop_condition=self._base_stop_condition,
            metrics=metrics,
            logs=logs or {},
        )

    async def initial_observation(self):
        messages = await self.message_env.initial_observation()
        model_input = await self._render(messages)
        if self._exceeds_context_limit(model_input.length):
            reserve = self.max_generation_tokens or 0
            return InitialObservationOverflow(
                reward=self.context_overflow_reward,
                metrics={"max_tokens_reached": 1.0, _STOP_MAX_TOKENS: 1.0},
                logs={
                    "initial_observation_overflow": (
                        f"Initial observation ({model_input.length} tokens) + max_generation_tokens "
                        f"({reserve}) = {model_input.length + reserve} exceeds max_trajectory_tokens "
                        f"({self.max_trajectory_tokens}). This task's prompt is too long for the "
                        "model's context window."
                    )
                },
            )
        return model_input, self._base_stop_condition

    async def step(self, action: types.Action, *, extra: types.ActionExtra | None = None) -> types.StepResult:
        if (extra or {}).get("stop_reason", "stop") == "length":
            if not self.terminate_on_length:
                continued = await self._continue_after_truncation(action)
                if continued is not None:
                    return continued
            return self._end(self.context_overflow_reward, {"max_tokens_reached": 1.0, _STOP_MAX_TOKENS: 1.0})

        message, termination = self.renderer.parse_response(action)
        if not termination.is_clean:
            if self.parse_error_policy is not None:
                return self._structural_parse_error(message, termination)
            metrics: types.Metrics = {"parse_error": 1.0}
            if self.terminate_on_parse_error:
                metrics[_STOP_PARSE_ERROR] = 1.0
            return types.StepResult(
                reward=self.failed_parse_reward,
                episode_done=self.terminate_on_parse_error,
                next_observation=ModelInput.empty(),
                next_stop_condition=self._base_stop_condition,
                metrics=metrics,
            )

        msg_step = await self.message_env.step(message)
        next_observation = await self._render(msg_step.next_messages)
        # Only a continuing episode needs room for another sample; a finished one keeps its reward.
        if not msg_step.episode_done and self._exceeds_context_limit(next_observation.length):
            return self._end(
                self.context_overflow_reward,
                {**msg_step.metrics, "context_overflow": 1.0, _STOP_CONTEXT_OVERFLOW: 1.0},
                msg_step.logs,
            )
        return types.StepResult(
            reward=msg_step.reward,
            episode_done=msg_step.episode_done,
            next_observation=next_observation,
            next_stop_condition=msg_step.next_stop_condition or self._base_stop_condition,
            metrics=msg_step.metrics,
            logs=msg_step.logs,
        )

    def _structural_parse_error(self, message: Message, termination: ParseTermination) -> types.StepResult:
        # The turn's boundary is unknown, so it is never retried (unlike a content failure).
        policy = self.parse_error_policy
        assert policy is not None  # step() calls this only under a ParseErrorPolicy
        failure = classify_parse_failure(message, termination)
        assert failure is not None  # termination is not clean, so this is a structural failure
        kind, detail = failure
        metrics: types.Metrics = {"parse_error": 1.0, _STOP_PARSE_ERROR: 1.0}
        if policy.mask_error_turns:
            metrics[types.PARSE_ERROR_MASKED_METRIC_KEY] = 1.0
        return self._end(policy.terminal_reward, metrics,
                         {"parse_failure_kind": str(kind), "parse_failure_detail": detail})

    def set_parse_error_policy(self, policy: ParseErrorPolicy) -> None:
        """Use `policy` for structural failures and pass it on to the inner env for content ones
        (the runner's seam)."""
        self.parse_error_policy = policy
        setter = getattr(self.message_env, "set_parse_error_policy", None)
        if setter is not None:
            setter(policy)
        elif policy.max_consecutive > 0:
            logger.warning(
                "ParseErrorPolicy.max_consecutive=%d is configured, but %s does not support a "
                "parse-error policy; content parse failures will not be retried (structural "
                "handling still applies).", policy.max_consecutive, type(self.message_env).__name__,
            )

    def set_max_tool_calls(self, max_tool_calls: int) -> None:
        """Pass the runner's tool-call cap to the inner env (tools run there); a warning when it
        cannot take one."""
        setter = getattr(self.message_env, "set_max_tool_calls", None)
        if setter is None:
            logger.warning(
                "max_tool_calls=%d is configured, but %s does not support a tool-call limit; the "
                "limit will not be enforced.", max_tool_calls, type(self.message_env).__name__,
            )
        else:
            setter(max_tool_calls)

    async def _continue_after_truncation(self, action: types.Action) -> types.StepResult | None:
        message, _ = self.renderer.parse_response(action)  # a cut-off turn rarely parses cleanly
        updated = await self.message_env.observe_truncated_response(message)
        if updated is None:
            return None
        next_observation = await self._render(updated)
        if self._exceeds_context_limit(next_observation.length):
            return self._end(self.context_overflow_reward, {"context_overflow": 1.0, _STOP_CONTEXT_OVERFLOW: 1.0})
        return types.StepResult(
            reward=0.0,
            episode_done=False,
            next_observation=next_observation,
            next_stop_condition=self._base_stop_condition,
            logs={"truncated_turn": "sampling stopped on 'length'; turn kept, episode continues"},
        )

    async def inject_messages(self, messages: list[Message]) -> tuple[ModelInput, StopCondition]:
        """Append messages through `MessageEnv.add_messages` and return the re-rendered prompt."""
        updated = await self.message_env.add_messages(messages)
        if updated is None:
            raise TypeError(
                f"{type(self.message_env).__name__} does not support message injection "
                "(add_messages returned None); implement MessageEnv.add_messages"
            )
        return await self._render(updated), self._base_stop_condition


__all__ = ["EnvFromMessageEnv", "InitialObservationOverflow", "MessageEnv", "MessageStepResult"]
