"""The `scripted` row: the source's `scripted_cases()` (`llm_gym.scripted.ScriptedCase`) score
inside their declared ranges on several seeds, both splits and both built-in renderers; at least
one gold case is required unless the source says why none can exist (`no_gold_reason()`, a skip).
"""

from __future__ import annotations

from typing import Sequence

from llm_gym.checks.common import CheckRow, _one_line, _Target, _where

_RENDERERS = ("chatml", "role_colon")
_DOCS_HINT = "see docs/writing-an-env.md"


def _check_scripted(target: _Target, env, seeds: Sequence[int]) -> CheckRow:
    from llm_gym.renderers import get_renderer
    from llm_gym.scripted import ScriptedCase, run_scripted_case

    source = env.unwrapped.source
    cls = type(source)
    how = (f"declare them: {cls.__name__}.scripted_cases() returning "
           "llm_gym.scripted.ScriptedCase(name, 'gold', reply, low, high) for the reference "
           f"answer or a solver, plus adversarial ones ({_DOCS_HINT})")
    try:
        cases = list(source.scripted_cases())
    except Exception as exc:
        return CheckRow("scripted", "fail", f"scripted_cases() raised {_one_line(exc)}{_where(exc)}")
    not_cases = [c for c in cases if not isinstance(c, ScriptedCase)]
    if not_cases:
        return CheckRow("scripted", "fail", f"scripted_cases() returned a "
                        f"{type(not_cases[0]).__name__}, not a llm_gym.scripted.ScriptedCase")
    gold = [c for c in cases if c.kind == "gold"]
    if not gold and (reason := source.no_gold_reason()):
        return CheckRow("scripted", "skip", f"no gold case can exist: {reason}"
                        + (f" ({len(cases)} adversarial cases not run alone)" if cases else ""),
                        {"cases": len(cases)})
    if not gold:
        detail = "no scripted cases" if not cases else f"{len(cases)} cases but no gold case"
        return CheckRow("scripted", "fail", f"{detail}: {how}", {"cases": len(cases)})
    tokenizer = env.unwrapped.tokenizer
    failures: list[str] = []
    runs = 0
    for renderer_name in _RENDERERS:
        renderer = get_renderer(renderer_name, tokenizer)
        for split in ("train", "test"):
            for case in cases:
                try:
                    case_src = cls(renderer=renderer, split=split,
                                   **{**target.knobs, **case.knobs})
                except Exception as exc:
                    failures.append(f"{case.name!r} ({renderer_name}, {split}): building the "
                                    f"source raised {_one_line(exc)}")
                    continue
                for seed in seeds:
                    runs += 1
                    try:
                        outcome = run_scripted_case(case_src, case, seed)
                    except Exception as exc:
                        failures.append(f"{case.name!r} ({renderer_name}, {split}, seed {seed}) "
                                        f"raised {_one_line(exc)}{_where(exc)}")
                        continue
                    if not outcome.ok:
                        failures.append(
                            f"{case.kind} case {case.name!r} scored {outcome.episode_return:g}, "
                            f"declared [{case.low:g}, {case.high:g}] ({renderer_name}, {split}, "
                            f"seed {seed})")
    data = {"cases": len(cases), "gold": len(gold), "runs": runs, "failures": failures[:20]}
    if failures:
        return CheckRow("scripted", "fail",
                        f"{len(failures)}/{runs} runs off: {failures[0]}", data)
    return CheckRow("scripted", "pass",
                    f"{len(cases)} cases ({len(gold)} gold) x {len(seeds)} seeds x 2 splits x "
                    f"{len(_RENDERERS)} renderers score as declared", data)
