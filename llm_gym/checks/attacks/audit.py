"""Running the generated attack suite against an environment, through its real episodes.

`audit_source(make_source, seeds)` plays each gold scripted case of the source on each seed
(`llm_gym.scripted`), reads the answer contract and the gold value of the episode's last turn
(`env.answer_contract`, `env.gold_answer`; a multi-turn env's gold value is its gold reply as the
contract reads it), builds the attack replies for that turn (`llm_gym.checks.attacks.suite.generate`,
plus the source's own `attack_replies(env, observation, rng)` when it has that hook: generators of
the gaming a free-text rubric invites), and replays the episode with each attack as the last
reply. A reply built to earn credit must score the gold episode's return; one built not to must
score less. The result is a `HackabilityReport`: false-credit and false-denial counts and rates,
per attack family, and the exploitable families that paid (a policy under RL would learn them).
`export` returns every run as a JSON-ready record, so the same replies can be replayed against
another version of the code (`replay_records`), which is how before/after tables are made.
"""

from __future__ import annotations

import asyncio
import random
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from llm_gym.checks.attacks.suite import Attack, generate
from llm_gym.scripted import ScriptedCase, aplay_scripted_episode

if TYPE_CHECKING:
    from llm_gym.env_source import EnvSource

__all__ = ["HackabilityReport", "audit_source", "inferred_contract", "replay_records"]

_SLACK = 1e-6


@dataclass
class FamilyCount:
    runs: int = 0
    false_credits: int = 0
    false_denials: int = 0


@dataclass
class HackabilityReport:
    """The audit of one source (see the module docstring). Rates are over `runs`."""

    runs: int = 0
    false_credits: int = 0
    false_denials: int = 0
    exploitable_credits: int = 0
    families: dict[str, FamilyCount] = field(default_factory=dict)
    findings: list[str] = field(default_factory=list)  # the first few mismatches, readable
    skipped: list[str] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    inferred: bool = False  # some contract was inferred from a gold reply (the env declares none)

    @property
    def false_credit_rate(self) -> float:
        return self.false_credits / self.runs if self.runs else 0.0

    @property
    def false_denial_rate(self) -> float:
        return self.false_denials / self.runs if self.runs else 0.0

    @property
    def exploitable_families(self) -> list[str]:
        return sorted({f.split(" :: ")[0] for f in self.findings if f.startswith("EXPLOITABLE")})

    def add(self, attack: Attack, got: float, gold: float, case: str, seed: int) -> None:
        paid = got >= gold - _SLACK
        fam = self.families.setdefault(attack.family, FamilyCount())
        fam.runs += 1
        self.runs += 1
        if paid == attack.credit:
            return
        if paid:
            fam.false_credits += 1
            self.false_credits += 1
            if attack.exploitable:
                self.exploitable_credits += 1
        else:
            fam.false_denials += 1
            self.false_denials += 1
        if len(self.findings) < 40:
            kind = "false credit" if paid else "false denial"
            tag = "EXPLOITABLE " + attack.family + " :: " if paid and attack.exploitable else ""
            self.findings.append(f"{tag}{kind}: {attack.family} / {attack.variant} on {case!r} seed {seed}: "
                                 f"scored {got:g} (gold {gold:g}): {attack.reply[:120]!r}")

    def summary(self) -> dict[str, Any]:
        return {
            "runs": self.runs, "false_credits": self.false_credits, "false_denials": self.false_denials,
            "false_credit_rate": round(self.false_credit_rate, 5),
            "false_denial_rate": round(self.false_denial_rate, 5),
            "exploitable_credits": self.exploitable_credits,
            "families": {k: vars(v) for k, v in sorted(self.families.items())},
            "findings": self.findings[:20], "skipped": self.skipped[:10],
        }


class _Recorder:
    """A gold reply function that remembers each turn's env state and observation."""

    def __init__(self, reply: Callable[[Any, str], str]) -> None:
        self.reply = reply
        self.turns: list[tuple[Any, Any, str]] = []  # (contract, gold value, observation)

    def __call__(self, env: Any, observation: str) -> str:
        contract = getattr(env, "answer_contract", None)
        gold = getattr(env, "gold_answer", None)
        self.turns.append((contract, gold, observation))
        return self.reply(env, observation)


async def _play(source: EnvSource, case: ScriptedCase, seed: int, replies: Sequence[str]) -> float:
    """The return of the episode (task `seed`) that says `replies`, then nothing."""
    turn = [0]

    def reply(env: Any, observation: str) -> str:
        i = turn[0]
        turn[0] += 1
        return replies[i] if i < len(replies) else ""

    variant = ScriptedCase(case.name, "adversarial", reply, -1e9, 1e9, knobs=case.knobs, max_turns=case.max_turns)
    env = source.make_env(np.random.default_rng(seed))
    trajectory, _ = await aplay_scripted_episode(source, variant, env)
    return float(sum(t.reward for t in trajectory.transitions))


def _gold_value(contract: Any, gold: Any, last_reply: str) -> Any:
    if gold is not None:
        return gold
    reading = contract.read(last_reply)
    return reading.value if reading.ok else None


def inferred_contract(gold_reply: str) -> Any:
    """A contract for an env that declares none, from its gold reply: a number when the reply is
    one, else the reply's exact text."""
    from llm_gym.grading.contracts import ExactTextAnswer, NumberAnswer
    from llm_gym.grading.quantity import read_quantity, strip_decoration

    tagged = re.fullmatch(r"\s*<answer>(.*)</answer>\s*", gold_reply, re.DOTALL | re.IGNORECASE)
    inside = tagged.group(1) if tagged else gold_reply
    if read_quantity(strip_decoration(inside)) is not None:
        return NumberAnswer()
    return ExactTextAnswer()


async def _audit_case(source: EnvSource, case: ScriptedCase, seed: int, report: HackabilityReport,
                      per_seed: int | None, env_label: str, infer: bool = False) -> None:
    recorder = _Recorder(case.reply)
    gold_case = ScriptedCase(case.name, "gold", recorder, case.low, case.high, knobs=case.knobs,
                             max_turns=case.max_turns)
    env = source.make_env(np.random.default_rng(seed))
    trajectory, replies = await aplay_scripted_episode(source, gold_case, env)
    gold_return = float(sum(t.reward for t in trajectory.transitions))
    if not replies or not case.low - _SLACK <= gold_return <= case.high + _SLACK:
        report.skipped.append(f"{case.name!r} seed {seed}: the gold case itself scored {gold_return:g}")
        return
    low = float(source.reward_range[0]) if hasattr(source, "reward_range") else None  # type: ignore[attr-defined]
    if low is not None and gold_return <= low + _SLACK:
        report.skipped.append(f"{case.name!r} seed {seed}: the gold case alone scores the env's minimum "
                              f"{low:g} (a group reward)")
        return
    contract, gold, observation = recorder.turns[-1]
    if contract is None and infer:
        contract, gold = inferred_contract(replies[-1]), None
        report.inferred = True
    if contract is None:
        report.skipped.append(f"{case.name!r}: the env declares no answer_contract")
        return
    gold = _gold_value(contract, gold, replies[-1])
    if gold is None:
        report.skipped.append(f"{case.name!r} seed {seed}: its contract does not read the gold reply "
                              f"{replies[-1][:60]!r}")
        return
    attacks = generate(contract, gold, seed=seed, task=observation, limit=per_seed)
    hook = getattr(source, "attack_replies", None)
    if hook is not None:
        attacks += list(hook(env, observation, random.Random(seed)))
    prefix = list(replies[:-1])
    for attack in attacks:
        got = await _play(source, case, seed, prefix + [attack.reply])
        report.add(attack, got, gold_return, case.name, seed)
        report.records.append({"env": env_label, "case": case.name, "knobs": dict(case.knobs), "seed": seed,
                               "prefix": prefix, "gold_reply": replies[-1], "reply": attack.reply,
                               "credit": attack.credit,
                               "family": attack.family, "variant": attack.variant,
                               "exploitable": attack.exploitable, "gold_return": gold_return, "got": got})


def audit_source(make_source: Callable[[dict[str, Any]], EnvSource], seeds: Sequence[int], *,
                 per_seed: int | None = None, env_label: str = "", keep_records: bool = False,
                 infer_contract: bool = False) -> HackabilityReport:
    """Audit the gold cases of the sources `make_source(case.knobs)` builds on `seeds` (see the
    module docstring); `per_seed` samples at most that many attacks per episode;
    `infer_contract`: audit an env that declares no contract with one inferred from its gold
    reply (`inferred_contract`) instead of skipping it."""
    report = HackabilityReport()
    probe = make_source({})
    cases = [c for c in probe.scripted_cases() if c.kind == "gold"]
    if not cases:
        report.skipped.append("no gold scripted case is declared")

    async def run() -> None:
        for case in cases:
            source = make_source(case.knobs)
            for seed in seeds:
                await _audit_case(source, case, seed, report, per_seed, env_label, infer_contract)

    asyncio.run(run())
    if not keep_records:
        report.records = []
    return report


def replay_records(make_source: Callable[[dict[str, Any]], EnvSource], records: Sequence[dict[str, Any]]
                   ) -> HackabilityReport:
    """Score exported records (`HackabilityReport.records`) against the sources `make_source`
    builds now: the same replies on the same tasks, judged against today's gold return."""
    report = HackabilityReport()
    cache: dict[str, EnvSource] = {}

    async def run() -> None:
        gold_returns: dict[tuple[str, int], float] = {}
        for rec in records:
            key = repr(sorted(rec["knobs"].items()))
            if key not in cache:
                cache[key] = make_source(rec["knobs"])
            source = cache[key]
            case = next((c for c in source.scripted_cases() if c.name == rec["case"]), None)
            if case is None:
                report.skipped.append(f"no case {rec['case']!r}")
                continue
            gkey = (rec["case"], rec["seed"])
            if gkey not in gold_returns:
                recorder = _Recorder(case.reply)
                env = source.make_env(np.random.default_rng(rec["seed"]))
                gold_case = ScriptedCase(case.name, "gold", recorder, case.low, case.high, knobs=case.knobs,
                                         max_turns=case.max_turns)
                trajectory, _ = await aplay_scripted_episode(source, gold_case, env)
                gold_returns[gkey] = float(sum(t.reward for t in trajectory.transitions))
            got = await _play(source, case, rec["seed"], list(rec["prefix"]) + [rec["reply"]])
            attack = Attack(rec["reply"], rec["credit"], rec["family"], rec["variant"], rec["exploitable"])
            report.add(attack, got, gold_returns[gkey], rec["case"], rec["seed"])

    asyncio.run(run())
    return report
