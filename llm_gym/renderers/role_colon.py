"""Role-colon renderer for base models: "User: ...\n\nAssistant: ..." with a text stop sequence.

Base models have no chat tokens, so turns are plain text and sampling stops on the string
"\n\nUser:" (a `list[str]` stop condition) or on EOS. Each turn is encoded as two pieces, the
role header ("User:") and the body (" content\n\n"), and pieces are concatenated as token lists, so
the generation prompt for a conversation is always a token prefix of the supervised example that
continues it, whatever the tokenizer's merges.
"""

from __future__ import annotations

from typing import Any, Sequence

from llm_gym.model_input import ModelInput
from llm_gym.renderers.base import (
    Message,
    ParseTermination,
    Renderer,
    TrainOnWhat,
    ensure_text,
    trained_messages,
    validate_messages,
)

STOP_TEXT = "\n\nUser:"


class RoleColonRenderer(Renderer):
    def __init__(self, tokenizer: Any) -> None:
        super().__init__(tokenizer)
        self.eos = getattr(tokenizer, "eos_token_id", None)

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def _header(self, role: str) -> list[int]:
        return self._encode(f"{role.capitalize()}:")

    def _body(self, message: Message) -> list[int]:
        # The end of a turn is the blank line; the next header's "User:" completes STOP_TEXT.
        return self._encode(" " + ensure_text(message["content"]) + "\n\n")

    def build_generation_prompt(
        self, messages: Sequence[Message], role: str = "assistant", prefill: str | None = None
    ) -> ModelInput:
        validate_messages(messages)
        tokens: list[int] = []
        for m in messages:
            tokens += self._header(m["role"]) + self._body(m)
        tokens += self._header(role)
        if prefill:
            tokens += self._encode(" " + prefill)
        return ModelInput.from_ints(tokens)

    def get_stop_sequences(self) -> list[str]:
        return [STOP_TEXT]

    def parse_response(self, tokens: Sequence[int]) -> tuple[Message, ParseTermination]:
        valid, had_invalid = self._split_valid(tokens)
        termination = ParseTermination.LENGTH
        if self.eos is not None:
            try:
                cut = valid.index(self.eos)
            except ValueError:
                pass
            else:
                valid, termination = valid[:cut], ParseTermination.EOS
        text = self.tokenizer.decode(valid, skip_special_tokens=True)
        cut = text.find(STOP_TEXT)
        if cut >= 0:
            text, termination = text[:cut], ParseTermination.STOP_SEQUENCE
        if had_invalid:
            termination = ParseTermination.MALFORMED
        return Message(role="assistant", content=text.strip()), termination

    def build_supervised_example(
        self,
        messages: Sequence[Message],
        train_on_what: TrainOnWhat = TrainOnWhat.LAST_ASSISTANT_MESSAGE,
    ) -> tuple[ModelInput, list[float]]:
        validate_messages(messages)
        trained_flags = trained_messages(messages, train_on_what)
        tokens: list[int] = []
        weights: list[float] = []
        for i, m in enumerate(messages):
            trained = trained_flags[i]
            header, body = self._header(m["role"]), self._body(m)
            tokens += header + body
            weights += [0.0] * len(header) + [float(trained)] * len(body)
        return ModelInput.from_ints(tokens), weights
