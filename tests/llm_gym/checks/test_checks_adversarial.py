"""`llm-gym check`'s `adversarial` row (`llm_gym.checks.adversarial`): the generated attack suite
played through every native id, and the row's verdicts.

Every native id declares its answer contract and must pass the row: no exploitable false credit,
false-credit and false-denial rates at most 0.5% on the generated replies. A third-party env
without a contract is audited with one inferred from its gold reply and fails only on
exploitable false credits; a card's `known_hackable` statement is printed with the row.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import llm_gym  # noqa: F401 - registers the catalog
from llm_gym.checks import check_env_id
from llm_gym.checks.adversarial import MAX_RATE
from llm_gym.checks.attacks.audit import inferred_contract
from llm_gym.env_source import EnvCard, EnvSource
from llm_gym.grading import ExactTextAnswer, NumberAnswer, grade_numeric
from llm_gym.registration import register_env, registered_envs
from llm_gym.rl import ProblemEnv
from llm_gym.scripted import ScriptedCase
from tests._fast import sampled

SLOW_SOURCES = ("envs_catalog.code.", "envs_catalog.tools.", "envs_catalog.textworld.")


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
        marks = [pytest.mark.slow] if source.startswith(SLOW_SOURCES) else []
        ids.append(pytest.param(env_id, marks=marks, id=env_id))
    return ids


# The row on a sample of native ids (every id's suite is re-measured against the committed
# hackability numbers by tests/envs_catalog/test_hackability.py, which CI runs in full).
_SAMPLE = [p for p in sampled(_native_ids(), 6, label=lambda p: p) if not p.marks][:6]


@pytest.mark.parametrize("env_id", _SAMPLE)
def test_native_ids_pass_the_generated_suite(env_id):
    (row,) = check_env_id(env_id, only=["adversarial"], seeds=2)
    data = row.data
    if row.status == "skip":  # a reward only a group gives: one episode cannot show credit
        assert any("group reward" in s for s in data["skipped"]), row.detail
        return
    assert row.status == "pass", row.detail
    assert not data["inferred_contract"], "a native id must declare its answer contract"
    assert data["runs"] >= 100 and data["exploitable_credits"] == 0
    assert data["false_credit_rate"] <= MAX_RATE and data["false_denial_rate"] <= MAX_RATE


# --- the row's verdicts on test-only sources -----------------------------------------------------
class _Env(ProblemEnv):
    def __init__(self, renderer, answer: int, lenient: bool, contract: bool) -> None:
        super().__init__(renderer)
        self.answer, self.lenient = answer, lenient
        if contract:
            self.answer_contract = NumberAnswer()
            self.gold_answer = answer

    def get_question(self) -> str:
        return f"Repeat the number {self.answer}."

    def check_format(self, sample_str: str) -> bool:
        return True

    def check_answer(self, sample_str: str) -> bool:
        if self.lenient:  # an old-style reader: any mention of the number pays
            return str(self.answer) in sample_str
        return grade_numeric(sample_str, self.answer).correct

    def get_reference_answer(self) -> str:
        return str(self.answer)


def _card(env_id: str, hackable: str = "") -> EnvCard:
    return EnvCard(id=env_id, family="math", description="Repeat a number; a test-only source.",
                   multi_turn=False, reward_range=(-0.1, 1.0), reward_meaning="1 for the number",
                   difficulty_knobs={}, data_source="generated", license="Apache-2.0",
                   example_episode=[{"role": "user", "content": "Repeat the number 7."},
                                    {"role": "assistant", "content": "7"}], known_hackable=hackable)


class StrictSource(EnvSource):
    card = _card("test/AdvStrict-v0")
    lenient, contract = False, True

    def make_env(self, rng: np.random.Generator) -> _Env:
        return _Env(self.renderer, int(rng.integers(10, 1000)), self.lenient, self.contract)

    def scripted_cases(self) -> list[ScriptedCase]:
        return [ScriptedCase("the number", "gold", lambda env, ob: str(env.answer), 1.0, 1.0)]


class LenientSource(StrictSource):
    card = _card("test/AdvLenient-v0")
    lenient = True


class NoContractSource(StrictSource):
    card = _card("test/AdvNoContract-v0")
    lenient, contract = True, False


class NoContractStrictSource(StrictSource):
    card = _card("test/AdvNoContractStrict-v0")
    contract = False


class HackableSource(StrictSource):
    card = _card("test/AdvHackable-v0", hackable="judge swayed by flattery (3%)")


def _row(env_id: str, cls: type[EnvSource]):
    register_env(env_id, f"{__name__}:{cls.__name__}")
    (row,) = check_env_id(env_id, only=["adversarial"], seeds=1)
    return row


def test_a_strict_reader_with_a_contract_passes():
    row = _row("test/AdvStrict-v0", StrictSource)
    assert row.status == "pass" and row.data["runs"] >= 100 and "0 false credits" in row.detail


def test_a_lenient_reader_fails_on_exploitable_credit():
    row = _row("test/AdvLenient-v0", LenientSource)
    assert row.status == "fail" and row.data["exploitable_credits"] > 0, row.detail
    assert "exploitable" in row.detail


def test_an_env_without_a_contract_is_audited_with_an_inferred_one():
    row = _row("test/AdvNoContract-v0", NoContractSource)
    assert row.data["inferred_contract"] and "inferred" in row.detail
    assert row.status == "fail"  # the lenient reader pays "75 or 76": exploitable either way
    strict = _row("test/AdvNoContractStrict-v0", NoContractStrictSource)
    assert strict.status == "pass", strict.detail


def test_known_hackable_is_printed():
    row = _row("test/AdvHackable-v0", HackableSource)
    assert "known hackable: judge swayed by flattery (3%)" in row.detail


def test_inferred_contracts():
    assert isinstance(inferred_contract("75"), NumberAnswer)
    assert isinstance(inferred_contract("\\boxed{3/4}"), NumberAnswer)
    assert isinstance(inferred_contract("melon\n32"), ExactTextAnswer)
