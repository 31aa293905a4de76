"""Chat-template renderer: any HF tokenizer's own `apply_chat_template`, token for token.

Prompts are exactly `tokenizer.apply_chat_template(messages, add_generation_prompt=True)`; a
supervised example is the full conversation's template tokens, with loss weights found by rendering
growing prefixes of the conversation (so weights line up with the template's own tokens, whatever
the template does): an assistant turn is trained from the end of the generation prompt that precedes
it up to and including its end-of-turn token (the template's text after that token, such as a
newline, is not trained, because sampling stops at the end-of-turn token). Sampling stops on EOS
and on the end-of-turn token the template emits. `has_extension_property` is probed once per
renderer, lazily: a few small conversations are rendered and it holds when every next-turn prompt
starts with the previous prompt + the template's own tokens for the assistant turn (false, e.g.,
for templates that strip reasoning from earlier turns); multi-turn prompts are built by
`llm_gym.renderers.continuation`, which checks the same relation on every real turn.
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

from llm_gym.model_input import ModelInput
from llm_gym.renderers.base import (
    Message,
    ParseTermination,
    Renderer,
    TrainOnWhat,
    first_index,
    trained_messages,
    validate_messages,
)
from llm_gym.renderers.tools import openai_tool_calls, parse_tool_calls

logger = logging.getLogger(__name__)

END_OF_TURN_TOKENS = ("<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "<|eot|>")

# Conversations rendered to probe the extension property: a plain exchange, and one with a system
# prompt and an assistant turn holding reasoning (templates that strip it from history fail).
_EXTENSION_PROBES: tuple[tuple[Message, ...], ...] = (
    (
        {"role": "user", "content": "Hi! What is 2 + 2?"},
        {"role": "assistant", "content": "It is 4."},
        {"role": "user", "content": "And 3 + 3?"},
        {"role": "assistant", "content": "6"},
        {"role": "user", "content": "Thanks."},
    ),
    (
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "Pick a number."},
        {"role": "assistant", "content": "<think>\nAny will do.\n</think>\n\n7"},
        {"role": "user", "content": "Another one."},
    ),
)


def _as_ids(out: Any) -> list[int]:
    # transformers >= 5 returns a BatchEncoding from apply_chat_template(tokenize=True).
    if isinstance(out, dict) or hasattr(out, "input_ids"):
        out = out["input_ids"]
    if out and isinstance(out[0], list):  # a batch of one
        out = out[0]
    return [int(t) for t in out]


def _common_prefix_len(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _template_message(m: Message) -> dict:
    """`m` as a chat template expects it: `tool_calls` as OpenAI dicts (arguments as objects), the
    raw text of unparsed calls kept in the content (so history shows what was sampled)."""
    out: dict[str, Any] = dict(m)
    calls = out.pop("tool_calls", None)
    unparsed = out.pop("unparsed_tool_calls", None)
    if calls:
        out["tool_calls"] = openai_tool_calls(calls)
    if unparsed:
        raw = "\n".join(u.raw_text for u in unparsed)
        out["content"] = (out["content"] + "\n" if out.get("content") else "") + raw
    return out


class ChatTemplateRenderer(Renderer):
    """Renderer over `tokenizer.apply_chat_template`. `stop_tokens` names the end-of-turn tokens
    (default: the usual ones that exist in the vocabulary); `chat_template_kwargs` are passed to
    every `apply_chat_template` call (e.g. `{"enable_thinking": False}`). With `tools` (set by
    `llm_gym.renderers.tools.with_tools`, or passed to `build_generation_prompt`) every call passes
    `tools=[{"type": "function", "function": spec}, ...]` to the template, and messages'
    `tool_calls` go to it as OpenAI dicts; `parse_response` reads Hermes/Qwen `<tool_call>` blocks
    into `tool_calls` / `unparsed_tool_calls`."""

    tools: list | None = None

    def __init__(
        self,
        tokenizer: Any,
        stop_tokens: Sequence[str] | None = None,
        chat_template_kwargs: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(tokenizer)
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError(
                f"tokenizer {getattr(tokenizer, 'name_or_path', tokenizer)!r} has no chat_template; "
                "use renderer='role_colon' for base models"
            )
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        unk = getattr(tokenizer, "unk_token_id", None)
        turn_ends: list[int] = []
        for tok in stop_tokens or END_OF_TURN_TOKENS:
            tid = tokenizer.convert_tokens_to_ids(tok)
            if tid is None or tid == unk or tokenizer.convert_ids_to_tokens(int(tid)) != tok:
                if stop_tokens is not None:
                    raise ValueError(f"stop token {tok!r} is not in the tokenizer's vocabulary")
                continue
            if int(tid) not in turn_ends:
                turn_ends.append(int(tid))
        self._turn_ends = turn_ends
        eos = getattr(tokenizer, "eos_token_id", None)
        self._eos = None if eos is None else int(eos)
        self._stops = turn_ends + ([self._eos] if self._eos is not None and self._eos not in turn_ends else [])
        if not self._stops:
            raise ValueError(
                f"tokenizer {getattr(tokenizer, 'name_or_path', tokenizer)!r} has neither an EOS "
                "token nor a known end-of-turn token; pass stop_tokens=[...]"
            )
        self._extension: bool | None = None  # probed on first use

    @property
    def has_extension_property(self) -> bool:
        """Whether this template keeps every earlier prompt + the assistant's turn as a prefix of
        the next prompt (probed once on a few small conversations; see the module docstring)."""
        if self._extension is None:
            self._extension = self._probe_extension()
        return self._extension

    def _probe_extension(self) -> bool:
        from llm_gym.renderers.continuation import EXTENDED, Continuation

        continuation = Continuation(self, fallback="new_datum")
        probed = False
        for convo in _EXTENSION_PROBES:
            messages = [m.copy() for m in convo]
            try:
                for k, message in enumerate(messages[:-1]):
                    if message.get("role") != "assistant":  # the probes all have roles
                        continue
                    prompt = continuation.first(messages[:k])
                    through = self._template(messages[: k + 1], add_generation_prompt=False)
                    if through[: prompt.length] != prompt.to_ints():
                        return False
                    # what a policy sampling the template's own turn produces: up to its end of turn
                    turn = through[prompt.length:]
                    cut, which = first_index(turn, self._stops)
                    action = turn[: cut + 1] if which is not None else turn
                    if continuation.next(prompt, action, messages[: k + 2]).mode != EXTENDED:
                        return False
            except Exception:  # the template rejects this conversation (e.g. a system message)
                continue
            probed = True
        return probed

    def _template(
        self, messages: Sequence[Message], add_generation_prompt: bool, tools: Sequence | None = None
    ) -> list[int]:
        if not messages and not add_generation_prompt:
            return []
        tools = self.tools if tools is None else tools
        extra = dict(self.chat_template_kwargs)
        if tools:
            extra["tools"] = [{"type": "function", "function": dict(t)} for t in tools]
        return _as_ids(
            self.tokenizer.apply_chat_template(
                [_template_message(m) for m in messages],
                add_generation_prompt=add_generation_prompt,
                tokenize=True,
                **extra,
            )
        )

    def build_generation_prompt(
        self, messages: Sequence[Message], role: str = "assistant", prefill: str | None = None,
        tools: Sequence | None = None,
    ) -> ModelInput:
        validate_messages(messages)
        if role != "assistant":
            raise ValueError("ChatTemplateRenderer only prompts for role='assistant'")
        tokens = self._template(messages, add_generation_prompt=True, tools=tools)
        if prefill:
            tokens += list(self.tokenizer.encode(prefill, add_special_tokens=False))
        return ModelInput.from_ints(tokens)

    def get_stop_sequences(self) -> list[int]:
        return list(self._stops)

    def parse_response(self, tokens: Sequence[int]) -> tuple[Message, ParseTermination]:
        message, termination = self._parse_at_stop_ids(tokens, self._stops, self._turn_ends)
        return parse_tool_calls(message), termination

    def build_supervised_example(
        self,
        messages: Sequence[Message],
        train_on_what: TrainOnWhat = TrainOnWhat.LAST_ASSISTANT_MESSAGE,
    ) -> tuple[ModelInput, list[float]]:
        validate_messages(messages)
        full = self._template(messages, add_generation_prompt=False)
        weights = [0.0] * len(full)
        for i, trained in enumerate(trained_messages(messages, train_on_what)):
            if not trained:
                continue
            prompt = self._template(messages[:i], add_generation_prompt=True)
            through = self._template(messages[: i + 1], add_generation_prompt=False)
            start = _common_prefix_len(prompt, full)
            end = _common_prefix_len(through, full)
            if start != len(prompt) or end != len(through):
                # The template rewrites earlier turns (e.g. drops reasoning from history), so the
                # turn's tokens cannot be located exactly; train on what follows the shared prefix.
                logger.warning(
                    "chat template of %r is not prefix-stable at message %d; loss weights are "
                    "approximate", getattr(self.tokenizer, "name_or_path", "?"), i,
                )
                end = len(through) if end == len(through) else len(full)
            # Stop at the turn's end-of-turn token: the sampler never produces what follows it.
            stop_at, which = first_index(full[start:end], self._stops)
            if which is not None:
                end = start + stop_at + 1
            for j in range(start, end):
                weights[j] = 1.0
        return ModelInput.from_ints(full), weights
