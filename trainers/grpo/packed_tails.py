"""Padding-free training forward for short rows: every real token once, no padded columns.

A GRPO micro-batch of a short-answer task is mostly padding and repetition: 16 rows per prompt,
each row a few sampled tokens padded to the longest answer, and the prompt shared by the group.
`shared_prefix.py` plans each prompt once; this module removes the rest. The shared prefixes and
the rows' own tokens (each row's tail after its prefix, or the whole row when nothing is shared)
are packed into one sequence `[1, M]` with each token's true position, so the projections, MLPs and
the LM head see only real tokens. Attention is the one place where rows must stay apart: a
custom attention function (registered in transformers' `AttentionInterface` and selected for
the packed forward only) scatters the packed queries, keys and values back into `[prefixes,
prefix width]` and `[rows, width]` layouts, attends each prefix causally to itself and each row to
its prefix's keys (grouped: a prefix's keys are never copied per row when rows come in equal runs)
and to its own earlier tokens, in one softmax, and packs the result. The prefixes travel in the same
packed sequence, ahead of the rows, so one model call does the whole micro-batch.
Gradients are exact: the same logits and the same parameter gradients as the plain forward.

Eager attention over `[rows, heads, width, prefix + width]` scores is only cheap while rows are
short, so `packed_fits` admits a micro-batch only when that score tensor stays small, and
`packed_pays` only when the padding it removes is worth more than the eager attention costs over
SDPA's fused kernel; long rows of about equal length (multi-turn episodes) keep the plain path.
The layout relies on a model calling its attention function with `module.layer_idx` and
`module.num_key_value_groups` (Llama, Qwen2/3, Mistral without a sliding window...): `verified`
compares the packed logprobs with the plain forward's on the first micro-batch each model sees and
falls back, with one warning, where they differ.
"""

from __future__ import annotations

import inspect
import warnings
import weakref
from dataclasses import dataclass

import torch

from trainers._attention import base_model, using_attention

ATTENTION_NAME = "llm_gym_packed_tails"
# Largest score tensor (rows x heads x width x (prefix + width) elements) the packed path builds;
# eager attention keeps ~3 such tensors for backward, and they grow with the row width squared;
# past it, SDPA's blocked kernel over padded rows keeps memory flat.
MAX_SCORE_ELEMENTS = 1 << 24
# packed vs plain logprobs on the first micro-batch: float32, and bf16/fp16 weights or autocast
VERIFY_ATOL = {torch.float32: 1e-4, "low": 5e-2}

_verdicts: "weakref.WeakKeyDictionary[torch.nn.Module, bool]" = weakref.WeakKeyDictionary()


@dataclass
class PackedLayout:
    """Where each packed token sits, and what it attends to.

    The packed sequence is the C shared prefixes' tokens (prefix c: positions 0 .. P_c - 1), then
    every row's own tokens. `prefix_index[n]` is prefix token n's slot `c * S + j` in a
    `[C, S]` layout, `flat_index[n]` row token n's slot `row * width + column` in `[rows, width]`.
    `group_size`: rows per prefix when the rows are equal consecutive runs (prefix c owns rows
    c*G .. c*G+G-1), which lets attention read a prefix's keys without copying them per row;
    None otherwise (`prefix_of_row` then picks each row's prefix)."""

    rows: int
    width: int
    flat_index: torch.Tensor  # [N]
    own_allowed: torch.Tensor  # [rows, 1, width, width] bool: causal and inside the row
    prefixes: int = 0  # C (0: rows start at position 0 and attend only to themselves)
    prefix_width: int = 0  # S
    prefix_index: torch.Tensor | None = None  # [sum of P_c]
    prefix_causal: torch.Tensor | None = None  # [C, 1, S, S] bool
    prefix_allowed: torch.Tensor | None = None  # [rows, 1, 1, S] bool: the row's prefix's tokens
    prefix_of_row: torch.Tensor | None = None  # [rows]
    group_size: int | None = None

    @property
    def prefix_tokens(self) -> int:
        return 0 if self.prefix_index is None else int(self.prefix_index.numel())


def packed_fits(rows: int, width: int, prefix_width: int, heads: int) -> bool:
    """Whether eager attention over this micro-batch's scores stays small (see module doc)."""
    return rows * heads * width * (prefix_width + width) <= MAX_SCORE_ELEMENTS


# Eager attention's cost per (query, key) pair relative to SDPA's fused kernel, which the plain
# path uses (CPU, tiny preset, forward + backward: packed lost 2.6 vs 1.2 s on 11 rows of ~500
# near-equal tokens and won 0.9 vs 1.1 s on 46 rows of 50-128 tokens; this ratio fits both).
EAGER_ATTENTION_COST = 2.5


def packed_pays(config, rows: int, width: int, prefix_width: int, real_tokens: int,
                trained_tokens: int | None = None) -> bool:
    """Whether the packed forward should be cheaper than the plain one: it skips the linear layers'
    (and LM head's) work on the `rows * width - real_tokens` padding slots, and, given
    `trained_tokens`, the LM head's on the real tokens that are not trained (`packed_logits`'
    `keep`); it pays `EAGER_ATTENTION_COST - 1` times the attention work over
    `rows x width x (prefix + width)` query-key pairs. FLOPs from the config's sizes; a config
    without them is packed as before."""
    try:
        d = int(config.hidden_size)
        heads = int(config.num_attention_heads)
        head_dim = int(getattr(config, "head_dim", None) or d // heads)
        kv = int(getattr(config, "num_key_value_heads", None) or heads)
        layers = int(config.num_hidden_layers)
        inner = int(getattr(config, "intermediate_size", 0) or 4 * d)
        vocab = int(config.vocab_size)
    except (AttributeError, TypeError, ValueError, ZeroDivisionError):
        return True
    # forward FLOPs: per token, q/o + k/v projections and the MLP in every layer, then the LM head;
    # per query-key pair, q.k and p.v in every head of every layer
    per_layer = 2 * d * heads * head_dim + 2 * d * kv * head_dim + 3 * d * inner
    per_token = layers * 2 * per_layer + 2 * d * vocab
    per_pair = layers * 4 * heads * head_dim
    saved = max(rows * width - real_tokens, 0) * per_token
    if trained_tokens is not None:
        saved += max(real_tokens - trained_tokens, 0) * 2 * d * vocab
    extra = (EAGER_ATTENTION_COST - 1) * rows * width * (prefix_width + width) * per_pair
    return saved >= extra


def _repeat_kv(x: torch.Tensor, groups: int) -> torch.Tensor:
    if groups == 1:
        return x
    b, h, s, d = x.shape
    return x[:, :, None].expand(b, h, groups, s, d).reshape(b, h * groups, s, d)


def _unpack(x: torch.Tensor, index: torch.Tensor, rows: int, width: int) -> torch.Tensor:
    """Packed [n, h, D] -> [rows, h, width, D] (zeros where no token sits)."""
    padded = x.new_zeros((rows * width, *x.shape[1:])).index_copy(0, index, x)
    return padded.view(rows, width, *x.shape[1:]).transpose(1, 2)


def _pack(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """[rows, h, width, D] -> packed [n, h, D]."""
    rows, h, width, d = x.shape
    return x.transpose(1, 2).reshape(rows * width, h, d).index_select(0, index)


def _masked(scores: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    # the dtype's minimum, not -inf: a fully masked row (never read back) stays finite
    return scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)


def _packed_attention(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    """transformers attention-function signature; `query` [1, H, M, D], `key`/`value`
    [1, H_kv, M, D] of the packed tokens (RoPE applied). Returns ([1, M, H, D], None)."""
    layout: PackedLayout = kwargs["llm_gym_packed"]
    rows, width = layout.rows, layout.width
    groups = module.num_key_value_groups
    q_all = query[0].transpose(0, 1)  # [M, H, D]
    k_all = _repeat_kv(key, groups)[0].transpose(0, 1)
    v_all = _repeat_kv(value, groups)[0].transpose(0, 1)
    n_pre = layout.prefix_tokens
    drop = dropout if module.training else 0.0

    def softmax(scores: torch.Tensor) -> torch.Tensor:
        probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
        return torch.nn.functional.dropout(probs, p=drop) if drop else probs

    q = _unpack(q_all[n_pre:], layout.flat_index, rows, width)
    k = _unpack(k_all[n_pre:], layout.flat_index, rows, width)
    v = _unpack(v_all[n_pre:], layout.flat_index, rows, width)
    heads, dim = q.shape[1], q.shape[3]
    own = _masked(torch.matmul(q, k.transpose(-1, -2)) * scaling, layout.own_allowed)
    if not n_pre:
        out = torch.matmul(softmax(own), v)
        return _pack(out, layout.flat_index)[None], None

    # The prefixes: causal attention inside each, in a [C, S] layout.
    prefix_index, prefix_causal, prefix_allowed = layout.prefix_index, layout.prefix_causal, layout.prefix_allowed
    # prefix tokens (n_pre > 0) exist only in a layout with prefixes, which sets all three
    assert prefix_index is not None and prefix_causal is not None and prefix_allowed is not None
    c, s_width = layout.prefixes, layout.prefix_width
    qp = _unpack(q_all[:n_pre], prefix_index, c, s_width)
    kp = _unpack(k_all[:n_pre], prefix_index, c, s_width)
    vp = _unpack(v_all[:n_pre], prefix_index, c, s_width)
    self_p = _masked(torch.matmul(qp, kp.transpose(-1, -2)) * scaling, prefix_causal)
    out_p = _pack(torch.matmul(softmax(self_p), vp), prefix_index)

    # The rows: their prefix's keys and their own earlier tokens, in one softmax.
    if layout.group_size:
        g = layout.group_size
        pre = torch.einsum("cghtd,chsd->cghts", q.reshape(c, g, heads, width, dim), kp)
        pre = pre.reshape(rows, heads, width, s_width)
    else:
        pre = torch.matmul(q, kp[layout.prefix_of_row].transpose(-1, -2))
    pre = _masked(pre * scaling, prefix_allowed)
    p_pre, p_own = softmax(torch.cat([pre, own], dim=-1)).split([s_width, width], dim=-1)
    out = torch.matmul(p_own, v)
    if layout.group_size:
        g = layout.group_size
        out = out + torch.einsum("cghts,chsd->cghtd",
                                 p_pre.reshape(c, g, heads, width, s_width), vp).reshape(out.shape)
    else:
        out = out + torch.matmul(p_pre, vp[layout.prefix_of_row])
    return torch.cat([out_p, _pack(out, layout.flat_index)])[None], None


def supports_packing(model: torch.nn.Module) -> bool:
    """Cheap structural test (the numeric one is `verified`): a transformers model with per-layer
    attention modules that the packed attention can drive, no sliding window, no padding-aware
    embedding tricks the layout would break."""
    base = base_model(model)
    config = getattr(base, "config", None)
    if config is None or _verdicts.get(base) is False:
        return False
    if getattr(config, "_attn_implementation", None) not in ("sdpa", "eager"):
        return False
    if getattr(config, "sliding_window", None) and getattr(config, "use_sliding_window", True):
        return False
    attn = [m for m in base.modules() if hasattr(m, "layer_idx") and hasattr(m, "num_key_value_groups")]
    return bool(attn)


def packed_logits(model: torch.nn.Module, input_ids_M: torch.Tensor, position_ids_M: torch.Tensor,
                  layout: PackedLayout, keep: torch.Tensor | None = None) -> torch.Tensor:
    """Logits [N, V] of the rows' packed tokens, or [K, V] of the row tokens `keep` indexes (one
    model call over prefixes + rows, `use_cache=False`). Where the model takes `logits_to_keep`,
    the LM head runs only on the tokens returned: in a multi-turn datum most tokens are prompt and
    env replies whose logits nothing reads."""
    n_pre = layout.prefix_tokens
    wanted = None if keep is None else keep + n_pre
    if wanted is None and n_pre:
        wanted = torch.arange(n_pre, input_ids_M.numel(), device=input_ids_M.device)
    extra = {}
    if wanted is not None and "logits_to_keep" in inspect.signature(base_model(model).forward).parameters:
        extra["logits_to_keep"] = wanted
    with using_attention(model, ATTENTION_NAME, _packed_attention):
        out = model(input_ids=input_ids_M[None], position_ids=position_ids_M[None], use_cache=False,
                    llm_gym_packed=layout, **extra)
    logits = out.logits[0]
    return logits if extra or wanted is None else logits[wanted]


def untested(model: torch.nn.Module) -> bool:
    """True until `verified` or `reject` has decided for this model."""
    return base_model(model) not in _verdicts


def reject(model: torch.nn.Module, why: str) -> None:
    """Switch packing off for this model, with one warning (its first packed forward failed)."""
    base = base_model(model)
    _verdicts[base] = False
    warnings.warn(f"padding-free training forward failed on {type(base).__name__} ({why}); using "
                  "the plain forward for this model", RuntimeWarning, stacklevel=3)


def verified(model: torch.nn.Module, packed_logp: torch.Tensor, plain_logp) -> bool:
    """Record (once per model) whether the packed forward reproduced the plain one; warn and
    switch packing off for this model when it did not. `plain_logp` is called only the first
    time, so later micro-batches pay nothing."""
    base = base_model(model)
    verdict = _verdicts.get(base)
    if verdict is None:
        with torch.no_grad():
            reference = plain_logp()
        gap = float((packed_logp.detach().float() - reference.float()).abs().max()) if reference.numel() else 0.0
        low = any(p.dtype != torch.float32 for p in base.parameters()) or torch.is_autocast_enabled(
            packed_logp.device.type)
        verdict = gap <= VERIFY_ATOL["low" if low else torch.float32]
        _verdicts[base] = verdict
        if not verdict:
            warnings.warn(f"padding-free training forward disagrees with the plain forward on "
                          f"{type(base).__name__} (max logprob gap {gap:.2e}); using the plain "
                          "forward for this model", RuntimeWarning, stacklevel=2)
    return verdict
