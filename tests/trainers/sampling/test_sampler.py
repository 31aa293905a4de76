"""HFSampler: logprob exactness, determinism, stops, batching across coroutines, prefix sharing."""

from __future__ import annotations

import asyncio

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from llm_gym.model_input import ModelInput  # noqa: E402
from llm_gym.renderers import ChatMLRenderer  # noqa: E402
from llm_gym.rl.problem_env import ProblemEnv, ProblemGroupBuilder  # noqa: E402
from llm_gym.rl.rollouts import do_group_rollout  # noqa: E402
from llm_gym.tokenizers import ByteTokenizer  # noqa: E402
from trainers.models import build_tiny_model  # noqa: E402
from trainers.sampling.hf import HFSampler  # noqa: E402

IM_END = 260
PROMPTS = [
    [259, 117, 10, 50, 43, 50, 260, 10, 259, 97, 10],
    [259, 65, 10],
    [259, 117, 10, 49, 50, 51, 52, 53, 54, 55, 56, 57, 260, 10, 259, 97, 10],
]


@pytest.fixture(scope="module")
def model_and_tok():
    return build_tiny_model(seed=0)


@pytest.fixture(scope="module")
def model(model_and_tok):
    return model_and_tok[0]


def teacher_forced_logprobs(model, prompt, completion):
    ids = torch.tensor([list(prompt) + list(completion)])
    with torch.no_grad():
        logp = model(ids).logits[0].float().log_softmax(-1)
    targets = torch.tensor(completion)
    return logp[len(prompt) - 1 : -1].gather(1, targets[:, None]).squeeze(1)


def test_logprobs_match_teacher_forcing_with_left_padding(model):
    sampler = HFSampler(model, temperature=1.0, max_tokens=12, seed=3)
    out = sampler.sample_batch(PROMPTS, n=2)  # mixed lengths: rows are left-padded
    for prompt, group in zip(PROMPTS, out):
        for sample in group:
            assert len(sample.tokens) == 12 and sample.stop_reason == "length"
            ref = teacher_forced_logprobs(model, prompt, sample.tokens)
            assert torch.allclose(torch.tensor(sample.logprobs), ref, atol=1e-4)


def test_temperature_logprobs_are_of_the_sampling_distribution(model):
    sampler = HFSampler(model, temperature=0.5, max_tokens=6, seed=3)
    [[sample]] = sampler.sample_batch(PROMPTS[:1])
    ids = torch.tensor([PROMPTS[0] + sample.tokens])
    with torch.no_grad():
        logp = (model(ids).logits[0].float() / 0.5).log_softmax(-1)
    ref = logp[len(PROMPTS[0]) - 1 : -1].gather(1, torch.tensor(sample.tokens)[:, None]).squeeze(1)
    assert torch.allclose(torch.tensor(sample.logprobs), ref, atol=1e-4)


def test_bf16_weights_give_float_logprobs(model):
    bf16 = build_tiny_model(seed=0)[0].to(torch.bfloat16)
    sampler = HFSampler(bf16, max_tokens=5, seed=0)
    [[sample]] = sampler.sample_batch(PROMPTS[:1])
    assert len(sample.tokens) == 5
    assert all(isinstance(x, float) and x <= 0.0 for x in sample.logprobs)


@pytest.mark.slow
def test_deterministic_given_seed(model):
    def run(seed):
        sampler = HFSampler(model, max_tokens=10, seed=seed)
        return [[s.tokens for s in g] for g in sampler.sample_batch(PROMPTS, n=3)]

    assert run(7) == run(7)
    assert run(7) != run(8)


def test_prefix_sharing_matches_no_sharing(model):
    shared = HFSampler(model, max_tokens=10, seed=11, share_prefixes=True)
    separate = HFSampler(model, max_tokens=10, seed=11, share_prefixes=False)
    a = shared.sample_batch(PROMPTS, n=4, stop=[IM_END])
    b = separate.sample_batch(PROMPTS, n=4, stop=[IM_END])
    for ga, gb in zip(a, b):
        for sa, sb in zip(ga, gb):
            assert sa.tokens == sb.tokens and sa.stop_reason == sb.stop_reason
            assert torch.allclose(torch.tensor(sa.logprobs), torch.tensor(sb.logprobs), atol=1e-5)
    assert shared.stats.prefill_rows == len(PROMPTS)
    assert separate.stats.prefill_rows == 4 * len(PROMPTS)


def test_stop_token_ends_row_and_is_included(model):
    # A fresh sampler with the same seed replays the same draws, so a run with a stop id must be
    # the free run cut right after that id's first occurrence.
    [[free]] = HFSampler(model, max_tokens=24, seed=2).sample_batch(PROMPTS[:1])
    assert free.stop_reason == "length" and len(free.tokens) == 24
    stop_id = free.tokens[5]
    first = free.tokens.index(stop_id)
    [[stopped]] = HFSampler(model, max_tokens=24, seed=2).sample_batch(PROMPTS[:1], stop=[stop_id])
    assert stopped.tokens == free.tokens[: first + 1]  # stop token included, as in Tinker
    assert stopped.stop_reason == "stop"
    assert stopped.logprobs == pytest.approx(free.logprobs[: first + 1], abs=1e-5)
    # constructor stop ids apply to every call
    always = HFSampler(model, max_tokens=24, seed=2, stop_token_ids=[stop_id])
    [[again]] = always.sample_batch(PROMPTS[:1])
    assert again.tokens == stopped.tokens


def test_stop_per_row_in_a_batch(model):
    # Many stop ids: most rows stop early, each exactly at its first stop token.
    stop_ids = list(range(0, 200))
    sampler = HFSampler(model, max_tokens=16, seed=5)
    out = sampler.sample_batch(PROMPTS, n=8, stop=stop_ids)
    reasons = set()
    for group in out:
        for s in group:
            reasons.add(s.stop_reason)
            if s.stop_reason == "stop":
                assert s.tokens[-1] in stop_ids
                assert not any(t in stop_ids for t in s.tokens[:-1])
            else:
                assert len(s.tokens) == 16 and not any(t in stop_ids for t in s.tokens)
    assert "stop" in reasons


def test_string_stop_sequences(model_and_tok):
    model, tok = model_and_tok
    def sampler():
        return HFSampler(model, max_tokens=32, seed=4, tokenizer=tok)

    [[free]] = sampler().sample_batch(PROMPTS[:1])
    # The first printable ASCII token is the first place its character can appear in the text.
    k = next(i for i, t in enumerate(free.tokens) if 32 <= t < 127)
    [[stopped]] = sampler().sample_batch(PROMPTS[:1], stop=[chr(free.tokens[k])])
    assert stopped.tokens == free.tokens[: k + 1] and stopped.stop_reason == "stop"
    with pytest.raises(ValueError, match="tokenizer"):
        HFSampler(model).sample_batch(PROMPTS[:1], stop=["\n\nUser:"])


def test_length_stop_and_zero_tokens(model):
    sampler = HFSampler(model, max_tokens=64, seed=0)
    [[short]] = sampler.sample_batch(PROMPTS[:1], max_tokens=3)
    assert len(short.tokens) == 3 and short.stop_reason == "length"
    [[empty]] = sampler.sample_batch(PROMPTS[:1], max_tokens=0)
    assert empty.tokens == [] and empty.stop_reason == "length"


def test_bad_input_raises_clear_errors(model):
    sampler = HFSampler(model)
    with pytest.raises(ValueError, match="empty prompt"):
        sampler.sample_batch([[]])
    with pytest.raises(ValueError, match=r"token id 261 is outside the model's vocabulary"):
        sampler.sample_batch([[1, 2, 261]])
    with pytest.raises(ValueError, match="outside"):
        sampler.sample_batch([[-1]])
    with pytest.raises(ValueError, match="temperature"):
        HFSampler(model, temperature=-1.0)


def _count_prefills(model):
    calls = []
    handle = model.register_forward_pre_hook(
        lambda mod, args, kwargs: calls.append(kwargs["input_ids"].shape), with_kwargs=True
    )
    return calls, handle


def test_concurrent_calls_are_batched(model):
    sampler = HFSampler(model, max_tokens=6, seed=0)
    calls, handle = _count_prefills(model)

    async def rollout(i):
        await asyncio.sleep(0)  # env work before the policy call
        return await sampler(ModelInput.from_ints(PROMPTS[i % 3]), [IM_END])

    async def main():
        return await asyncio.gather(*[rollout(i) for i in range(8)])

    try:
        results = asyncio.run(main())
    finally:
        handle.remove()
    assert len(results) == 8 and all(1 <= len(r.tokens) <= 6 for r in results)
    prefills = [shape for shape in calls if shape[1] > 1]
    assert len(prefills) == 1  # one prefill for all eight coroutines
    assert prefills[0][0] == 3  # ...of the three distinct prompts (prefix sharing)
    assert sampler.stats.batches == 1 and sampler.stats.requests == 8
    assert all(shape[0] <= 8 for shape in calls if shape[1] == 1)


def test_max_batch_size_splits_and_bad_call_fails_alone(model):
    sampler = HFSampler(model, max_tokens=3, seed=0, max_batch_size=4)

    async def main():
        good = [sampler(PROMPTS[1], [IM_END]) for _ in range(10)]
        bad = sampler([], [IM_END])
        return await asyncio.gather(*good, bad, return_exceptions=True)

    results = asyncio.run(main())
    assert isinstance(results[-1], ValueError)
    assert all(not isinstance(r, BaseException) for r in results[:-1])
    assert sampler.stats.batches == 3  # 10 requests, at most 4 rows per batch


def test_per_call_max_tokens_in_one_batch(model):
    sampler = HFSampler(model, max_tokens=50, seed=0)

    async def main():
        return await asyncio.gather(*[sampler(PROMPTS[0], [], max_tokens=k) for k in (2, 5, 3)])

    results = asyncio.run(main())
    assert [len(r.tokens) for r in results] == [2, 5, 3]
    assert all(r.stop_reason == "length" for r in results)
    assert sampler.stats.batches == 1 and sampler.stats.decode_steps == 4


class _EchoEnv(ProblemEnv):
    def get_question(self) -> str:
        return "Say 7"

    def check_answer(self, sample_str: str) -> bool:
        return sample_str.strip() == "7"

    def check_format(self, sample_str: str) -> bool:
        return True

    def get_reference_answer(self) -> str:
        return "7"


def test_drives_group_rollouts(model):
    renderer = ChatMLRenderer(ByteTokenizer())
    sampler = HFSampler(model, max_tokens=8, seed=0)
    builders = [ProblemGroupBuilder(lambda: _EchoEnv(renderer), num_envs=4) for _ in range(3)]

    async def main():
        return await asyncio.gather(*[do_group_rollout(b, sampler) for b in builders])

    groups = asyncio.run(main())
    assert sampler.stats.batches == 1 and sampler.stats.prefill_rows == 1  # 12 rows, one prompt
    for group in groups:
        for traj in group.trajectories_G:
            ac = traj.transitions[0].ac
            assert len(ac.logprobs) == len(ac.tokens) >= 1
