"""HFSampler's multi-turn KV reuse and greedy de-duplication: the same tokens and logprobs as a
sampler that prefills every prompt from scratch, a bounded cache, and invalidation on weight
changes. The oracle is the same sampler with `reuse_kv=False` (itself checked against
teacher-forced logprobs in test_sampler.py)."""

from __future__ import annotations

import asyncio

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from llm_gym.rl.outcome import episode_correct  # noqa: E402
from llm_gym.rl.rollouts import RolloutLimits  # noqa: E402
from trainers.grpo.trainer import rollout_groups  # noqa: E402
from trainers.models import build_tiny_model  # noqa: E402
from trainers.sampling.hf import HFSampler  # noqa: E402

IM_END, EOS = 260, 258


@pytest.fixture(scope="module")
def model():
    return build_tiny_model(seed=0)[0]


def guess_number_groups(n_groups: int, group_size: int, seed: int = 0):
    from llm_gym import GymRLDataset

    # The classic game (range_starts=1): every episode opens with the same prompt ("from 1 to 20"),
    # so greedy evaluation has duplicate requests to de-duplicate and shared prefixes to reuse.
    dataset = GymRLDataset("llm/GuessNumber-v0", batch_size=n_groups, group_size=group_size,
                           seed=seed, split="train", max_turns=4, range_starts=1)
    return list(dataset.get_batch(0))


def rollout(model, temperature: float, reuse: bool, n_groups=3, group_size=4, max_tokens=6, seed=0):
    sampler = HFSampler(model, temperature=temperature, max_tokens=max_tokens,
                        stop_token_ids=[IM_END, EOS], seed=seed, reuse_kv=reuse)
    groups = rollout_groups(guess_number_groups(n_groups, group_size), sampler,
                            RolloutLimits(max_turns=4))
    return groups, sampler


def transitions(groups):
    return [(tr.ob.to_ints(), tr.ac.tokens, tr.ac.logprobs, tr.reward)
            for g in groups for t in g.trajectories_G for tr in t.transitions]


def assert_same_transitions(a, b):
    assert len(a) == len(b)
    for (ob_a, ac_a, lp_a, r_a), (ob_b, ac_b, lp_b, r_b) in zip(a, b):
        assert ob_a == ob_b and ac_a == ac_b and r_a == r_b
        assert lp_a == pytest.approx(lp_b, abs=1e-4)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_multi_turn_rollouts_match_full_prefill(model, temperature):
    # Seeded sampling draws the same numbers either way: the batch has the same rows at every
    # step, only how the prompt's KV was obtained differs.
    fresh, plain = rollout(model, temperature, reuse=False)
    reused, cached = rollout(model, temperature, reuse=True)
    a, b = transitions(fresh), transitions(reused)
    assert len(a) > 12  # several turns per episode
    assert_same_transitions(a, b)
    # the later turns really were served from the cache: most prompt tokens were not prefilled
    assert plain.stats.reused_tokens == 0
    assert cached.stats.cache_hits > 0
    assert cached.stats.reused_tokens > cached.stats.prefill_tokens
    assert cached.stats.prefill_tokens < plain.stats.prefill_tokens / 2
    # superseded entries are dropped: at most one cached sequence per episode remains
    assert 0 < cached.cached_sequences <= 3 * 4


def test_rows_with_different_cached_lengths_share_a_batch(model):
    # Prompts of unequal length, continued by suffixes of unequal length, plus a prompt with no
    # cached part, in one batch: left padding of both parts, positions and mask must line up.
    first = [[259, 117, 10, 50, 43, 50, 260, 10, 259, 97, 10], [259, 65, 10],
             [259, 117, 10] + list(range(40, 70)) + [260, 10, 259, 97, 10]]
    sampler = HFSampler(model, temperature=1.0, max_tokens=5, seed=1)
    plain = HFSampler(model, temperature=1.0, max_tokens=5, seed=1, reuse_kv=False)
    out_a = sampler.sample_batch(first)
    out_b = plain.sample_batch(first)
    assert [g[0].tokens for g in out_a] == [g[0].tokens for g in out_b]
    extra = [[10, 259, 117], list(range(70, 90)), [33]]
    second = [p + g[0].tokens + e for p, g, e in zip(first, out_a, extra)]
    second.append([259, 66, 67, 10])  # no cached sequence
    a = sampler.sample_batch(second)
    b = plain.sample_batch(second)
    for ga, gb in zip(a, b):
        assert ga[0].tokens == gb[0].tokens
        assert ga[0].logprobs == pytest.approx(gb[0].logprobs, abs=1e-4)
    assert sampler.stats.cache_hits == 3
    # a prompt that an earlier sequence extends (the same prompt again) reuses all but one token
    before = sampler.stats.reused_tokens
    again = sampler.sample_batch([second[3]])
    assert sampler.stats.reused_tokens - before == len(second[3]) - 1
    assert len(again[0][0].tokens) == 5


def test_in_place_weight_update_invalidates_the_cache():
    model = build_tiny_model(seed=0)[0]
    prompt = [259, 117, 10, 50, 43, 50, 260, 10, 259, 97, 10]
    sampler = HFSampler(model, temperature=0.0, max_tokens=6)
    [[s1]] = sampler.sample_batch([prompt])
    assert sampler.cached_sequences == 1
    follow = prompt + s1.tokens + [10, 259, 97, 10]
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1.5)  # what an optimizer step does: in place
    hits = sampler.stats.cache_hits
    [[s2]] = sampler.sample_batch([follow])
    assert sampler.stats.cache_hits == hits  # stale entry not used
    [[ref]] = HFSampler(model, temperature=0.0, max_tokens=6, reuse_kv=False).sample_batch([follow])
    assert s2.tokens == ref.tokens and s2.logprobs == pytest.approx(ref.logprobs, abs=1e-5)
    sampler.invalidate_cache()
    assert sampler.cached_sequences == 0 and sampler.cached_bytes == 0


def test_cache_is_bounded_by_entries_and_bytes(model):
    prompts = [[259, 65 + i, 10] for i in range(10)]
    by_count = HFSampler(model, max_tokens=4, seed=0, kv_cache_entries=3)
    by_count.sample_batch(prompts)
    assert by_count.cached_sequences == 3
    per_token = 4 * 2 * 128 * 4  # layers x (K, V) x hidden x float32 bytes
    by_bytes = HFSampler(model, max_tokens=4, seed=0, kv_cache_bytes=15 * per_token)
    by_bytes.sample_batch(prompts)  # each sequence: 3 prompt + 3 fed tokens = 6 tokens
    assert by_bytes.cached_sequences == 2 and by_bytes.cached_bytes <= 15 * per_token
    off = HFSampler(model, max_tokens=4, seed=0, reuse_kv=False)
    off.sample_batch(prompts)
    assert off.cached_sequences == 0
    with pytest.raises(ValueError, match="kv_cache_bytes"):
        HFSampler(model, kv_cache_bytes=-1)


def test_greedy_duplicates_are_generated_once(model):
    prompts = [[259, 65, 10]] * 5 + [[259, 66, 10]] * 3
    sampler = HFSampler(model, temperature=0.0, max_tokens=6, reuse_kv=False)
    out = sampler.sample_batch(prompts)
    ref = HFSampler(model, temperature=0.0, max_tokens=6, reuse_kv=False, share_prefixes=False)
    expected = ref.sample_batch(prompts)
    assert [g[0].tokens for g in out] == [g[0].tokens for g in expected]
    assert sampler.stats.greedy_duplicates == 6 and sampler.stats.requests == 8
    assert sampler.stats.generated_tokens == 2 * 6  # two generations, not eight
    out[0][0].tokens.append(-1)  # results are independent lists, not aliases
    assert out[1][0].tokens == expected[1][0].tokens


@pytest.mark.slow
def test_greedy_evaluation_on_guess_number_unchanged(model):
    # Evaluation rolls out many problems with the same few secrets greedily: de-duplication and
    # KV reuse must not change a single outcome.
    fresh, _ = rollout(model, 0.0, reuse=False, n_groups=6, group_size=1)
    fast, sampler = rollout(model, 0.0, reuse=True, n_groups=6, group_size=1)
    assert [episode_correct(t) for g in fresh for t in g.trajectories_G] == \
        [episode_correct(t) for g in fast for t in g.trajectories_G]
    assert_same_transitions(transitions(fresh), transitions(fast))
    assert sampler.stats.greedy_duplicates > 0


def test_repeating_a_prompt_keeps_its_cache(model):
    # With max_tokens=1 a call stores exactly its prompt; asking again must reuse it, not drop it.
    prompt = [259, 65, 10, 66]
    sampler = HFSampler(model, temperature=0.0, max_tokens=1)
    for expected_hits in (0, 1, 2):
        sampler.sample_batch([prompt])
        assert sampler.stats.cache_hits == expected_hits and sampler.cached_sequences == 1


def _teacher_forced(model, prompt, completion):
    ids = torch.tensor([list(prompt) + list(completion)])
    with torch.no_grad():
        logp = model(ids).logits[0].float().log_softmax(-1)
    return logp[len(prompt) - 1 : -1].gather(1, torch.tensor(completion)[:, None]).squeeze(1)


def test_preallocated_kv_buffers_match_teacher_forcing(model):
    # Every call after the first decodes into preallocated KV buffers (written in place, future
    # columns masked). Rows of mixed prompt/cached lengths that stop at different steps (so the
    # batch is compacted mid-generation) must still get the model's own logprobs, on a fresh
    # prompt and on a turn continued from the cache.
    sampler = HFSampler(model, temperature=1.0, max_tokens=8, seed=5)
    sampler.sample_batch([[259, 65, 10]], max_tokens=1)  # first call: the model's own cache
    assert sampler._kv_supported  # so the later calls below use the buffers
    first = [[259, 117, 10] + list(range(40, 40 + k)) for k in (0, 3, 11, 25)]
    limits = [8, 2, 5, 1]  # rows end at different steps: compaction happens

    async def batch(prompts, lims):
        return await asyncio.gather(*(sampler(p, max_tokens=n) for p, n in zip(prompts, lims)))

    out = asyncio.run(batch(first, limits))
    second = [p + o.tokens + [10, 259, 97] for p, o in zip(first, out)]
    hits = sampler.stats.cache_hits
    out2 = asyncio.run(batch(second, [6, 3, 8, 2]))
    assert sampler.stats.cache_hits - hits == len(second)  # the second turn reused the cache
    for prompts, outs, lims in ((first, out, limits), (second, out2, [6, 3, 8, 2])):
        for p, o, n in zip(prompts, outs, lims):
            assert len(o.tokens) == n and o.stop_reason == "length"
            assert torch.allclose(torch.tensor(o.logprobs), _teacher_forced(model, p, o.tokens),
                                  atol=1e-4)


def test_a_models_cache_kind_is_probed_once_and_results_do_not_depend_on_it():
    """The first sampler for a model probes its cache with transformers' own `DynamicCache`; later
    samplers (the trainer builds one per step) start on the preallocated buffers and sample the
    same tokens."""
    import trainers.sampling.hf as sampler_mod

    fresh_model = build_tiny_model(seed=4)[0]
    assert fresh_model not in sampler_mod._CACHE_KIND
    first_groups, first = rollout(fresh_model, 1.0, reuse=False, n_groups=2)
    assert sampler_mod._CACHE_KIND[fresh_model] == (True, fresh_model.config.num_hidden_layers)
    second = HFSampler(fresh_model, temperature=1.0, max_tokens=6, stop_token_ids=[IM_END, EOS],
                       seed=0, reuse_kv=False)
    assert second._kv_supported is True  # no probe call
    second_groups, _ = rollout(fresh_model, 1.0, reuse=False, n_groups=2)
    assert_same_transitions(transitions(first_groups), transitions(second_groups))


def test_single_turn_envs_train_without_keeping_kv():
    from trainers.grpo.config import GRPOConfig
    from trainers.grpo.trainer import builder_single_turn, make_sampler, single_turn_env
    from llm_gym import GymEnvGroupBuilder

    assert single_turn_env("llm/Math-v0") and single_turn_env("llm/Countdown-v0")
    assert not single_turn_env("llm/GuessNumber-v0") and not single_turn_env("llm/Calculator-v0")
    assert not single_turn_env("llm/NoSuchEnv-v0")  # unknown: keep the cache
    assert builder_single_turn(GymEnvGroupBuilder("llm/Math-v0", 2, 0))
    assert not builder_single_turn(GymEnvGroupBuilder(lambda **k: None, 2, 0))
    model = build_tiny_model(seed=0)[0]
    cfg = GRPOConfig()
    args = (cfg, model, "cpu", [IM_END], 256, 1.0, 0, 8)
    assert make_sampler(*args, multi_turn=False).reuse_kv is False
    assert make_sampler(*args).reuse_kv is True
    # a single-turn rollout with reuse off stores nothing and samples what a reusing one does
    builders = [GymEnvGroupBuilder("llm/Math-v0", 4, s, split="train") for s in range(3)]
    on, off = make_sampler(*args), make_sampler(*args, multi_turn=False)
    a = rollout_groups(builders, on, RolloutLimits(max_turns=1))
    b = rollout_groups(builders, off, RolloutLimits(max_turns=1))
    assert off.cached_sequences == 0 < on.cached_sequences
    assert_same_transitions(transitions(a), transitions(b))
