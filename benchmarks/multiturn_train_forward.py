"""Training forward/backward on multi-turn datums: the LM head on every real token vs on the trained
tokens only (issue 23, item 7).

A multi-turn datum is mostly prompt and env replies (mask 0); the loss reads log p only where the
policy sampled (mask 1). The packed training forward (`trainers.grpo.packed_tails`) therefore runs
the LM head on the trained tokens alone (`packed_logits(..., keep=...)`). This script rolls out
`--groups` x `--group-size` GuessNumber episodes of a preset at temperature 1 (an untrained
policy: every turn is sampled to `max_tokens` and every env reply is "Invalid. ...", a realistic
mix of trained and untrained tokens), gives every datum a random advantage so every row trains,
and times one forward + backward of the packed layout's micro-batches three ways, alternating:
`trained_only` (what training runs), `all_real_tokens` (the LM head on every real token, as before
this change) and `padded` (the plain forward). CPU seconds of this process (one torch thread), so
the numbers do not depend on other processes' load as much as wall time does.

    .venv/bin/python benchmarks/multiturn_train_forward.py --model tiny-bpe
    .venv/bin/python benchmarks/multiturn_train_forward.py --model tiny
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--model", default="tiny-bpe", choices=["tiny", "tiny-bpe"])
    parser.add_argument("--groups", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from llm_gym.rl import assemble_training_data, compute_advantages
    from trainers.cli_train import config_and_explicit
    from trainers.grpo import trainer as T
    from trainers.grpo.fit import fit_to_env
    from trainers.grpo.shared_prefix import supports_shared_prefix
    from trainers.models import load_policy, resolve_model

    cfg, explicit = config_and_explicit(["--env", "llm/GuessNumber-v0", "--model", args.model, "--no-sft",
                                         "--group-size", str(args.group_size),
                                         "--groups-per-batch", str(args.groups)])
    cfg.validate()
    fit_to_env(cfg, explicit)
    torch.set_num_threads(1)
    accelerator = T.make_accelerator(cfg)
    T.seed_everything(0)
    model, _ = load_policy(resolve_model(args.model, seed=0), device=accelerator.device, dtype=torch.float32)
    _tok, stop_ids = T.env_tokenizer_and_stops(cfg)
    builders = list(T.make_dataset(cfg, "train", args.groups, args.group_size, 0).get_batch(0))
    sampler = T.make_sampler(cfg, model, accelerator.device, stop_ids, 0, 1.0, 0, args.groups * args.group_size)
    with torch.no_grad():
        groups = T.rollout_groups(builders, sampler, T.rollout_limits(cfg, sampler))
    advantages = compute_advantages(groups, cfg.loss, None)
    rng = np.random.default_rng(0)
    advantages = [rng.normal(size=len(a)) for a in advantages]  # every row trains
    data, _ = assemble_training_data(groups, advantages)
    share = cfg.share_prefix and supports_shared_prefix(model)
    micro = T.micro_batches(data, cfg.micro_batch_size, share, cfg.micro_batch_tokens)
    batches = [T.collate(chunk, 0, accelerator.device, share, pack=True) for chunk in micro]
    tokens = sum(len(d.model_input.to_ints()) for d in data)
    trained = int(sum(float(d.loss_fn_inputs["mask"].sum()) for d in data))

    def run(mode: str) -> float:
        model.zero_grad(set_to_none=True)
        start = time.process_time()
        for mb in batches:
            if mode == "padded":
                logp = T._padded_token_logprobs(model, mb, cfg.temperature)[0]
            else:
                logp = T._token_logprobs(model, mb, cfg.temperature, trained_only=mode == "trained_only")[0]
            (logp * mb.mask).sum().backward()
        return time.process_time() - start

    modes = ("trained_only", "all_real_tokens", "padded")
    run("trained_only")  # warm-up (the packed path's one-time check against the plain forward)
    seconds: dict[str, list[float]] = {m: [] for m in modes}
    for _ in range(args.repeats):
        for mode in modes:
            seconds[mode].append(round(run(mode), 3))
    result = {"model": args.model, "datums": len(data), "tokens": tokens, "trained_tokens": trained,
              "micro_batches": len(batches), "cpu_seconds": seconds}
    print(json.dumps(result))
    best = {m: min(v) for m, v in seconds.items()}
    print(f"{args.model}: {len(data)} datums, {tokens} tokens, {trained} trained; CPU-s (best of "
          f"{args.repeats}): trained_only {best['trained_only']:.2f}, all_real_tokens "
          f"{best['all_real_tokens']:.2f}, padded {best['padded']:.2f}")


if __name__ == "__main__":
    main()
