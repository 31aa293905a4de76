"""`python -m llm_gym.checks.attacks ID [--seeds N] [--per-seed K] [--json]`: one env's audit."""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m llm_gym.checks.attacks",
                                     description="Run the generated attack suite on one registered id.")
    parser.add_argument("env_id")
    parser.add_argument("--seeds", type=int, default=3, help="tasks per gold case (default 3)")
    parser.add_argument("--per-seed", type=int, default=None, help="at most this many replies per task")
    parser.add_argument("--json", action="store_true", help="print the whole report as JSON")
    args = parser.parse_args(argv)
    from llm_gym.checks.attacks.audit import audit_source
    from llm_gym.checks.common import _resolve_target
    import gymnasium as gym

    target = _resolve_target(args.env_id)
    env = gym.make(args.env_id)
    source = env.unwrapped.source  # type: ignore[attr-defined]
    cls, renderer = type(source), source.renderer
    report = audit_source(lambda knobs: cls(renderer=renderer, split="train", **{**target.knobs, **knobs}),
                          list(range(args.seeds)), per_seed=args.per_seed)
    if args.json:
        print(json.dumps(report.summary(), indent=2))
        return 0
    print(f"{args.env_id}: {report.runs} replies, {report.false_credits} false credits "
          f"({100 * report.false_credit_rate:.2f}%), {report.false_denials} false denials "
          f"({100 * report.false_denial_rate:.2f}%), {report.exploitable_credits} exploitable")
    for name, fam in sorted(report.families.items()):
        if fam.false_credits or fam.false_denials:
            print(f"  {name}: {fam.false_credits} FC, {fam.false_denials} FD of {fam.runs}")
    for line in report.findings[:25]:
        print("  -", line)
    for line in report.skipped[:5]:
        print("  skipped:", line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
