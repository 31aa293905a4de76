"""Policy-gradient losses of the GRPO trainer, one small function per objective.

Every loss takes per-token tensors of one micro-batch, shape [B, T]: `logp` (log-probs of the
target tokens under the current policy, with gradient), `sampling_logp` (the sampler's log-probs,
i.e. the old policy q; reused as is, so an on-policy step needs no extra forward pass) and
`advantages` (the trajectory's advantage on sampled tokens, 0 elsewhere). Each returns the
per-token loss (to be masked and reduced by `reduce_loss`); signs follow "minimise the loss".
Formulas follow the Tinker docs' built-in losses (`importance_sampling`, `ppo`, `cispo`, `dro`),
so a run here and a Tinker run optimise the same objective. `policy_loss` is the one entry point
the trainer calls: loss + optional k3 KL to a reference model + the reduction + metrics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

import torch

from trainers.grpo.config import REDUCTIONS

Reduction = Literal["token_sum", "seq_mean", "token_mean"]


@dataclass(frozen=True)
class LossParams:
    """Hyper-parameters the losses read (see `GRPOConfig` for their documentation)."""

    clip_eps_low: float = 0.2
    clip_eps_high: float = 0.2
    dro_beta: float = 0.05


# L_IS = -E_q[ (p/q) · A ],  ratio = exp(logp - logq).  At p = q the gradient is REINFORCE's.
def importance_sampling_loss(logp, sampling_logp, advantages, params: LossParams):
    ratio = torch.exp(logp - sampling_logp)
    return -ratio * advantages


# L_PPO = -E_q[ min(r·A, clip(r, 1-ε_low, 1+ε_high)·A) ]  (Schulman et al. 2017, token-wise).
def ppo_loss(logp, sampling_logp, advantages, params: LossParams):
    ratio = torch.exp(logp - sampling_logp)
    clipped = torch.clamp(ratio, 1.0 - params.clip_eps_low, 1.0 + params.clip_eps_high)
    return -torch.minimum(ratio * advantages, clipped * advantages)


# L_CISPO = -E_q[ sg(clip(r, 1-ε_low, 1+ε_high)) · log p · A ]: the clipped IS weight scales the
# gradient of log p but never blocks it (MiniMax-M1).
def cispo_loss(logp, sampling_logp, advantages, params: LossParams):
    ratio = torch.exp(logp - sampling_logp)
    weight = torch.clamp(ratio, 1.0 - params.clip_eps_low, 1.0 + params.clip_eps_high).detach()
    return -weight * logp * advantages


# L_DRO = -E_q[ log p · A - ½ β (log p - log q)² ]  (Richemond et al. 2024): a quadratic penalty
# instead of a clip keeps p near q, which also makes it usable off-policy.
def dro_loss(logp, sampling_logp, advantages, params: LossParams):
    return -(logp * advantages - 0.5 * params.dro_beta * (logp - sampling_logp) ** 2)


LossFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, LossParams], torch.Tensor]
LOSSES: dict[str, LossFn] = {
    "importance_sampling": importance_sampling_loss,
    "ppo": ppo_loss,
    "cispo": cispo_loss,
    "dro": dro_loss,
}


# k3 estimator of KL(p || ref) per token (Schulman, "Approximating KL divergence"):
#   KL ≈ exp(ref - logp) - (ref - logp) - 1  ≥ 0, unbiased, low variance.
def k3_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    delta = ref_logp - logp
    return torch.exp(delta) - delta - 1.0


def token_weights(mask_BT: torch.Tensor, reduction: str, num_seqs: float, num_tokens: float,
                  world_size: int = 1) -> torch.Tensor:
    """Per-token weights w such that `(loss_BT * w).sum()` is this micro-batch's share of the
    whole batch's reduced loss (so summing micro-batches — and DDP's average over `world_size`
    processes — gives exactly the full-batch loss, whatever the micro-batch size).

    - `token_sum`: Σ_tokens loss (Tinker's convention; the loss grows with the batch).
    - `seq_mean`: mean over sequences of each sequence's mean token loss (original GRPO).
    - `token_mean`: Σ_tokens loss / Σ_batch tokens (DAPO: long answers weigh more).

    `num_seqs` / `num_tokens` are counts over the *global* batch (all micro-batches, all ranks).
    """
    if reduction == "token_sum":
        w = mask_BT
    elif reduction == "seq_mean":
        w = mask_BT / mask_BT.sum(dim=1, keepdim=True).clamp(min=1.0) / max(num_seqs, 1.0)
    elif reduction == "token_mean":
        w = mask_BT / max(num_tokens, 1.0)
    else:
        raise ValueError(f"unknown loss reduction {reduction!r}; choose one of {list(REDUCTIONS)}")
    return w * world_size


def policy_loss(
    loss_name: str,
    logp_BT: torch.Tensor,
    sampling_logp_BT: torch.Tensor,
    advantages_BT: torch.Tensor,
    mask_BT: torch.Tensor,
    weights_BT: torch.Tensor,
    params: LossParams,
    ref_logp_BT: torch.Tensor | None = None,
    kl_beta: float = 0.0,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The reduced loss of one micro-batch and detached per-batch sums for metrics.

    `weights_BT` come from `token_weights` (zero wherever `mask_BT` is zero, so environment and
    padding tokens contribute neither loss nor gradient). Metric sums (`*_sum`) are over masked
    tokens; the trainer divides by the token count after accumulating micro-batches.
    """
    if loss_name not in LOSSES:
        raise ValueError(f"unknown loss {loss_name!r}; choose one of {sorted(LOSSES)}")
    per_token = LOSSES[loss_name](logp_BT, sampling_logp_BT, advantages_BT, params)
    kl_BT = None
    if ref_logp_BT is not None:
        kl_BT = k3_kl(logp_BT, ref_logp_BT)
        if kl_beta:
            per_token = per_token + kl_beta * kl_BT
    loss = (per_token * weights_BT).sum()

    with torch.no_grad():
        log_ratio = (logp_BT - sampling_logp_BT) * mask_BT
        ratio = torch.exp(log_ratio)
        clipped = ((ratio < 1.0 - params.clip_eps_low) | (ratio > 1.0 + params.clip_eps_high)).float()
        stats = {
            "clip_frac_sum": (clipped * mask_BT).sum(),
            # k1 estimate of KL(q || p) between sampler and learner: ~0 when on-policy.
            "sampler_kl_sum": (-log_ratio).sum(),
            "kl_sum": (kl_BT.detach() * mask_BT).sum() if kl_BT is not None else mask_BT.new_zeros(()),
        }
    return loss, stats
