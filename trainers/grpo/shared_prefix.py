"""Shared-prefix training forward: a group's common prompt goes through the model once.

The G datums of a GRPO group start with the same observation (and a multi-turn group with the same
first observation), and none of those tokens carries loss. Instead of pushing every row's full
sequence through the model, the trainer can run each distinct prompt once with `use_cache=True`
(gradients on), expand the KV cache to the rows that continue it (`Cache.reorder_cache`, an
`index_select`, so the gradient of every row's loss flows back into the shared prompt's keys and
values), and then run only each row's own tail against that cache — the last prompt token, whose
logits predict the first sampled token, plus the rest of the sequence. On short-answer tasks that
is several times less arithmetic than the plain forward, for the same logits and gradients.

This module is the torch side of that trick and its planning: `trained_start` / `prefix_key` say
which tokens of a datum can be shared, `pack_micro_batches` keeps rows that share a prefix in one
micro-batch, `plan_shared_prefix` decides whether sharing pays for a micro-batch and how to split
each row, and `shared_prefix_logits` runs the two forwards. `trainers.grpo.trainer.collate` and
`token_logprobs` put it together; `GRPOConfig.share_prefix` switches it off.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable, Sequence

import numpy as np
import torch

from trainers.sampling.hf import cache_kwargs

# Share only when the padded token count drops by at least this fraction: otherwise the extra
# forward call and cache expansion eat the saving (one-row groups, tiny prompts, long multi-turn
# tails).
MIN_TOKEN_SAVING = 0.25


def trained_start(mask: np.ndarray) -> int:
    """Index of the first position whose logits carry loss (mask > 0); `len - 1` when none does.

    Positions before it can be computed once for every row with the same tokens there; the
    position itself must be computed per row, since its logits predict the first trained token."""
    hits = np.flatnonzero(np.asarray(mask) > 0)
    return int(hits[0]) if hits.size else max(len(mask) - 1, 0)


def prefix_key(tokens: Sequence[int], mask: np.ndarray) -> tuple[int, ...]:
    """The shareable prefix of one datum: its input tokens before `trained_start`. Datums with
    equal keys (a GRPO group's rows; a multi-turn group's rows share their first observation) can
    share one prefix computation."""
    return tuple(tokens[: trained_start(mask)])


def pack_micro_batches(keys: Sequence[Hashable], size: int) -> list[list[int]]:
    """Indices of each micro-batch (at most `size` rows), in order, keeping runs of consecutive
    equal keys (a group) in one micro-batch whenever the run fits in one; a longer run is split
    into full micro-batches. Adds a micro-batch only where a group would otherwise be split."""
    runs: list[list[int]] = []
    for i, key in enumerate(keys):
        if runs and keys[runs[-1][0]] == key:
            runs[-1].append(i)
        else:
            runs.append([i])
    batches: list[list[int]] = []
    current: list[int] = []
    for run in runs:
        if len(current) + len(run) <= size:
            current += run
            continue
        if len(run) <= size:  # the group fits in a micro-batch of its own: don't split it
            batches.append(current)
            current = list(run)
            continue
        fill = size - len(current)  # a group bigger than a micro-batch is split anyway
        current += run[:fill]
        rest = run[fill:]
        batches.append(current)
        while len(rest) > size:
            batches.append(rest[:size])
            rest = rest[size:]
        current = rest
    if current:
        batches.append(current)
    return [b for b in batches if b]


def split_by_tokens(batches: list[list[int]], lengths: Sequence[int], keys: Sequence[Hashable],
                    shared: Sequence[int], budget: int) -> list[list[int]]:
    """Each micro-batch cut, in order, so that no piece's tokens pass `budget` (0: no cut): a row
    costs its length, less `shared[i]` (its shareable prefix's length) when a row with the same key
    is already in the piece. A single row over the budget stays a piece of its own."""
    if budget <= 0:
        return batches
    out: list[list[int]] = []
    for batch in batches:
        piece: list[int] = []
        seen: set = set()
        cost = 0
        for i in batch:
            row = lengths[i] - (shared[i] if keys[i] in seen else 0)
            if piece and cost + row > budget:
                out.append(piece)
                piece, seen, cost = [], set(), 0
                row = lengths[i]
            piece.append(i)
            seen.add(keys[i])
            cost += row
        if piece:
            out.append(piece)
    return out


@dataclass
class PrefixPlan:
    """How one micro-batch is split: `prefixes[c]` runs once; row r continues prefix
    `prefix_of_row[r]`, whose length `split[r]` is where the row's own tokens start."""

    prefixes: list[tuple[int, ...]]
    prefix_of_row: list[int]
    split: list[int]


def plan_shared_prefix(tokens_B: Sequence[Sequence[int]], keys_B: Sequence[tuple[int, ...]],
                       min_saving: float = MIN_TOKEN_SAVING) -> PrefixPlan | None:
    """Group rows by `prefix_key`; None when sharing would not save `min_saving` of the padded
    tokens (no two rows share a prefix, or the prefixes are short next to the rows' tails)."""
    index: dict[tuple[int, ...], int] = {}
    prefix_of_row = [index.setdefault(k, len(index)) for k in keys_B]
    if len(index) == len(keys_B):
        return None  # nothing is shared
    prefixes = list(index)
    split = [len(prefixes[c]) for c in prefix_of_row]
    width = max(len(p) for p in prefixes)
    if width == 0:
        return None
    plain = len(tokens_B) * max(len(t) for t in tokens_B)
    shared = len(prefixes) * width + len(tokens_B) * max(len(t) - s for t, s in zip(tokens_B, split))
    if shared > (1.0 - min_saving) * plain:
        return None
    return PrefixPlan(prefixes, prefix_of_row, split)


def supports_shared_prefix(model: torch.nn.Module) -> bool:
    """False where the model would not return a KV cache in training (gradient checkpointing
    turns `use_cache` off in HF models)."""
    # what HF's `is_activation_checkpointing` checks (its older name warns in transformers 5)
    return not any(getattr(m, "gradient_checkpointing", False) is True for m in model.modules())


def shared_prefix_logits(
    model: torch.nn.Module,
    prefix_ids_CS: torch.Tensor,
    prefix_of_row_B: torch.Tensor,
    input_ids_BT: torch.Tensor,
    attention_mask_BK: torch.Tensor,
    position_ids_BT: torch.Tensor,
) -> torch.Tensor:
    """Logits [B, T, V] of each row's own tokens, continuing its shared prefix.

    `prefix_ids_CS`: the C distinct prefixes, right-padded to S (causal attention alone keeps a
    real token from seeing the padding after it, so no mask is needed there). `prefix_of_row_B`:
    which prefix each row continues. `attention_mask_BK` (K = S + T): the row's prefix's real
    tokens, then its own non-padding tokens. `position_ids_BT`: continue from the prefix length.
    """
    cache_kw, has_logits_to_keep = cache_kwargs(model)
    extra = {"logits_to_keep": 1} if has_logits_to_keep else {}  # prefix logits are not needed
    out = model(input_ids=prefix_ids_CS, use_cache=True, **extra)
    cache = getattr(out, "cache", None)
    if cache is None:
        cache = getattr(out, "past_key_values", None)
    if cache is None:
        raise RuntimeError(
            "share_prefix needs the model to return a KV cache in training, but it returned none "
            "(gradient checkpointing turns use_cache off); set share_prefix=False"
        )
    # index_select on every layer: the rows' gradients w.r.t. their copies sum back into the prefix
    cache.reorder_cache(prefix_of_row_B)
    out = model(input_ids=input_ids_BT, attention_mask=attention_mask_BK,
                position_ids=position_ids_BT, use_cache=True, **{cache_kw: cache})
    return out.logits
