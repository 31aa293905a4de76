"""Role-colon renderer for base models: "User: ...\n\nAssistant: ..." with a text stop sequence.

Base models have no chat tokens, so turns are plain text and sampling stops on the string
"\n\nUser:" (a `list[str]` stop condition) or on EOS.
"""

from __future__ import annotations

from typing import Any, Sequence

from llm_gym.model_input import ModelInput
from llm_gym.renderers.base import (
    Message,
    ParseTermination,
    Renderer,
    TrainOnWhat,
    get_text_content,
    validate_messages,
)

STOP_TEXT = "\n\nUser:"


class RoleColonRenderer(Renderer):
    def __init__(self, tokenizer: Any) -> None:
        super().__init__(tokenizer)
        self.eos = getattr(tokenizer, "eos_token_id", None)

    @staticmethod
    def _turn_text(message: Message) -> tuple[str, str]:
        return f"{message['role'].capitalize()}: ", get_text_content(message) + "\n\n"

    def build_generation_prompt(
        self, messages: Sequence[Message], role: str = "assistant", prefill: str | None = None
    ) -> ModelInput:
        validate_messages(messages)
        text = "".join(h + b for h, b in map(self._turn_text, messages))
        text += f"{role.capitalize()}:"
        if prefill:
            text += " " + prefill
        return ModelInput.from_ints(self.tokenizer.encode(text, add_special_tokens=False))

    def get_stop_sequences(self) -> list[str]:
        return [STOP_TEXT]

    def parse_response(self, tokens: Sequence[int]) -> tuple[Message, ParseTermination]:
        valid, had_invalid = self._split_valid(tokens)
        termination = ParseTermination.LENGTH
        if self.eos is not None and self.eos in valid:
            valid = valid[: valid.index(self.eos)]
            termination = ParseTermination.EOS
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
        last_assistant = max(
            (i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1
        )
        tokens: list[int] = []
        weights: list[float] = []
        for i, m in enumerate(messages):
            header, body = self._turn_text(m)
            trained = m["role"] == "assistant" and (
                train_on_what == TrainOnWhat.ALL_ASSISTANT_MESSAGES or i == last_assistant
            )
            # The assistant header ends "Assistant:" and the body starts with " " so that the
            # prompt built by build_generation_prompt is a token prefix of the example.
            h = self.tokenizer.encode(header[:-1], add_special_tokens=False)
            b = self.tokenizer.encode(" " + body, add_special_tokens=False)
            tokens += h + b
            weights += [0.0] * len(h) + [float(trained)] * len(b)
        return ModelInput.from_ints(tokens), weights
