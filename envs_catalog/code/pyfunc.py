"""`llm/PyFunc-v0`: procedurally generated small function-writing tasks with hidden unit tests.

A task composes `min_transforms`..`max_transforms` steps of one family, drawn from the source's
generator: **list** (a `list[int]` through maps, filters, sorts, reversal, de-duplication,
running sums, slicing, rotation, neighbour differences, optionally ending in a reduction such as
a sum, a count or a maximum), **str** (case changes, reversal, replacing or removing characters,
vowels or spaces, a Caesar shift, de-duplication, sorting, reversing the words, optionally ending
in a count or a length) or **int** (arithmetic with Python's `//` and `%`, squares, absolute
values, digit sums, reversed digits, max/min with a constant). The prompt is a stub `def
solve(...)` whose docstring lists the steps and shows `num_examples` examples; the reply is the
completed function (whole -- any valid module -- or its body), read by `contract.SolutionAnswer`
under the one answer policy (`llm_gym.grading.POLICY`). Each step carries one line of the reference *code* and
a trusted reference function written independently of it; the expected outputs of the hidden
tests come from the trusted one on the host and never enter the sandbox: the judge reports the
candidate's return values and the host compares them type-strictly (`harness.strict_equal`: a
tuple is not a list, True is not 1).

Test adequacy: the `num_tests` hidden inputs (others than the examples; from three tests on, the
first is the edge case, the empty list/string or 0) are chosen to tell the reference from every
program one edit away from it (`mutants.py`: a step dropped, a comparison, constant, operator,
builtin or argument order changed, a call or filter removed, ...). `hidden_inputs` runs those
mutants in-process on a pool of candidate inputs -- edge cases at the steps' boundaries (single
elements, duplicates, negatives, extremes, lengths and values next to each constant), draws
biased to them and plain draws -- and a greedy set cover picks the fewest that kill every mutant
the pool tells apart; plain draws fill the rest. A task whose mutants need more than `num_tests`
inputs is redrawn. So every mutant the pool tells apart fails a hidden test, by construction;
judged on a few hundred fresh inputs from the task's own distribution instead of the pool, at
least 99% of the mutants that differ from the reference fail one, and so does every dropped step
(asserted by tests/envs_catalog/code/test_code_mutation.py; `scripts/mutation_report.py` prints the table).

Tasks whose hidden outputs are all the same, or all equal to their inputs, are redrawn (a
constant or the identity would pass). Held-out split: the task's key (family and steps with
their constants, e.g. "list|mul:3|gt:5|sum"; not the test inputs) is hashed by
`llm_gym.authoring.split_of`, and `make_env` draws until the task is in the source's split.
The space is unbounded for RL training: thousands of distinct keys per family, fresh hidden
inputs per episode.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from llm_gym.authoring import check_int, split_of
from llm_gym.env_source import EnvCard, EnvSource
from llm_gym.renderers import Renderer
from llm_gym.scripted import ScriptedCase

from .contract import instruction
from .env import CODE_KNOB_DEFAULTS, CODE_KNOB_DOCS, CodeEnv, check_code_knobs, code_scripted_cases
from .harness import CodeTask, encode_value
from .mutants import MutationScore, cover, kill_masks, load, mutants, score

__all__ = ["FAMILIES", "InputSpace", "PyFuncSource", "PyFuncTask", "generate_task", "hidden_inputs"]

FAMILIES = ("list", "str", "int")
ENTRY_POINT = "solve"
_MAX_DRAWS = 2000
_ADEQUATE_FROM = 3  # from this many hidden tests on, the first is the edge case
_POOL_PLAIN = 24  # candidate hidden inputs drawn from the distribution
_POOL_NEAR = 24  # and drawn biased to the steps' boundaries
_POOL_CHECK = 200  # plain draws that the mutants the pool cannot kill meet (see hidden_inputs)
_VOWELS = "aeiou"


@dataclass(frozen=True)
class Op:
    key: str  # "mul:3": the step and its constants (part of the task key)
    phrase: str  # "multiply each element by 3"
    code: str  # one line of the reference solution, over the variable of its family
    fn: Callable[[Any], Any]  # the trusted reference, written independently of `code`
    terminal: bool = False  # the step turns the value into an int (list/str reductions)


def _k(rng: np.random.Generator, low: int, high: int) -> int:
    return int(rng.integers(low, high + 1))


# -- list[int] -------------------------------------------------------------------------------------

def _list_step(rng: np.random.Generator) -> Op:
    kind = _k(rng, 0, 17)
    if kind == 0:
        k = _k(rng, 1, 9) * (1 if rng.integers(2) else -1)
        word = f"add {k} to" if k > 0 else f"subtract {-k} from"
        return Op(f"add:{k}", f"{word} each element", f"xs = [x + ({k}) for x in xs]",
                  lambda xs: [x + k for x in xs])
    if kind == 1:
        k = _k(rng, 2, 5)
        return Op(f"mul:{k}", f"multiply each element by {k}", f"xs = [x * {k} for x in xs]",
                  lambda xs: [x * k for x in xs])
    if kind == 2:
        return Op("neg", "negate each element", "xs = [-x for x in xs]",
                  lambda xs: [0 - x for x in xs])
    if kind == 3:
        return Op("abs", "replace each element by its absolute value",
                  "xs = [abs(x) for x in xs]", lambda xs: [x if x >= 0 else -x for x in xs])
    if kind == 4:
        return Op("square", "square each element", "xs = [x * x for x in xs]",
                  lambda xs: [x**2 for x in xs])
    if kind == 5:
        k = _k(rng, 2, 5)
        return Op(f"mod:{k}", f"replace each element by its remainder modulo {k} (Python's %, "
                  "never negative)", f"xs = [x % {k} for x in xs]",
                  lambda xs: [x - k * (x // k) for x in xs])
    if kind == 6:
        return Op("even", "keep only the even elements", "xs = [x for x in xs if x % 2 == 0]",
                  lambda xs: [x for x in xs if not x & 1])
    if kind == 7:
        return Op("odd", "keep only the odd elements", "xs = [x for x in xs if x % 2 != 0]",
                  lambda xs: [x for x in xs if x & 1])
    if kind == 8:
        k = _k(rng, -5, 5)
        return Op(f"gt:{k}", f"keep only the elements greater than {k}",
                  f"xs = [x for x in xs if x > {k}]", lambda xs: [x for x in xs if not x <= k])
    if kind == 9:
        k = _k(rng, -5, 5)
        return Op(f"lt:{k}", f"keep only the elements less than {k}",
                  f"xs = [x for x in xs if x < {k}]", lambda xs: [x for x in xs if not x >= k])
    if kind == 10:
        k = _k(rng, 2, 4)
        return Op(f"div:{k}", f"keep only the elements divisible by {k}",
                  f"xs = [x for x in xs if x % {k} == 0]",
                  lambda xs: [x for x in xs if (x // k) * k == x])
    if kind == 11:
        if rng.integers(2):
            return Op("sort", "sort the list in ascending order", "xs = sorted(xs)",
                      lambda xs: sorted(xs))
        return Op("sortdesc", "sort the list in descending order",
                  "xs = sorted(xs, reverse=True)", lambda xs: sorted(xs)[::-1])
    if kind == 12:
        return Op("reverse", "reverse the list", "xs = xs[::-1]", lambda xs: list(reversed(xs)))
    if kind == 13:
        return Op("dedupe", "remove repeated values, keeping the first occurrence of each",
                  "xs = list(dict.fromkeys(xs))", _dedupe)
    if kind == 14:
        return Op("cumsum", "replace each element by the sum of itself and all elements "
                  "before it (the running sum)",
                  "xs = [sum(xs[:i + 1]) for i in range(len(xs))]", _running_sum)
    if kind == 15:
        k = _k(rng, 1, 4)
        if rng.integers(2):
            return Op(f"take:{k}", f"keep only the first {k} elements (all of them if there are "
                      "fewer)", f"xs = xs[:{k}]", lambda xs: [x for i, x in enumerate(xs) if i < k])
        return Op(f"drop:{k}", f"remove the first {k} elements (all of them if there are "
                  "fewer)", f"xs = xs[{k}:]", lambda xs: [x for i, x in enumerate(xs) if i >= k])
    if kind == 16:
        k = _k(rng, 1, 3)
        return Op(f"rotate:{k}", f"rotate the list left by {k} position{'s' * (k > 1)} (the first "
                  f"element moves to the end, {k} time{'s' * (k > 1)}; an empty list stays empty)",
                  f"xs = xs[{k} % len(xs):] + xs[:{k} % len(xs)] if xs else xs", _rotator(k))
    return Op("diffs", "replace the list by the differences between neighbours (each element "
              "minus the one before it; one element fewer, empty for fewer than two)",
              "xs = [b - a for a, b in zip(xs, xs[1:])]",
              lambda xs: [xs[i] - xs[i - 1] for i in range(1, len(xs))])


def _list_reduction(rng: np.random.Generator) -> Op:
    kind = _k(rng, 0, 6)
    if kind == 0:
        return Op("sum", "compute the sum of the elements (0 for an empty list)", "return sum(xs)",
                  _total, True)
    if kind == 1:
        return Op("len", "count the elements", "return len(xs)", lambda xs: sum(1 for _ in xs), True)
    if kind == 2:
        return Op("max", "find the largest element (0 for an empty list)",
                  "return max(xs, default=0)", lambda xs: sorted(xs)[-1] if xs else 0, True)
    if kind == 3:
        return Op("min", "find the smallest element (0 for an empty list)",
                  "return min(xs, default=0)", lambda xs: sorted(xs)[0] if xs else 0, True)
    if kind == 4:
        return Op("counteven", "count the even elements", "return sum(1 for x in xs if x % 2 == 0)",
                  lambda xs: len([x for x in xs if not x & 1]), True)
    if kind == 5:
        k = _k(rng, -5, 5)
        return Op(f"countgt:{k}", f"count the elements greater than {k}",
                  f"return sum(1 for x in xs if x > {k})", lambda xs: len([x for x in xs if x > k]),
                  True)
    return Op("sumsq", "compute the sum of the squares of the elements (0 for an empty list)",
              "return sum(x * x for x in xs)", lambda xs: _total([x**2 for x in xs]), True)


def _dedupe(xs):
    seen, out = set(), []
    for x in xs:
        if x not in seen:
            seen.add(x)
            out.append(x)
    return out


def _running_sum(xs):
    out, total = [], 0
    for x in xs:
        total += x
        out.append(total)
    return out


def _total(xs):
    total = 0
    for x in xs:
        total += x
    return total


def _rotator(k: int):
    def rotate(xs):
        out = list(xs)
        for _ in range(k if out else 0):
            out.append(out.pop(0))
        return out

    return rotate


# -- str ---------------------------------------------------------------------------------------------

def _str_step(rng: np.random.Generator, alphabet: str) -> Op:
    kind = _k(rng, 0, 13)
    letters = [c for c in alphabet if c.isalpha()]
    if kind == 0:
        return Op("upper", "convert it to upper case", "s = s.upper()", lambda s: s.upper())
    if kind == 1:
        return Op("lower", "convert it to lower case", "s = s.lower()", lambda s: s.lower())
    if kind == 2:
        return Op("swapcase", "swap the case of every letter", "s = s.swapcase()",
                  lambda s: "".join(c.lower() if c.isupper() else c.upper() for c in s))
    if kind == 3:
        return Op("reverse", "reverse it", "s = s[::-1]", lambda s: "".join(reversed(s)))
    if kind == 4:
        a, b = (str(c) for c in rng.choice(letters, size=2, replace=False))
        return Op(f"replace:{a}{b}", f"replace every '{a}' with '{b}'",
                  f"s = s.replace({a!r}, {b!r})", lambda s: "".join(b if c == a else c for c in s))
    if kind == 5:
        a = str(rng.choice(letters))
        return Op(f"remove:{a}", f"remove every '{a}'", f"s = s.replace({a!r}, '')",
                  lambda s: "".join(c for c in s if c != a))
    if kind == 6:
        return Op("novowels", "remove the vowels (a, e, i, o and u, in either case)",
                  "s = ''.join(c for c in s if c.lower() not in 'aeiou')",
                  lambda s: "".join(c for c in s if c not in "aeiouAEIOU"))
    if kind == 7:
        return Op("dedupe", "remove repeated characters, keeping the first occurrence of each "
                  "(case-sensitive)", "s = ''.join(dict.fromkeys(s))", lambda s: "".join(_dedupe(s)))
    if kind == 8:
        return Op("sort", "sort its characters by code point (so spaces, then upper case, then "
                  "lower case)", "s = ''.join(sorted(s))", lambda s: "".join(sorted(s)))
    if kind == 9:
        k = _k(rng, 1, 5)
        return Op(f"caesar:{k}", f"shift every lower-case letter {k} place{'s' * (k > 1)} forward "
                  "in the alphabet, wrapping from 'z' to 'a' (other characters stay)",
                  f"s = ''.join(chr((ord(c) - 97 + {k}) % 26 + 97) if 'a' <= c <= 'z' else c "
                  "for c in s)", _caesar(k))
    if kind == 10:
        return Op("evens", "keep only the characters at even positions (the first, third, "
                  "fifth, ...)", "s = s[::2]", lambda s: "".join(c for i, c in enumerate(s) if i % 2 == 0))
    if kind == 11:
        return Op("double", "repeat every character twice", "s = ''.join(c * 2 for c in s)",
                  lambda s: "".join(c + c for c in s))
    if kind == 12:
        return Op("nospaces", "remove all spaces", "s = s.replace(' ', '')",
                  lambda s: "".join(c for c in s if c != " "))
    return Op("revwords", "reverse the order of its words (split on whitespace, joined with "
              "single spaces)", "s = ' '.join(s.split()[::-1])",
              lambda s: " ".join(reversed([w for w in s.split(" ") if w])))


def _str_reduction(rng: np.random.Generator, alphabet: str) -> Op:
    kind = _k(rng, 0, 4)
    if kind == 0:
        return Op("len", "count its characters", "return len(s)", lambda s: sum(1 for _ in s), True)
    if kind == 1:
        a = str(rng.choice([c for c in alphabet if c.isalpha()]))
        return Op(f"count:{a}", f"count how many times '{a}' occurs", f"return s.count({a!r})",
                  lambda s: sum(1 for c in s if c == a), True)
    if kind == 2:
        return Op("countvowels", "count its vowels (a, e, i, o and u, in either case)",
                  "return sum(1 for c in s if c.lower() in 'aeiou')",
                  lambda s: len([c for c in s if c in "aeiouAEIOU"]), True)
    if kind == 3:
        return Op("countupper", "count its upper-case letters", "return sum(1 for c in s if c.isupper())",
                  lambda s: len([c for c in s if "A" <= c <= "Z"]), True)
    return Op("words", "count its words (separated by whitespace)", "return len(s.split())",
              lambda s: len([w for w in s.split(" ") if w]), True)


def _caesar(k: int):
    def shift(s):
        abc = "abcdefghijklmnopqrstuvwxyz"
        return "".join(abc[(abc.index(c) + k) % 26] if c in abc else c for c in s)

    return shift


# -- int ---------------------------------------------------------------------------------------------

def _int_step(rng: np.random.Generator) -> Op:
    kind = _k(rng, 0, 10)
    if kind == 0:
        k = _k(rng, 1, 20) * (1 if rng.integers(2) else -1)
        word = f"add {k} to it" if k > 0 else f"subtract {-k} from it"
        return Op(f"add:{k}", word, f"n = n + ({k})", lambda n: n + k)
    if kind == 1:
        k = _k(rng, 2, 7)
        return Op(f"mul:{k}", f"multiply it by {k}", f"n = n * {k}", lambda n: n * k)
    if kind == 2:
        k = _k(rng, 2, 5)
        return Op(f"floordiv:{k}", f"floor-divide it by {k} (Python's //, rounding down)",
                  f"n = n // {k}", lambda n: _floordiv(n, k))
    if kind == 3:
        k = _k(rng, 2, 9)
        return Op(f"mod:{k}", f"take its remainder modulo {k} (Python's %, never negative)",
                  f"n = n % {k}", lambda n: n - k * _floordiv(n, k))
    if kind == 4:
        return Op("square", "square it", "n = n * n", lambda n: n**2)
    if kind == 5:
        return Op("abs", "take its absolute value", "n = abs(n)", lambda n: -n if n < 0 else n)
    if kind == 6:
        return Op("neg", "negate it", "n = -n", lambda n: 0 - n)
    if kind == 7:
        return Op("digitsum", "replace it by the sum of the decimal digits of its absolute value",
                  "n = sum(int(d) for d in str(abs(n)))", _digit_sum)
    if kind == 8:
        return Op("revdigits", "replace it by the number whose decimal digits are those of its "
                  "absolute value in reverse order (120 becomes 21, -34 becomes 43)",
                  "n = int(str(abs(n))[::-1])", _reverse_digits)
    k = _k(rng, -10, 10)
    if kind == 9:
        return Op(f"max:{k}", f"replace it by the larger of it and {k}", f"n = max(n, {k})",
                  lambda n: n if n > k else k)
    return Op(f"min:{k}", f"replace it by the smaller of it and {k}", f"n = min(n, {k})",
              lambda n: n if n < k else k)


def _floordiv(n: int, k: int) -> int:
    q = abs(n) // k
    return q if n >= 0 else -q - (1 if abs(n) % k else 0)


def _digit_sum(n: int) -> int:
    n, total = abs(n), 0
    while n:
        n, d = divmod(n, 10)
        total += d
    return total


def _reverse_digits(n: int) -> int:
    n, out = abs(n), 0
    while n:
        n, d = divmod(n, 10)
        out = out * 10 + d
    return out


# -- inputs ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class InputSpace:
    """The inputs of one task: a family's values within the knobs' bounds (`max_len`,
    `max_value`; for strings, the task's `alphabet`)."""

    family: str
    alphabet: str  # the characters a str task's strings use; "" for the other families
    max_len: int
    max_value: int

    def draw(self, rng: np.random.Generator, *, empty: bool = False, min_len: int = 0) -> Any:
        """One input from the task's distribution (lengths and values uniform); `empty`: the
        edge case (the empty list or string, or 0)."""
        if self.family == "int":
            return 0 if empty else _k(rng, -50 * self.max_value, 50 * self.max_value)
        n = 0 if empty else _k(rng, min(min_len, self.max_len), self.max_len)
        if self.family == "list":
            return [_k(rng, -self.max_value, self.max_value) for _ in range(n)]
        return "".join(str(c) for c in rng.choice(list(self.alphabet), size=n)) if n else ""

    def draw_many(self, rng: np.random.Generator, n: int) -> list[Any]:
        """`n` inputs from the same distribution as `draw`'s, drawn in a few vectorised calls."""
        if self.family == "int":
            bound = 50 * self.max_value
            return [int(v) for v in rng.integers(-bound, bound + 1, size=n)]
        lengths = rng.integers(0, self.max_len + 1, size=n).tolist()
        if self.family == "list":
            flat = rng.integers(-self.max_value, self.max_value + 1, size=sum(lengths)).tolist()
        else:
            flat = [str(c) for c in rng.choice(list(self.alphabet), size=sum(lengths))]
        starts = np.cumsum([0] + lengths).tolist()
        parts = [flat[a:b] for a, b in zip(starts, starts[1:])]
        return parts if self.family == "list" else ["".join(p) for p in parts]

    def edge_cases(self, steps: tuple[Op, ...], rng: np.random.Generator) -> list[Any]:
        """Inputs at the boundaries the steps care about, all within the space: single elements,
        duplicates, negatives, the extreme values, values and lengths next to each step's
        constants, sorted and reverse-sorted lists; strings of one character, doubled characters,
        runs of spaces, mixed case. Some of them filled in from `rng`."""
        consts = _constants(steps)
        if self.family == "int":
            bound = 50 * self.max_value
            near = {0, 1, 2, 3, 9, 10, 11, 19, 20, 21, 99, 100, 101, 120, bound - 1, bound}
            near |= {c + d for c in consts for d in (-1, 0, 1)}
            near |= {c * m + d for c in consts if c > 1 for m in (2, 3) for d in (-1, 0, 1)}
            return sorted({v for n in near for v in (n, -n) if abs(v) <= bound},
                          key=lambda v: (abs(v), v))
        if self.family == "list":
            return self._list_edges(consts, rng)
        return self._str_edges(rng)

    def palette(self, steps: tuple[Op, ...]) -> list[int]:
        """List elements the steps are sensitive to: 0, +-1, +-2, the extremes and each constant
        of the steps +-1 (and its negation), within [-max_value, max_value]."""
        v = self.max_value
        near = {0, 1, 2, v} | {c + d for c in _constants(steps) for d in (-1, 0, 1)}
        return sorted({x for n in near for x in (n, -n) if abs(x) <= v}, key=lambda x: (abs(x), x))

    def draw_near(self, rng: np.random.Generator, steps: tuple[Op, ...]) -> Any:
        """An input of the space biased to the boundaries: ints in [-30, 30]; lists and strings
        of the longest length half the time, list elements from `palette` half the time or, one
        list in three, from three palette values only (long runs of repeats), strings from three
        of the alphabet's characters and more spaces."""
        if self.family == "int":
            return _k(rng, -min(30, 50 * self.max_value), min(30, 50 * self.max_value))
        n = self.max_len if rng.random() < 0.5 else _k(rng, 0, self.max_len)
        if self.family == "list":
            palette = self.palette(steps)
            if rng.random() < 1 / 3:
                few = [palette[int(i)] for i in rng.integers(len(palette), size=3)]
                return [few[int(rng.integers(3))] for _ in range(n)]
            return [palette[int(rng.integers(len(palette)))] if rng.random() < 0.5
                    else _k(rng, -self.max_value, self.max_value) for _ in range(n)]
        chars = list(self.alphabet) + [" "] * 3
        few = [str(c) for c in rng.choice(chars, size=3)]
        return "".join(few[int(rng.integers(3))] for _ in range(n))

    def _list_edges(self, consts: set[int], rng: np.random.Generator) -> list[Any]:
        v, top = self.max_value, self.max_len
        palette = self.palette(())
        near = sorted({c + d for c in consts for d in (-1, 0, 1)} - set(palette),
                      key=lambda x: (abs(x), x))
        cases: list[list[int]] = [[x] for x in palette + [x for x in near if abs(x) <= v]]
        cases += [[x, x] for x in (0, 1, -1, v)] + [[1, 2, 1], [2, 1, 2, 1], [-1, 1, -1]]
        lengths = {2, 3, top} | {c + d for c in consts for d in (-1, 0, 1)}
        for n in sorted(x for x in lengths if 2 <= x <= top):
            cases.append([_k(rng, -v, v) for _ in range(n)])
        run = [_k(rng, -v, v) for _ in range(top)]
        cases += [sorted(run), sorted(run, reverse=True), [abs(x) for x in run],
                  [-abs(x) for x in run]]
        return [[min(max(x, -v), v) for x in case] for case in cases if len(case) <= top]

    def _str_edges(self, rng: np.random.Generator) -> list[Any]:
        chars = list(self.alphabet)
        letters = [c for c in chars if c != " "]
        cases = chars + [c + c for c in chars]
        cases += [" " + letters[0], letters[0] + " ", letters[0] + "  " + letters[1],
                  self.alphabet, self.alphabet[::-1]]
        cases += [c.lower() + c for c in letters if c.isupper()]  # both cases of one letter
        for _ in range(3):
            words = ["".join(str(c) for c in rng.choice(letters, size=_k(rng, 1, 3)))
                     for _ in range(3)]
            cases.append(" " + "  ".join(words) + " ")
        return [c for c in dict.fromkeys(cases) if len(c) <= self.max_len]


def _constants(steps: tuple[Op, ...]) -> set[int]:
    """The integer constants of the steps, read off their keys ("gt:-3" -> -3)."""
    return {int(c) for op in steps for c in op.key.split(":")[1:] if c.lstrip("-").isdigit()}


# -- tasks -------------------------------------------------------------------------------------------

_SIGNATURES = {
    "list": ("xs", "list[int]", "Given a list of integers xs"),
    "str": ("s", "str", "Given a string s"),
    "int": ("n", "int", "Given an integer n"),
}


@dataclass(frozen=True)
class PyFuncTask:
    key: str  # the split key: family and steps
    family: str
    steps: tuple[Op, ...]
    examples: tuple[tuple[Any, Any], ...]  # shown in the docstring
    tests: tuple[tuple[Any, Any], ...]  # hidden
    space: InputSpace  # where the examples and hidden inputs come from

    @property
    def returns(self) -> str:
        if self.family == "int" or self.steps[-1].terminal:
            return "int"
        return _SIGNATURES[self.family][1]

    def stub(self) -> str:
        """`def solve(...)` with the docstring: what the model completes."""
        var, kind, intro = _SIGNATURES[self.family]
        lines = [f"def {ENTRY_POINT}({var}: {kind}) -> {self.returns}:", f'    """{intro}:']
        for i, op in enumerate(self.steps, 1):
            lines.append(f"    {i}. {op.phrase}{'.' if i == len(self.steps) else ';'}")
        lines.append("    Return the result.")
        if self.examples:
            lines.append("")
        for arg, out in self.examples:
            lines += [f"    >>> {ENTRY_POINT}({arg!r})", f"    {out!r}"]
        lines.append('    """')
        return "\n".join(lines) + "\n"

    def reference_body(self) -> str:
        return _reference_source(self.family, self.steps).split("\n", 1)[1]

    def reference_source(self) -> str:
        """`def solve(x):` and the reference body, without the docstring: what `mutants` edits."""
        return _reference_source(self.family, self.steps)

    def sample(self, rng: np.random.Generator, n: int) -> list[tuple[Any, Any]]:
        """`n` (input, expected output) pairs drawn from the task's input distribution (not
        necessarily distinct)."""
        return [(x, _run(self.steps, x)) for x in self.space.draw_many(rng, n)]

    def with_hidden_inputs(self, rng: np.random.Generator, num_tests: int, *,
                           also_kill: Sequence[str] = ()) -> PyFuncTask | None:
        """This task with `num_tests` hidden inputs chosen afresh from `rng` by `hidden_inputs`
        (the examples stay); None when that many cannot kill every mutant they tell apart."""
        inputs = hidden_inputs(rng, self.steps, self.space, num_tests,
                               {repr(x) for x, _ in self.examples}, also_kill=also_kill)
        if inputs is None:
            return None
        return dataclasses.replace(self, tests=tuple((x, _run(self.steps, x)) for x in inputs))

    def mutation_score(self, rng: np.random.Generator, sample_size: int = 300) -> MutationScore:
        """How the hidden tests fare against the reference's one-edit mutants (`mutants.score`),
        distinguishability judged on the tests and `sample_size` fresh inputs from `rng`."""
        return score(self.reference_source(), ENTRY_POINT, self.tests,
                     self.sample(rng, sample_size))

    def code_task(self) -> CodeTask:
        return CodeTask(
            prompt=self.stub(),
            entry_point=ENTRY_POINT,
            cases=tuple(encode_value([arg]) for arg, _ in self.tests),
            expected=tuple(out for _, out in self.tests),
        )


def _run(steps: tuple[Op, ...], value: Any) -> Any:
    for op in steps:
        value = op.fn(value)
    return value


def _alphabet(rng: np.random.Generator) -> str:
    """Letters a string task draws from: five lower-case (two vowels among them), two of them
    also in upper case, and a space."""
    vowels = [str(c) for c in rng.choice(list(_VOWELS), size=2, replace=False)]
    consonants = [str(c) for c in rng.choice(list("bcdfghklmnprst"), size=3, replace=False)]
    lower = vowels + consonants
    upper = [c.upper() for c in rng.choice(lower, size=2, replace=False)]
    return "".join(lower + upper) + " "


def generate_task(rng: np.random.Generator, *, families: tuple[str, ...], min_transforms: int,
                  max_transforms: int, num_tests: int, num_examples: int, max_len: int,
                  max_value: int, split: str | None = None) -> PyFuncTask:
    """One task drawn from `rng` (and only from it); `split`, when given, the split it must be in."""
    for _ in range(_MAX_DRAWS):
        family = families[int(rng.integers(len(families)))]
        alphabet = _alphabet(rng) if family == "str" else ""
        count = _k(rng, min_transforms, max_transforms)
        reduce = family != "int" and count > 0 and bool(rng.random() < 0.4)
        steps: list[Op] = []
        for i in range(count):
            if reduce and i == count - 1:
                op = (_list_reduction(rng) if family == "list" else _str_reduction(rng, alphabet))
            elif family == "list":
                op = _list_step(rng)
            elif family == "str":
                op = _str_step(rng, alphabet)
            else:
                op = _int_step(rng)
            steps.append(op)
        names = [op.key.split(":")[0] for op in steps]
        if any(a == b for a, b in zip(names, names[1:])):
            continue  # "reverse, reverse" and the like: redraw
        key = family + "|" + "|".join(op.key for op in steps)
        if split is not None and split_of(key) != split:
            continue
        ops = tuple(steps)
        space = InputSpace(family, alphabet, max_len, max_value)
        # examples avoid the edge case only where it is a hidden test (as they always have)
        seen = {repr(space.draw(rng, empty=True))} if num_tests >= _ADEQUATE_FROM else set()
        examples = []
        for _ in range(num_examples):  # fresh inputs, preferably ones the steps change
            for _ in range(20):
                x = space.draw(rng, min_len=2)
                out = _run(ops, x)
                if repr(x) not in seen and repr(out) != repr(x):
                    break
            seen.add(repr(x))
            examples.append((x, out))
        inputs = hidden_inputs(rng, ops, space, num_tests, seen)
        if inputs is None:
            continue  # its mutants need more tests than num_tests: redraw
        tests = [(x, _run(ops, x)) for x in inputs]
        if len(tests) > 1 and len({repr(out) for _, out in tests}) == 1:
            continue  # a constant would pass the hidden tests
        if all(repr(out) == repr(x) for x, out in tests):
            continue  # so would the identity
        return PyFuncTask(key, family, ops, tuple(examples), tuple(tests), space)
    raise RuntimeError(
        f"no {split or 'any'!r} PyFunc task found in {_MAX_DRAWS} draws with families={families}, "
        f"transforms {min_transforms}-{max_transforms}, max_len={max_len}, max_value={max_value}; "
        "widen the knobs"
    )


def hidden_inputs(rng: np.random.Generator, steps: tuple[Op, ...], space: InputSpace,
                  num_tests: int, seen: set[str], *,
                  also_kill: Sequence[str] = ()) -> list[Any] | None:
    """The `num_tests` hidden inputs of a task (fewer only when the space has fewer fresh inputs),
    none of whose reprs is in `seen` (the examples'), drawn from `rng` only; None when no
    `num_tests` of the candidates kill every mutant the candidates tell apart (redraw the task).
    `also_kill`: more trusted sources of `solve` to tell from the reference (BugFix's buggy
    function and its one-edit mutants, the wrong fixes).

    Candidates: `space.edge_cases`, `_POOL_NEAR` draws biased to the steps' boundaries
    (`space.draw_near`) and `_POOL_PLAIN` plain draws. Every one-edit mutant of the reference code
    (`mutants.mutants`) runs on them in-process (`mutants.kill_masks`: trusted code, a few
    builtins, a step budget); the mutants none of them kills also meet `_POOL_CHECK` more plain
    draws, and the draws that kill one become candidates too. A greedy set cover
    (`mutants.cover`) then picks the fewest candidates that kill every mutant any candidate kills;
    from `_ADEQUATE_FROM` tests on, the edge case (the empty list or string, or 0) comes first
    whether or not it is needed. Plain draws fill the remaining slots."""
    first = [space.draw(rng, empty=True)] if num_tests >= _ADEQUATE_FROM else []
    plain = space.draw_many(rng, _POOL_PLAIN)
    near = [space.draw_near(rng, steps) for _ in range(_POOL_NEAR)]
    taken = set(seen) | {repr(x) for x in first}
    pool = list(first) + _fresh_inputs(space.edge_cases(steps, rng) + near + plain, taken)
    sources = [m.source for m in mutants(_reference_source(space.family, steps), ENTRY_POINT)]
    fns = [load(source, ENTRY_POINT) for source in sources + list(also_kill)]
    masks = kill_masks(fns, pool, [_run(steps, x) for x in pool])
    # The mutants the pool cannot tell apart meet `_POOL_CHECK` more plain draws: those that
    # tell one apart join the pool (their bits for the other mutants are left 0, which only
    # makes the greedy choice more conservative).
    alive = [i for i, m in enumerate(masks) if not m and fns[i] is not None]
    check = _fresh_inputs(space.draw_many(rng, _POOL_CHECK), set(taken))
    check_masks = kill_masks([fns[i] for i in alive], check, [_run(steps, x) for x in check])
    useful = [j for j in range(len(check)) if any(m >> j & 1 for m in check_masks)]
    for i, m in zip(alive, check_masks):
        masks[i] = sum(1 << (len(pool) + k) for k, j in enumerate(useful) if m >> j & 1)
    pool += [check[j] for j in useful]
    taken |= {repr(check[j]) for j in useful}
    picks = list(range(len(first))) + cover(masks, chosen=(1 << len(first)) - 1)
    if len(picks) > num_tests:
        return None
    chosen = [pool[i] for i in picks]
    fill = {repr(x) for x in plain} - {repr(x) for x in chosen}
    chosen += [x for x in pool if repr(x) in fill][:num_tests - len(chosen)]
    for _ in range(20 * num_tests):
        if len(chosen) >= num_tests:
            break
        x = space.draw(rng)
        if repr(x) not in taken:
            taken.add(repr(x))
            chosen.append(x)
    return chosen


def _fresh_inputs(inputs: list[Any], taken: set[str]) -> list[Any]:
    """`inputs` whose reprs are not in `taken` (which gains them), first occurrences only."""
    out = []
    for x in inputs:
        if repr(x) not in taken:
            taken.add(repr(x))
            out.append(x)
    return out


def _reference_source(family: str, steps: tuple[Op, ...]) -> str:
    """The reference solution without its docstring: what `mutants` edits."""
    var = _SIGNATURES[family][0]
    body = [f"    {op.code}\n" for op in steps]
    if not steps[-1].terminal:
        body.append(f"    return {var}\n")
    return f"def {ENTRY_POINT}({var}):\n" + "".join(body)


INSTRUCTION = "Write the Python function below. " + instruction()


def question_text(task: PyFuncTask) -> str:
    return f"{INSTRUCTION}\n\n```python\n{task.stub()}```"


def reference_response(task: PyFuncTask) -> str:
    return f"```python\n{task.stub()}{task.reference_body()}```"


_DEFAULTS: dict[str, Any] = {
    "families": "list,str,int",
    "min_transforms": 1,
    "max_transforms": 3,
    "num_tests": 10,
    "num_examples": 2,
    "max_len": 8,
    "max_value": 20,
    **CODE_KNOB_DEFAULTS,
    "test_timeout_s": 2.0,
    "timeout_s": 10.0,
}


_KNOB_DOCS = {
    "families": "comma-separated subset of 'list,str,int': the kinds of task drawn",
    "min_transforms": "fewest composed steps, 1-6",
    "max_transforms": "most composed steps, min_transforms-6",
    "num_tests": "hidden inputs per task, 1-50 (from 3 on, the first is the empty list/string or "
    "0; fewer when the knobs allow fewer distinct inputs; tasks whose one-edit mutants need more "
    "inputs to be caught are redrawn)",
    "num_examples": "worked examples in the docstring, 1-3",
    "max_len": "longest input list or string, 1-50",
    "max_value": "list elements lie in [-max_value, max_value], int inputs in "
    "[-50*max_value, 50*max_value]; 1-1000",
    **CODE_KNOB_DOCS,
}


def _example_episode() -> list[dict[str, str]]:
    task = generate_task(np.random.default_rng(3), families=("list",), min_transforms=2,
                         max_transforms=2, num_tests=4, num_examples=2, max_len=5, max_value=9)
    return [{"role": "user", "content": question_text(task)},
            {"role": "assistant", "content": reference_response(task)}]


class PyFuncSource(EnvSource):
    """Generated function-writing tasks; knobs in `DEFAULTS`. Registered as `llm/PyFunc-v0`."""

    DEFAULTS = _DEFAULTS
    card = EnvCard(
        id="llm/PyFunc-v0",
        family="code",
        description=(
            "Procedurally generated Python functions with hidden unit tests, fully offline and "
            "unbounded: a task composes 1-3 steps over a list of ints (maps, filters, sorts, "
            "de-duplication, running sums, slicing, rotation, reductions), a string (case, "
            "reversal, replacements, Caesar shifts, counts) or an int (arithmetic with // and %, "
            "digit sums, reversed digits), described step by step in the docstring of a "
            "'def solve(...)' stub with two examples. The reply (a ```python block with the "
            "whole function -- any valid module -- or its body, read under the one answer "
            "policy, llm_gym.grading.POLICY: the last block that is a program, a second, "
            "different program voiding the credit) runs in llm_gym.sandbox on hidden inputs whose "
            "expected outputs a trusted reference computes on the host; they never enter the "
            "sandbox, and outputs are compared type-strictly. The hidden inputs are chosen by "
            "mutation testing: they catch every program one edit away from the reference (a step "
            "dropped; an operator, constant, comparison or builtin changed) that a pool of edge "
            "cases and random inputs tells apart from it -- over 99% of those that differ on the "
            "task's inputs at all, and every dropped step, in tests/envs_catalog/code/test_code_mutation.py."
        ),
        answer_contract="program (SolutionAnswer, a ProgramAnswer): the last ```python block defining "
        "solve, or the body continuing the stub; else the whole reply",
        multi_turn=False,
        reward_range=(0.0, 1.0),
        reward_meaning=(
            "1 when the function returns the expected value (type-strict: a tuple is not a list, "
            "True is not 1) on every hidden input, else 0; with partial_credit=true, the fraction "
            "of hidden inputs right. No program, two different programs, syntax errors, timeouts, "
            "a reply over max_chars and any harness failure score 0 with a metric (no_code, "
            "several_programs, syntax_error, timeout, too_long, harness_error); sandbox/<backend> "
            "says which sandbox graded."
        ),
        difficulty_knobs={k: f"{doc} (default {_DEFAULTS[k]!r})" for k, doc in _KNOB_DOCS.items()},
        data_source="generated on the fly from the seed (no dataset)",
        license="Apache-2.0 (generated data)",
        example_episode=_example_episode(),
    )

    def __init__(self, *, renderer: Renderer, split: str = "train", **knobs: Any) -> None:
        own = {k: knobs.pop(k, v) for k, v in self.DEFAULTS.items()}
        super().__init__(renderer=renderer, split=split, **knobs)
        families = own["families"]
        parts = families.split(",") if isinstance(families, str) else None
        if not parts or any(p.strip() not in FAMILIES for p in parts):
            raise ValueError(
                f"families must be a comma-separated subset of {','.join(FAMILIES)!r}, got "
                f"{families!r}"
            )
        self.families = tuple(dict.fromkeys(p.strip() for p in parts))
        self.min_transforms = check_int("min_transforms", own["min_transforms"], 1, 6)
        self.max_transforms = check_int("max_transforms", own["max_transforms"],
                                        self.min_transforms, 6)
        self.num_tests = check_int("num_tests", own["num_tests"], 1, 50)
        self.num_examples = check_int("num_examples", own["num_examples"], 1, 3)
        self.max_len = check_int("max_len", own["max_len"], 1, 50)
        self.max_value = check_int("max_value", own["max_value"], 1, 1000)
        self.knobs = check_code_knobs(own)

    def draw_task(self, rng: np.random.Generator) -> PyFuncTask:
        return generate_task(
            rng, families=self.families, min_transforms=self.min_transforms,
            max_transforms=self.max_transforms, num_tests=self.num_tests,
            num_examples=self.num_examples, max_len=self.max_len, max_value=self.max_value,
            split=self.split,
        )

    def make_env(self, rng: np.random.Generator) -> CodeEnv:
        task = self.draw_task(rng)
        return CodeEnv(self.renderer, question_text(task), task.code_task(),
                       reference_response(task), knobs=self.knobs, task_id=task.key,
                       reference_body=task.reference_body(),
                       reference_program=task.stub() + task.reference_body())

    def scripted_cases(self) -> list[ScriptedCase]:
        """Gold: the reference solution (stub and body) and its body alone. Adversarial (no
        credit): the stub unchanged, an empty reply, prose, the solution followed by a second,
        different program, and the harness attacks
        (`env.ATTACKS`: printing PASSED, sys.exit/os._exit, an always-equal object,
        monkeypatched builtins and a fake check, reading the tests, sleeping past a 0.1 s
        per-test / 1 s total clock); the last two on 3 hidden tests, to keep them cheap."""
        return code_scripted_cases({"test_timeout_s": 0.1, "timeout_s": 1.0, "num_tests": 3},
                                   {"num_tests": 3})
