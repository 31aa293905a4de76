"""REINFORCE on `llm/Math-v0` through plain Gymnasium — no llm-gym trainer involved.

A third-party-style training loop: `gym.make_vec` gives a batch of text environments whose
observations and actions are token-id sequences; a tiny GRU policy written here samples a response
token by token until one of the env's stop tokens (`info["stop_condition"]`), the env grades it,
and the policy gradient is the classic REINFORCE estimator with a batch-mean baseline:

    loss = -mean_i[(R_i - mean(R)) * sum_t log pi(a_it | prompt_i, a_i<t)]

Only `gymnasium`, `numpy`, `torch` and `llm_gym` (for `import llm_gym`, which registers the
`llm/` ids) are used. Math episodes are single-turn, so with same-step autoreset each `step`
returns the rewards of this batch and the prompts of the next.

    python examples/reinforce_gymnasium.py --iterations 200 --num-envs 16
"""

from __future__ import annotations

import argparse
import math

import gymnasium as gym
import numpy as np
import torch
from torch import nn

import llm_gym  # noqa: F401  (registers the llm/ environment ids)


class GRUPolicy(nn.Module):
    """Token embedding -> GRU -> logits over the vocabulary."""

    def __init__(self, vocab_size: int, hidden: int = 128) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, hidden)
        self.gru = nn.GRU(hidden, hidden, batch_first=True)
        self.head = nn.Linear(hidden, vocab_size)

    def forward(self, tokens: torch.Tensor, state: torch.Tensor | None = None):
        out, state = self.gru(self.embed(tokens), state)
        return self.head(out), state


def sample_responses(
    policy: GRUPolicy, prompts: tuple[np.ndarray, ...], stops: list[list[int]], max_new_tokens: int,
    generator: torch.Generator, allowed: torch.Tensor | None = None,
) -> tuple[list[np.ndarray], torch.Tensor]:
    """Sample one response per prompt; return the token arrays and each response's summed
    log-probability (differentiable). A response ends after its env's stop token. `allowed`
    (a boolean mask over the vocabulary) restricts sampling to those tokens plus the stops."""
    responses, logps = [], []
    for prompt, stop in zip(prompts, stops):  # prompts differ in length: one at a time keeps it simple
        logits, state = policy(torch.as_tensor(prompt, dtype=torch.long)[None])
        mask = None
        if allowed is not None:
            mask = allowed.clone()
            mask[stop] = True
        tokens, logp = [], torch.zeros(())
        for _ in range(max_new_tokens):
            step_logits = logits[0, -1]
            if mask is not None:
                step_logits = step_logits.masked_fill(~mask, float("-inf"))
            dist = torch.distributions.Categorical(logits=step_logits)
            token = torch.multinomial(dist.probs, 1, generator=generator)[0]
            logp = logp + dist.log_prob(token)
            tokens.append(int(token))
            if int(token) in stop:
                break
            logits, state = policy(token.view(1, 1), state)
        responses.append(np.asarray(tokens, dtype=np.int64))
        logps.append(logp)
    return responses, torch.stack(logps)


def train(
    env_id: str = "llm/Math-v0", num_envs: int = 8, iterations: int = 100, lr: float = 3e-3,
    max_new_tokens: int = 4, seed: int = 0, log_every: int = 10, alphabet: str | None = "0123456789",
) -> list[dict[str, float]]:
    """Run REINFORCE; return one record per iteration (mean reward, loss).

    `alphabet` restricts the policy to those characters' byte tokens (plus the stop tokens), a
    common action-space shaping for a from-scratch policy; `None` samples the whole vocabulary.
    """
    envs = gym.make_vec(
        env_id, num_envs=num_envs, vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP},
    )
    vocab_size = envs.single_action_space.feature_space.n  # Sequence(Discrete(V))
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    policy = GRUPolicy(vocab_size)
    optimizer = torch.optim.Adam(policy.parameters(), lr=lr)
    allowed = None
    if alphabet:
        allowed = torch.zeros(vocab_size, dtype=torch.bool)
        allowed[list(alphabet.encode("utf-8"))] = True  # the default tokenizer is byte-level

    obs, info = envs.reset(seed=seed)
    history = []
    for it in range(iterations):
        stops = [list(s) for s in info["stop_condition"]]
        actions, logp = sample_responses(policy, obs, stops, max_new_tokens, generator, allowed)
        obs, rewards, terminated, truncated, info = envs.step(tuple(actions))
        returns = torch.as_tensor(rewards, dtype=torch.float32)
        advantages = returns - returns.mean()
        loss = -(advantages * logp).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        record = {"iteration": it, "reward": float(returns.mean()), "loss": float(loss.detach()),
                  "reward_min": float(returns.min()), "reward_max": float(returns.max())}
        history.append(record)
        if log_every and it % log_every == 0:
            print(f"iter {it:4d}  reward {record['reward']:+.3f}  loss {record['loss']:+.4f}")
        if not math.isfinite(record["loss"]):
            raise FloatingPointError(f"loss became {record['loss']} at iteration {it}")
    envs.close()
    return history


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="llm/Math-v0")
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--max-new-tokens", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--alphabet", default="0123456789",
                        help="characters the policy may emit besides the stop tokens ('' = any)")
    args = parser.parse_args()
    train(args.env_id, args.num_envs, args.iterations, args.lr, args.max_new_tokens, args.seed,
          alphabet=args.alphabet or None)


if __name__ == "__main__":
    main()
