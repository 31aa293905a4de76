"""Environment throughput, side by side in one process: llm-gym vs reasoning-gym and GEM, both
sides doing the same work (tokens in, tokens out) at the same difficulty.

A policy sees token ids and emits token ids. Our envs do that tokenizer work themselves; the peers
hand out and take strings, so here they get exactly the work their users add, done with our env's
own tokenizer and chat template (those of `gym.make("llm/Math-v0")`: the byte-level default and
its ChatML renderer):

- Prompt in: the peer's question/observation becomes messages (multi-turn: the whole conversation
  so far) rendered by the same renderer's `build_generation_prompt(...).to_ints()` -- the same
  chat-templated ids our env returns. Encoding the bare text would be less work but a different
  observation (no chat template), so it is not the like-for-like choice. The peer keeps a list
  (what a sampler takes); ours returns an int64 array plus `info["text"]`, as its contract says.
- Action out: the same list of sampled ids on both sides (the response + `<|im_end|>`); ours gets
  it through `env.step`, the peer decodes it (`tokenizer.decode(ids, skip_special_tokens=True)`,
  the least a user must do) and scores/steps the string.
- Same difficulty: `llm/Math-v0`'s default (2 terms, 2 digits, "+") vs reasoning-gym
  `basic_arithmetic` with min/max_terms=2, min/max_digits=2, operators=("+",); `llm/GuessNumber-v0`
  with max_number=10, max_turns=4, range_starts=1 (the classic range 1..10) vs GEM's
  `game:GuessTheNumber-v0-easy` (1..10, 4 turns).

Per item/episode:

1. Arithmetic. Ours: `gym.make("llm/Math-v0")` (Gymnasium's OrderEnforcing + PassiveEnvChecker;
   a fresh env per run with the per-process prompt cache emptied, so each run starts cold) ->
   `reset(seed=s)` -> the policy encodes the reference response -> `step(ids)` (decode, parse,
   grade). reasoning-gym 0.1.23: `dataset[i]` -> render + encode the question -> the policy encodes
   the gold answer -> decode -> `score_answer`. Every reward is asserted to be 1.
2. Guess-the-number, one binary-search policy for both: it reads "higher"/"lower" from the
   observation's newly decoded tokens and replies in the format each env's prompt asks for (ours:
   "Reply with just the number." -> `7`; GEM: "Only the number that is wrapped inside \\boxed{}
   will be considered" -> `\\boxed{7}`). Ours: `reset(seed)`, `step(ids)` per turn. GEM 0.1.0:
   `reset(seed)` -> render + encode the intro; per turn decode the reply, `step(text)` and, unless
   the game is over, render + encode the conversation so far (as GEM's own chat-template
   `ObservationWrapper` re-renders the history each turn). Every game is asserted won.

Contenders alternate run by run (ours, theirs, ours, ...), each run on fresh seeds (run * n + i);
the best run of each is kept and the ratio is ours/theirs.

Run: `make bench-env` (or `.venv/bin/python benchmarks/env_throughput.py [--n N --repeats R]`,
after `pip install -e '.[bench]'`). Prints a markdown table and writes
benchmarks/out/env_throughput.json.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Callable
from pathlib import Path

import gymnasium as gym

import llm_gym  # noqa: F401  (registers llm/ ids)


def _tools():
    """The tokenizer, renderer and end-of-turn id that `gym.make("llm/Math-v0")` uses (GuessNumber
    is made over the same default pair)."""
    env = gym.make("llm/Math-v0")
    base = env.unwrapped
    tok, renderer = base.tokenizer, base.renderer
    env.close()
    return tok, renderer, tok.convert_tokens_to_ids("<|im_end|>")


def ours_math(n: int, run: int = 0) -> tuple[int, float]:
    # Envs made by name share one prompt cache per process; empty it so every run starts cold.
    from envs_catalog.math import arithmetic

    getattr(arithmetic, "_clear_prompt_cache", lambda: None)()
    env = gym.make("llm/Math-v0")
    base = env.unwrapped
    tok = base.tokenizer
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    correct = 0.0
    t0 = time.perf_counter()
    for i in range(run * n, run * n + n):
        env.reset(seed=i)
        # The policy: the reference answer as sampled ids (a list, as samplers return them).
        action = tok.encode(base.current_env.get_reference_response()) + [im_end]
        _, reward, _, _, _ = env.step(action)
        correct += reward
    secs = time.perf_counter() - t0
    assert correct == n, f"gold answers must all score 1, got {correct}/{n}"
    return n, secs


# The same difficulty as our llm/Math-v0 default: 2 terms, 2 digits, "+".
RG_MATCHED = dict(min_terms=2, max_terms=2, min_digits=2, max_digits=2, operators=("+",))


def reasoning_gym_math(n: int, run: int = 0) -> tuple[int, float]:
    import reasoning_gym

    tok, renderer, im_end = _tools()
    ds = reasoning_gym.create_dataset("basic_arithmetic", size=n, seed=run, **RG_MATCHED)
    correct = 0.0
    t0 = time.perf_counter()
    for i in range(n):
        entry = ds[i]
        prompt_ids = renderer.build_generation_prompt(
            [{"role": "user", "content": entry["question"]}]
        ).to_ints()
        assert prompt_ids  # the policy's input
        action = tok.encode(entry["answer"]) + [im_end]  # the policy
        response = tok.decode(action, skip_special_tokens=True)
        correct += ds.score_answer(response, entry)
    secs = time.perf_counter() - t0
    assert correct == n, f"reasoning-gym gold answers must score 1, got {correct}/{n}"
    return n, secs


_HINT = re.compile(r"(higher|lower)", re.IGNORECASE)


def ours_guess(n: int, run: int = 0) -> tuple[int, float]:
    env = gym.make("llm/GuessNumber-v0", max_number=10, max_turns=4, range_starts=1)  # GEM: 1..10
    tok = env.unwrapped.tokenizer
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    wins = 0.0
    t0 = time.perf_counter()
    for i in range(run * n, run * n + n):
        obs, _ = env.reset(seed=i)
        lo, hi, seen = 1, 10, len(obs)
        while True:
            guess = (lo + hi) // 2
            action = tok.encode(str(guess)) + [im_end]  # as our prompt asks: just the number
            obs, reward, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                wins += reward > 0
                break
            feedback = tok.decode(obs[seen:].tolist())  # the env's new turn, as a policy reads it
            seen = len(obs)
            hint = _HINT.search(feedback)
            assert hint is not None
            if hint.group(1).lower() == "higher":
                lo = guess + 1
            else:
                hi = guess - 1
    secs = time.perf_counter() - t0
    assert wins == n, f"binary search must win every game, won {wins}/{n}"
    return n, secs


def gem_guess(n: int, run: int = 0) -> tuple[int, float]:
    import gem

    tok, renderer, im_end = _tools()
    env = gem.make("game:GuessTheNumber-v0-easy")
    wins = 0.0
    t0 = time.perf_counter()
    for i in range(run * n, run * n + n):
        text, _ = env.reset(seed=i)
        messages = [{"role": "user", "content": text}]
        obs = renderer.build_generation_prompt(messages).to_ints()
        lo, hi, seen = 1, 10, len(obs)
        while True:
            guess = (lo + hi) // 2
            action = tok.encode(f"\\boxed{{{guess}}}") + [im_end]  # as GEM's prompt asks
            response = tok.decode(action, skip_special_tokens=True)
            text, reward, terminated, truncated, _ = env.step(response)
            if terminated or truncated:
                wins += reward > 0
                break
            messages += [{"role": "assistant", "content": response}, {"role": "user", "content": text}]
            obs = renderer.build_generation_prompt(messages).to_ints()
            feedback = tok.decode(obs[seen:])  # the policy reads the new turn, as on our side
            seen = len(obs)
            hint = _HINT.search(feedback)
            assert hint is not None
            if hint.group(1).lower() == "higher":
                lo = guess + 1
            else:
                hi = guess - 1
    secs = time.perf_counter() - t0
    assert wins == n, f"binary search must win every game, won {wins}/{n}"
    return n, secs


def side_by_side(
    ours: Callable[[int], tuple[int, float]], theirs: Callable[[int], tuple[int, float]], repeats: int
) -> tuple[float, float]:
    """Best rate of each contender over `repeats` alternating runs (ours, theirs, ours, ...)."""
    best_ours = best_theirs = 0.0
    for run in range(repeats):
        n, secs = ours(run)
        best_ours = max(best_ours, n / secs)
        n, secs = theirs(run)
        best_theirs = max(best_theirs, n / secs)
    return best_ours, best_theirs


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", type=int, default=5000, help="items / episodes per run")
    parser.add_argument("--repeats", type=int, default=5, help="runs per contender (best is kept)")
    parser.add_argument("--out", default="benchmarks/out/env_throughput.json")
    args = parser.parse_args()

    rows = []
    ours, theirs = side_by_side(
        lambda run: ours_math(args.n, run), lambda run: reasoning_gym_math(args.n, run), args.repeats
    )
    rows.append(("arithmetic items/s, same difficulty, tokens both sides", "llm/Math-v0", ours,
                 "reasoning-gym basic_arithmetic 2 terms, 2 digits, + (+ render/encode/decode)",
                 theirs))
    ours, theirs = side_by_side(
        lambda run: ours_guess(args.n, run), lambda run: gem_guess(args.n, run), args.repeats
    )
    rows.append(("guess-the-number episodes/s, 1..10 in 4 turns, tokens both sides",
                 "llm/GuessNumber-v0 max_number=10, max_turns=4, range_starts=1", ours,
                 "GEM game:GuessTheNumber-v0-easy (+ render/encode/decode)", theirs))

    print("| workload | ours | ours/s | theirs | theirs/s | ratio |")
    print("|---|---|---:|---|---:|---:|")
    for what, a, x, b, y in rows:
        print(f"| {what} | {a} | {x:,.0f} | {b} | {y:,.0f} | {x / y:.2f}x |")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(
        [dict(workload=w, ours=a, ours_per_s=x, theirs=b, theirs_per_s=y, ratio=x / y)
         for w, a, x, b, y in rows], indent=2))


if __name__ == "__main__":
    main()
