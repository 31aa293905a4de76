"""The Tinker cookbook's `tokenizer_utils`: `get_tokenizer(model_name)` and its registry (local only).

Environment code written for the cookbook calls `get_tokenizer(model_name)` in its dataset builders;
after switching imports it lands here. A name registered with `register_tokenizer` wins; "byte" /
"llm-gym/byte" give the embedded `ByteTokenizer`; a model that `tml_renderers` tokenizes (Inkling,
Kimi K3.1-Pro: `is_tml_renderers_model`) gets that package's tokenizer behind
`TmlRenderersTokenizerAdapter`; any other name goes through `_get_hf_tokenizer`, which applies
the cookbook's per-model loading rules (Kimi K2's custom tokenizer class at a pinned revision,
`HF_TRUST_REMOTE_CODE`) on top of `transformers.AutoTokenizer` and never downloads: it loads from a
local directory or the local HF cache (the hub client is put offline unless the user opted out),
and a missing tokenizer fails with the step that fetches it. Importing this module imports neither
transformers nor tml_renderers.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Callable, Literal, Protocol, TypeAlias, runtime_checkable

from llm_gym.tokenizers import _BYTE_ALIASES, hub_offline_by_default, load_tokenizer

# The cookbook spells an HF `PreTrainedTokenizer` this way without importing transformers.
Tokenizer: TypeAlias = Any

_CUSTOM_TOKENIZER_REGISTRY: dict[str, Callable[[], Tokenizer]] = {}

# Kimi K2 tokenizers are the repos' own `TikTokenTokenizer` (it renders tool declarations as
# TypeScript); the cookbook pins these revisions of them.
_KIMI_TOKENIZER_REVISIONS: dict[str, str] = {
    "moonshotai/Kimi-K2-Thinking": "a51ccc050d73dab088bf7b0e2dd9b30ae85a4e55",
    "moonshotai/Kimi-K2.5": "2426b45b6af0da48d0dcce71bbce6225e5c73adc",
    "moonshotai/Kimi-K2.6": "b5aabbfb20227ed42becbf5541dbffd213942c58",
}
# Only this repo's config.json is remote code, not its tokenizer: an explicit False keeps
# transformers from stopping at its interactive "run custom code?" prompt.
_NO_REMOTE_CODE_TOKENIZERS = frozenset({"nvidia/NVIDIA-Nemotron-3.5-Super-VL-120B-A12B-BF16"})
_TRUTHY = ("1", "true", "yes")


def ensure_tml_renderers_importable() -> None:
    """Make `tml_renderers` importable: installed, or a source checkout named by the
    `TML_RENDERERS_SOURCE_DIR` environment variable (put on `sys.path`, and taken off again when
    the package still cannot be found there). Raises `ModuleNotFoundError` saying how to get it."""
    if importlib.util.find_spec("tml_renderers") is not None:
        return
    source = os.environ.get("TML_RENDERERS_SOURCE_DIR")
    if source:
        source_dir = Path(source).expanduser()
        if (source_dir / "tml_renderers").exists():
            entry = str(source_dir)
            added = entry not in sys.path
            if added:
                sys.path.insert(0, entry)
            if importlib.util.find_spec("tml_renderers") is not None:
                return
            if added:
                sys.path.remove(entry)
    raise ModuleNotFoundError(
        "the Inkling / Kimi K3.1-Pro tokenizers need the `tml_renderers` package: pip install tml-renderers, or set "
        "TML_RENDERERS_SOURCE_DIR to a directory that contains the tml_renderers package"
    )


class TmlTokenizer(Protocol):
    """What the adapter uses of a `tml_renderers` tokenizer (that package builds it)."""

    bos_token: str
    eos_token: str

    def encode_ordinary(self, text: str) -> Sequence[int]: ...

    def decode(self, token_ids: list[int]) -> str: ...

    def encode_special(self, text: str) -> int: ...


@runtime_checkable
class SupportsEncodeOrdinary(Protocol):
    """A tokenizer with a native "no special tokens" encoder (the `tml_renderers` ones)."""

    def encode_ordinary(self, text: str) -> Sequence[int]: ...


def encode_without_special_tokens(tokenizer: Tokenizer | SupportsEncodeOrdinary, text: str) -> list[int]:
    """`text` as token ids, without the BOS/EOS tokens a model's tokenizer may add: the tokenizer's
    own `encode_ordinary` when it has one, else `encode(text, add_special_tokens=False)`."""
    if isinstance(tokenizer, SupportsEncodeOrdinary):
        return list(tokenizer.encode_ordinary(text))
    return list(tokenizer.encode(text, add_special_tokens=False))


@runtime_checkable
class SupportsTmlTokenizer(Protocol):
    """A tokenizer that exposes the `tml_renderers` tokenizer underneath it."""

    tml_tokenizer: TmlTokenizer


TmlTokenizerFamily: TypeAlias = Literal["o200k_base_chat", "h200k_base_chat", "kimi_k3"]

# family -> the `tml_renderers.tokenizers` names that build it: the class of tml-renderers 0.4+
# (what cookbook 0.6 calls), then, for o200k, the factory function of earlier releases.
_TML_TOKENIZER_BUILDERS: dict[str, tuple[str, ...]] = {
    "o200k_base_chat": ("O200kBaseChatTokenizer", "o200k_base_chat"),
    "h200k_base_chat": ("H200kBaseChatTokenizer",),
    "kimi_k3": ("KimiK3Tokenizer",),
}


def _tml_tokenizer_family(model_name: str) -> TmlTokenizerFamily | None:
    """The `tml_renderers` tokenizer family of a model (the cookbook's table), or None when the
    model uses a Hugging Face tokenizer."""
    base = model_name.split(":", 1)[0]
    if base == "thinkingmachines/Inkling-2-Small":
        return "h200k_base_chat"
    if base.startswith("thinkingmachines/Inkling"):
        return "o200k_base_chat"
    if base.startswith("moonshotai/Kimi-K3.1-Pro"):  # the K3 renderer family's tokenizer
        return "kimi_k3"
    return None


def is_tml_renderers_model(model_name: str) -> bool:
    """Whether `tml_renderers` (not a Hugging Face tokenizer) tokenizes `model_name`."""
    return _tml_tokenizer_family(model_name) is not None


def _load_tml_tokenizer(family: TmlTokenizerFamily) -> TmlTokenizer:
    ensure_tml_renderers_importable()
    tokenizers = importlib.import_module("tml_renderers.tokenizers")
    for name in _TML_TOKENIZER_BUILDERS[family]:
        build = getattr(tokenizers, name, None)
        if build is not None:
            return build()
    raise ModuleNotFoundError(
        f"the installed tml_renderers has no {family} tokenizer (looked for "
        f"{', '.join(_TML_TOKENIZER_BUILDERS[family])}); install a newer tml-renderers"
    )


class TmlRenderersTokenizerAdapter:
    """The HF-style `encode` / `decode` / `eos_token_id` face of a `tml_renderers` tokenizer
    (`tml_tokenizer`), which Inkling and Kimi K3.1-Pro models use. Without `tml_tokenizer` the
    one `name_or_path`'s family uses is built (the o200k chat tokenizer for an unknown name)."""

    eos_token_id: int | None = None
    tml_tokenizer: TmlTokenizer

    def __init__(self, name_or_path: str, tml_tokenizer: TmlTokenizer | None = None):
        if tml_tokenizer is None:
            tml_tokenizer = _load_tml_tokenizer(_tml_tokenizer_family(name_or_path) or "o200k_base_chat")
        self.name_or_path = name_or_path
        self.tml_tokenizer = tml_tokenizer
        self.bos_token = self.tml_tokenizer.bos_token
        self.eos_token = self.tml_tokenizer.eos_token
        try:
            self.eos_token_id = int(self.tml_tokenizer.encode_special(self.eos_token))
        except Exception:  # a tokenizer without a special eos id: none to stop on
            self.eos_token_id = None

    def encode(self, text: str, add_special_tokens: bool = False, **_: Any) -> list[int]:
        if add_special_tokens:
            raise ValueError("the tml_renderers tokenizer has no HF-style add_special_tokens; "
                             "render special tokens with the tml renderer instead")
        return list(self.tml_tokenizer.encode_ordinary(text))

    def decode(self, token_ids: Sequence[int], **_: Any) -> str:
        return str(self.tml_tokenizer.decode(list(token_ids)))


def get_tokenizer(model_name: str) -> Tokenizer:
    """The tokenizer called `model_name` (an optional ":checkpoint" suffix is ignored).

    A factory registered with `register_tokenizer` wins (called each time: it caches if it wants
    to); "byte" gives the embedded byte tokenizer; a model that `is_tml_renderers_model` (Inkling,
    Kimi K3.1-Pro) its `tml_renderers` tokenizer; anything else an HF tokenizer from a local path
    or the local HF cache (`_get_hf_tokenizer`, cached)."""
    factory = _CUSTOM_TOKENIZER_REGISTRY.get(model_name)
    if factory is not None:
        return factory()
    if model_name in _BYTE_ALIASES:
        return load_tokenizer(model_name)
    if (family := _tml_tokenizer_family(model_name)) is not None:
        return TmlRenderersTokenizerAdapter(model_name, _load_tml_tokenizer(family))
    return _get_hf_tokenizer(model_name)


def _hub_offline() -> bool:
    """Whether the HF hub client is in offline mode (llm-gym's default): then it cannot download,
    and `local_files_only` is redundant."""
    hub_offline_by_default()
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


@functools.cache
def _get_hf_tokenizer(model_name: str) -> Tokenizer:
    """An HF tokenizer for `model_name`, by the cookbook's rules, from local files only.

    A local directory loads as is. A hub id loads from the local HF cache: with
    `trust_remote_code=True` when `HF_TRUST_REMOTE_CODE` is 1/true/yes; Kimi K2 ids through the
    repo's own `TikTokenTokenizer` class at the pinned revision (AutoTokenizer does not resolve
    it on every transformers release). The hub client is offline (or `local_files_only=True`
    when the user turned offline mode off), so nothing is downloaded: a tokenizer that is not
    cached raises an `OSError` naming the command that fetches it."""
    model_name = model_name.split(":", 1)[0]
    if os.path.isdir(model_name):
        return load_tokenizer(model_name)
    kwargs: dict[str, Any] = {} if _hub_offline() else {"local_files_only": True}
    if os.environ.get("HF_TRUST_REMOTE_CODE", "").lower() in _TRUTHY:
        kwargs["trust_remote_code"] = True
    try:
        if model_name.startswith("moonshotai/Kimi-K2"):
            from transformers.dynamic_module_utils import get_class_from_dynamic_module

            revision = _KIMI_TOKENIZER_REVISIONS.get(model_name)
            cls = get_class_from_dynamic_module(
                "tokenization_kimi.TikTokenTokenizer", model_name, revision=revision
            )
            return cls.from_pretrained(model_name, revision=revision, **kwargs)
        if model_name in _NO_REMOTE_CODE_TOKENIZERS:
            kwargs.setdefault("trust_remote_code", False)
        from transformers.models.auto.tokenization_auto import AutoTokenizer

        return AutoTokenizer.from_pretrained(model_name, **kwargs)
    except (OSError, ValueError) as exc:
        raise OSError(
            f"tokenizer {model_name!r} is neither a local directory nor in the local Hugging Face "
            "cache, and llm-gym never downloads at run time. Download it once on a connected machine "
            f"(`hf download {model_name}`), pass a local path, or use 'byte'. ({type(exc).__name__}: {exc})"
        ) from exc


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
    "SupportsEncodeOrdinary",
    "SupportsTmlTokenizer",
    "TmlRenderersTokenizerAdapter",
    "TmlTokenizer",
    "TmlTokenizerFamily",
    "Tokenizer",
    "encode_without_special_tokens",
    "ensure_tml_renderers_importable",
    "is_tml_renderers_model",
    "get_registered_tokenizer_names",
    "get_tokenizer",
    "is_tokenizer_registered",
    "register_tokenizer",
    "unregister_tokenizer",
]
