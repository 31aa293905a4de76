"""Elementary number theory: `NumberTheorySource` (`llm/NumberTheory-v0`).

Kinds (knob `kinds`): `gcd` and `lcm` of two numbers, `mod` (a mod m, non-negative remainder),
`powmod` (a^k mod m), `next_prime` (the smallest prime greater than n) and `divisors` (how many
positive divisors n has). Each task draws a kind uniformly, then numbers up to `max_value`. All
answers are non-negative integers computed in pure Python (trial division: `max_value` is at most
10^6) and graded by `llm_gym.grading.grade_numeric`. Split key: the kind and its numbers (gcd/lcm
operands sorted).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from envs_catalog.math._numeric import (
    instruction,
    FORMAT_COEF_DOC,
    NumericSource,
    NumericTask,
    check_kinds,
    knob_docs,
)
from llm_gym.authoring import check_int
from llm_gym.env_source import EnvCard

KINDS = ("gcd", "lcm", "mod", "powmod", "next_prime", "divisors")

_DOCS = {
    "kinds": f"which questions to ask, a non-empty list from {list(KINDS)}",
    "max_value": "largest number in a question, 10-1000000",
    "format_coef": FORMAT_COEF_DOC,
}


def is_prime(n: int) -> bool:
    if n < 2:
        return False
    if n % 2 == 0:
        return n == 2
    return all(n % p for p in range(3, math.isqrt(n) + 1, 2))


def next_prime(n: int) -> int:
    """The smallest prime strictly greater than `n`."""
    k = n + 1
    while not is_prime(k):
        k += 1
    return k


def num_divisors(n: int) -> int:
    count, p = 1, 2
    while p * p <= n:
        e = 0
        while n % p == 0:
            n //= p
            e += 1
        count *= e + 1
        p += 1
    return count * (2 if n > 1 else 1)


class NumberTheorySource(NumericSource):
    """gcd / lcm / mod / powmod / next prime / divisor counts; knobs in `DEFAULTS`."""

    DEFAULTS: dict[str, Any] = {"kinds": list(KINDS), "max_value": 100, "format_coef": 0.1}
    SPLIT_PREFIX = "number_theory"
    card = EnvCard(
        id="llm/NumberTheory-v0",
        family="math",
        description=(
            "Elementary number theory with integer answers, generated offline: greatest common "
            "divisor, least common multiple, remainders (a mod m), modular powers (a^k mod m), "
            "the next prime after n, and the number of divisors of n, with numbers up to "
            "max_value (100 by default), e.g. 'What is gcd(84, 36)?' -> '12'. The knob kinds "
            "picks the question types. Answers are one integer, graded exactly, read under the "
            "one answer policy (llm_gym.grading.POLICY)."
        ),
        answer_contract="an integer (NumberAnswer)",
        multi_turn=False,
        reward_range=(-0.1, 1.0),
        reward_meaning=(
            "format_coef*(format_ok-1) + correct: 1 for the right integer, 0 for a wrong number, "
            "-format_coef (0.1) when no single number can be read (empty, malformed, conflicting, "
            "over 4096 characters, invalid UTF-8); a reply not ended by the renderer's end of "
            "turn loses format_coef but is still graded."
        ),
        difficulty_knobs=knob_docs(_DOCS, DEFAULTS),
        data_source="generated on the fly from the seed (no dataset)",
        license="Apache-2.0 (generated data)",
        example_episode=[
            {"role": "user", "content": "What is gcd(84, 36)? Reply with just the number."},
            {"role": "assistant", "content": "12"},
        ],
    )

    def configure(self, knobs: dict[str, Any]) -> None:
        self.kinds = check_kinds("kinds", knobs["kinds"], KINDS)
        self.max_value = check_int("max_value", knobs["max_value"], 10, 1_000_000)

    def _n(self, rng: np.random.Generator, low: int = 2) -> int:
        return int(rng.integers(low, self.max_value + 1))

    def draw_task(self, rng: np.random.Generator) -> NumericTask:
        kind = self.kinds[int(rng.integers(len(self.kinds)))]
        tail = " " + instruction()
        if kind in ("gcd", "lcm"):
            a, b = self._n(rng), self._n(rng)
            if kind == "gcd" and rng.random() < 0.7:  # mostly pairs with a common factor
                g = self._n(rng) if self.max_value < 40 else int(rng.integers(2, 13))
                a, b = max(2, a // g) * g, max(2, b // g) * g
                a, b = min(a, self.max_value), min(b, self.max_value)
            answer = math.gcd(a, b) if kind == "gcd" else math.lcm(a, b)
            question = f"What is {'gcd' if kind == 'gcd' else 'lcm'}({a}, {b})?{tail}"
            key = f"{kind}({min(a, b)},{max(a, b)})"
        elif kind == "mod":
            a, m = self._n(rng, 0), int(rng.integers(2, min(self.max_value, 50) + 1))
            answer = a % m
            question = f"What is {a} mod {m} (the remainder of {a} divided by {m})?{tail}"
            key = f"mod({a},{m})"
        elif kind == "powmod":
            a = int(rng.integers(2, min(self.max_value, 20) + 1))
            k = int(rng.integers(2, min(self.max_value, 30) + 1))
            m = int(rng.integers(2, min(self.max_value, 50) + 1))
            answer = pow(a, k, m)
            question = f"What is {a}^{k} mod {m}?{tail}"
            key = f"powmod({a},{k},{m})"
        elif kind == "next_prime":
            n = self._n(rng, 1)
            answer = next_prime(n)
            question = f"What is the smallest prime number greater than {n}?{tail}"
            key = f"next_prime({n})"
        else:
            n = self._n(rng, 1)
            answer = num_divisors(n)
            question = f"How many positive divisors does {n} have?{tail}"
            key = f"divisors({n})"
        return NumericTask(question, Fraction(answer), key, str(answer))
