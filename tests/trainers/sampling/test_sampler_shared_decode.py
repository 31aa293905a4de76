"""HFSampler's shared-prompt decode: rows that share a prompt decode against its unexpanded KV
through `_shared_prompt_attention`. The oracle is the same sampler forced onto the expanded path
(`_shared_decode = False`: the prompt KV index-selected to every row, SDPA over the expanded
buffers), itself checked against teacher-forced logprobs in test_sampler.py: the same tokens and
stop reasons, logprobs within 1e-5, for greedy and seeded sampling, token and string stops,
per-call limits, unequal and interleaved groups, GQA and Qwen3, and the KV the multi-turn store
keeps."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from transformers import Qwen3Config, Qwen3ForCausalLM  # noqa: E402

from trainers.models import (  # noqa: E402
    build_tiny_model,
    byte_hf_tokenizer,
    init_weights_,
    tiny_config,
)
from trainers.sampling import hf as sampler_mod  # noqa: E402
from trainers.sampling.hf import HFSampler  # noqa: E402

IM_END, EOS = 260, 258
PROMPTS = [
    [259, 117, 10, 50, 43, 50, 260, 10, 259, 97, 10],
    [259, 65, 10],
    [259, 117, 10, 49, 50, 51, 52, 53, 54, 55, 56, 57, 260, 10, 259, 97, 10],
]
MANY_STOPS = list(range(40, 70))  # most rows stop early, at different steps: compaction runs


def _llama(seed=0, **overrides):
    config = tiny_config()
    for name, value in overrides.items():
        setattr(config, name, value)
    return build_tiny_model(seed=seed, config=config)[0]


@pytest.fixture(scope="module")
def model():
    # a wider init than the preset's: peaked distributions, so stops fire and near-ties are rare
    return _llama(initializer_range=0.1)


@pytest.fixture(scope="module")
def gqa_model():
    return _llama(seed=1, num_key_value_heads=2, initializer_range=0.1)


@pytest.fixture(scope="module")
def qwen3_model():
    config = Qwen3Config(vocab_size=261, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                         max_position_embeddings=256, initializer_range=0.1, pad_token_id=256,
                         tie_word_embeddings=True)
    with torch.random.fork_rng(devices=[]):
        qwen = Qwen3ForCausalLM(config)
    init_weights_(qwen, torch.Generator().manual_seed(2))
    return qwen.eval()


class _Counters:
    """Counts expansions (`Cache.reorder_cache`) and the decode forwards that carried the shared
    layout."""

    def __init__(self, monkeypatch, model):
        self.reorders = 0
        self.shared_forwards = 0
        original = transformers.cache_utils.Cache.reorder_cache

        def reorder(cache, index):
            self.reorders += 1
            return original(cache, index)

        monkeypatch.setattr(transformers.cache_utils.Cache, "reorder_cache", reorder)

        def hook(module, args, kwargs):
            self.shared_forwards += sampler_mod._SHARED_KW in kwargs

        self.handle = model.register_forward_pre_hook(hook, with_kwargs=True)


@pytest.fixture
def counters(monkeypatch):
    made = []

    def make(model):
        made.append(_Counters(monkeypatch, model))
        return made[-1]

    yield make
    for c in made:
        c.handle.remove()


def make_sampler(model, shared: bool, **kw):
    HFSampler(model, max_tokens=2).sample_batch(PROMPTS[:1])  # probe the model's cache kind once
    sampler = HFSampler(model, **{"max_tokens": 10, "seed": 3, **kw})
    if not shared:
        sampler._shared_decode = False
    return sampler


def generate(sampler, calls):
    """Run `calls` = [(prompt, stop, max_tokens)] as one batch, in order."""
    return sampler._generate([sampler._make_request(p, stop, k) for p, stop, k in calls])


def assert_same(new, old):
    assert len(new) == len(old)
    for a, b in zip(new, old):
        assert a.tokens == b.tokens and a.stop_reason == b.stop_reason
        assert len(a.logprobs) == len(b.logprobs)
        assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-5, rtol=0)


def compare(model, calls, counters=None, **kw):
    """New path vs expanded path on the same batch; returns the new path's results and sampler."""
    count = counters(model) if counters else None
    new_sampler = make_sampler(model, True, **kw)
    new = generate(new_sampler, calls)
    if count:
        assert count.reorders == 0  # the prompt KV was never expanded to the rows
        assert count.shared_forwards == new_sampler.stats.decode_steps > 0
        count.shared_forwards = 0
    old_sampler = make_sampler(model, False, **kw)
    old = generate(old_sampler, calls)
    if count:
        assert count.reorders == 1 and count.shared_forwards == 0
    assert_same(new, old)
    return new, new_sampler


def groups(prompts, sizes, stop=None, max_tokens=None):
    return [(p, stop, max_tokens) for p, g in zip(prompts, sizes) for _ in range(g)]


@pytest.mark.parametrize("seed", [3, 4])
def test_seeded_sampling_with_token_stops(model, counters, seed):
    out, sampler = compare(model, groups(PROMPTS, [4, 4, 4], stop=MANY_STOPS), counters, seed=seed)
    assert sampler.stats.prefill_rows == 3
    assert {r.stop_reason for r in out} == {"stop", "length"}  # rows stopped at different steps


def test_greedy_rows_sharing_a_prompt(model, counters):
    # greedy de-duplicates identical requests; different limits and stops keep the rows apart
    calls = [(p, stop, k) for p in PROMPTS for stop, k in
             [(None, 10), (None, 4), ([IM_END], 7), (MANY_STOPS, 10), ([EOS, 97], 9)]]
    out, _ = compare(model, calls, counters, temperature=0.0)
    assert [len(r.tokens) for r in out[:2]] == [10, 4]


def test_string_stops_and_per_call_limits(model, counters):
    tok = byte_hf_tokenizer()
    calls = (groups(PROMPTS[:2], [3, 3], stop=["a", "e"], max_tokens=12)
             + groups(PROMPTS[2:], [4], max_tokens=5) + groups(PROMPTS[:1], [2], max_tokens=1))
    out, _ = compare(model, calls, counters, tokenizer=tok, max_tokens=12)
    assert [len(r.tokens) for r in out[6:]] == [5, 5, 5, 5, 1, 1]


def test_unequal_and_interleaved_groups(model, counters):
    unequal = groups(PROMPTS, [5, 1, 3], stop=MANY_STOPS)
    compare(model, unequal, counters)
    interleaved = [(PROMPTS[i % 2], MANY_STOPS, None) for i in range(7)] + [(PROMPTS[2], None, 6)]
    compare(model, interleaved, counters, seed=5)


def test_grouped_query_attention(gqa_model, counters):
    assert gqa_model.config.num_key_value_heads < gqa_model.config.num_attention_heads
    compare(gqa_model, groups(PROMPTS, [4, 2, 3], stop=MANY_STOPS), counters)
    compare(gqa_model, groups(PROMPTS, [3, 3, 3]), counters, temperature=0.7, seed=8)


def test_qwen3(qwen3_model, counters):
    compare(qwen3_model, groups(PROMPTS, [4, 4, 4], stop=MANY_STOPS), counters)
    compare(qwen3_model, groups(PROMPTS, [2, 5, 1]), counters, seed=9)


def test_no_shared_prompts_and_kv_hits_keep_the_expanded_path(model, counters):
    count = counters(model)
    sampler = make_sampler(model, True, reuse_kv=True)
    generate(sampler, [(p, None, None) for p in PROMPTS])  # distinct prompts: nothing to share
    assert count.shared_forwards == 0 and count.reorders == 0
    first = generate(sampler, [(PROMPTS[0] + [1, 2], None, 3)])
    extended = PROMPTS[0] + [1, 2] + first[0].tokens[:2] + [10, 259]
    generate(sampler, [(extended, None, 4)] * 3)  # shared, but served from the KV store
    assert sampler.stats.cache_hits >= 1 and count.shared_forwards == 0 and count.reorders == 1


def test_kept_kv_matches_the_expanded_path_and_serves_the_next_turn(model):
    calls = groups(PROMPTS, [4, 2, 3], stop=MANY_STOPS)
    samplers = [make_sampler(model, shared, reuse_kv=True) for shared in (True, False)]
    firsts = [generate(s, calls) for s in samplers]
    assert_same(*firsts)
    new_store, old_store = samplers[0]._kv._entries, samplers[1]._kv._entries
    assert set(new_store) == set(old_store) and len(new_store) >= 5
    for key, (layers, size) in new_store.items():
        old_layers, old_size = old_store[key]
        assert size == old_size
        for (k, v), (ko, vo) in zip(layers, old_layers):
            assert k.shape == ko.shape == (k.shape[0], len(key), k.shape[2])
            assert torch.allclose(k, ko, atol=1e-5) and torch.allclose(v, vo, atol=1e-5)
    # the next turn continues each row: served from the store, the same on both samplers
    nexts = [[(c[0] + r.tokens + [10, 259, 97, 10], None, 6) for c, r in zip(calls, first)]
             for first in firsts]
    assert nexts[0] == nexts[1]
    seconds = [generate(s, nexts[0]) for s in samplers]
    assert_same(*seconds)
    assert samplers[0].stats.cache_hits == len({tuple(p) for p, _, _ in nexts[0]})


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_models_first_shared_decode_step_is_checked_against_the_expanded_path(counters, dtype):
    """The check passes on a correct model in float32 and in bf16 (whose rounding differs
    between the two paths: its tolerance must not turn a working model away)."""
    import warnings

    fresh = _llama(seed=4, initializer_range=0.1).to(getattr(torch, dtype))
    assert fresh not in sampler_mod._SHARED_VERIFIED
    calls = groups(PROMPTS, [3, 3, 3], stop=MANY_STOPS)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        if dtype == "float32":
            compare(fresh, calls, counters)
        else:  # bf16 logprobs differ by more than assert_same's 1e-5: same path, not compared
            generate(make_sampler(fresh, True), calls)
    assert fresh in sampler_mod._SHARED_VERIFIED


def test_a_shared_decode_that_disagrees_warns_and_the_model_decodes_expanded(monkeypatch, counters):
    """A wrong shared path (here: its prompt values scaled) is caught at the model's first shared
    decode step; that generation continues on the expanded path, as do all later ones."""
    fresh = _llama(seed=5, initializer_range=0.1)

    class Broken(sampler_mod._SharedPrompts):
        def __init__(self, *args):
            super().__init__(*args)
            self.values = [v * 1.5 for v in self.values]

    monkeypatch.setattr(sampler_mod, "_SharedPrompts", Broken)
    calls = groups(PROMPTS, [4, 2, 3], stop=MANY_STOPS)
    count = counters(fresh)
    broken = make_sampler(fresh, True)
    with pytest.warns(RuntimeWarning, match="expanded path from now on"):
        out = generate(broken, calls)
    assert count.shared_forwards == 1  # the checked step only
    assert sampler_mod._SHARED_OK[fresh] is False and fresh not in sampler_mod._SHARED_VERIFIED
    assert_same(out, generate(make_sampler(fresh, False), calls))
    count.shared_forwards = 0
    generate(make_sampler(fresh, True), calls)
    assert count.shared_forwards == 0
