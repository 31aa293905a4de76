"""The generic adversarial audit (`llm_gym.checks.adversarial`) over the native catalog.

Each id's gold answers are rewritten by class — a second answer in five wordings, worked steps
and checks around the answer, degenerate replies built from the prompt — and played through
the env. Ids whose own readers still fail a class are listed in `OPEN` (issue 21) as strict
expected failures, so closing one makes its entry fail until it is removed.
"""

from __future__ import annotations

import importlib

import gymnasium as gym
import pytest

import llm_gym  # noqa: F401 - registers the catalog
from llm_gym import get_renderer, load_tokenizer
from llm_gym.checks.adversarial import ALTERNATIVES, WORKING, _degenerate, _mutate, audit_source
from llm_gym.registration import registered_envs
from tests._fast import sampled

OPEN: dict[str, str] = {}  # id -> the class its reader still fails (issue 21): none today
SLOW_SOURCES = ("envs_catalog.code.", "envs_catalog.tools.", "envs_catalog.textworld.")
TOKENIZER = load_tokenizer()


def _native_ids() -> list:
    ids = []
    for row in registered_envs():
        env_id = row["id"]
        spec = gym.registry.get(env_id)
        if spec is None or not env_id.startswith("llm/"):
            continue
        source = str(spec.kwargs.get("source", ""))
        if not source.startswith("envs_catalog."):
            continue
        marks = [pytest.mark.xfail(strict=True, reason=f"issue 21: {OPEN[env_id]}")] if env_id in OPEN else []
        if source.startswith(SLOW_SOURCES):
            marks.append(pytest.mark.slow)
        ids.append(pytest.param(env_id, marks=marks, id=env_id))
    return ids


def _audit(env_id: str):
    from llm_gym.checks.common import _TEXT_ENV_OPTIONS

    kwargs = dict(gym.registry[env_id].kwargs)
    module, name = str(kwargs.pop("source")).split(":")
    cls = getattr(importlib.import_module(module), name)
    knobs = {k: v for k, v in kwargs.items() if k not in _TEXT_ENV_OPTIONS}
    renderer = get_renderer("chatml", TOKENIZER)
    return audit_source(lambda case_knobs: cls(renderer=renderer, split="train",
                                               **{**knobs, **case_knobs}),
                        [0, 1, 2], answer_form=cls.card.answer_form)


@pytest.mark.parametrize("env_id", sampled(_native_ids(), 12, label=lambda p: p))
def test_no_false_credit_or_denial(env_id):
    report = _audit(env_id)
    if report.runs == 0:  # a group reward (PairwisePreference): one episode cannot show credit
        assert report.skipped and all("group reward" in s for s in report.skipped), report.skipped
        return
    assert not report.skipped, report.skipped
    assert not report.findings, "\n".join(map(str, report.findings[:10]))


def test_the_classes_are_what_they_claim():
    gold, alt = "Answer: 75", "Answer: 76"
    for build in ALTERNATIVES.values():  # every alternative shows both answers
        reply = build(gold, alt)
        assert gold in reply and alt in reply
    for wrap in WORKING.values():  # every working variant keeps the gold answer whole
        assert gold in wrap(gold)
    assert _mutate("Answer: 75") == "Answer: 76" and _mutate("A: knight") != "A: knight"
    junk = _degenerate("<|im_start|>user\nSort these fruits: apple, banana, cherry, apple<|im_end|>")
    assert junk["one word"] == "apple" and junk["empty"] == ""
    assert junk["numbered filler"].startswith("1. ") and "four" not in _degenerate("Connect Four four")["one word"]
    assert "im_start" not in junk["prompt echoed"]
