"""The generic adversarial audit: replies built from an env's own gold answers, by class.

Every env declares gold `ScriptedCase`s (`llm_gym.scripted`). `audit_source` plays each gold
case on a few seeds, then replays the same episode with its *last* reply (the answer: a single
turn's reply, a game's winning move, a tool episode's final answer) rewritten, and with junk
replies throughout, and compares the episode return with the gold one:

- **alternatives** (false credit if paid in full): the gold answer plus a second, different
  answer — the gold last reply of another task of the same env, or the gold with its last digit
  or letter changed — after it ("Alternatively:", "If that is wrong, my backup answer is:", a
  bare second block), before it ("Option A … Option B", "or maybe"), must not score the gold's
  return;
- **working** (false denial if not paid in full): the gold answer with worked steps before it,
  a true check after it, prose that says "the answer is below" first, or bold markup around a
  one-line answer, must score the gold's return;
- **degenerate** (false credit if paid in full): replies built from the prompt alone, not from
  the task's solution — empty, one word, one word repeated, numbered filler, one-word bullets,
  the prompt echoed back — must not score the gold's return on any turn.

What applies follows the card's `answer_form`: "one answer" and "program" get all three
classes; "exact text" (the whole reply is the answer, verbatim: a program's predicted output)
the alternatives and the degenerate replies, not the working (any prose would be part of the
answer); "free text" (the reply is the product: instructions, preference) only the degenerate
one. `_check_adversarial` turns the audit into `llm-gym check`'s `adversarial` row.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence

from llm_gym.checks.common import CheckRow, _Target
from llm_gym.grading.numeric import _parse_number_words
from llm_gym.scripted import ScriptedCase, run_scripted_case

if TYPE_CHECKING:
    from llm_gym.env_source import EnvSource

__all__ = ["ANSWER_FORMS", "AdversarialReport", "audit_source"]

ANSWER_FORMS = ("one answer", "program", "exact text", "free text")
_SLACK = 1e-6
_SPECIAL = re.compile(r"<\|[^|<>]{0,40}\|>|</?s>|^(?:system|user|assistant)\s*$|^(?:User|Assistant|System):",
                      re.MULTILINE)
_WORD = re.compile(r"[A-Za-z]{4,}")
_STOPWORDS = frozenset(
    "that this with from your have will what when which there their then than they them each "
    "into only also more most some such these those would could should about after before "
    "reply answer respond write given using line lines following below above".split()
)

# --- the classes -------------------------------------------------------------------------------
ALTERNATIVES: dict[str, Callable[[str, str], str]] = {
    "appended alternative": lambda gold, alt: f"{gold}\n\nAlternatively:\n{alt}",
    "backup answer": lambda gold, alt: f"{gold}\n\nIf that is wrong, my backup answer is:\n{alt}",
    "second block": lambda gold, alt: f"{gold}\n\n{alt}",
    "options": lambda gold, alt: f"Option A:\n{gold}\n\nOption B:\n{alt}",
    "earlier alternative": lambda gold, alt: f"{alt}\n\nHmm, or maybe:\n{gold}",
}
WORKING: dict[str, Callable[[str], str]] = {
    "worked steps first": lambda gold: (
        "Let me work through this step by step. First, 2 + 3 = 5, and 12 - 4 = 8. Now I can "
        f"put it together.\n\n{gold}"),
    "true check after": lambda gold: (
        f"{gold}\n\nLet me double-check my arithmetic: 2 + 3 = 5 and 12 - 4 = 8, so I am "
        "confident in this."),
    "the answer is below": lambda gold: f"The answer is given below.\n\n{gold}",
}


def _bold(gold: str) -> str | None:
    return f"**{gold.strip()}**" if "\n" not in gold.strip() and "*" not in gold else None


def _degenerate(prompt: str) -> dict[str, str]:
    text = _SPECIAL.sub(" ", prompt)
    # not number words: "four" every turn is a legal ConnectFour strategy, not a degenerate reply
    words = [w for w in _WORD.findall(text)
             if w.lower() not in _STOPWORDS and _parse_number_words(w) is None]
    counts: dict[str, int] = {}
    for w in words:
        counts[w.lower()] = counts.get(w.lower(), 0) + 1
    top = max(counts, key=lambda w: (counts[w], w)) if counts else "okay"
    distinct = list(dict.fromkeys(w.lower() for w in words))[:12] or ["okay"]
    return {
        "empty": "",
        "one word": top,
        "one word repeated": " ".join([top] * 60),
        "numbered filler": "\n".join(f"{i}. {w}" for i, w in enumerate(distinct, 1)),
        "one-word bullets": "\n".join(f"- {w}" for w in distinct),
        "prompt echoed": " ".join(text.split())[:2000],
    }


def _mutate(text: str) -> str:
    """`text` with its last digit (else its last letter) changed."""
    for i in range(len(text) - 1, -1, -1):
        c = text[i]
        if c.isdigit():
            return text[:i] + str((int(c) + 1) % 10) + text[i + 1:]
    for i in range(len(text) - 1, -1, -1):
        c = text[i]
        if c.isascii() and c.isalpha():
            new = "b" if c.lower() == "a" else "a"
            return text[:i] + (new.upper() if c.isupper() else new) + text[i + 1:]
    return text + " x"


# --- playing -----------------------------------------------------------------------------------
@dataclass
class Finding:
    kind: str  # "false credit" or "false denial"
    case: str  # gold case name
    variant: str  # the class's variant name
    seed: int
    gold_return: float
    got: float

    def __str__(self) -> str:
        return (f"{self.kind}: {self.variant!r} on gold case {self.case!r} (seed {self.seed}) "
                f"scored {self.got:g}, the gold {self.gold_return:g}")


@dataclass
class AdversarialReport:
    answer_form: str
    runs: int = 0
    findings: list[Finding] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # gold cases that could not be audited

    @property
    def false_credits(self) -> int:
        return sum(f.kind == "false credit" for f in self.findings)

    @property
    def false_denials(self) -> int:
        return sum(f.kind == "false denial" for f in self.findings)


def _replay(source: EnvSource, case: ScriptedCase, seed: int, replies: list[str],
            last: Callable[[str], str] | None, every: str | None = None) -> float:
    """The return of the episode that says `replies` up to the last one, then `last(gold
    last reply)`, then nothing; or `every` on every turn."""
    turn = [0]

    def reply(env: Any, observation: str) -> str:
        i = turn[0]
        turn[0] += 1
        if every is not None:
            return every
        if i < len(replies) - 1:
            return replies[i]
        return last(replies[-1]) if i == len(replies) - 1 and last is not None else ""

    variant = ScriptedCase(case.name, "adversarial", reply, -1e9, 1e9, knobs=case.knobs,
                           max_turns=case.max_turns)
    return run_scripted_case(source, variant, seed).episode_return


def audit_source(
    make_source: Callable[[dict[str, Any]], EnvSource], seeds: list[int], *,
    answer_form: str = "one answer",
) -> AdversarialReport:
    """Audit the gold cases of the sources `make_source(case.knobs)` builds (see the module
    docstring) on `seeds`."""
    if answer_form not in ANSWER_FORMS:
        raise ValueError(f"answer_form must be one of {ANSWER_FORMS}, got {answer_form!r}")
    report = AdversarialReport(answer_form)
    probe = make_source({})
    gold_cases = [c for c in probe.scripted_cases() if c.kind == "gold"]
    for case in gold_cases:
        source = make_source(case.knobs)
        prompts: list[str] = []

        def recording(env: Any, observation: str, _reply=case.reply) -> str:
            prompts.append(observation)
            return _reply(env, observation)

        recorder = ScriptedCase(case.name, "gold", recording, case.low, case.high,
                                knobs=case.knobs, max_turns=case.max_turns)
        golds = {}
        for seed in seeds:
            prompts.clear()
            outcome = run_scripted_case(source, recorder, seed)
            if not outcome.ok or not outcome.replies:
                report.skipped.append(f"{case.name!r} seed {seed}: the gold case itself scored "
                                      f"{outcome.episode_return:g}")
                continue
            golds[seed] = (outcome, prompts[0])
        low = float(source.reward_range[0]) if hasattr(source, "reward_range") else None
        for seed, (outcome, prompt) in golds.items():
            gold_return, replies = outcome.episode_return, outcome.replies
            if low is not None and gold_return <= low + _SLACK:
                # A reward only a group gives (a preference between the group's replies): one
                # episode alone scores the minimum, so nothing here can tell credit apart.
                report.skipped.append(f"{case.name!r} seed {seed}: the gold case alone scores "
                                      f"the env's minimum {low:g} (a group reward)")
                continue
            others = [o.replies[-1] for s, (o, _) in golds.items()
                      if s != seed and o.replies[-1].strip() != replies[-1].strip()]
            alternatives = [others[0]] if others else []
            alternatives.append(_mutate(replies[-1]))

            def check(kind: str, name: str, got: float) -> None:
                report.runs += 1
                paid = got >= gold_return - _SLACK
                if (kind == "false credit") == paid:
                    report.findings.append(Finding(kind, case.name, name, seed, gold_return, got))

            if answer_form != "free text":
                for name, build in ALTERNATIVES.items():
                    for k, alt in enumerate(alternatives):
                        got = _replay(source, case, seed, replies,
                                      lambda g, b=build, a=alt: b(g, a))
                        check("false credit", f"{name} ({'another task' if k == 0 and others else 'mutated'})", got)
                for name, wrap in (WORKING.items() if answer_form != "exact text" else ()):
                    check("false denial", name, _replay(source, case, seed, replies, wrap))
                if answer_form != "exact text" and _bold(replies[-1]) is not None:
                    check("false denial", "bold", _replay(source, case, seed, replies,
                                                          lambda g: _bold(g) or g))
            for name, junk in _degenerate(prompt).items():
                check("false credit", f"degenerate: {name}",
                      _replay(source, case, seed, replies, None, every=junk))
    return report


def _check_adversarial(target: _Target, env, seeds: Sequence[int]) -> CheckRow:
    source = env.unwrapped.source
    cls, renderer = type(source), source.renderer
    form = getattr(source.card, "answer_form", "one answer")
    report = audit_source(lambda knobs: cls(renderer=renderer, split="train",
                                            **{**target.knobs, **knobs}),
                          list(seeds), answer_form=form)
    data = {"answer_form": form, "runs": report.runs, "false_credits": report.false_credits,
            "false_denials": report.false_denials,
            "findings": [str(f) for f in report.findings[:20]], "skipped": report.skipped[:5]}
    if report.findings:
        return CheckRow("adversarial", "fail", f"{report.false_credits} false credits, "
                        f"{report.false_denials} false denials in {report.runs} runs: "
                        f"{report.findings[0]}", data)
    if not report.runs:
        return CheckRow("adversarial", "skip", "no gold case could be played: "
                        + ("; ".join(report.skipped[:2]) or "none declared"), data)
    return CheckRow("adversarial", "pass", f"{report.runs} replies ({form}): no false credit, "
                    "no false denial", data)
