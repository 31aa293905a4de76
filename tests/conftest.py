"""Shared test fixtures: tokenizers built in-process (no hub, no network) and a scripted policy.

`hf_chat_tokenizer` is a tiny byte-level BPE trained on a few strings and wrapped in
`transformers.PreTrainedTokenizerFast`, with ChatML special tokens and a ChatML Jinja
`chat_template`; building it imports transformers, so only tests that ask for it pay for that.
"""

from __future__ import annotations

import os

# Tests never reach a hub: keep every HF client offline (set before transformers is imported).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import asyncio
from typing import Sequence

import pytest

from llm_gym.completers import TokenCompleter, TokensWithLogprobs
from llm_gym.tokenizers import ByteTokenizer
# The real-tokenizer fixtures (tests/_real_tokenizers.py), for every test folder.
from tests._real_tokenizers import real_tokenizer_root, real_tokenizers  # noqa: F401

CHATML_JINJA = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content']"
    " + '<|im_end|>' + '\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
_BPE_CORPUS = [
    "You are a helpful assistant. Answer with a number.",
    "What is 2 + 2? The answer is 4. What is 12 + 30? The answer is 42.",
    "user assistant system tool\n\nUser: Assistant: hello world, again and again!",
]


def build_hf_chat_tokenizer(vocab_size: int = 320):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(_BPE_CORPUS * 10, trainer=trainer)
    hf = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>", "<|im_end|>"],
    )
    hf.chat_template = CHATML_JINJA
    return hf


@pytest.fixture(scope="session")
def byte_tokenizer() -> ByteTokenizer:
    return ByteTokenizer()


@pytest.fixture(scope="session")
def hf_chat_tokenizer():
    return build_hf_chat_tokenizer()


class ScriptedPolicy(TokenCompleter):
    """Replies with the next scripted token list (and logprobs), recording what it was shown."""

    def __init__(self, script: Sequence[Sequence[int]], logprobs: Sequence[Sequence[float]] | None = None):
        self.script = [list(s) for s in script]
        self.logprobs = None if logprobs is None else [list(lp) for lp in logprobs]
        self.calls: list[tuple[list[int], object, int | None]] = []

    async def __call__(self, model_input, stop, *, max_tokens=None) -> TokensWithLogprobs:
        i = len(self.calls) % len(self.script)
        self.calls.append((model_input.to_ints(), stop, max_tokens))
        await asyncio.sleep(0)
        lps = None if self.logprobs is None else self.logprobs[i]
        return TokensWithLogprobs(self.script[i], lps)


@pytest.fixture
def scripted_policy():
    """A factory: `scripted_policy([[tokens turn 1], ...], logprobs=[[...], ...])`."""
    return ScriptedPolicy
