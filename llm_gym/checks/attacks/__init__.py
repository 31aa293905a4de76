"""The generated attack suite: replies built from parts, each with its verdict by construction.

`parts` (declarations, connectives, bounds, prose, disguises), `writers` (how each contract kind's
values can be written), `suite.generate(contract, gold)` (the composed replies) and
`audit.audit_source(make_source, seeds)` (played through an env's real episodes, tallied as
false-credit and false-denial rates per family). `llm-gym check`'s `adversarial` row and the
catalog's hackability column run it; `python -m llm_gym.checks.attacks llm/Math-v0` prints one
env's report.
"""

from llm_gym.checks.attacks.audit import HackabilityReport, audit_source, replay_records
from llm_gym.checks.attacks.suite import Attack, generate

__all__ = ["Attack", "HackabilityReport", "audit_source", "generate", "replay_records"]
