"""Run one forward of a transformers model through a custom attention function.

The padding-free training forward (`trainers/grpo/packed_tails.py`) and the HF sampler's
shared-prompt decode (`trainers/sampling/hf.py`) each replace attention for selected forwards only:
the function is registered once in transformers' `AttentionInterface` under its name, and
`using_attention` points the model's config at it for the duration of a `with` block (the layout
the function needs rides along as a forward keyword). `base_model` is the transformers model under
DDP / DataParallel / PEFT wrappers, whose config holds the attention implementation.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

import torch

_registered: set[str] = set()


def base_model(model: torch.nn.Module) -> torch.nn.Module:
    """The transformers model under DDP / DataParallel / PEFT wrappers."""
    if isinstance(model, (torch.nn.parallel.DistributedDataParallel, torch.nn.DataParallel)):
        model = model.module
    get_base: Callable[[], torch.nn.Module] | None = getattr(model, "get_base_model", None)  # PEFT's
    return get_base() if callable(get_base) else model


@contextlib.contextmanager
def using_attention(model: torch.nn.Module, name: str, fn: Callable) -> Iterator[None]:
    """Inside the block, `model`'s attention layers call `fn` (registered once as `name`)."""
    if name not in _registered:
        from transformers import AttentionInterface

        AttentionInterface.register(name, fn)
        _registered.add(name)
    config: Any = base_model(model).config  # a transformers config (nn.Module's typing: Tensor | Module)
    old = config._attn_implementation
    config._attn_implementation = name
    try:
        yield
    finally:
        config._attn_implementation = old
