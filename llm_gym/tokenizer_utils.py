"""The Tinker cookbook's `tokenizer_utils` names, backed by `llm_gym.tokenizers` (local only).

Environment code written for the cookbook calls `get_tokenizer(model_name)` in its dataset builders;
after switching imports it lands here. A name registered with `register_tokenizer` wins; otherwise
`llm_gym.tokenizers.load_tokenizer` resolves it: "byte" / "llm-gym/byte" give the embedded
`ByteTokenizer`, any other name or path loads an HF tokenizer from disk or the local HF cache and
never downloads (the error names the step that fetches it).
"""

from __future__ import annotations

from typing import Any, Callable, TypeAlias

from llm_gym.tokenizers import load_tokenizer

# The cookbook spells an HF `PreTrainedTokenizer` this way without importing transformers.
Tokenizer: TypeAlias = Any

_CUSTOM_TOKENIZER_REGISTRY: dict[str, Callable[[], Tokenizer]] = {}


def get_tokenizer(model_name: str) -> Tokenizer:
    """The tokenizer called `model_name`: a registered factory's, else `load_tokenizer(model_name)`."""
    factory = _CUSTOM_TOKENIZER_REGISTRY.get(model_name)
    if factory is not None:
        return factory()
    return load_tokenizer(model_name)


def register_tokenizer(name: str, factory: Callable[[], Tokenizer]) -> None:
    """Make `get_tokenizer(name)` call `factory()` (e.g. to give a hub model id a local tokenizer)."""
    _CUSTOM_TOKENIZER_REGISTRY[name] = factory


def get_registered_tokenizer_names() -> list[str]:
    return list(_CUSTOM_TOKENIZER_REGISTRY)


def is_tokenizer_registered(name: str) -> bool:
    return name in _CUSTOM_TOKENIZER_REGISTRY


def unregister_tokenizer(name: str) -> bool:
    """Remove a registered factory; False when `name` was not registered."""
    return _CUSTOM_TOKENIZER_REGISTRY.pop(name, None) is not None


__all__ = [
    "Tokenizer",
    "get_registered_tokenizer_names",
    "get_tokenizer",
    "is_tokenizer_registered",
    "register_tokenizer",
    "unregister_tokenizer",
]
