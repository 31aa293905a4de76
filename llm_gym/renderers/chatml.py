"""ChatML renderer: `<|im_start|>role\ncontent<|im_end|>\n` turns, stopping on the `<|im_end|>` id.

This is the default renderer for the embedded byte tokenizer, and it fits any tokenizer that has
`<|im_start|>`/`<|im_end|>` special tokens (Qwen-family). Stops are token ids, so the sampler checks
them in O(1) per token.
"""

from __future__ import annotations

import array
from typing import Any, Sequence

from llm_gym.model_input import ModelInput
from llm_gym.model_input import EncodedTextChunk
from llm_gym.renderers.base import (
    Message,
    ParseTermination,
    RenderContext,
    RenderedMessage,
    Renderer,
    TrainOnWhat,
    ensure_text,
    prompt_with_text,
    trained_messages,
    validate_messages,
)
from llm_gym.renderers.tools import format_assistant_text, parse_tool_calls, prepend_tools_to_messages
from llm_gym.tokenizers import ByteTokenizer


class ChatMLRenderer(Renderer):
    """ChatML turns. With `tools` (set by `llm_gym.renderers.tools.with_tools`, or passed to
    `build_generation_prompt`) the leading system message declares them and assistant tool calls
    render as `<tool_call>` blocks (the format in `llm_gym.renderers.tools`); `parse_response` fills
    `tool_calls` / `unparsed_tool_calls` from such blocks."""

    tools: list | None = None

    def __init__(self, tokenizer: Any) -> None:
        super().__init__(tokenizer)
        ids = tokenizer.convert_tokens_to_ids(["<|im_start|>", "<|im_end|>"])
        unk = getattr(tokenizer, "unk_token_id", None)
        if any(i is None or i == unk for i in ids):
            raise ValueError(
                f"tokenizer {getattr(tokenizer, 'name_or_path', tokenizer)!r} has no <|im_start|>/"
                "<|im_end|> tokens; use renderer='chat_template' or 'role_colon'"
            )
        self.im_start, self.im_end = int(ids[0]), int(ids[1])
        self.eos = getattr(tokenizer, "eos_token_id", None)
        self._parse_stops = [self.im_end]
        if self.eos is not None and self.eos != self.im_end:
            self._parse_stops.append(int(self.eos))
        self._turn_ends = (self.im_end,)
        self._newline = tokenizer.encode("\n", add_special_tokens=False)
        # The byte tokenizer encodes text as its UTF-8 bytes and decodes a special id to its name,
        # so a prompt's text (`decode(ids, skip_special_tokens=False)`) is the concatenation of
        # what was encoded: build_generation_prompt records it on the prompt, and TextEnv reports
        # it as info["text"] instead of decoding the ids again. Other tokenizers need not
        # round-trip text, and a subclass that renders turns its own way breaks the equality.
        kind = type(self)
        self._records_text = (
            type(tokenizer) is ByteTokenizer
            and kind._turn is ChatMLRenderer._turn
            and kind._turn_header is ChatMLRenderer._turn_header
        )

    @property
    def has_extension_property(self) -> bool:
        return True  # history is never rewritten

    def _turn_header(self, role: str) -> list[int]:
        return [self.im_start] + self.tokenizer.encode(role + "\n", add_special_tokens=False)

    def _turn(self, message: Message) -> tuple[list[int], list[int]]:
        """(header tokens, body tokens incl. <|im_end|>) for one message; newline after is extra."""
        role, text = _role_and_text(message)
        body = self.tokenizer.encode(text, add_special_tokens=False)
        return self._turn_header(role), body + [self.im_end]

    def render_message(self, message: Message, ctx: RenderContext) -> RenderedMessage:
        """One message in the cookbook's Qwen3 chunking of the same tokens: header = the newline
        that ends the previous turn (not before the first message) + `<|im_start|>role\n`,
        output = the content, then `<|im_end|>` as a chunk of its own. (The builders below produce
        these tokens directly.)"""
        header, body = self._turn(message)
        if ctx.idx > 0:
            header = self._newline + header
        output = [EncodedTextChunk(tokens=body[:-1]), EncodedTextChunk(tokens=body[-1:])]
        return RenderedMessage(output=output, header=EncodedTextChunk(tokens=header))

    def build_generation_prompt(
        self, messages: Sequence[Message], role: str = "assistant", prefill: str | None = None,
        tools: Sequence | None = None,
    ) -> ModelInput:
        """The prompt for a `role` turn; `tools` (default: the renderer's own) are declared in the
        leading system message."""
        validate_messages(messages)
        messages = prepend_tools_to_messages(messages, self.tools if tools is None else tools)
        tokens: list[int] = []
        if not self._records_text:
            for m in messages:
                header, body = self._turn(m)
                tokens += header + body + self._newline
            tokens += self._turn_header(role)
            if prefill:
                tokens += self.tokenizer.encode(prefill, add_special_tokens=False)
            return ModelInput.from_ints(tokens)
        # The same tokens as above (`_turn`, `_turn_header`), and their text alongside.
        encode = self.tokenizer.encode
        start, end = [self.im_start], [self.im_end]
        pieces: list[str] = []
        for m in messages:
            turn_role, text = _role_and_text(m)
            tokens += start + encode(turn_role + "\n") + encode(text) + end + self._newline
            pieces += ("<|im_start|>", turn_role, "\n", text, "<|im_end|>\n")
        tokens += start + encode(role + "\n")
        pieces += ("<|im_start|>", role, "\n")
        if prefill:
            tokens += encode(prefill)
            pieces.append(prefill)
        return prompt_with_text(tokens, "".join(pieces), self.tokenizer)

    def get_stop_sequences(self) -> list[int]:
        return list(self._parse_stops)

    def parse_response(self, tokens: Sequence[int]) -> tuple[Message, ParseTermination]:
        # Fast path for the common reply: a list of ids that ends on its only stop id,
        # <|im_end|>. It gives `_parse_at_stop_ids`'s outcome (nothing to drop, the cut at the
        # end, STOP_SEQUENCE) without its general machinery, which dominates a short reply's cost;
        # array("Q") accepts exactly the ids `_split_valid` keeps, in one C pass. Anything else
        # takes the general path.
        if type(tokens) is list and tokens and tokens[-1] == self.im_end:
            try:
                ids = array.array("Q", tokens)
            except (TypeError, OverflowError):
                ids = None
            if ids is not None and max(ids) < self._vocab_size:
                body = ids.tolist()
                del body[-1]
                for stop in self._parse_stops:
                    if stop in body:
                        break
                else:
                    text = self.tokenizer.decode(body, skip_special_tokens=False)
                    message: Message = {"role": "assistant", "content": text}  # a Message is a dict
                    return parse_tool_calls(message), ParseTermination.STOP_SEQUENCE
        message, termination = self._parse_at_stop_ids(tokens, self._parse_stops, self._turn_ends)
        return parse_tool_calls(message), termination

    def build_supervised_example(
        self,
        messages: Sequence[Message],
        train_on_what: TrainOnWhat = TrainOnWhat.LAST_ASSISTANT_MESSAGE,
    ) -> tuple[ModelInput, list[float]]:
        validate_messages(messages)
        trained_flags = trained_messages(messages, train_on_what)
        if self.tools:
            messages = prepend_tools_to_messages(messages, self.tools)
            if len(trained_flags) < len(messages):  # the added system message is never trained
                trained_flags = [False, *trained_flags]
        tokens: list[int] = []
        weights: list[float] = []
        for i, m in enumerate(messages):
            header, body = self._turn(m)
            trained = trained_flags[i]
            tokens += header + body + self._newline
            weights += [0.0] * len(header) + [float(trained)] * len(body) + [0.0] * len(self._newline)
        return ModelInput.from_ints(tokens), weights


def _role_and_text(message: Message) -> tuple[str, str]:
    """A message's role and the text its turn renders (an assistant's with its tool calls)."""
    # Message is total=False, but one without a role or content raises KeyError here, as before.
    role = message["role"]  # pyright: ignore[reportTypedDictNotRequiredAccess]
    text = format_assistant_text(message) if role == "assistant" else ensure_text(message["content"])  # pyright: ignore[reportTypedDictNotRequiredAccess]
    return role, text
