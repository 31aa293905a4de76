"""Role-colon renderer for base models: "User: ...\n\nAssistant: ..." with a text stop sequence.

Base models have no chat tokens, so turns are plain text and sampling stops on the string
"\n\nUser:". This is the cookbook's `RoleColonRenderer`, token for token: the prompt starts with
the tokenizer's BOS; each message is a header ("User:") and an output (" content\n\n"), encoded
separately and concatenated as token lists, so a generation prompt is always a token prefix of the
supervised example that continues it; a supervised example ends with the trained stop overlap
"User:" (the rest of the stop sequence), so the model learns to stop. `parse_response` strips a
final EOS, splits the text on "\n\nUser:" and keeps the content's own whitespace and special
tokens: STOP_SEQUENCE for one delimiter, EOS for a final EOS and no delimiter, MALFORMED for no
end at all, a delimiter followed by EOS, or two delimiters. One addition: ids outside the
vocabulary are dropped (MALFORMED) instead of failing in `decode`.
"""

from __future__ import annotations

from typing import Any, Sequence

from llm_gym.model_input import EncodedTextChunk
from llm_gym.renderers.base import (
    Message,
    ParseTermination,
    RenderContext,
    RenderedMessage,
    Renderer,
    TrainOnWhat,
    ensure_text,
    validate_messages,
)
from llm_gym.model_input import ModelInput
from llm_gym.renderers.tools import (
    TOOL_CALL_CLOSE,
    format_assistant_text,
    parse_tool_calls,
    prepend_tools_to_messages,
)

STOP_TEXT = "\n\nUser:"
# Named once so `render_message` and `parse_response` stay inverses of each other.
_CONTENT_PREFIX = " "
_CONTENT_SUFFIX = "\n\n"


class RoleColonRenderer(Renderer):
    """Role-colon turns. With `tools` (set by `llm_gym.renderers.tools.with_tools`, or passed to
    `build_generation_prompt`) a leading "System:" message declares them, assistant tool calls are
    `<tool_call>` blocks in the turn's text, tool results are "Tool:" turns, and sampling also stops
    after `</tool_call>` (which then ends the turn cleanly: STOP_SEQUENCE)."""

    tools: list | None = None

    def __init__(self, tokenizer: Any) -> None:
        super().__init__(tokenizer)
        self.eos = getattr(tokenizer, "eos_token_id", None)
        self._bos = self._find_bos_tokens()

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def _find_bos_tokens(self) -> list[int]:
        # The cookbook encodes the BOS string; an HF tokenizer reads it back as the BOS id. The
        # byte tokenizer never makes special ids from text, so there we use the id itself rather
        # than the seven bytes of "<|bos|>".
        bos = getattr(self.tokenizer, "bos_token", None)
        if bos is None:
            return []
        tokens = self._encode(str(bos))
        bos_id = getattr(self.tokenizer, "bos_token_id", None)
        if bos_id is not None and tokens != [bos_id]:
            return [int(bos_id)]
        return tokens

    @property
    def _bos_tokens(self) -> list[int]:
        return list(self._bos)

    @property
    def has_extension_property(self) -> bool:
        return True  # history is never rewritten

    def render_message(self, message: Message, ctx: RenderContext) -> RenderedMessage:
        # Message is total=False, but one without a role or content raises KeyError here, as before.
        role = message["role"]  # pyright: ignore[reportTypedDictNotRequiredAccess]
        header = self._encode(role.capitalize() + ":")
        text = format_assistant_text(message) if role == "assistant" else ensure_text(message["content"])  # pyright: ignore[reportTypedDictNotRequiredAccess]
        output = self._encode(_CONTENT_PREFIX + text + _CONTENT_SUFFIX)
        # "User:" completes the stop sequence after an assistant turn. Other roles get the
        # cookbook's placeholder, which it (and so we) appends when such a message ends a
        # supervised example.
        overlap = self._encode("User:" if role == "assistant" else "<UNUSED>")
        return RenderedMessage(
            header=EncodedTextChunk(tokens=header),
            output=[EncodedTextChunk(tokens=output)],
            stop_overlap=EncodedTextChunk(tokens=overlap),
        )

    def build_generation_prompt(
        self, messages, role: str = "assistant", prefill: str | None = None, tools=None,
    ) -> ModelInput:
        """The base class's prompt; `tools` (default: the renderer's own) are declared in a
        leading system message."""
        validate_messages(messages)
        messages = prepend_tools_to_messages(messages, self.tools if tools is None else tools)
        return super().build_generation_prompt(messages, role=role, prefill=prefill)

    def build_supervised_example(
        self, messages, train_on_what: TrainOnWhat = TrainOnWhat.LAST_ASSISTANT_MESSAGE
    ):
        """The base class's example; with `tools`, over the conversation that declares them (an
        added system message gets `trainable=False` under CUSTOMIZED)."""
        if self.tools:
            validate_messages(messages)
            with_spec = prepend_tools_to_messages(messages, self.tools)
            if len(with_spec) > len(messages) and TrainOnWhat(train_on_what) is TrainOnWhat.CUSTOMIZED:
                # the system message prepend_tools_to_messages just added, which has content
                with_spec[0] = Message(role="system", content=with_spec[0]["content"], trainable=False)  # pyright: ignore[reportTypedDictNotRequiredAccess]
            messages = with_spec
        return super().build_supervised_example(messages, train_on_what)

    def get_stop_sequences(self) -> list[str]:
        return [STOP_TEXT, TOOL_CALL_CLOSE] if self.tools else [STOP_TEXT]

    def parse_response(self, tokens: Sequence[int]) -> tuple[Message, ParseTermination]:
        valid, had_invalid = self._split_valid(tokens)
        ended_with_eos = bool(valid) and self.eos is not None and valid[-1] == self.eos
        if ended_with_eos:
            valid = valid[:-1]
        text = str(self.tokenizer.decode(valid, skip_special_tokens=False))
        pieces = text.split(STOP_TEXT)
        content = pieces[0].removeprefix(_CONTENT_PREFIX).removesuffix(_CONTENT_SUFFIX)
        stopped_on_call = bool(self.tools) and len(pieces) == 1 and content.endswith(TOOL_CALL_CLOSE)
        if had_invalid:
            termination = ParseTermination.MALFORMED
        elif stopped_on_call and not ended_with_eos:
            termination = ParseTermination.STOP_SEQUENCE
        elif len(pieces) == 1:
            termination = ParseTermination.EOS if ended_with_eos else ParseTermination.MALFORMED
        elif len(pieces) == 2 and not ended_with_eos:
            termination = ParseTermination.STOP_SEQUENCE
        else:  # the sampler should have stopped at the delimiter: EOS after it, or a second one
            termination = ParseTermination.MALFORMED
        return parse_tool_calls(Message(role="assistant", content=content)), termination
