"""Tokenizers: the embedded byte-level tokenizer (the default) and `load_tokenizer` for HF ones.

`ByteTokenizer` needs no files and no network: ids 0..255 are UTF-8 bytes, a few special tokens
follow. It mirrors the slice of the HF tokenizer interface that llm-gym uses (`encode`, `decode`,
`convert_tokens_to_ids`, `eos_token_id`, `pad_token_id`, `vocab_size`, `len()`), so renderers and
environments treat it and an HF tokenizer alike. `load_tokenizer` accepts a name, a path or an
object; HF `transformers` is imported only when a name or path other than the byte tokenizer's is
asked for, and only the local cache is consulted.
"""

from __future__ import annotations

import functools
import os
from typing import Any, Iterable, Sequence

from llm_gym.model_input import as_token_ids

BYTE_TOKENIZER_NAME = "llm-gym/byte"
_BYTE_ALIASES = {"byte", "bytes", BYTE_TOKENIZER_NAME}


# decode: sequences longer than this try bytes() first (cheapest for plain text; a short prompt
# starts with a special token, where that attempt would only add a raised exception).
_BYTES_FIRST_MIN_LEN = 32


class InvalidTokenError(ValueError):
    """A token id outside the tokenizer's vocabulary."""


class ByteTokenizer:
    """UTF-8 bytes as tokens 0..255, then special tokens.

    | id  | token          |
    |-----|----------------|
    | 256 | `<|pad|>`      |
    | 257 | `<|bos|>`      |
    | 258 | `<|eos|>`      |
    | 259 | `<|im_start|>` |
    | 260 | `<|im_end|>`   |

    `encode` never produces special tokens from text (a literal "<|im_end|>" in a user message stays
    bytes), so prompt injection of control tokens through text is impossible.
    """

    SPECIAL_TOKENS: tuple[str, ...] = ("<|pad|>", "<|bos|>", "<|eos|>", "<|im_start|>", "<|im_end|>")
    NUM_BYTES = 256

    def __init__(self) -> None:
        self.name_or_path = BYTE_TOKENIZER_NAME
        self._special_to_id = {tok: self.NUM_BYTES + i for i, tok in enumerate(self.SPECIAL_TOKENS)}
        self._id_to_special = {i: tok for tok, i in self._special_to_id.items()}
        # decode(skip_special_tokens=False) fast path: each id's bytes (special tokens are ASCII).
        self._id_bytes = [bytes([i]) for i in range(self.NUM_BYTES)] + [
            tok.encode("ascii") for tok in self.SPECIAL_TOKENS
        ]

    # --- sizes and special ids -------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        return self.NUM_BYTES + len(self.SPECIAL_TOKENS)

    def __len__(self) -> int:
        return self.vocab_size

    @property
    def pad_token_id(self) -> int:
        return self._special_to_id["<|pad|>"]

    @property
    def bos_token_id(self) -> int:
        return self._special_to_id["<|bos|>"]

    @property
    def eos_token_id(self) -> int:
        return self._special_to_id["<|eos|>"]

    @property
    def pad_token(self) -> str:
        return "<|pad|>"

    @property
    def eos_token(self) -> str:
        return "<|eos|>"

    @property
    def bos_token(self) -> str:
        return "<|bos|>"

    @property
    def all_special_ids(self) -> list[int]:
        return list(self._id_to_special)

    @property
    def all_special_tokens(self) -> list[str]:
        return list(self.SPECIAL_TOKENS)

    # --- conversion ------------------------------------------------------------------------
    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        if not isinstance(text, str):
            raise TypeError(f"ByteTokenizer.encode expects a str, got {type(text).__name__}")
        ids = list(text.encode("utf-8"))
        if add_special_tokens:
            ids.insert(0, self.bos_token_id)
        return ids

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict[str, list[int]]:
        ids = self.encode(text, add_special_tokens=add_special_tokens)
        return {"input_ids": ids, "attention_mask": [1] * len(ids)}

    def check_ids(self, ids: Iterable[int]) -> None:
        """Raise `InvalidTokenError` naming the first id outside 0..vocab_size-1 (and `TypeError`
        for text or non-integer ids)."""
        ids = _checked_ids(ids, "ByteTokenizer token ids")
        limit = self.vocab_size
        if ids and max(ids) >= limit:
            bad = next(i for i in ids if i >= limit)
            raise InvalidTokenError(
                f"token id {bad} is outside the byte tokenizer's vocabulary (0..{limit - 1})"
            )

    def decode(
        self, ids: Sequence[int], skip_special_tokens: bool = False, errors: str = "replace"
    ) -> str:
        """Decode ids to text. Invalid UTF-8 becomes U+FFFD (`errors="replace"`, the default);
        ids outside the vocabulary raise `InvalidTokenError`; text or non-integer ids raise
        `TypeError`."""
        if isinstance(ids, (list, tuple)) and ids:
            # Fast paths, for ids that are all valid; anything else (non-integers included) falls
            # through to the checked path below, which gives the documented errors.
            # - Long runs of plain bytes (model output): bytes() range-checks and converts in one
            #   C pass (it stops at the first id over 255).
            # - Otherwise, with special tokens shown: each id's bytes spliced and decoded once
            #   (special tokens' names are ASCII, which never continues a UTF-8 sequence, so this
            #   equals decoding the runs between them one by one). The list lookup rejects ids
            #   past the table (IndexError) and non-integers (TypeError); only negative ids need
            #   a check of their own (min(), one pass; they would index from the end).
            try:
                raw = None
                if len(ids) > _BYTES_FIRST_MIN_LEN:
                    try:
                        raw = bytes(ids)
                    except ValueError:
                        pass
                if raw is not None:
                    return raw.decode("utf-8", errors)
                if not skip_special_tokens:
                    if min(ids) >= 0:
                        return b"".join(map(self._id_bytes.__getitem__, ids)).decode("utf-8", errors)
                elif min(ids) >= 0 and max(ids) < self.NUM_BYTES:
                    return bytes(ids).decode("utf-8", errors)
            except (TypeError, IndexError):
                pass
        ids = _checked_ids(ids, "ByteTokenizer.decode ids")
        if not ids or max(ids) < self.NUM_BYTES:
            return bytes(ids).decode("utf-8", errors=errors)
        self.check_ids(ids)
        parts: list[str] = []
        start = 0
        for pos, i in enumerate(ids):
            if i < self.NUM_BYTES:
                continue
            if start < pos:
                parts.append(bytes(ids[start:pos]).decode("utf-8", errors=errors))
            if not skip_special_tokens:
                parts.append(self._id_to_special[i])
            start = pos + 1
        if start < len(ids):
            parts.append(bytes(ids[start:]).decode("utf-8", errors=errors))
        return "".join(parts)

    def convert_tokens_to_ids(self, tokens: str | Sequence[str]) -> int | list[int]:
        if isinstance(tokens, str):
            return self._token_to_id(tokens)
        return [self._token_to_id(t) for t in tokens]

    def _token_to_id(self, token: str) -> int:
        if token in self._special_to_id:
            return self._special_to_id[token]
        raw = token.encode("utf-8")
        if len(raw) == 1:
            return raw[0]
        raise KeyError(f"{token!r} is not a single byte or a special token of the byte tokenizer")

    def convert_ids_to_tokens(self, ids: int | Sequence[int]) -> str | list[str]:
        if isinstance(ids, int) and not isinstance(ids, bool):
            return self._id_to_token(ids)
        return [self._id_to_token(i) for i in as_token_ids(ids)]

    def _id_to_token(self, i: int) -> str:
        self.check_ids((i,))
        if i in self._id_to_special:
            return self._id_to_special[i]
        return bytes([i]).decode("latin-1")

    def __repr__(self) -> str:
        return f"ByteTokenizer(vocab_size={self.vocab_size})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ByteTokenizer)

    def __hash__(self) -> int:
        return hash(ByteTokenizer)


def _checked_ids(ids: Any, what: str) -> tuple[int, ...]:
    try:
        return as_token_ids(ids, what=what)
    except ValueError as exc:  # a negative id is an invalid token like any other
        raise InvalidTokenError(str(exc)) from None


def vocab_size_of(tokenizer: Any) -> int:
    """Number of token ids a tokenizer can produce (HF: `len(tok)`, which counts added tokens)."""
    try:
        return int(len(tokenizer))
    except TypeError:
        return int(tokenizer.vocab_size)


def tokenizer_name(tokenizer: Any) -> str:
    return str(getattr(tokenizer, "name_or_path", type(tokenizer).__name__))


def load_tokenizer(name_or_path_or_object: Any = None) -> Any:
    """Return a tokenizer from a name, a local path, or an object (returned as is).

    `None`, `"byte"` or `"llm-gym/byte"` give the embedded `ByteTokenizer`. Any other string is
    loaded with `transformers.AutoTokenizer` from a local path or the local HF cache only; when it
    is not there, the error says how to get it.
    """
    if name_or_path_or_object is None:
        return _byte_tokenizer()
    if isinstance(name_or_path_or_object, str):
        if name_or_path_or_object in _BYTE_ALIASES:
            return _byte_tokenizer()
        return _load_hf_tokenizer(name_or_path_or_object)
    if isinstance(name_or_path_or_object, os.PathLike):
        return _load_hf_tokenizer(os.fspath(name_or_path_or_object))
    tok = name_or_path_or_object
    if not (callable(getattr(tok, "encode", None)) and callable(getattr(tok, "decode", None))):
        raise TypeError(
            f"tokenizer must be a name, a path, or an object with encode/decode; got {type(tok).__name__}"
        )
    return tok


@functools.lru_cache(maxsize=1)
def _byte_tokenizer() -> ByteTokenizer:
    return ByteTokenizer()


def hub_offline_by_default() -> None:
    """Put the HF hub client in offline mode unless the user chose otherwise.

    `local_files_only=True` is not enough: huggingface_hub (>= 1.x) still makes side requests
    (e.g. its agent-harness registry) while loading. llm-gym never downloads at run time, so before
    transformers/huggingface_hub are first imported we default `HF_HUB_OFFLINE=1`; set
    `HF_HUB_OFFLINE=0` in the environment to opt out.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")


@functools.lru_cache(maxsize=16)
def _load_hf_tokenizer(name_or_path: str) -> Any:
    hub_offline_by_default()
    try:
        from transformers import AutoTokenizer
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            f"loading tokenizer {name_or_path!r} needs `transformers`: pip install 'llm-gym[train]' "
            "(or pip install transformers), or use the built-in tokenizer='byte'"
        ) from exc
    if os.path.isdir(name_or_path):
        try:
            return AutoTokenizer.from_pretrained(name_or_path, local_files_only=True)
        except Exception as exc:
            raise OSError(
                f"could not load a tokenizer from the local directory {name_or_path!r} "
                f"({type(exc).__name__}: {exc}); it should hold tokenizer.json or the files "
                "`tokenizer.save_pretrained(dir)` writes"
            ) from exc
    try:
        # local_files_only: never touch the network, so a missing tokenizer fails at once
        # instead of hanging on an unreachable hub.
        return AutoTokenizer.from_pretrained(name_or_path, local_files_only=True)
    except Exception as exc:
        raise OSError(
            f"tokenizer {name_or_path!r} is neither a local directory nor in the local Hugging Face "
            "cache, and llm-gym never downloads at run time. Download it once on a connected machine "
            f"(`hf download {name_or_path}`), pass a local path, or use tokenizer='byte'."
        ) from exc
