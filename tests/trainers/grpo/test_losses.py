"""The GRPO losses against their formulas: on-policy gradients, clipping, stop-gradients, the
three reductions, micro-batch invariance and masking."""

from __future__ import annotations

import pytest
import torch

from trainers._trl_compat import selective_log_softmax
from trainers.grpo.config import LOSS_NAMES, REDUCTIONS
from trainers.grpo.losses import LOSSES, LossParams, k3_kl, policy_loss, token_weights

P = LossParams(clip_eps_low=0.2, clip_eps_high=0.3, dro_beta=0.1)


def test_loss_registry_matches_config_names():
    assert tuple(LOSSES) == LOSS_NAMES


@pytest.mark.parametrize("name", LOSS_NAMES)
def test_on_policy_gradient_is_reinforce(name):
    # At p = q every objective's gradient is -A * d(log p): ratio 1, weight 1, zero DRO penalty.
    logp = torch.tensor([-0.5, -1.2, -2.0], requires_grad=True)
    adv = torch.tensor([1.0, -0.5, 2.0])
    LOSSES[name](logp, logp.detach().clone(), adv, P).sum().backward()
    assert torch.allclose(logp.grad, -adv)


def test_importance_sampling_value_and_gradient():
    logp = torch.tensor([-1.0], requires_grad=True)
    q = torch.tensor([-1.5])
    adv = torch.tensor([2.0])
    loss = LOSSES["importance_sampling"](logp, q, adv, P).sum()
    ratio = torch.exp(torch.tensor(0.5))
    assert torch.allclose(loss, -ratio * 2.0)
    loss.backward()
    assert torch.allclose(logp.grad, -ratio * 2.0)  # d/dlogp of -exp(logp - q) A


def test_ppo_clips_in_the_direction_of_the_advantage():
    q = torch.zeros(4)
    # ratio e^0.5 ≈ 1.65 > 1.3 (clip high), and e^-0.5 ≈ 0.61 < 0.8 (clip low)
    logp = torch.tensor([0.5, 0.5, -0.5, -0.5], requires_grad=True)
    adv = torch.tensor([1.0, -1.0, 1.0, -1.0])
    loss = LOSSES["ppo"](logp, q, adv, P)
    loss.sum().backward()
    # too likely & positive advantage: clipped, no gradient; negative advantage: unclipped term
    # is the min, gradient flows. Symmetrically below the low clip.
    assert logp.grad[0] == 0 and logp.grad[3] == 0
    assert logp.grad[1] != 0 and logp.grad[2] != 0
    assert torch.allclose(loss[0], torch.tensor(-1.3))


def test_cispo_weight_is_clipped_and_stop_gradient():
    q = torch.zeros(2)
    logp = torch.tensor([0.5, -0.5], requires_grad=True)  # ratios 1.65 and 0.61
    adv = torch.tensor([1.0, 1.0])
    LOSSES["cispo"](logp, q, adv, P).sum().backward()
    # gradient = -sg(clip(r)) * A: never zero, bounded by the clip range
    assert torch.allclose(logp.grad, torch.tensor([-1.3, -0.8]))


def test_dro_formula():
    q = torch.tensor([-1.0, -2.0])
    logp = torch.tensor([-0.5, -2.5], requires_grad=True)
    adv = torch.tensor([1.0, -1.0])
    loss = LOSSES["dro"](logp, q, adv, P)
    expected = -(logp * adv - 0.5 * 0.1 * (logp - q) ** 2)
    assert torch.allclose(loss, expected)
    loss.sum().backward()
    assert torch.allclose(logp.grad, -(adv - 0.1 * (logp.detach() - q)))


def test_k3_kl_nonnegative_and_zero_on_policy():
    logp = torch.randn(100)
    ref = torch.randn(100)
    kl = k3_kl(logp, ref)
    assert (kl >= 0).all() and kl.max() > 0
    assert torch.allclose(k3_kl(logp, logp), torch.zeros(100))


def _batch(seed=0, B=6, T=9):
    g = torch.Generator().manual_seed(seed)
    mask = (torch.rand(B, T, generator=g) > 0.4).float()
    mask[:, 0] = 1.0
    logp = (-torch.rand(B, T, generator=g) * 3).requires_grad_(True)
    q = logp.detach() + 0.1 * torch.randn(B, T, generator=g)
    adv = torch.randn(B, 1, generator=g).expand(B, T) * mask
    return logp, q, adv, mask


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_reductions_match_definitions(reduction):
    logp, q, adv, mask = _batch()
    per_token = LOSSES["importance_sampling"](logp, q, adv, P) * mask
    w = token_weights(mask, reduction, num_seqs=mask.shape[0], num_tokens=float(mask.sum()))
    got = (LOSSES["importance_sampling"](logp, q, adv, P) * w).sum()
    if reduction == "token_sum":
        want = per_token.sum()
    elif reduction == "seq_mean":
        want = (per_token.sum(1) / mask.sum(1)).mean()
    else:
        want = per_token.sum() / mask.sum()
    assert torch.allclose(got, want)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", LOSS_NAMES)
def test_micro_batches_sum_to_the_full_batch_gradient(name, reduction):
    logp, q, adv, mask = _batch(seed=3)
    n_seqs, n_tok = mask.shape[0], float(mask.sum())

    full, _ = policy_loss(name, logp, q, adv, mask, token_weights(mask, reduction, n_seqs, n_tok), P)
    (g_full,) = torch.autograd.grad(full, logp)
    total = 0.0
    grads = []
    for sl in (slice(0, 2), slice(2, 3), slice(3, 6)):
        part, _ = policy_loss(name, logp[sl], q[sl], adv[sl], mask[sl],
                              token_weights(mask[sl], reduction, n_seqs, n_tok), P)
        total = total + part
        grads.append(torch.autograd.grad(part, logp)[0][sl])
    assert torch.allclose(total, full, atol=1e-6)
    assert torch.allclose(torch.cat(grads), g_full, atol=1e-6)


def test_masked_positions_get_zero_logit_gradient():
    # Env tokens / padding (mask 0) must contribute nothing, even with non-zero advantage there.
    torch.manual_seed(0)
    B, T, V = 3, 7, 11
    logits = torch.randn(B, T, V, requires_grad=True)
    targets = torch.randint(0, V, (B, T))
    mask = torch.tensor([[0, 0, 1, 1, 1, 0, 0]] * B, dtype=torch.float32)
    adv = torch.full((B, T), 0.7)  # deliberately non-zero on masked positions
    logp = selective_log_softmax(logits, targets)
    for name in LOSS_NAMES:
        loss, _ = policy_loss(name, logp, logp.detach() - 0.05, adv, mask,
                              token_weights(mask, "token_mean", B, float(mask.sum())), P,
                              ref_logp_BT=logp.detach() + 0.1, kl_beta=0.5)
        (g,) = torch.autograd.grad(loss, logits, retain_graph=True)
        assert g[mask == 0].abs().max() == 0
        assert g[mask == 1].abs().max() > 0


def test_metrics_clip_fraction_and_unknown_loss():
    logp, q, adv, mask = _batch()
    q = logp.detach() - 1.0  # every ratio e^1 > 1.3: all masked tokens clipped
    _, stats = policy_loss("ppo", logp, q, adv, mask, token_weights(mask, "token_sum", 1, 1), P)
    assert stats["clip_frac_sum"] == mask.sum()
    with pytest.raises(ValueError, match="unknown loss 'grpo2'"):
        policy_loss("grpo2", logp, q, adv, mask, mask, P)
    with pytest.raises(ValueError, match="loss reduction"):
        token_weights(mask, "mean", 1, 1)
