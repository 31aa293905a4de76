"""The `card` row: every `EnvCard` field filled in, the id matching the registered one, the
documented difficulty knobs equal to the knobs the constructor takes, `reward_range` ordered
(on the card and the source), and `example_episode` well-formed chat messages (user first,
assistant last, as many assistant turns as `multi_turn` says).
"""

from __future__ import annotations

import inspect
import re
import sys
from typing import Any

from llm_gym.checks.common import _TEXT_ENV_OPTIONS, CheckRow, _one_line, _Target, _where


def _constructor_knobs(source_cls: type, registered: dict[str, Any]) -> set[str]:
    """Knobs the constructor takes: the keyword parameters with defaults of the nearest
    `__init__` in the class's MRO (options a base class takes through `**knobs` are the base's
    to document; parameters without a default are wiring the spec supplies, like a bridge's
    dataset name), the keys of a `DEFAULTS` dict (the catalog's convention:
    `own = {k: knobs.pop(k, v) for k, v in DEFAULTS.items()}`) on the class or its module, and the
    knobs the spec registers (minus that wiring)."""
    knobs: set[str] = set()
    required: set[str] = set()
    for klass in source_cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        if klass.__name__ != "EnvSource":
            try:
                params = list(inspect.signature(init).parameters.values())
            except (TypeError, ValueError):
                params = []
            for p in params:
                if p.kind not in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) or p.name in (
                        "self", "renderer", "split"):
                    continue
                (required if p.default is p.empty else knobs).add(p.name)
        break
    knobs |= {k for k in registered if k not in required}
    defaults = getattr(source_cls, "DEFAULTS", None)
    if not isinstance(defaults, dict):
        defaults = getattr(sys.modules.get(source_cls.__module__), "DEFAULTS", None)
    if isinstance(defaults, dict):
        knobs |= {str(k) for k in defaults}
    return knobs


class _Probe:
    """A knob value no validator accepts (so constructing with it only tells whether the name is
    known)."""

    def __repr__(self) -> str:
        return "<probe>"


def _accepts_knob(source_cls: type, renderer: Any, knob: str) -> bool:
    try:
        source_cls(renderer=renderer, **{knob: _Probe()})
    except TypeError as exc:
        return f"unexpected keyword argument {knob!r}" not in str(exc)
    except Exception:
        return True
    return True


_ROLES = {"system", "user", "assistant", "tool"}


def _card_problems(env_id: str, source: Any, target: _Target) -> list[str]:
    from llm_gym.env_source import EnvCard

    card = getattr(source, "card", None)
    if not isinstance(card, EnvCard):
        return [f"{type(source).__name__}.card is {type(card).__name__}, not an EnvCard"]
    problems: list[str] = []
    if card.id != env_id:
        problems.append(f"card.id {card.id!r} != the registered id {env_id!r}")
    if not re.fullmatch(r"[\w.\-]+/[\w.\-]+", card.id or "") or (
            card.id.startswith("llm/") and not re.fullmatch(r"llm/[\w.\-]+-v\d+", card.id)):
        problems.append(f"card.id {card.id!r} is not 'namespace/Name-vN'")
    for name in ("family", "description", "reward_meaning", "data_source", "license"):
        value = getattr(card, name)
        if not isinstance(value, str) or not value.strip():
            problems.append(f"card.{name} is empty")
    if isinstance(card.description, str) and 0 < len(card.description.strip()) <= 50:
        problems.append("card.description is not a paragraph (50 characters or fewer)")
    if not isinstance(card.multi_turn, bool):
        problems.append(f"card.multi_turn must be a bool, got {card.multi_turn!r}")
    try:
        lo, hi = (float(x) for x in card.reward_range)
        if not lo < hi:  # NaN fails too; infinite bounds are allowed (a wrapped env's unknown range)
            problems.append(f"card.reward_range {card.reward_range!r} is not (low, high), low < high")
    except Exception:
        problems.append(f"card.reward_range {card.reward_range!r} is not a pair of numbers")
    try:
        slo, shi = (float(x) for x in source.reward_range)
        if not slo <= shi:
            problems.append(f"the source's reward_range {source.reward_range!r} is not ordered")
    except Exception:
        problems.append(f"the source's reward_range {getattr(source, 'reward_range', None)!r} "
                        "is not a pair of numbers")
    knob_docs = card.difficulty_knobs
    if not isinstance(knob_docs, dict):
        problems.append("card.difficulty_knobs must be a dict {knob: 'what it does (default X)'}")
        knob_docs = {}
    for knob, doc in knob_docs.items():
        if not isinstance(doc, str) or not doc.strip():
            problems.append(f"card.difficulty_knobs[{knob!r}] has no description")
    # Knobs documented = knobs the constructor takes.
    cls = type(source)
    documented = set(knob_docs)
    accepted = _constructor_knobs(
        cls, {k: v for k, v in target.registered.items() if k not in _TEXT_ENV_OPTIONS})
    undocumented = sorted(accepted - documented)
    if undocumented:
        problems.append(f"constructor knobs missing from card.difficulty_knobs: {undocumented}")
    refused = sorted(k for k in documented - accepted
                     if not _accepts_knob(cls, source.renderer, k))
    if refused:
        problems.append(f"card.difficulty_knobs documents knobs the constructor refuses: {refused}")
    # The example episode: well-formed chat messages, user first, assistant last.
    episode = card.example_episode
    if not isinstance(episode, list) or not episode:
        problems.append("card.example_episode is empty (a real short episode as chat messages)")
    else:
        bad = [i for i, m in enumerate(episode)
               if not isinstance(m, dict) or m.get("role") not in _ROLES
               or not isinstance(m.get("content"), str) or not m["content"].strip()]
        if bad:
            problems.append(f"card.example_episode[{bad[0]}] is not a {{'role', 'content'}} message "
                            f"with a role in {sorted(_ROLES)} and non-empty text")
        else:
            roles = [m["role"] for m in episode if m["role"] != "system"]
            if not roles or roles[0] != "user" or roles[-1] != "assistant":
                problems.append("card.example_episode must start with a user turn and end with an "
                                f"assistant turn, got roles {roles}")
            elif isinstance(card.multi_turn, bool) and card.multi_turn != (roles.count("assistant") > 1):
                problems.append(
                    f"card.multi_turn is {card.multi_turn} but example_episode has "
                    f"{roles.count('assistant')} assistant turn(s): show a "
                    f"{'multi' if card.multi_turn else 'single'}-turn episode")
    return problems


def _check_card(target: _Target, env) -> CheckRow:
    source = env.unwrapped.source
    try:
        problems = _card_problems(target.env_id, source, target)
    except Exception as exc:
        return CheckRow("card", "fail", f"reading the card raised {_one_line(exc)}{_where(exc)}")
    if problems:
        return CheckRow("card", "fail", f"{problems[0]}" + (
            f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""), {"problems": problems})
    return CheckRow("card", "pass", "all fields filled in; knobs match the constructor",
                    {"knobs": sorted(source.card.difficulty_knobs)})
