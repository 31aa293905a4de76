"""Environment throughput, side by side in one process: llm-gym vs reasoning-gym vs GEM.

1. Arithmetic items/s. Ours, per item: `env.reset(seed=s)` on `gym.make("llm/Math-v0")` (with
   Gymnasium's default OrderEnforcing + PassiveEnvChecker wrappers; a fresh env per run, and the
   per-process prompt cache is emptied first, so every run starts cold) -> prompt token ids and info text; the "policy"
   takes the episode's reference response and encodes it (+ `<|im_end|>`) into an int64 array;
   `env.step(action)` decodes, parses and grades it -> reward (asserted to be 1 for every item).
   reasoning-gym, per item: `basic_arithmetic` `dataset[i]` (generates the question and answer
   strings) and `score_answer(gold, entry)` (asserted 1); strings only, no tokenizer. Once at its
   default config (2-6 terms, 1-4 digits, + - * /), once at our default's difficulty (2 terms,
   2 digits, "+"): the "same difficulty" row is the like-for-like one.
2. Guess-the-number episodes/s with a binary-search player (1..10, at most 4 guesses). Ours:
   `llm/GuessNumber-v0` with max_number=10, max_turns=4 over tokens: reset(seed), then each turn
   the player encodes its guess (+ `<|im_end|>`), steps, and decodes the new observation tokens to
   read "Higher"/"Lower". GEM: `game:GuessTheNumber-v0-easy`, reset(seed), steps with
   "\\boxed{guess}" strings and reads the string observation.

Every run uses fresh seeds (run * n + i), so no run repeats an earlier run's tasks in a way that
could flatter the best-of-N (llm-gym memoizes each cached prompt's text and array per process).

Run: `make bench-env` (or `.venv/bin/python benchmarks/env_throughput.py`, after
`pip install -e '.[bench]'`). Prints a markdown table and writes benchmarks/out/env_throughput.json.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

import llm_gym  # noqa: F401  (registers llm/ ids)


def _best_of(fn, repeats: int) -> float:
    """Best items/s of `repeats` runs; `fn(run)` returns (items, seconds). Each run uses its own
    seeds (run * n + i), so no run re-uses an earlier run's seeds."""
    best = 0.0
    for run in range(repeats):
        n, secs = fn(run)
        best = max(best, n / secs)
    return best


def ours_math(n: int, run: int = 0) -> tuple[int, float]:
    # Envs made by name share one prompt cache per process; empty it so every run starts cold.
    from envs_catalog.math import arithmetic

    getattr(arithmetic, "_clear_prompt_cache", lambda: None)()
    env = gym.make("llm/Math-v0")
    base = env.unwrapped
    tok = base.tokenizer
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    # Answers are computed outside the timed loop's env calls but inside the loop, like a policy.
    correct = 0.0
    t0 = time.perf_counter()
    for i in range(run * n, run * n + n):
        obs, info = env.reset(seed=i)
        answer = base.current_env.get_reference_response()
        action = np.asarray(tok.encode(answer) + [im_end], dtype=np.int64)
        _, reward, _, _, _ = env.step(action)
        correct += reward
    secs = time.perf_counter() - t0
    assert correct == n, f"gold answers must all score 1, got {correct}/{n}"
    return n, secs


# reasoning-gym's own defaults (2-6 terms, 1-4 digits, + - * /), and the same difficulty as our
# llm/Math-v0 default (2 terms, 2 digits, "+").
RG_DEFAULT: dict = {}
RG_MATCHED = dict(min_terms=2, max_terms=2, min_digits=2, max_digits=2, operators=("+",))


def reasoning_gym_math(n: int, config: dict, run: int = 0) -> tuple[int, float]:
    import reasoning_gym

    ds = reasoning_gym.create_dataset("basic_arithmetic", size=n, seed=run, **config)
    correct = 0.0
    t0 = time.perf_counter()
    for i in range(n):
        entry = ds[i]
        correct += ds.score_answer(entry["answer"], entry)
    secs = time.perf_counter() - t0
    assert correct == n, f"reasoning-gym gold answers must score 1, got {correct}/{n}"
    return n, secs


_HINT = re.compile(r"(higher|lower)", re.IGNORECASE)


def ours_guess(n: int, run: int = 0) -> tuple[int, float]:
    env = gym.make("llm/GuessNumber-v0", max_number=10, max_turns=4)
    tok = env.unwrapped.tokenizer
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    wins = 0.0
    t0 = time.perf_counter()
    for i in range(run * n, run * n + n):
        obs, _ = env.reset(seed=i)
        lo, hi, seen = 1, 10, len(obs)
        while True:
            guess = (lo + hi) // 2
            obs, reward, terminated, truncated, _ = env.step(
                np.asarray(tok.encode(str(guess)) + [im_end], dtype=np.int64)
            )
            if terminated or truncated:
                wins += reward > 0
                break
            feedback = tok.decode(obs[seen:].tolist())  # the env's new turn, as a policy reads it
            seen = len(obs)
            if _HINT.search(feedback).group(1).lower() == "higher":
                lo = guess + 1
            else:
                hi = guess - 1
    secs = time.perf_counter() - t0
    assert wins == n, f"binary search must win every game, won {wins}/{n}"
    return n, secs


def gem_guess(n: int, run: int = 0) -> tuple[int, float]:
    import gem

    env = gem.make("game:GuessTheNumber-v0-easy")
    wins = 0.0
    t0 = time.perf_counter()
    for i in range(run * n, run * n + n):
        env.reset(seed=i)
        lo, hi = 1, 10
        while True:
            guess = (lo + hi) // 2
            obs, reward, terminated, truncated, _ = env.step(f"\\boxed{{{guess}}}")
            if terminated or truncated:
                wins += reward > 0
                break
            if _HINT.search(obs).group(1).lower() == "higher":
                lo = guess + 1
            else:
                hi = guess - 1
    secs = time.perf_counter() - t0
    assert wins == n, f"binary search must win every game, won {wins}/{n}"
    return n, secs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5000, help="items / episodes per run")
    parser.add_argument("--repeats", type=int, default=3, help="runs per contender (best is kept)")
    parser.add_argument("--out", default="benchmarks/out/env_throughput.json")
    args = parser.parse_args()

    rows = []
    ours = _best_of(lambda run: ours_math(args.n, run), args.repeats)
    theirs = _best_of(lambda run: reasoning_gym_math(args.n, RG_DEFAULT, run), args.repeats)
    rows.append(("arithmetic items/s, each at its defaults", "llm/Math-v0 (tokens)", ours,
                 "reasoning-gym basic_arithmetic (strings)", theirs))
    theirs = _best_of(lambda run: reasoning_gym_math(args.n, RG_MATCHED, run), args.repeats)
    rows.append(("arithmetic items/s, same difficulty", "llm/Math-v0 (tokens)", ours,
                 "reasoning-gym basic_arithmetic 2 terms, 2 digits, + (strings)", theirs))
    ours = _best_of(lambda run: ours_guess(args.n, run), args.repeats)
    theirs = _best_of(lambda run: gem_guess(args.n, run), args.repeats)
    rows.append(("guess-the-number episodes/s", "llm/GuessNumber-v0 (tokens)", ours,
                 "GEM game:GuessTheNumber-v0-easy (strings)", theirs))

    print("| workload | ours | ours/s | theirs | theirs/s | ratio |")
    print("|---|---|---:|---|---:|---:|")
    for what, a, x, b, y in rows:
        print(f"| {what} | {a} | {x:,.0f} | {b} | {y:,.0f} | {x / y:.1f}x |")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(
        [dict(workload=w, ours=a, ours_per_s=x, theirs=b, theirs_per_s=y, ratio=x / y)
         for w, a, x, b, y in rows], indent=2))


if __name__ == "__main__":
    main()
