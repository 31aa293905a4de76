"""Chat-template renderer: any HF tokenizer's own `apply_chat_template`, token for token.

Prompts are exactly `tokenizer.apply_chat_template(messages, add_generation_prompt=True)`; a
supervised example is the full conversation's template tokens, with loss weights found by rendering
growing prefixes of the conversation (so weights line up with the template's own tokens, whatever
the template does). Sampling stops on EOS and on the end-of-turn token the template emits.
"""

from __future__ import annotations

from typing import Any, Sequence

from llm_gym.model_input import ModelInput
from llm_gym.renderers.base import (
    Message,
    ParseTermination,
    Renderer,
    TrainOnWhat,
    validate_messages,
)


def _as_ids(out: Any) -> list[int]:
    # transformers >= 5 may return a BatchEncoding from apply_chat_template(tokenize=True).
    if isinstance(out, dict) or hasattr(out, "input_ids"):
        out = out["input_ids"]
    return [int(t) for t in out]


class ChatTemplateRenderer(Renderer):
    def __init__(self, tokenizer: Any, stop_tokens: Sequence[str] | None = None) -> None:
        super().__init__(tokenizer)
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError(
                f"tokenizer {getattr(tokenizer, 'name_or_path', tokenizer)!r} has no chat_template; "
                "use renderer='role_colon' for base models"
            )
        stops: list[int] = []
        if tokenizer.eos_token_id is not None:
            stops.append(int(tokenizer.eos_token_id))
        candidates = list(stop_tokens or ("<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>"))
        vocab = tokenizer.get_vocab()
        for tok in candidates:
            if tok in vocab and vocab[tok] not in stops:
                stops.append(int(vocab[tok]))
        self._stops = stops

    def _template(self, messages: Sequence[Message], add_generation_prompt: bool) -> list[int]:
        return _as_ids(
            self.tokenizer.apply_chat_template(
                [dict(m) for m in messages],
                add_generation_prompt=add_generation_prompt,
                tokenize=True,
            )
        )

    def build_generation_prompt(
        self, messages: Sequence[Message], role: str = "assistant", prefill: str | None = None
    ) -> ModelInput:
        validate_messages(messages)
        if role != "assistant":
            raise ValueError("ChatTemplateRenderer only prompts for role='assistant'")
        tokens = self._template(messages, add_generation_prompt=True)
        if prefill:
            tokens += self.tokenizer.encode(prefill, add_special_tokens=False)
        return ModelInput.from_ints(tokens)

    def get_stop_sequences(self) -> list[int]:
        return list(self._stops)

    def parse_response(self, tokens: Sequence[int]) -> tuple[Message, ParseTermination]:
        valid, had_invalid = self._split_valid(tokens)
        termination = ParseTermination.LENGTH
        eos = self.tokenizer.eos_token_id
        for i, t in enumerate(valid):
            if t in self._stops:
                termination = ParseTermination.EOS if t == eos else ParseTermination.STOP_SEQUENCE
                valid = valid[:i]
                break
        if had_invalid:
            termination = ParseTermination.MALFORMED
        text = self.tokenizer.decode(valid, skip_special_tokens=True)
        return Message(role="assistant", content=text), termination

    def build_supervised_example(
        self,
        messages: Sequence[Message],
        train_on_what: TrainOnWhat = TrainOnWhat.LAST_ASSISTANT_MESSAGE,
    ) -> tuple[ModelInput, list[float]]:
        validate_messages(messages)
        full = self._template(messages, add_generation_prompt=False)
        weights = [0.0] * len(full)
        last_assistant = max(
            (i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1
        )
        for i, m in enumerate(messages):
            if m["role"] != "assistant":
                continue
            if train_on_what == TrainOnWhat.LAST_ASSISTANT_MESSAGE and i != last_assistant:
                continue
            start = len(self._template(messages[:i], add_generation_prompt=True))
            end = len(self._template(messages[: i + 1], add_generation_prompt=False))
            for j in range(start, min(end, len(full))):
                weights[j] = 1.0
        return ModelInput.from_ints(full), weights
