"""Shared fixtures for the adapter tests: make sure the catalog ids are registered and build a
tiny byte-level HF tokenizer (with a ChatML chat template) and model in-process, no downloads.

`trainers.models` provides the same things once it exists; these builders are used only when it
does not (so the adapter tests run while the trainer is being written).
"""

from __future__ import annotations

import gymnasium as gym

import llm_gym  # noqa: F401  (registers catalogs)
from llm_gym.registration import register_env

_STAND_INS = {
    "llm/Math-v0": "envs_catalog.math.arithmetic:MathSource",
}

CHATML_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def ensure_catalog() -> None:
    """Register the catalog ids the tests use if the `llm_gym.envs` entry point has not (a
    checkout run without `pip install -e .`, e.g. from a throwaway venv)."""
    try:
        from envs_catalog import ENV_SPECS
    except ImportError:
        ENV_SPECS = []
    for spec in ENV_SPECS:
        if spec["id"] not in gym.registry:
            register_env(spec["id"], spec["source"], max_episode_steps=spec.get("max_episode_steps"),
                         **dict(spec.get("kwargs") or {}))
    for env_id, source in _STAND_INS.items():
        if env_id not in gym.registry:
            register_env(env_id, source)


def byte_hf_tokenizer():
    try:
        from trainers.models import byte_hf_tokenizer as real
    except ImportError:
        real = None
    if real is not None:
        tok = real()
        if getattr(tok, "chat_template", None):
            return tok
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    byte_chars = sorted(alphabet, key=lambda c: _byte_of(c))
    vocab = {c: i for i, c in enumerate(byte_chars)}
    specials = ["<|pad|>", "<|bos|>", "<|eos|>", "<|im_start|>", "<|im_end|>"]
    for s in specials:
        vocab[s] = len(vocab)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens(specials)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<|pad|>", bos_token="<|bos|>", eos_token="<|im_end|>",
    )
    tok.chat_template = CHATML_TEMPLATE
    tok.padding_side = "left"
    return tok


def _byte_of(char: str) -> int:
    from tokenizers import pre_tokenizers  # noqa: F401

    # GPT-2's bytes_to_unicode: printable latin-1 bytes map to themselves, the rest to 256+.
    code = ord(char)
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(
        range(ord("®"), ord("ÿ") + 1)
    )
    if code in printable:
        return code
    others = [b for b in range(256) if b not in printable]
    return others[code - 256]


def tiny_model(vocab_size: int, seed: int = 0):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
        pad_token_id=256, bos_token_id=257, eos_token_id=260, tie_word_embeddings=True,
    )
    return LlamaForCausalLM(config)
