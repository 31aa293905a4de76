"""Helpers for the slow GRPO tests: a tiny Llama given a few seconds of supervised warm-up on
1-digit addition, so rollouts have reward variance (a random-init model never emits an answer)."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import torch

from llm_gym import get_renderer, load_tokenizer


class NoRewardEnv:
    """Wraps an env: every episode ends after one turn with reward 0, so every group has
    constant rewards (the test decides any group reward) and, with
    `remove_constant_reward_groups`, an RL step gets no datum."""

    def __init__(self, env):
        self.env = env

    async def initial_observation(self):
        return await self.env.initial_observation()

    async def step(self, action, *, extra=None):
        result = await self.env.step(action, extra=extra)
        return dataclasses.replace(result, reward=0.0, episode_done=True, metrics={})


def train_records(run_dir: Path) -> dict[int, dict]:
    """A run's training-step lines of metrics.jsonl, by step."""
    lines = (Path(run_dir) / "metrics.jsonl").read_text().splitlines()
    return {r["step"]: r for r in map(json.loads, lines) if "loss" in r}


def warm_start_model(path: Path, steps: int = 60, seed: int = 0) -> str:
    """Build the tiny preset, fit it briefly on "a+b=" -> "a+b" chats, save it to `path`."""

    if (path / "config.json").is_file():
        return str(path)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matmuls: one thread is fastest, esp. on a shared CPU
    try:
        return _warm_start(path, steps, seed)
    finally:
        torch.set_num_threads(threads)


def _warm_start(path: Path, steps: int, seed: int) -> str:
    from trainers.models import build_tiny_model

    model, hf_tok = build_tiny_model(None, seed=seed)
    renderer = get_renderer(None, load_tokenizer("byte"))
    rng = random.Random(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        rows = []
        for _ in range(32):
            a, b = rng.randrange(10), rng.randrange(10)
            tokens, weights = renderer.build_supervised_example(
                [{"role": "user", "content": f"{a}+{b}="}, {"role": "assistant", "content": str(a + b)}])
            rows.append((tokens.to_ints(), weights))
        n = max(len(t) for t, _ in rows)
        ids = torch.tensor([t + [256] * (n - len(t)) for t, _ in rows])
        w = torch.tensor([wt + [0.0] * (n - len(wt)) for _, wt in rows])
        logits = model(input_ids=ids[:, :-1]).logits
        nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")
        loss = (nll * w[:, 1:]).sum() / w[:, 1:].sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    model.save_pretrained(path)
    hf_tok.save_pretrained(path)
    return str(path)
