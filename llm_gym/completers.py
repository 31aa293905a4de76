"""Policies as the environment API sees them: token and message completers.

A `TokenCompleter` is what rollouts call: given the observation tokens and a stop condition it
returns sampled tokens with their sampling logprobs (`TokensWithLogprobs`). The trainer's HF sampler
implements it; tests implement it with scripts. A `MessageCompleter` works one level up, on chat
messages, for envs and tools that talk in text.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Literal, Sequence, Union

from llm_gym.model_input import ModelInput

StopCondition = Union[list[str], list[int]]
StopReason = Literal["stop", "length"]


@dataclass
class TokensWithLogprobs:
    """Sampled tokens, their per-token sampling logprobs (if known) and why sampling stopped.

    `sequence_id` is the sampler's id for this sampled sequence (a Tinker sampling client's
    `SampledSequence.sequence_id`; None when the completer has none): `trajectory_to_data` uses it
    to record the datum's provenance spans. `prompt_cache_hit_tokens` counts the prompt tokens the
    sampler served from its prefix cache for this sample (0 when unknown)."""

    tokens: list[int]
    maybe_logprobs: list[float] | None
    stop_reason: StopReason = "stop"
    sequence_id: str | None = None
    prompt_cache_hit_tokens: int = 0

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


class TokenCompleter:
    """A policy over tokens: `await policy(model_input, stop, max_tokens=...)`.

    A plain base class like the cookbook's (instantiable; calling the base raises
    NotImplementedError). Rollouts pass `max_tokens=` only when a limit asks for one, so a
    completer written for the cookbook (`__call__(self, model_input, stop)`) works unchanged."""

    async def __call__(
        self, model_input: ModelInput, stop: StopCondition, *, max_tokens: int | None = None
    ) -> TokensWithLogprobs:
        raise NotImplementedError(f"{type(self).__name__} must implement async __call__")


class MessageCompleter:
    """A policy over chat messages: `await completer(messages) -> message` (a plain base class,
    as in the cookbook)."""

    async def __call__(self, messages: Sequence[dict]) -> dict:
        raise NotImplementedError(f"{type(self).__name__} must implement async __call__")


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


# ---------------------------------------------------------------------------------------------
# Completers over a hosted sampling client (the cookbook's Tinker-service completers)
# ---------------------------------------------------------------------------------------------


@dataclass
class SamplingParams:
    """The sampling parameters a sampling client's `sample` / `sample_async` receives, when the
    `tinker` package is not installed (with it, `tinker.SamplingParams` is passed instead)."""

    temperature: float = 1.0
    max_tokens: int | None = None
    stop: StopCondition | None = None


async def _sample_response(
    sampling_client, model_input: ModelInput, *, temperature: float, max_tokens: int | None,
    stop: StopCondition | None, owner: str, prompt_as_keyword: bool = False,
):
    """One sampling request (`num_samples=1`) to a client with the Tinker `SamplingClient`
    interface; returns its response (`.sequences[0]` with `.tokens`, `.logprobs`, `.stop_reason`
    and, on a real Tinker response, `.sequence_id` and `.prompt_cache_hit_tokens`).

    As the cookbook (0.6) does, the client's `sample(...)` is called and its result awaited (a
    Tinker `APIFuture`, a coroutine, or the response itself); a client with only `sample_async`
    (the interface cookbook 0.5 called) is awaited through that. llm_gym runs no sampling service,
    so anything with neither is refused here, at first use, with the fix; with `tinker` installed
    the prompt and parameters are converted to its types (a real `tinker.SamplingClient`
    validates them)."""
    sample: Callable[..., Any] | None = getattr(sampling_client, "sample", None)
    if not callable(sample):
        sample = getattr(sampling_client, "sample_async", None)
    if not callable(sample):
        raise TypeError(
            f"{owner} needs a sampling client with the Tinker SamplingClient interface "
            "(`await client.sample(model_input, num_samples=1, sampling_params=...)`, or "
            "`sample_async`, returning `.sequences[0].tokens`); got "
            f"{type(sampling_client).__name__}. llm_gym has no hosted sampling service: pass a "
            "tinker.SamplingClient, or use RendererMessageCompleter with a local TokenCompleter "
            "(e.g. the trainer's HF sampler)."
        )
    try:
        import tinker  # pyright: ignore[reportMissingImports] - optional: not installed in .venv
    except ImportError:
        params, prompt = SamplingParams(temperature=temperature, max_tokens=max_tokens, stop=stop), model_input
    else:
        params = tinker.SamplingParams(temperature=temperature, max_tokens=max_tokens, stop=stop)
        prompt = model_input
        if isinstance(model_input, ModelInput):
            prompt = tinker.ModelInput.from_ints(list(model_input.to_ints()))
    # The cookbook's token completer passes `prompt=`, its message completer the prompt positionally;
    # a client written against either keeps working.
    if prompt_as_keyword:
        response = sample(prompt=prompt, num_samples=1, sampling_params=params)
    else:
        response = sample(prompt, num_samples=1, sampling_params=params)
    if inspect.isawaitable(response):
        response = await response
    return response


async def _sample_with_client(
    sampling_client, model_input: ModelInput, *, temperature: float, max_tokens: int | None,
    stop: StopCondition | None, owner: str, prompt_as_keyword: bool = False,
):
    """The first sequence of `_sample_response` (`.tokens`, `.logprobs`, `.stop_reason`)."""
    response = await _sample_response(
        sampling_client, model_input, temperature=temperature, max_tokens=max_tokens, stop=stop,
        owner=owner, prompt_as_keyword=prompt_as_keyword,
    )
    return response.sequences[0]


@dataclass
class TinkerTokenCompleter(TokenCompleter):
    """A `TokenCompleter` over a Tinker-style sampling client (the cookbook's name and fields):
    samples at most `max_tokens` (the smaller of it and a per-call `max_tokens`, and no more than
    `context_window - prompt length` when that is set: ValueError when no room is left) and
    returns the sequence's tokens, logprobs, stop reason and `sequence_id`, with the response's
    `prompt_cache_hit_tokens`.

    llm_gym has no sampling service: `sampling_client` must have the Tinker `SamplingClient`
    interface (`sample`, or `sample_async`), else TypeError at the first call. For a local model use the
    trainer's HF sampler (`trainers.sampling.hf`)."""

    sampling_client: object
    max_tokens: int
    temperature: float = 1.0
    context_window: int | None = None

    async def __call__(
        self, model_input: ModelInput, stop: StopCondition, *, max_tokens: int | None = None
    ) -> TokensWithLogprobs:
        budget = self.max_tokens if max_tokens is None else min(self.max_tokens, max_tokens)
        if self.context_window is not None:
            budget = min(budget, self.context_window - model_input.length)
            if budget <= 0:
                raise ValueError(
                    f"Prompt length ({model_input.length}) exceeds context window "
                    f"({self.context_window}). No room for generation."
                )
        response = await _sample_response(
            self.sampling_client, model_input, temperature=self.temperature, max_tokens=budget,
            stop=stop, owner="TinkerTokenCompleter", prompt_as_keyword=True,
        )
        sequence = response.sequences[0]
        if sequence.logprobs is None:
            raise ValueError("the sampling client returned no logprobs; RL needs them")
        return TokensWithLogprobs(
            tokens=list(sequence.tokens), maybe_logprobs=list(sequence.logprobs),
            stop_reason=sequence.stop_reason, sequence_id=getattr(sequence, "sequence_id", None),
            prompt_cache_hit_tokens=getattr(response, "prompt_cache_hit_tokens", 0) or 0,
        )


class TinkerMessageCompleter(MessageCompleter):
    """A `MessageCompleter` that samples from a Tinker-style sampling client (the cookbook's name
    and constructor): renders the conversation, samples once with `max_tokens`, `temperature` and
    the renderer's stop sequences (or `stop_condition`), and returns the parsed reply as
    `{"role": "assistant", "content": ..., ["tool_calls": ...]}`.

    llm_gym has no sampling service: `sampling_client` must have the Tinker `SamplingClient`
    interface (`sample`, or `sample_async`); anything else raises `TypeError` when the completer
    is first called. For a local policy use `RendererMessageCompleter`."""

    def __init__(self, sampling_client, renderer, max_tokens: int,
                 stop_condition: StopCondition | None = None, temperature: float = 1.0):
        self.sampling_client = sampling_client
        self.renderer = renderer
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.stop_condition = renderer.get_stop_sequences() if stop_condition is None else stop_condition

    async def __call__(self, messages: Sequence[dict]) -> dict:
        prompt = self.renderer.build_generation_prompt(list(messages))
        sequence = await _sample_with_client(
            self.sampling_client, prompt, temperature=self.temperature, max_tokens=self.max_tokens,
            stop=self.stop_condition, owner="TinkerMessageCompleter",
        )
        parsed, _termination = self.renderer.parse_response(list(sequence.tokens))
        result = {"role": "assistant", "content": parsed["content"]}
        if "tool_calls" in parsed:
            result["tool_calls"] = parsed["tool_calls"]
        return result
