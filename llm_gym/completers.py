"""Policies as the environment API sees them: token and message completers.

A `TokenCompleter` is what rollouts call: given the observation tokens and a stop condition it
returns sampled tokens with their sampling logprobs (`TokensWithLogprobs`). The trainer's HF sampler
implements it; tests implement it with scripts. A `MessageCompleter` works one level up, on chat
messages, for envs and tools that talk in text.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Literal, Sequence, Union

from llm_gym.model_input import ModelInput

StopCondition = Union[list[str], list[int]]
StopReason = Literal["stop", "length"]


@dataclass
class TokensWithLogprobs:
    """Sampled tokens, their per-token sampling logprobs (if known) and why sampling stopped."""

    tokens: list[int]
    maybe_logprobs: list[float] | None
    stop_reason: StopReason = "stop"

    def __post_init__(self) -> None:
        if isinstance(self.tokens, (str, bytes, bytearray)):
            raise TypeError(
                f"TokensWithLogprobs.tokens must be a list of token ids, got {type(self.tokens).__name__}"
            )
        if self.maybe_logprobs is not None and len(self.maybe_logprobs) != len(self.tokens):
            raise ValueError(
                f"TokensWithLogprobs: {len(self.tokens)} tokens but {len(self.maybe_logprobs)} "
                "logprobs; pass one logprob per token or maybe_logprobs=None"
            )

    @property
    def logprobs(self) -> list[float]:
        if self.maybe_logprobs is None:
            raise ValueError("these tokens were sampled without logprobs (maybe_logprobs is None)")
        return self.maybe_logprobs


class TokenCompleter(ABC):
    """A policy over tokens: `await policy(model_input, stop, max_tokens=...)`.

    Rollouts pass `max_tokens=` only when a limit asks for one, so a completer written for the
    cookbook (`__call__(self, model_input, stop)`) works unchanged."""

    @abstractmethod
    async def __call__(
        self, model_input: ModelInput, stop: StopCondition, *, max_tokens: int | None = None
    ) -> TokensWithLogprobs: ...


class MessageCompleter(ABC):
    """A policy over chat messages: `await completer(messages) -> message`."""

    @abstractmethod
    async def __call__(self, messages: Sequence[dict]) -> dict: ...


class RendererMessageCompleter(MessageCompleter):
    """A `MessageCompleter` made from a `TokenCompleter` and a renderer."""

    def __init__(self, token_completer: TokenCompleter, renderer, max_tokens: int | None = None):
        self.token_completer = token_completer
        self.renderer = renderer
        self.max_tokens = max_tokens

    async def __call__(self, messages: Sequence[dict]) -> dict:
        prompt = self.renderer.build_generation_prompt(list(messages))
        stop = self.renderer.get_stop_sequences()
        if self.max_tokens is None:  # cookbook-style completers take no max_tokens
            out = await self.token_completer(prompt, stop)
        else:
            out = await self.token_completer(prompt, stop, max_tokens=self.max_tokens)
        message, _termination = self.renderer.parse_response(out.tokens)
        return message
