"""Padding-free training forward (`trainers/grpo/packed_tails.py`): packing a micro-batch's
prefixes and rows into one sequence gives the padded forward's logprobs, loss, metrics and
parameter gradients — on ragged groups, equal groups (the grouped-keys path), multi-turn datums,
grouped-query attention, a second architecture (Qwen3) and bf16 autocast; and it steps aside
where it should (too-large scores, a sliding window, a model it reproduces wrongly)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.trainers.grpo.test_shared_prefix import PAD, _accelerator, _batch, _datum
from trainers.grpo import packed_tails
from trainers.grpo.config import GRPOConfig


def _equal_groups() -> list:
    """Four groups of four rows each (answers of 1-7 tokens): the grouped-keys layout."""
    rng = np.random.default_rng(3)
    tok = lambda n: [int(x) for x in rng.integers(0, 250, n)]  # noqa: E731
    data = []
    for prompt_len in (12, 12, 7, 20):
        prompt = tok(prompt_len)
        data += [_datum([(prompt, False), (tok(int(n)), True)], float(a), rng)
                 for n, a in zip(rng.integers(1, 8, 4), rng.normal(size=4))]
    return data


def _multi_turn_groups() -> list:
    """Two groups of three two-turn rows: a shared prompt, then sampled turn, env reply (not
    trained), sampled turn."""
    rng = np.random.default_rng(5)
    tok = lambda n: [int(x) for x in rng.integers(0, 250, n)]  # noqa: E731
    data = []
    for prompt_len in (9, 14):
        prompt = tok(prompt_len)
        data += [_datum([(prompt, False), (tok(int(a)), True), (tok(6), False), (tok(int(b)), True)],
                        float(adv), rng)
                 for a, b, adv in zip(rng.integers(1, 5, 3), rng.integers(1, 5, 3), rng.normal(size=3))]
    return data


def _tiny(kind: str = "llama", **overrides):
    if kind == "qwen3":
        from transformers import Qwen3Config, Qwen3ForCausalLM

        config = Qwen3Config(vocab_size=261, hidden_size=64, intermediate_size=128,
                             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                             head_dim=16, max_position_embeddings=256, attn_implementation="sdpa")
        torch.manual_seed(0)
        return Qwen3ForCausalLM(config).train()
    from trainers.models import build_tiny_model, tiny_config

    config = tiny_config()
    config.num_hidden_layers = 2
    for k, v in overrides.items():
        setattr(config, k, v)
    model, _ = build_tiny_model(seed=2, config=config)
    return model.train()


def _fb(model, data, pack: bool, share: bool = True, micro_batch_size: int = 64, **cfg_kw):
    from trainers.grpo.trainer import forward_backward

    cfg = GRPOConfig(share_prefix=share, pack_rows=pack, micro_batch_size=micro_batch_size,
                     loss="ppo", loss_reduction="seq_mean", temperature=0.9, **cfg_kw)
    model.zero_grad(set_to_none=True)
    metrics = forward_backward(model, data, cfg, _accelerator(), PAD)
    return metrics, {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def _assert_same(a, b, atol=1e-5):
    (m_a, g_a), (m_b, g_b) = a, b
    assert g_a.keys() == g_b.keys() and g_a
    for name, g in g_a.items():
        torch.testing.assert_close(g_b[name], g, atol=atol, rtol=1e-4, msg=name)
    for key in ("loss", "entropy", "clip_frac", "sampler_kl", "trained_tokens", "datums"):
        assert m_b[key] == pytest.approx(m_a[key], rel=1e-4, abs=1e-6), key


def _packed_calls(monkeypatch) -> list:
    calls = []
    real = packed_tails.packed_logits
    monkeypatch.setattr(packed_tails, "packed_logits",
                        lambda *a, **k: calls.append(a[3]) or real(*a, **k))
    return calls


@pytest.mark.parametrize("share", [True, False])
@pytest.mark.parametrize("micro_batch_size", [64, 5])
def test_packed_equals_padded_on_ragged_groups_and_multi_turn_datums(monkeypatch, share,
                                                                     micro_batch_size):
    model = _tiny()
    data = _batch()  # ragged groups, two multi-turn datums sharing a first turn, a lone row
    padded = _fb(model, data, pack=False, share=share, micro_batch_size=micro_batch_size)
    calls = _packed_calls(monkeypatch)
    packed = _fb(model, data, pack=True, share=share, micro_batch_size=micro_batch_size)
    assert calls, "the packed path was not taken"
    assert any(layout.prefixes for layout in calls) == share
    _assert_same(padded, packed)


@pytest.mark.parametrize("kind", ["llama", "llama-gqa", "qwen3"])
def test_packed_equals_padded_on_equal_groups(monkeypatch, kind):
    model = _tiny("qwen3") if kind == "qwen3" else _tiny(
        num_key_value_heads=2 if kind == "llama-gqa" else 4)
    data = _equal_groups()
    padded = _fb(model, data, pack=False)
    calls = _packed_calls(monkeypatch)
    packed = _fb(model, data, pack=True)
    assert [layout.group_size for layout in calls] == [4]  # prefixes read without per-row copies
    _assert_same(padded, packed)


def test_packed_layout_holds_only_real_tokens():
    from trainers.grpo.trainer import collate

    data = _equal_groups()
    mb = collate(data, PAD, torch.device("cpu"), share_prefix=True, pack=True)
    real = int(mb.attention_mask[:, mb.prefix_ids.shape[1]:].sum())  # rows' own tokens
    prefix_tokens = 11 + 11 + 6 + 19  # each prompt but its last token (whose logits are trained)
    assert mb.packed_ids.numel() == prefix_tokens + real < mb.prefix_ids.numel() + mb.input_ids.numel()
    assert mb.layout.prefix_tokens == prefix_tokens
    # every packed row token is the padded layout's token at its slot
    assert torch.equal(mb.packed_ids[prefix_tokens:], mb.input_ids.reshape(-1)[mb.layout.flat_index])
    assert torch.equal(mb.packed_positions[prefix_tokens:],
                       mb.position_ids.reshape(-1)[mb.layout.flat_index])


def test_packed_forward_keeps_logits_packed_for_the_entropy_metric():
    """The training step's packed forward hands on [K, V] logits of the K trained tokens only
    (the LM head runs on nothing else; its entropy metric reads them there); the public
    `token_logprobs` computes every real token's and scatters them into [B, T, V]."""
    from trainers.grpo.trainer import _token_logprobs, collate, token_logprobs

    model = _tiny()
    mb = collate(_multi_turn_groups(), PAD, torch.device("cpu"), share_prefix=True, pack=True)
    assert mb.layout is not None
    with torch.no_grad():
        logp, logits, flat = _token_logprobs(model, mb, 0.9)
        logp_pub, logits_pub = token_logprobs(model, mb, 0.9)
    trained = mb.mask.reshape(-1).nonzero().squeeze(1)
    assert flat is not None and torch.equal(flat.sort().values, trained)
    assert logits.shape == (trained.numel(), 261) < (mb.layout.flat_index.numel(), 261)
    assert logits_pub.shape == (*mb.input_ids.shape, 261)
    assert torch.allclose(logits_pub.reshape(-1, 261)[flat], logits, atol=1e-5)
    assert torch.allclose(logp_pub.reshape(-1)[flat], logp.reshape(-1)[flat], atol=1e-5)
    untrained = ~mb.mask.bool()
    assert (logp[untrained] == 0).all()  # the loss reads nothing there
    real_untrained = torch.zeros(mb.mask.numel(), dtype=torch.bool)
    real_untrained[mb.layout.flat_index] = True
    real_untrained &= untrained.reshape(-1)
    assert real_untrained.any() and (logp_pub.reshape(-1)[real_untrained] != 0).all()


def test_packed_under_bf16_autocast_stays_close():
    model = _tiny()
    data = _equal_groups()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        padded = _fb(model, data, pack=False)
        packed = _fb(model, data, pack=True)
    assert packed_tails._verdicts.get(model) is True
    for name, g in padded[1].items():
        assert torch.isfinite(packed[1][name]).all(), name
    assert packed[0]["loss"] == pytest.approx(padded[0]["loss"], abs=5e-2)


def test_scores_too_large_keep_the_padded_path(monkeypatch):
    # a GRPO batch of short answers fits; 128 multi-turn rows of ~600 own tokens do not
    assert packed_tails.packed_fits(rows=256, width=8, prefix_width=60, heads=4)
    assert not packed_tails.packed_fits(rows=128, width=600, prefix_width=140, heads=4)
    model = _tiny()
    calls = _packed_calls(monkeypatch)
    monkeypatch.setattr(packed_tails, "MAX_SCORE_ELEMENTS", 10)
    _fb(model, _equal_groups(), pack=True)
    assert calls == []


def test_packing_is_chosen_only_where_the_padding_it_removes_outweighs_eager_attention(monkeypatch):
    from trainers.models import tiny_config

    config = tiny_config()
    # a GRPO batch of short answers (42% padding): packing pays
    assert packed_tails.packed_pays(config, rows=256, width=9, prefix_width=24, real_tokens=1340)
    # multi-turn rows of ~670 tokens, nearly equal: eager attention would cost more than it saves
    assert not packed_tails.packed_pays(config, rows=9, width=672, prefix_width=0, real_tokens=5950)
    # rows of ~200 tokens, half of the slots padding: packing pays again
    assert packed_tails.packed_pays(config, rows=30, width=200, prefix_width=0, real_tokens=3000)
    # the multi-turn rows again, 40 trained tokens each: with a 261-id LM head running it on those
    # alone saves too little; with a 151,936-id one (Qwen3's) packing pays
    assert not packed_tails.packed_pays(config, rows=9, width=672, prefix_width=0, real_tokens=5950,
                                        trained_tokens=360)
    config.vocab_size = 151_936
    assert not packed_tails.packed_pays(config, rows=9, width=672, prefix_width=0, real_tokens=5950)
    assert packed_tails.packed_pays(config, rows=9, width=672, prefix_width=0, real_tokens=5950,
                                    trained_tokens=360)
    config.vocab_size = 261

    model = _tiny()
    rng = np.random.default_rng(5)
    long_rows = [_datum([(list(map(int, rng.integers(0, 250, 150))), False),
                         (list(map(int, rng.integers(0, 250, 60 + i))), True)], float(a), rng)
                 for i, a in enumerate(rng.normal(size=4))]
    padded = _fb(model, long_rows, pack=False)
    calls = _packed_calls(monkeypatch)
    chosen = _fb(model, long_rows, pack=True)
    assert calls == []  # near-equal long rows keep SDPA's fused attention
    _assert_same(padded, chosen)


def test_sliding_window_models_are_not_packed():
    from transformers import MistralConfig, MistralForCausalLM

    config = MistralConfig(vocab_size=261, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                           num_attention_heads=4, num_key_value_heads=4, sliding_window=16,
                           attn_implementation="sdpa")
    assert not packed_tails.supports_packing(MistralForCausalLM(config))
    config.sliding_window = None
    assert packed_tails.supports_packing(MistralForCausalLM(config))


def test_a_model_the_packed_forward_gets_wrong_falls_back_with_a_warning(monkeypatch):
    model = _tiny()
    data = _equal_groups()
    padded = _fb(model, data, pack=False)
    real = packed_tails.packed_logits
    monkeypatch.setattr(packed_tails, "packed_logits", lambda *a, **k: real(*a, **k) * 1.01)
    with pytest.warns(RuntimeWarning, match="padding-free training forward disagrees"):
        first = _fb(model, data, pack=True)
    assert packed_tails._verdicts[model] is False and not packed_tails.supports_packing(model)
    _assert_same(padded, first)  # the micro-batch that failed the check was redone padded
    _assert_same(padded, _fb(model, data, pack=True))  # and later ones never try again


def test_a_model_whose_first_packed_forward_raises_falls_back_with_a_warning(monkeypatch):
    model = _tiny()
    data = _equal_groups()
    padded = _fb(model, data, pack=False)

    def broken(*a, **k):
        raise TypeError("forward() got an unexpected keyword argument 'llm_gym_packed'")

    monkeypatch.setattr(packed_tails, "packed_logits", broken)
    with pytest.warns(RuntimeWarning, match="padding-free training forward failed"):
        first = _fb(model, data, pack=True)
    assert packed_tails._verdicts[model] is False
    _assert_same(padded, first)
    # a model that passed its check does not hide later errors
    other = _tiny()
    monkeypatch.undo()
    _fb(other, data, pack=True)
    assert packed_tails._verdicts[other] is True
    monkeypatch.setattr(packed_tails, "packed_logits", broken)
    with pytest.raises(TypeError, match="llm_gym_packed"):
        _fb(other, data, pack=True)
