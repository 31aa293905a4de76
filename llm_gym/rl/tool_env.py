"""A tool-using agent episode (`AgentToolMessageEnv`) and its builder (`build_agent_tool_env`).

The cookbook's `tinker_cookbook.tool_use.agent_tool_message_env`, same names and semantics: each
step takes the policy's parsed assistant message; its `tool_calls` run (concurrently with
`asyncio.gather` under "parallel", in order under "sequential"; sync tools in the env's
`concurrent.futures` executor, so a group's episodes and their tools overlap), each result is
appended as a `tool` message with the call's `tool_call_id` (the policy's id, or `call_<turn>_<i>`
when it wrote none), and the episode goes on. It ends when a turn makes no tool call (the answer),
a tool asks to stop, `max_turns` turns were taken, or `max_tool_calls` is used up (the calls over
the budget are dropped); then `reward_fn(messages)` grades the conversation once. A turn whose
calls all failed to parse scores `failed_parse_reward` (ending the episode when
`terminate_on_parse_error`), or, under a `ParseErrorPolicy`, is retried with a corrective user
message up to `max_consecutive` times. Unknown tools, bad arguments, exceptions and timeouts inside
a tool become `Error: ...` tool messages (metric `tool_errors`), and tool output over
`max_tool_output_chars` is cut with a note. `build_agent_tool_env` wraps the episode in
`EnvFromMessageEnv` over a renderer that declares the tools (`llm_gym.renderers.tools.with_tools`).

Extras over the cookbook, all defaulted to its behaviour or to "off": `executor`,
`tool_timeout_s`, `max_tool_output_chars`, and sync or float-returning reward functions.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
from concurrent.futures import Executor
from typing import Any, Awaitable, Callable, Sequence, cast

from llm_gym.renderers import Message, Renderer, ToolCall, UnparsedToolCall, get_text_content
from llm_gym.renderers.content import PARSE_FAILURE_DETAIL_MAX_CHARS
from llm_gym.renderers.tools import with_tools
from llm_gym.rl import types
from llm_gym.rl.message_env import EnvFromMessageEnv, MessageEnv, MessageStepResult
from llm_gym.rl.rollout_limits import ParseErrorPolicy, RolloutLimits, TerminationRewardPolicy
from llm_gym.rl.rollout_presets import default_rollout_config_for_model
from llm_gym.tools import Tool, ToolResult, error_tool_result, handle_tool_call

logger = logging.getLogger(__name__)

RewardFn = Callable[
    [list[Message]], "Awaitable[tuple[float, dict[str, float]]] | tuple[float, dict[str, float]] | float"
]
"""Grades a finished episode from its messages: sync or async, returning `(reward, metrics)` or a
bare reward."""

TOOL_EXECUTIONS = ("parallel", "sequential")
DEFAULT_MAX_TOOL_OUTPUT_CHARS = 8192


async def _bounded(awaitable: Awaitable[Any], timeout_s: float | None) -> Any:
    """`await awaitable`, cancelled after `timeout_s` (TimeoutError). Works without a current
    task (TextEnv steps coroutines by hand), which `asyncio.timeout` needs."""
    if timeout_s is None:
        return await awaitable
    task = asyncio.ensure_future(awaitable)
    done, _ = await asyncio.wait({task}, timeout=timeout_s)
    if not done:
        task.cancel()
        raise TimeoutError(f"timed out after {timeout_s} s")
    return task.result()


def _stop(reason: str) -> str:
    return f"{types.STOP_METRIC_PREFIX}{reason}"


class AgentToolMessageEnv(MessageEnv):
    """One tool-using episode at the level of messages (see the module docstring)."""

    def __init__(
        self,
        tools: Sequence[Tool],
        initial_messages: Sequence[Message],
        max_turns: int,
        reward_fn: RewardFn,
        *,
        failed_parse_reward: float = -0.1,
        terminate_on_parse_error: bool = True,
        max_tool_calls: int | None = None,
        parse_error_policy: ParseErrorPolicy | None = None,
        tool_execution: str = "parallel",
        termination_policy: TerminationRewardPolicy | None = None,
        executor: Executor | None = None,
        tool_timeout_s: float | None = None,
        max_tool_output_chars: int | None = DEFAULT_MAX_TOOL_OUTPUT_CHARS,
    ) -> None:
        if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
            raise ValueError(f"max_turns must be a positive int, got {max_turns!r}")
        if tool_execution == "concurrent_safe":
            raise NotImplementedError(
                "tool_execution='concurrent_safe' is reserved (tools carry no concurrency-safety marker "
                "to split on yet); use 'parallel' or 'sequential'"
            )
        if tool_execution not in TOOL_EXECUTIONS:
            raise ValueError(f"tool_execution must be one of {TOOL_EXECUTIONS}, got {tool_execution!r}")
        if max_tool_calls is not None and (isinstance(max_tool_calls, bool) or max_tool_calls < 0):
            raise ValueError(f"max_tool_calls must be a non-negative int or None, got {max_tool_calls!r}")
        names = [t.name for t in tools]
        if len(set(names)) != len(names):
            raise ValueError(f"tool names must be unique, got {names}")
        self.tools = list(tools)
        self.initial_messages = [cast(Message, dict(m)) for m in initial_messages]
        self.max_turns = max_turns
        self.reward_fn = reward_fn
        self.failed_parse_reward = failed_parse_reward
        self.terminate_on_parse_error = terminate_on_parse_error
        self.max_tool_calls = max_tool_calls
        self.parse_error_policy = parse_error_policy
        self.tool_execution = tool_execution
        self.termination_policy = termination_policy
        self.executor = executor
        self.tool_timeout_s = tool_timeout_s
        self.max_tool_output_chars = max_tool_output_chars
        self.history: list[Message] = []
        self._tool_dict = {t.name: t for t in self.tools}
        self._turn_count = 0
        self._tool_calls_made = 0
        self._tool_errors = 0
        self._consecutive_parse_errors = 0
        self._should_stop = False

    # --- seams for the rollout runner ----------------------------------------------------------
    def set_max_tool_calls(self, max_tool_calls: int) -> None:
        """Apply the runner's tool-call cap; the tighter of it and the env's own wins."""
        self.max_tool_calls = (
            max_tool_calls if self.max_tool_calls is None else min(self.max_tool_calls, max_tool_calls)
        )

    def set_parse_error_policy(self, policy: ParseErrorPolicy) -> None:
        self.parse_error_policy = policy

    @property
    def tool_calls_made(self) -> int:
        return self._tool_calls_made

    def close(self) -> None:
        """Release every tool that holds something (an optional `close()`: a sandbox, which
        kills its runs still going). Called once the episode is over or abandoned (see
        `llm_gym.rl.types.release_env`); a tool call after it gets the tool's error result."""
        for t in self.tools:
            types.release_env(t)

    # --- MessageEnv ----------------------------------------------------------------------------
    async def initial_observation(self) -> list[Message]:
        if not self.history:
            self.history = [cast(Message, dict(m)) for m in self.initial_messages]
        return self.history

    async def observe_truncated_response(self, message: Message) -> list[Message]:
        self.history.append(message)
        return self.history

    async def add_messages(self, messages: list[Message]) -> list[Message]:
        self.history.extend(messages)
        return self.history

    async def _run_one(self, call: ToolCall, call_id: str) -> ToolResult:
        run = handle_tool_call(self._tool_dict, call, executor=self.executor, call_id=call_id)
        try:
            result = await _bounded(run, self.tool_timeout_s)
        except TimeoutError:
            result = error_tool_result(f"tool '{call.function.name}' timed out after {self.tool_timeout_s} s",
                                       call_id=call_id, name=call.function.name, error_type="timeout")
        for m in result.messages:
            m.setdefault("tool_call_id", call_id)
            self._truncate(m)
        return result

    def _truncate(self, message: Message) -> None:
        cap = self.max_tool_output_chars
        content = message.get("content")
        if cap is None or not isinstance(content, str) or len(content) <= cap:
            return
        message["content"] = content[:cap] + f"\n... [output truncated: {len(content) - cap} more characters]"

    async def _handle_tool_calls(self, calls: list[ToolCall], ids: list[str]) -> list[Message]:
        if self.tool_execution == "sequential":
            results = [await self._run_one(c, i) for c, i in zip(calls, ids)]
        else:
            results = list(await asyncio.gather(*(self._run_one(c, i) for c, i in zip(calls, ids))))
        added: list[Message] = []
        for result in results:
            if result.metrics.get("tool_error"):
                self._tool_errors += 1
            self.history.extend(result.messages)
            added.extend(result.messages)
            self._should_stop = self._should_stop or result.should_stop
        return added

    async def step(self, message: Message) -> MessageStepResult:
        self._turn_count += 1
        metrics: dict[str, float] = {}
        logs: types.Logs = {}
        calls: list[ToolCall] = list(message.get("tool_calls") or [])
        unparsed: list[UnparsedToolCall] = list(message.get("unparsed_tool_calls") or [])
        ids = [c.id or f"call_{self._turn_count}_{i}" for i, c in enumerate(calls)]
        if calls and any(c.id is None for c in calls):  # history shows the ids the tool turns answer
            message = dict(message)  # type: ignore[assignment]
            message["tool_calls"] = [dataclasses.replace(c, id=i) for c, i in zip(calls, ids)]
            calls = message["tool_calls"]
        self.history.append(message)
        text = get_text_content(message)
        if text:
            logs["assistant_content"] = text
        max_turns_reached = self._turn_count >= self.max_turns
        if unparsed:
            metrics["parse_error"] = 1.0
            logs["parse_errors"] = "\n".join(u.error for u in unparsed)[:PARSE_FAILURE_DETAIL_MAX_CHARS]

        if unparsed and not calls:
            self._consecutive_parse_errors += 1
            if self.parse_error_policy is not None:
                return self._content_parse_error_step(unparsed, metrics, logs, max_turns_reached)
            done = self.terminate_on_parse_error or max_turns_reached
            if max_turns_reached:
                metrics["max_turns"] = 1.0
            if done:
                metrics[_stop(types.StopReason.PARSE_ERROR)] = 1.0
                metrics.update(self._episode_metrics())
            return MessageStepResult(self.failed_parse_reward, done, self.history, metrics, logs)
        self._consecutive_parse_errors = 0

        capped = False
        to_run, run_ids = calls, ids
        if calls and self.max_tool_calls is not None:
            budget = max(self.max_tool_calls - self._tool_calls_made, 0)
            if len(calls) > budget:
                capped = True
                to_run, run_ids = calls[:budget], ids[:budget]
                logs["tool_calls_dropped"] = (
                    f"{len(calls) - budget} tool call(s) dropped: max_tool_calls={self.max_tool_calls} reached"
                )
        if to_run:
            for i, c in enumerate(to_run):
                logs[f"tool_call_{i}"] = f"{c.function.name}({c.function.arguments})"[:PARSE_FAILURE_DETAIL_MAX_CHARS]
            added = await self._handle_tool_calls(to_run, run_ids)
            self._tool_calls_made += len(to_run)
            for i, m in enumerate(added):
                # Tool messages carry content; one without raises KeyError here, as before.
                content = m["content"]  # pyright: ignore[reportTypedDictNotRequiredAccess]
                logs[f"tool_result_{i}"] = _content_for_log(content)[:PARSE_FAILURE_DETAIL_MAX_CHARS]

        answered = not calls
        done = answered or max_turns_reached or self._should_stop or capped
        if max_turns_reached and not answered:
            metrics["max_turns"] = 1.0
        if self._should_stop:
            metrics["tool_stopped"] = 1.0
        if capped:
            metrics["max_tool_calls"] = 1.0
        reward = 0.0
        if done:
            if answered:
                reason = types.StopReason.COMPLETED
            elif self._should_stop:
                reason = types.StopReason.TOOL_STOPPED
            elif capped:
                reason = types.StopReason.MAX_TOOL_CALLS
            else:
                reason = types.StopReason.MAX_TURNS
            metrics[_stop(reason)] = 1.0
            reward, reward_metrics = await self._grade()
            metrics.update(reward_metrics)
            metrics.update(self._episode_metrics())
        return MessageStepResult(reward, done, self.history, metrics, logs)

    def _episode_metrics(self) -> dict[str, float]:
        return {"tool_calls": float(self._tool_calls_made), "tool_errors": float(self._tool_errors),
                "turns": float(self._turn_count)}

    async def _grade(self) -> tuple[float, dict[str, float]]:
        policy = self.termination_policy
        messages = self.history
        if policy is not None and not policy.pass_all_messages_to_grader:
            messages = self.history[len(self.initial_messages):]
        timeout = policy.grader_timeout_seconds if policy is not None else None
        out: Any = self.reward_fn(messages)
        if inspect.isawaitable(out):
            out = await _bounded(out, timeout)
        if isinstance(out, tuple):
            reward, reward_metrics = out
            return float(reward), dict(reward_metrics)
        return float(out), {}

    def _content_parse_error_step(self, unparsed, metrics, logs, max_turns_reached) -> MessageStepResult:
        policy = self.parse_error_policy
        assert policy is not None  # step() calls this only under a ParseErrorPolicy
        logs["parse_failure_kind"] = "content"
        if policy.mask_error_turns:
            metrics[types.PARSE_ERROR_MASKED_METRIC_KEY] = 1.0
        if self._consecutive_parse_errors <= policy.max_consecutive and not max_turns_reached:
            details = "\n".join(u.error for u in unparsed)[:PARSE_FAILURE_DETAIL_MAX_CHARS]
            self.history.append(Message(role="user", content=policy.retry_message_template.format(details=details)))
            logs["parse_error_retry"] = (
                f"injected corrective message (consecutive parse error {self._consecutive_parse_errors}, "
                f"budget {policy.max_consecutive})"
            )
            return MessageStepResult(-policy.penalty_per_error, False, self.history, metrics, logs)
        if max_turns_reached:
            metrics["max_turns"] = 1.0
        metrics[_stop(types.StopReason.PARSE_ERROR)] = 1.0
        metrics.update(self._episode_metrics())
        return MessageStepResult(policy.terminal_reward, True, self.history, metrics, logs)


def _content_for_log(content: Any) -> str:
    """A message's content as one log line: text as is, thinking as `<think>...</think>`, an
    image as `<image>URL</image>` or `<image>Image(WxH, mode)</image>` (never its pixels)."""
    if isinstance(content, str):
        return content
    pieces = []
    for part in content:
        kind = part.get("type")
        if kind == "text":
            pieces.append(part["text"])
        elif kind == "thinking":
            pieces.append(f"<think>{part['thinking']}</think>")
        elif kind == "image":
            image = part.get("image")
            size, mode = getattr(image, "size", None), getattr(image, "mode", None)
            shown = image if isinstance(image, str) else (
                f"Image({size[0]}x{size[1]}, {mode})" if size and mode else type(image).__name__)
            pieces.append(f"<image>{shown}</image>")
        else:
            pieces.append(f"<{kind}>")
    return "\n".join(pieces)


def build_agent_tool_env(
    renderer: Renderer,
    tools: Sequence[Tool],
    initial_messages: Sequence[Message],
    reward_fn: RewardFn,
    *,
    rollout_config: Any = None,
    model_name: str | None = None,
    max_turns: int | None = None,
    failed_parse_reward: float = -0.1,
    terminate_on_parse_error: bool = True,
    max_tool_calls: int | None = None,
    max_trajectory_tokens: int | None = None,
    max_generation_tokens: int | None = None,
    context_overflow_reward: float = -0.1,
    terminate_on_length: bool | None = None,
    parse_error_policy: ParseErrorPolicy | None = None,
    executor: Executor | None = None,
    tool_timeout_s: float | None = None,
    max_tool_output_chars: int | None = DEFAULT_MAX_TOOL_OUTPUT_CHARS,
    declare_tools: bool = True,
) -> EnvFromMessageEnv:
    """An `EnvFromMessageEnv` for a tool-using agent (the cookbook's function, same keywords).

    `rollout_config` (a `llm_gym.rl.rollout_presets.RolloutConfig`) supplies `max_turns`,
    `max_tool_calls` (tighter cap wins), the parse-error policy, tool execution order and grader
    policy where the keywords do not; with a cumulative token budget in it the env defaults to
    `terminate_on_length=False` (the runner owns length stops). Without `rollout_config`,
    `model_name` picks the model's default (`default_rollout_config_for_model`: agentic for
    Inkling models, simple otherwise); pass `rollout_config=simple()` to opt out. `max_turns`
    defaults to 5.
    `declare_tools=True` renders with `with_tools(renderer, specs)`, so the prompt lists the tools
    (pass False when `initial_messages` already declare them). Returns the token-level env; its
    `message_env` is the `AgentToolMessageEnv`.
    """
    cfg = rollout_config
    if cfg is None and model_name is not None:
        cfg = default_rollout_config_for_model(model_name)
    limits: RolloutLimits | None = getattr(cfg, "limits", None)
    if max_turns is None:
        max_turns = limits.max_turns if limits is not None and limits.max_turns is not None else 5
    if parse_error_policy is None and cfg is not None:
        parse_error_policy = cfg.parse_errors
    if limits is not None and limits.max_tool_calls is not None:
        max_tool_calls = limits.max_tool_calls if max_tool_calls is None else min(max_tool_calls, limits.max_tool_calls)
    if terminate_on_length is None:
        runner_owns_length = limits is not None and any(
            x is not None for x in (limits.max_trajectory_tokens, limits.max_sampled_tokens, limits.max_turn_tokens)
        )
        terminate_on_length = not runner_owns_length
    tool_execution = getattr(cfg, "tool_execution", "parallel")
    message_env = AgentToolMessageEnv(
        tools, initial_messages, max_turns, reward_fn,
        failed_parse_reward=failed_parse_reward, terminate_on_parse_error=terminate_on_parse_error,
        max_tool_calls=max_tool_calls, parse_error_policy=parse_error_policy,
        tool_execution=tool_execution, termination_policy=getattr(cfg, "termination", None),
        executor=executor, tool_timeout_s=tool_timeout_s, max_tool_output_chars=max_tool_output_chars,
    )
    if declare_tools and tools:
        renderer = with_tools(renderer, [t.to_spec() for t in tools])
    return EnvFromMessageEnv(
        renderer=renderer, message_env=message_env,
        failed_parse_reward=failed_parse_reward, terminate_on_parse_error=terminate_on_parse_error,
        max_trajectory_tokens=max_trajectory_tokens, max_generation_tokens=max_generation_tokens,
        context_overflow_reward=context_overflow_reward, terminate_on_length=terminate_on_length,
        parse_error_policy=parse_error_policy, rollout_limits=limits,
    )


__all__ = ["AgentToolMessageEnv", "RewardFn", "build_agent_tool_env"]
