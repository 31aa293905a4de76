"""Shared-prefix training forward (`trainers/grpo/shared_prefix.py`): computing a group's prompt
once and expanding its KV cache gives the same per-token logprobs, loss, metrics and parameter
gradients as the plain forward over full rows — for groups with rows and prompts of different
lengths, multi-turn datums, micro-batches that split groups, and a KL reference model."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from llm_gym.model_input import ModelInput
from llm_gym.rl import Datum
from trainers.grpo.config import GRPOConfig
from trainers.grpo.shared_prefix import pack_micro_batches, plan_shared_prefix, prefix_key

PAD = 256


def _datum(segments: list[tuple[list[int], bool]], advantage: float, rng: np.random.Generator) -> Datum:
    """A datum from (tokens, sampled?) segments, as `trajectory_to_data` builds them: sampled
    tokens get mask 1, the advantage and a sampling logprob near the model's."""
    tokens, mask = [], []
    for toks, sampled in segments:
        tokens += toks
        mask += [1.0 if sampled else 0.0] * len(toks)
    mask_arr = np.asarray(mask[1:], dtype=np.float32)
    return Datum(
        model_input=ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={
            "target_tokens": np.asarray(tokens[1:], dtype=np.int64),
            "logprobs": (np.log(1 / 300) + rng.normal(0, 0.3, len(mask_arr))).astype(np.float32) * mask_arr,
            "advantages": (advantage * mask_arr).astype(np.float32),
            "mask": mask_arr,
        },
    )


def _batch() -> list[Datum]:
    """Three single-turn groups (prompts of 9, 14 and 5 tokens; answers of 1-6 tokens), a
    multi-turn group of two sharing its first observation, a lone multi-turn datum, and a
    one-token prompt (nothing to share: its row continues an empty prefix)."""
    rng = np.random.default_rng(0)
    tok = lambda n: [int(x) for x in rng.integers(0, 250, n)]  # noqa: E731
    data = []
    for prompt_len, answer_lens in ((9, (3, 1, 6, 2, 4, 5)), (14, (4, 4, 2, 3)), (5, (5, 2, 3, 1, 4))):
        prompt = tok(prompt_len)
        advs = rng.normal(size=len(answer_lens))
        data += [_datum([(prompt, False), (tok(n), True)], float(a), rng)
                 for n, a in zip(answer_lens, advs)]
    first = tok(11)
    data += [_datum([(first, False), (tok(3), True), (tok(4), False), (tok(2), True)], 0.7, rng),
             _datum([(first, False), (tok(2), True), (tok(6), False), (tok(3), True)], -0.7, rng)]
    data.append(_datum([(tok(7), False), (tok(2), True), (tok(3), False), (tok(2), True)], 0.4, rng))
    data.append(_datum([(tok(1), False), (tok(4), True)], -0.3, rng))  # empty shareable prefix
    return data


@pytest.fixture(scope="module")
def model():
    from trainers.models import build_tiny_model, tiny_config

    config = tiny_config()
    config.num_hidden_layers = 2
    m, _ = build_tiny_model(seed=1, config=config)
    return m.train()


def _accelerator():
    from trainers.grpo.trainer import make_accelerator

    return make_accelerator(GRPOConfig(device="cpu"))


def _run(model, data, share: bool, micro_batch_size: int, ref_model=None, kl_beta=0.0):
    from trainers.grpo.trainer import forward_backward

    cfg = GRPOConfig(share_prefix=share, micro_batch_size=micro_batch_size, loss="ppo",
                     loss_reduction="seq_mean", kl_beta=kl_beta, temperature=0.9)
    model.zero_grad(set_to_none=True)
    metrics = forward_backward(model, data, cfg, _accelerator(), PAD, ref_model)
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return metrics, grads


def test_shared_prefix_logprobs_match_the_plain_forward(model):
    from trainers.grpo.trainer import collate, token_logprobs

    data = _batch()
    plain = collate(data, PAD, torch.device("cpu"), share_prefix=False)
    shared = collate(data, PAD, torch.device("cpu"), share_prefix=True)
    assert plain.prefix_ids is None
    assert shared.prefix_ids is not None and shared.prefix_ids.shape[0] == 6  # 3 + 1 + 1 lone + 1 empty
    assert shared.input_ids.numel() + shared.prefix_ids.numel() < 0.75 * plain.input_ids.numel()
    with torch.no_grad():
        logp_plain, logits_plain = token_logprobs(model, plain, 0.9)
        logp_shared, logits_shared = token_logprobs(model, shared, 0.9)
    # same trained positions, in the same order, with the same values
    sel_p, sel_s = plain.mask.bool(), shared.mask.bool()
    assert sel_p.sum() == sel_s.sum() > 0
    torch.testing.assert_close(logp_shared[sel_s], logp_plain[sel_p], atol=1e-5, rtol=0)
    torch.testing.assert_close(logits_shared[sel_s], logits_plain[sel_p], atol=1e-5, rtol=0)
    for name in ("target_tokens", "sampling_logp", "advantages"):
        assert torch.equal(getattr(shared, name)[sel_s], getattr(plain, name)[sel_p]), name


@pytest.mark.parametrize("micro_batch_size", [64, 4])
def test_shared_prefix_gradients_and_metrics_match(model, micro_batch_size):
    data = _batch()
    m_plain, g_plain = _run(model, data, share=False, micro_batch_size=micro_batch_size)
    m_shared, g_shared = _run(model, data, share=True, micro_batch_size=micro_batch_size)
    assert g_plain.keys() == g_shared.keys() and len(g_plain) == len(list(model.parameters()))
    for name, g in g_plain.items():
        assert g.abs().max() > 0 or "norm" in name, name
        torch.testing.assert_close(g_shared[name], g, atol=1e-5, rtol=1e-4, msg=name)
    for key in ("loss", "entropy", "clip_frac", "sampler_kl", "trained_tokens", "datums"):
        assert m_shared[key] == pytest.approx(m_plain[key], rel=1e-5, abs=1e-6), key
    assert m_plain["clip_frac"] > 0  # the ppo clip is exercised


def test_shared_prefix_with_kl_reference_model(model):
    ref = copy.deepcopy(model).eval().requires_grad_(False)
    with torch.no_grad():
        for p in ref.parameters():
            p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())) * 0.02)
    data = _batch()
    m_plain, g_plain = _run(model, data, False, 64, ref_model=ref, kl_beta=0.5)
    m_shared, g_shared = _run(model, data, True, 64, ref_model=ref, kl_beta=0.5)
    assert m_plain["kl"] > 0
    assert m_shared["kl"] == pytest.approx(m_plain["kl"], rel=1e-5)
    for name, g in g_plain.items():
        torch.testing.assert_close(g_shared[name], g, atol=1e-5, rtol=1e-4, msg=name)


def test_prefix_key_is_the_untrained_prefix_minus_the_predicting_token():
    rng = np.random.default_rng(1)
    d = _datum([([1, 2, 3, 4], False), ([5, 6], True)], 1.0, rng)
    # inputs 1 2 3 4 5; position 3 (token 4) predicts the first sampled token, so it is per-row
    assert prefix_key(d.model_input.to_ints(), d.loss_fn_inputs["mask"]) == (1, 2, 3)
    untrained = _datum([([1, 2, 3], False)], 0.0, rng)
    assert prefix_key(untrained.model_input.to_ints(), untrained.loss_fn_inputs["mask"]) == (1,)


def test_plan_falls_back_when_sharing_does_not_pay():
    assert plan_shared_prefix([[1, 2, 3, 4]], [(1, 2, 3)]) is None  # a group of one
    assert plan_shared_prefix([[1, 2, 3], [4, 5, 6]], [(1, 2), (4, 5)]) is None  # nothing common
    long_tails = [[1, 2] + list(range(10, 40)), [1, 2] + list(range(50, 80))]
    assert plan_shared_prefix(long_tails, [(1, 2), (1, 2)]) is None  # 2 of 32 tokens shared
    plan = plan_shared_prefix([[1, 2, 3, 4, 5, 6, 7, 8]] * 3 + [[9, 9, 9, 9, 9, 9]],
                              [(1, 2, 3, 4, 5, 6)] * 3 + [(9, 9, 9, 9)])
    assert plan is not None and plan.prefix_of_row == [0, 0, 0, 1] and plan.split == [6, 6, 6, 4]


def test_pack_micro_batches_keeps_groups_together():
    keys = ["a"] * 4 + ["b"] * 4 + ["c"] * 4 + ["d"] * 2
    assert pack_micro_batches(keys, 5) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13]]
    assert pack_micro_batches(keys, 8) == [list(range(8)), list(range(8, 14))]
    # a group bigger than a micro-batch is split into full ones
    assert pack_micro_batches(["a"] * 7 + ["b"], 3) == [[0, 1, 2], [3, 4, 5], [6, 7]]
    batches = pack_micro_batches(keys, 3)
    assert sorted(i for b in batches for i in b) == list(range(14)) and max(map(len, batches)) <= 3


def test_split_by_tokens_caps_micro_batches_counting_a_shared_prefix_once():
    from trainers.grpo.shared_prefix import split_by_tokens

    # four rows of 10 tokens sharing a 6-token prefix cost 10 + 3 * 4 = 22 together
    keys, lengths, shared = ["a"] * 4 + ["b"] * 2, [10] * 4 + [30, 30], [6] * 4 + [0, 0]
    assert split_by_tokens([list(range(6))], lengths, keys, shared, 0) == [list(range(6))]
    assert split_by_tokens([list(range(6))], lengths, keys, shared, 22) == [[0, 1, 2, 3], [4], [5]]
    assert split_by_tokens([list(range(6))], lengths, keys, shared, 21) == [[0, 1, 2], [3], [4], [5]]
    # a row over the budget is a piece of its own; order and membership are kept
    pieces = split_by_tokens([[0, 1], [2, 3, 4, 5]], lengths, keys, shared, 12)
    assert pieces == [[0], [1], [2], [3], [4], [5]]


@pytest.mark.parametrize("budget", [40, 25])
def test_a_token_budget_changes_micro_batches_not_the_gradient(model, budget):
    from trainers.grpo.trainer import micro_batches

    data = _batch()
    assert len(micro_batches(data, 64, True, budget)) > len(micro_batches(data, 64, True, 0))
    base_cfg = dict(share_prefix=True, micro_batch_size=64, loss="ppo", loss_reduction="seq_mean",
                    temperature=0.9)
    from trainers.grpo.trainer import forward_backward

    results = []
    for tokens in (0, budget):
        cfg = GRPOConfig(micro_batch_tokens=tokens, **base_cfg)
        model.zero_grad(set_to_none=True)
        metrics = forward_backward(model, data, cfg, _accelerator(), PAD)
        results.append((metrics, {n: p.grad.clone() for n, p in model.named_parameters()}))
    (m0, g0), (m1, g1) = results
    for name, g in g0.items():
        torch.testing.assert_close(g1[name], g, atol=1e-5, rtol=1e-4, msg=name)
    assert m1["loss"] == pytest.approx(m0["loss"], rel=1e-5, abs=1e-7)
