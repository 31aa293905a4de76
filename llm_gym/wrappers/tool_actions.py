"""`ToolActions`: any llm-gym multi-turn env played through one `act(message)` tool, as TRL sees it.

TRL's multi-turn path (`trl.GRPOTrainer(environment_factory=...)`, with
`llm_gym.adapters.trl.TextEnvironment` as the environment) shows the model the env's opening text
after an instruction, with the `act` tool's schema in the system prompt; each model turn is parsed
for tool calls, each `act` call's `message` goes to the env, and the env's reply comes back as a
tool turn (`<tool_response>` in Qwen's template). `ToolActionsEnv` is that episode as a seed-API
`Env`, so our trainer plays exactly TRL's workload: the prompt is the renderer's own rendering with
the tool declared (`with_tools`; for `chat_template` it is `apply_chat_template(..., tools=[...])`
token for token), a sampled turn is parsed with the renderer's tool-call parser, and each next
observation is built by `llm_gym.renderers.continuation.Continuation`, which keeps the prefix
property (TRL concatenates prompt + completion + tool suffix the same way). Episode semantics follow
TRL 1.16's `_tool_call_loop` (read in `trl/trainer/grpo_trainer.py`): a turn with no parseable tool
call ends the episode (so does a turn whose `<tool_call>` blocks do not all parse: TRL's response
parser then falls back to plain text); every call of a turn is run in order, and a call TRL cannot
run (unknown tool name, `arguments` missing or not an object, a missing or extra argument, a
non-string message) gets an `{'error': ...}` tool reply and the episode goes on; the loop stops
after `max_tool_calling_iterations` rounds of calls (a later turn's calls are not run) or when the
episode's completion (sampled + tool tokens after the prompt) would exceed `max_completion_length`
or the context reaches `max_context_tokens` (TRL: the model's `max_position_embeddings`). Once the
wrapped env has ended, `act` answers "The episode is over. Total reward: R." as `TextEnvironment`
does and the model may keep calling it (`after_done="reply"`, TRL's behaviour), or the episode ends
with the wrapped one (`after_done="end"`). Reward: each step's reward is the wrapped env's reward
for the calls it ran, so the return is the wrapped env's return (`TextEnvironment.get_reward`).
Differences that remain: the text of an error reply names `act()` where Python's names the
method's qualified name; TRL cuts a turn that overruns the completion budget to the budget before
parsing (so do we) but then trains only the kept tokens (our trainer trains the whole sampled
turn); a turn truncated by the sampler's per-turn `max_tokens` (TRL has none) gets the template's
end-of-turn token appended by the continuation, where TRL appends the tool suffix right after the
cut; an exception raised by the wrapped env itself propagates (`TextEnv`'s rule for env bugs)
where TRL would turn it into an error reply. Gymnasium face: `register_tool_actions("llm/GuessNumber-v0")` registers
"llm/GuessNumber-act-v0", a `TextEnv` over `ToolActionsSource` (the same pattern as
`llm_gym.wrappers.from_text`: a wrapper is an `EnvSource`, so the result is groupable, poolable and
trainable by id); `gym.make` kwargs go to the wrapped env's source except this module's own knobs.
"""

from __future__ import annotations

import json
import re
from typing import Any, Sequence, cast

import numpy as np

from llm_gym.env_source import EnvCard, EnvSource
from llm_gym.model_input import ModelInput
from llm_gym.renderers import Message, Renderer, ToolSpec, with_tools
from llm_gym.renderers.continuation import Continuation
from llm_gym.renderers.tools import TOOL_CALL_CLOSE, TOOL_CALL_OPEN
from llm_gym.rl.types import (
    Action,
    ActionExtra,
    Env,
    InitialObservationOverflow,
    Observation,
    StepResult,
    StopCondition,
    release_env,
)

__all__ = [
    "ACT_TOOL",
    "DEFAULT_INSTRUCTION",
    "ToolActionsEnv",
    "ToolActionsSource",
    "register_tool_actions",
    "tool_actions_id",
]

# The schema transformers' `get_json_schema` derives from `TextEnvironment.act`'s docstring (what TRL
# renders); tests/llm_gym/wrappers/test_tool_actions.py checks the two stay equal.
# cast: a ToolSpec plus the "return" key transformers' schema has (ToolSpec does not declare it).
ACT_TOOL: ToolSpec = cast(ToolSpec, {
    "name": "act",
    "description": "Send your next move or message to the environment.",
    "parameters": {
        "type": "object",
        "properties": {"message": {"type": "string", "description": "Your move or reply, as plain text."}},
        "required": ["message"],
    },
    "return": {
        "type": "string",
        "description": "The environment's reply: its next observation, or the final result when "
        "the episode is over.",
    },
})
# `llm_gym.adapters.trl.multi_turn_dataset`'s user message (the env's opening text follows it).
DEFAULT_INSTRUCTION = (
    "You are playing an environment. Send each of your moves with the `act` tool; "
    "the environment replies with its observation.\n\n"
)
AFTER_DONE = ("reply", "end")
DEFAULT_MAX_COMPLETION_LENGTH = 4096
DEFAULT_MAX_CONTEXT_TOKENS = 32_768
_CHATML_TURN = re.compile(r"<\|im_start\|>(\w+)\n(.*?)(?:<\|im_end\|>|$)", re.S)
_BLOCK_BODY = re.compile(re.escape(TOOL_CALL_OPEN) + r"(.*?)" + re.escape(TOOL_CALL_CLOSE), re.S)
_OWN_KNOBS = ("env_id", "instruction", "system_prompt", "max_tool_calling_iterations",
              "max_completion_length", "max_context_tokens", "after_done")
_TEXT_ENV_ARGS = ("source", "tokenizer", "renderer", "split", "turn_limit", "render_mode",
                  "max_action_length")
_MAX_CACHED_PROMPTS = 256


def _observation_text(tokenizer: Any, tokens: Sequence[int]) -> str:
    """Observation tokens as the text of a tool reply, as `TextEnvironment` shows them: the
    non-assistant turns' contents when the text has ChatML markup, the plain decoded text else."""
    raw = tokenizer.decode(list(tokens), skip_special_tokens=False)
    turns = _CHATML_TURN.findall(raw)
    if turns:
        return "\n".join(c.strip() for role, c in turns if role != "assistant" and c.strip())
    return tokenizer.decode(list(tokens), skip_special_tokens=True).strip()


def _text_action(renderer: Renderer, text: str) -> list[int]:
    """The tokens of `text` ended by the renderer's first stop (what a sampler would send)."""
    tokens = list(renderer.tokenizer.encode(text, add_special_tokens=False))
    stops = renderer.get_stop_sequences()
    if stops:
        stop = stops[0]
        tokens += [int(stop)] if not isinstance(stop, str) else list(
            renderer.tokenizer.encode(stop, add_special_tokens=False))
    return tokens


def _tool_calls(message: Message, raw_text: str) -> list[tuple[str, Any]] | None:
    """The turn's calls as `(name, arguments)` pairs the way TRL's response parser reads them, or
    None when TRL would see no tool call: no `<tool_call>` block, or a block that is not a JSON
    object with a string `name` (invalid JSON, no name, an unclosed block: TRL's parser then
    falls back to plain text for the whole turn). A block with a name but `arguments` missing or
    not an object is still a call (TRL runs it and replies with the error). `raw_text` is the
    sampled turn's text (re-read, in order, only when our parser rejected a block)."""
    calls = message.get("tool_calls") or []
    unparsed = message.get("unparsed_tool_calls") or []
    if not calls and not unparsed:
        return None
    if not unparsed:
        return [(c.function.name, json.loads(c.function.arguments)) for c in calls]
    if raw_text.count(TOOL_CALL_OPEN) > raw_text.count(TOOL_CALL_CLOSE):
        return None  # an unclosed block
    out = []
    for body in _BLOCK_BODY.findall(raw_text):
        try:
            payload = json.loads(body.strip())
        except ValueError:
            return None
        if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
            return None
        out.append((payload["name"], payload.get("arguments", {})))
    return out or None


def _call_error(name: str, arguments: Any) -> str | None:
    """The error TRL's call `act(**arguments)` raises (TRL replies `{'error': str(e)}`), or None."""
    if name != ACT_TOOL["name"]:
        return f"Tool {name} not found."
    if not isinstance(arguments, dict):
        return f"act() argument after ** must be a mapping, not {type(arguments).__name__}"
    extra = [k for k in arguments if k != "message"]
    if extra:
        return f"act() got an unexpected keyword argument {extra[0]!r}"
    if "message" not in arguments:
        return "act() missing 1 required positional argument: 'message'"
    if not isinstance(arguments["message"], str):  # TextEnvironment cannot encode it
        return f"act() message must be a str, got {type(arguments['message']).__name__}"
    return None


class ToolActionsEnv(Env):
    """One episode of `env` (a seed-API multi-turn `Env`) played through the `act` tool.

    Args:
        env: the wrapped episode, fresh (its `initial_observation` not yet taken).
        renderer: the policy's renderer (without tools; the `act` tool is added here).
        env_renderer: the renderer `env` reads actions with and writes observations in (default:
            `env.renderer`, else `renderer`).
        continuation: a `Continuation` over `with_tools(renderer, [ACT_TOOL])` (shared by a source's
            episodes); made here when None.
        instruction, system_prompt, max_tool_calling_iterations, max_completion_length,
        max_context_tokens, after_done: see `ToolActionsSource` and the module docstring.

    Step metrics: `tool_calls`, `tool_errors` (this turn), `no_tool_call`, `malformed_tool_call`,
    the continuation's one-hot mode on a continuing step, the wrapped env's step metrics prefixed
    `env/`, and on the last step `tool_rounds`, `env_done` and a one-hot `stop/<reason>`
    (`completed`: a turn without tool call; `parse_error`: a turn whose blocks do not parse;
    `max_tool_calls`, `max_tokens`: the completion budget, `context_overflow`; with
    `after_done="end"` also `completed` when the wrapped env ends).
    """

    def __init__(
        self, env: Env, renderer: Renderer, *, env_renderer: Renderer | None = None,
        continuation: Continuation | None = None, instruction: str = DEFAULT_INSTRUCTION,
        system_prompt: str | None = None, max_tool_calling_iterations: int | None = None,
        max_completion_length: int | None = DEFAULT_MAX_COMPLETION_LENGTH,
        max_context_tokens: int = DEFAULT_MAX_CONTEXT_TOKENS, after_done: str = "reply",
        prompt_cache: dict | None = None,
    ) -> None:
        if after_done not in AFTER_DONE:
            raise ValueError(f"after_done must be one of {list(AFTER_DONE)}, got {after_done!r}")
        self.env = env
        self.renderer = renderer
        self.env_renderer = env_renderer or getattr(env, "renderer", None) or renderer
        self.continuation = continuation or Continuation(with_tools(renderer, [ACT_TOOL]))
        self.instruction = instruction
        self.system_prompt = system_prompt
        self.max_tool_calling_iterations = max_tool_calling_iterations
        self.max_completion_length = max_completion_length
        self.max_context_tokens = max_context_tokens
        self.after_done = after_done
        self._prompt_cache = prompt_cache
        self._stop = list(self.continuation.renderer.get_stop_sequences())
        self._messages: list[Message] = []
        self._ob: ModelInput | None = None
        self._prompt_len = 0
        self._env_ob_len = 0
        self._env_done = False
        self._return = 0.0
        self._rounds = 0
        self._done = False

    @property
    def stop_condition(self) -> StopCondition:
        return cast(StopCondition, list(self._stop))  # a copy, of the same kind (str or int)

    def close(self) -> None:
        release_env(self.env)

    async def initial_observation(self) -> tuple[Observation, StopCondition]:
        first = await self.env.initial_observation()
        if isinstance(first, InitialObservationOverflow):  # not handled here (it never was)
            raise TypeError("ToolActionsEnv: the wrapped env's prompt is over its token budget "
                            "(InitialObservationOverflow), which the act tool cannot play")
        env_ob, _ = first
        tokens = env_ob.to_ints()
        self._env_ob_len = len(tokens)
        text = _observation_text(self.env_renderer.tokenizer, tokens)
        self._messages = ([Message(role="system", content=self.system_prompt)] if self.system_prompt else [])
        self._messages.append(Message(role="user", content=self.instruction + text))
        cache = self._prompt_cache
        ob = cache.get(text) if cache is not None else None
        if ob is None:
            ob = self.continuation.first(self._messages)
            if cache is not None:
                if len(cache) >= _MAX_CACHED_PROMPTS:
                    cache.clear()
                cache[text] = ob
        self._ob = ob
        self._prompt_len = ob.length
        return ob, self.stop_condition

    async def _act(self, message: str) -> tuple[str, float, dict[str, float]]:
        """`TextEnvironment.act`: the reply text, the wrapped env's reward and its metrics."""
        if self._env_done:
            return f"The episode is over. Total reward: {self._return:g}.", 0.0, {}
        action = _text_action(self.env_renderer, message)
        result = await self.env.step(action)
        reward = float(result.reward)
        self._return += reward
        metrics = {f"env/{k}": float(v) for k, v in result.metrics.items()
                   if isinstance(v, (int, float, np.integer, np.floating))}
        if result.episode_done:
            self._env_done = True
            return f"The episode is over. Total reward: {self._return:g}.", reward, metrics
        tokens = result.next_observation.to_ints()
        # The reply is what the observation adds after the previous one and the action.
        start = self._env_ob_len + len(action)
        new = tokens[start:] if len(tokens) > start else tokens
        self._env_ob_len = len(tokens)
        return _observation_text(self.env_renderer.tokenizer, new), reward, metrics

    def _finish(self, reward: float, reason: str, metrics: dict, logs: dict) -> StepResult:
        self._done = True
        metrics.update({"tool_rounds": self._rounds, "env_done": float(self._env_done),
                        f"stop/{reason}": 1.0})
        logs["stop_reason"] = reason
        return StepResult(reward, True, ModelInput.empty(), self.stop_condition, metrics, logs)

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        if self._ob is None or self._done:
            raise RuntimeError("ToolActionsEnv: call initial_observation() first; envs are single-use")
        action = list(action)
        seen = action
        budget = self.max_completion_length
        used = self._ob.length - self._prompt_len
        if budget is not None and used + len(action) > budget:
            seen = action[:max(0, budget - used)]  # TRL cuts the turn to the budget, then parses it
        renderer = self.continuation.renderer
        message, _termination = renderer.parse_response(seen)
        raw = ""
        if message.get("unparsed_tool_calls"):
            raw = renderer.tokenizer.decode(seen, skip_special_tokens=False)
        calls = _tool_calls(message, raw)
        metrics: dict[str, float] = {"tool_calls": 0.0, "tool_errors": 0.0,
                                     "no_tool_call": 0.0, "malformed_tool_call": 0.0}
        logs: dict[str, Any] = {"response": str(message.get("content", ""))}
        if calls is None:
            malformed = TOOL_CALL_OPEN in str(message.get("content", "")) or bool(
                message.get("unparsed_tool_calls"))
            metrics["malformed_tool_call" if malformed else "no_tool_call"] = 1.0
            return self._finish(0.0, "parse_error" if malformed else "completed", metrics, logs)
        cap = self.max_tool_calling_iterations
        if cap is not None and self._rounds >= cap:
            return self._finish(0.0, "max_tool_calls", metrics, logs)
        self._rounds += 1
        reward, replies = 0.0, []
        for name, arguments in calls:
            metrics["tool_calls"] += 1
            error = _call_error(name, arguments)
            if error is not None:
                metrics["tool_errors"] += 1
                replies.append(Message(role="tool", name=name, content=str({"error": error})))
                continue
            text, r, env_metrics = await self._act(arguments["message"])
            reward += r
            metrics.update(env_metrics)
            replies.append(Message(role="tool", name=name, content=text))
        logs["replies"] = [m["content"] for m in replies]
        if self.after_done == "end" and self._env_done:
            return self._finish(reward, "completed", metrics, logs)
        if len(seen) < len(action):
            return self._finish(reward, "max_tokens", metrics, logs)
        self._messages = self._messages + [message, *replies]
        turn = self.continuation.next(self._ob, action, self._messages)
        ob = turn.observation
        if budget is not None and ob.length - self._prompt_len > budget:
            return self._finish(reward, "max_tokens", metrics, logs)
        if ob.length >= self.max_context_tokens:
            return self._finish(reward, "context_overflow", metrics, logs)
        metrics.update(turn.metrics)
        self._ob = ob
        return StepResult(reward, False, ob, self.stop_condition, metrics, logs)


def _check_optional_int(name: str, value: Any, low: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an int >= {low} or None, got {value!r}")
    return value


class ToolActionsSource(EnvSource):
    """The episodes of a registered llm-gym id (`env_id`), played through the `act` tool.

    Knobs (besides the wrapped env's own, which go to its source with the registered defaults):
    `env_id` (the wrapped id, set by `register_tool_actions`), `instruction` (the user message
    before the env's opening text; default TRL's adapter's, `DEFAULT_INSTRUCTION`),
    `system_prompt` (default None), `max_tool_calling_iterations` (rounds of tool calls, default
    None: no limit, as TRL), `max_completion_length` (sampled + tool tokens after the prompt,
    default 4096), `max_context_tokens` (default 32768), `after_done` ("reply", TRL's, or "end").
    The wrapped source gets this env's renderer (without tools) and split.
    """

    card = EnvCard(
        id="llm/ToolActions", family="wrappers",
        description="Any llm-gym multi-turn env played through one `act(message)` tool, as TRL's "
        "environment_factory path plays it.",
        multi_turn=True, reward_range=(-np.inf, np.inf), reward_meaning="the wrapped env's return",
        difficulty_knobs={k: "see llm_gym.wrappers.tool_actions" for k in _OWN_KNOBS},
        data_source="the wrapped env's", license="the wrapped env's",
    )

    def __init__(
        self, *, renderer: Renderer, split: str = "train", env_id: str | None = None,
        instruction: str = DEFAULT_INSTRUCTION, system_prompt: str | None = None,
        max_tool_calling_iterations: int | None = None,
        max_completion_length: int | None = DEFAULT_MAX_COMPLETION_LENGTH,
        max_context_tokens: int = DEFAULT_MAX_CONTEXT_TOKENS, after_done: str = "reply",
        **knobs: Any,
    ) -> None:
        import gymnasium as gym

        from llm_gym.registration import TEXT_ENV_ENTRY_POINT
        from llm_gym.text_env import resolve_source

        super().__init__(renderer=renderer, split=split)
        if not isinstance(env_id, str) or env_id not in gym.registry:
            raise ValueError(
                f"ToolActionsSource needs env_id=<a registered llm-gym id>, got {env_id!r}; use "
                "llm_gym.wrappers.tool_actions.register_tool_actions('llm/GuessNumber-v0')"
            )
        spec = gym.spec(env_id)
        if spec.entry_point != TEXT_ENV_ENTRY_POINT or "source" not in spec.kwargs:
            raise ValueError(f"{env_id!r} is not an llm-gym TextEnv id (entry point {spec.entry_point!r})")
        if after_done not in AFTER_DONE:
            raise ValueError(f"after_done must be one of {list(AFTER_DONE)}, got {after_done!r}")
        self.env_id = env_id
        self.instruction = str(instruction)
        self.system_prompt = system_prompt
        self.max_tool_calling_iterations = _check_optional_int(
            "max_tool_calling_iterations", max_tool_calling_iterations, 0)
        self.max_completion_length = _check_optional_int("max_completion_length", max_completion_length, 1)
        context_tokens = _check_optional_int("max_context_tokens", max_context_tokens, 1)
        if context_tokens is None:  # ToolActionsEnv compares every observation's length with it
            raise ValueError("max_context_tokens must be an int >= 1, got None")
        self.max_context_tokens = context_tokens
        self.after_done = after_done
        inner_knobs = {k: v for k, v in spec.kwargs.items() if k not in _TEXT_ENV_ARGS}
        inner_knobs.update(knobs)
        inner_cls = resolve_source(spec.kwargs["source"])
        self.inner = inner_cls(renderer=renderer, split=split, **inner_knobs)
        self.card = EnvCard(**{**vars(type(self).card), "id": f"{env_id} (act tool)",
                               "family": self.inner.card.family,
                               "reward_range": tuple(self.inner.reward_range),
                               "description": f"{self.inner.card.description} Played through one "
                               "`act(message)` tool (llm_gym.wrappers.tool_actions)."})
        self.tool_renderer = with_tools(renderer, [ACT_TOOL])
        self.continuation = Continuation(self.tool_renderer)
        self._prompts: dict[str, ModelInput] = {}  # first prompt per opening text (bounded)

    @property
    def reward_range(self) -> tuple[float, float]:
        return tuple(self.inner.reward_range)  # type: ignore[return-value]

    def make_env(self, rng: np.random.Generator) -> ToolActionsEnv:
        return ToolActionsEnv(
            self.inner.make_env(rng), self.renderer, env_renderer=self.renderer,
            continuation=self.continuation, instruction=self.instruction,
            system_prompt=self.system_prompt,
            max_tool_calling_iterations=self.max_tool_calling_iterations,
            max_completion_length=self.max_completion_length,
            max_context_tokens=self.max_context_tokens, after_done=self.after_done,
            prompt_cache=self._prompts,
        )

    def task_key(self, env: Any) -> Any:
        return self.inner.task_key(env.env) if isinstance(env, ToolActionsEnv) else None


def tool_actions_id(env_id: str) -> str:
    """The id `register_tool_actions` gives `env_id`: "llm/GuessNumber-v0" -> "llm/GuessNumber-act-v0"."""
    head, sep, version = env_id.rpartition("-v")
    if not sep or not version.isdigit():
        return f"{env_id}-act"
    return f"{head}-act-v{version}"


def register_tool_actions(env_id: str, *, id: str | None = None, **defaults: Any) -> str:
    """Register `id` (default `tool_actions_id(env_id)`) as `env_id` played through the `act` tool
    and return it: `gym.make(id, tokenizer=..., renderer=..., **knobs)` is a `TextEnv` over
    `ToolActionsSource(env_id=env_id, **defaults, **knobs)`. Registering twice is a no-op."""
    import gymnasium as gym

    from llm_gym.registration import register_env

    if not isinstance(env_id, str) or env_id not in gym.registry:
        raise ValueError(f"register_tool_actions: {env_id!r} is not a registered env id")
    new_id = id or tool_actions_id(env_id)
    register_env(new_id, "llm_gym.wrappers.tool_actions:ToolActionsSource", env_id=env_id, **defaults)
    return new_id
