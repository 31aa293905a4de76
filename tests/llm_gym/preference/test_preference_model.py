"""`PreferenceModelFromChatRenderer` reads the verdict from the sampled sequence's tokens (a
client's `sample` returns `.sequences[0]`, an object with `.tokens`), for a client with the Tinker
SamplingClient interface; here a local fake that answers A, B or Tie."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from llm_gym.preference.types import Comparison, PreferenceModelFromChatRenderer
from llm_gym.renderers import get_renderer
from llm_gym.tokenizers import ByteTokenizer

TOK = ByteTokenizer()


class FakeClient:
    def __init__(self, verdict: str) -> None:
        self.verdict = verdict
        self.prompts = []

    async def sample(self, prompt, num_samples, sampling_params):
        self.prompts.append(prompt)
        sequence = SimpleNamespace(tokens=TOK.encode(self.verdict), logprobs=None, stop_reason="stop")
        return SimpleNamespace(sequences=[sequence])


@pytest.mark.parametrize("verdict, score", [("A", -1.0), ("B", 1.0), ("Tie", 0.0)])
def test_the_verdict_is_decoded_from_the_sequence_tokens(verdict, score):
    client = FakeClient(verdict)
    model = PreferenceModelFromChatRenderer(get_renderer("role_colon", TOK), client)
    comparison = Comparison([{"role": "user", "content": "Name a fruit."}],
                            [{"role": "assistant", "content": "apple"}],
                            [{"role": "assistant", "content": "a rock"}])
    assert asyncio.run(model(comparison)) == score
    assert len(client.prompts) == 1
