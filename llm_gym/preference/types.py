"""Pairwise preference types (the cookbook's `tinker_cookbook.preference.types`).

A `Comparison` is one prompt with two candidate completions A and B; a `LabeledComparison` adds
which one a human preferred ("A", "B" or "Tie"). A `PreferenceModel` is awaited on a comparison
and returns a score in [-1, 1]: -1 prefers A, 0 is a tie, 1 prefers B — the preference-reward env
turns those scores into per-completion rewards. `ComparisonRendererFromChatRenderer` lays a
comparison out as one chat conversation for a preference model to read or be trained on;
`PreferenceModelFromChatRenderer` samples the verdict from a sampling client with the Tinker
`SamplingClient` interface (`await client.sample_async(model_input, num_samples=, sampling_params=)`),
which llm_gym does not provide: give it such an object, or write your own `PreferenceModel`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal

from llm_gym.model_input import ModelInput

logger = logging.getLogger(__name__)

__all__ = [
    "Comparison",
    "ComparisonRenderer",
    "ComparisonRendererFromChatRenderer",
    "LabeledComparison",
    "PreferenceModel",
    "PreferenceModelBuilder",
    "PreferenceModelFromChatRenderer",
]


@dataclass
class Comparison:
    """Two completions (lists of messages) of the same prompt conversation."""

    prompt_conversation: list[dict]
    completion_A: list[dict]
    completion_B: list[dict]

    def swap(self) -> "Comparison":
        """The same comparison with A and B exchanged."""
        return Comparison(self.prompt_conversation, completion_A=self.completion_B, completion_B=self.completion_A)


@dataclass
class LabeledComparison:
    """A `Comparison` with the preferred completion: "A", "B" or "Tie"."""

    comparison: Comparison
    label: Literal["A", "B", "Tie"]

    def swap(self) -> "LabeledComparison":
        """A and B exchanged, and the label with them (a tie stays a tie)."""
        return LabeledComparison(self.comparison.swap(), {"A": "B", "B": "A", "Tie": "Tie"}[self.label])  # type: ignore[arg-type]


class PreferenceModel:
    """Scores a comparison: `await model(comparison)` -> float in [-1, 1] (-1: A, 0: tie, 1: B).

    Subclasses implement `__call__` (the cookbook's base raises NotImplementedError, so does this)."""

    async def __call__(self, comparison: Comparison) -> float:
        raise NotImplementedError(f"{type(self).__name__} must implement async __call__(comparison) -> float")


class PreferenceModelBuilder:
    """Makes a `PreferenceModel`: `builder()`."""

    def __call__(self) -> PreferenceModel:
        raise NotImplementedError(f"{type(self).__name__} must implement __call__() -> PreferenceModel")


class ComparisonRenderer:
    """Turns comparisons into model inputs for a preference model (generation prompt, or a
    supervised example whose weights select the label token)."""

    def build_generation_prompt(self, comparison: Comparison) -> ModelInput:
        raise NotImplementedError

    def to_model_input_weights(self, labeled_comparison: LabeledComparison) -> tuple[ModelInput, Any]:
        raise NotImplementedError

    @property
    def tokenizer(self) -> Any:
        raise NotImplementedError


class ComparisonRendererFromChatRenderer(ComparisonRenderer):
    """A comparison as one conversation: the prompt, then system markers "==== Completion A ====",
    completion A, "==== Completion B ====", completion B and "==== Preference ====", rendered by a
    chat renderer; the label is the assistant's reply."""

    def __init__(self, convo_renderer: Any):
        self.convo_renderer = convo_renderer

    def _comparison_to_convo(self, comparison: Comparison) -> list[dict]:
        return [
            *comparison.prompt_conversation,
            {"role": "system", "content": "==== Completion A ===="},
            *comparison.completion_A,
            {"role": "system", "content": "==== Completion B ===="},
            *comparison.completion_B,
            {"role": "system", "content": "==== Preference ===="},
        ]

    def build_generation_prompt(self, comparison: Comparison) -> ModelInput:
        return self.convo_renderer.build_generation_prompt(self._comparison_to_convo(comparison))

    def to_model_input_weights(self, labeled_comparison: LabeledComparison) -> tuple[ModelInput, Any]:
        """The conversation with the label as the assistant's reply, cut just after the first
        weighted token (the label's first token), and its weights (the renderer's own type)."""
        convo = self._comparison_to_convo(labeled_comparison.comparison)
        convo.append({"role": "assistant", "content": labeled_comparison.label})
        model_input, weights = self.convo_renderer.build_supervised_example(convo)
        first = next((i for i, w in enumerate(weights) if float(w) == 1.0), None)
        if first is None:
            return model_input, weights
        return ModelInput.from_ints(list(model_input.to_ints())[: first + 1]), weights[: first + 1]

    @property
    def tokenizer(self) -> Any:
        return self.convo_renderer.tokenizer


class PreferenceModelFromChatRenderer(PreferenceModel):
    """Samples one token ("A", "B" or "Tie") at temperature 0 from a sampling client with the
    Tinker `SamplingClient` interface, and maps it to -1, 1, 0 (anything else: 0, with a warning).

    llm_gym has no hosted sampling service: `sampling_client` must be an object with
    `async sample_async(model_input, num_samples=..., sampling_params=...)` returning
    `.sequences[0].tokens`, e.g. a real `tinker.SamplingClient`. Anything else raises a
    `TypeError` on the first call, not at construction."""

    def __init__(self, convo_renderer: Any, sampling_client: Any):
        self.comparison_renderer = ComparisonRendererFromChatRenderer(convo_renderer)
        self.sampling_client = sampling_client

    async def __call__(self, comparison: Comparison) -> float:
        from llm_gym.completers import _sample_with_client

        prompt = self.comparison_renderer.build_generation_prompt(comparison)
        sequence = await _sample_with_client(
            self.sampling_client, prompt, temperature=0.0, max_tokens=1, stop=None,
            owner="PreferenceModelFromChatRenderer",
        )
        verdict = str(self.comparison_renderer.tokenizer.decode(list(sequence.tokens))).strip()
        if verdict in ("A", "B", "Tie"):
            return {"A": -1.0, "B": 1.0, "Tie": 0.0}[verdict]
        logger.warning("Invalid preference model output: %r", verdict)
        return 0.0
