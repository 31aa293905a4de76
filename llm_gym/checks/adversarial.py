"""`llm-gym check`'s `adversarial` row: the generated attack suite, played through the env.

The row runs `llm_gym.checks.attacks.audit_source` on the env's gold scripted cases (a few seeds,
a sample of the suite per task): replies built from parts with the verdict each must get under the
one answer policy -- natural forms of the gold answer (credit), other values, a second declared
value, a second value in the declared slot, bounds, scales and units, doubts, disguises and junk
(no credit). It reports the false-credit and false-denial rates and the exploitable families that
paid (a false credit a policy that does not know the answer could learn).

- An env that declares its answer contract (`env.answer_contract`, as every catalog env does)
  fails the row on any exploitable false credit or a false-credit or false-denial rate above
  `MAX_RATE` (0.5%).
- An env without one (a bridged library's env, an older third-party env) is audited with a
  contract inferred from its gold reply (a number, else the reply's exact text) and fails only
  on exploitable false credits: its own reader may be stricter about forms than the policy, so
  its rates are reported, not judged.
- A card whose `known_hackable` is set gets that statement printed with the row.
"""

from __future__ import annotations

from typing import Any, Sequence

from llm_gym.checks.attacks.audit import audit_source
from llm_gym.checks.common import CheckRow, _Target

__all__ = ["MAX_RATE", "PER_SEED"]

MAX_RATE = 0.005
PER_SEED = 160  # attack replies sampled per task: seeds x cases x PER_SEED replies in all


def _check_adversarial(target: _Target, env: Any, seeds: Sequence[int]) -> CheckRow:
    source = env.unwrapped.source
    cls, renderer = type(source), source.renderer
    report = audit_source(lambda knobs: cls(renderer=renderer, split="train", **{**target.knobs, **knobs}),
                          list(seeds)[:3], per_seed=PER_SEED, infer_contract=True)
    hackable = getattr(source.card, "known_hackable", "")
    data: dict[str, Any] = {**report.summary(), "inferred_contract": report.inferred,
                            "known_hackable": hackable}
    note = f"; known hackable: {hackable}" if hackable else ""
    if not report.runs:
        reason = "; ".join(report.skipped[:2]) or "no gold case declared"
        return CheckRow("adversarial", "skip", f"no generated reply could be played: {reason}{note}", data)
    rates = (f"{report.runs} generated replies: {report.false_credits} false credits "
             f"({100 * report.false_credit_rate:.2f}%), {report.false_denials} false denials "
             f"({100 * report.false_denial_rate:.2f}%)")
    if report.inferred:
        rates += " (contract inferred from the gold reply)"
    if report.exploitable_credits:
        families = ", ".join(report.exploitable_families) or "?"
        return CheckRow("adversarial", "fail", f"{rates}; {report.exploitable_credits} exploitable "
                        f"({families}): {report.findings[0]}{note}", data)
    judged = not report.inferred and (report.false_credit_rate > MAX_RATE or report.false_denial_rate > MAX_RATE)
    if judged:
        return CheckRow("adversarial", "fail", f"{rates}, over {100 * MAX_RATE:g}%: {report.findings[0]}{note}", data)
    return CheckRow("adversarial", "pass", rates + note, data)
