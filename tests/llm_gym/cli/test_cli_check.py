"""`llm-gym check`: real ids pass; deliberately broken third-party-style sources (registered
in-process, outside the llm/ namespace so the registry-wide tests never see them) fail exactly the
row that covers their defect, with exit status 1; the --json schema; an unknown id's one line."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from typing import Any

import numpy as np
import pytest

import llm_gym
from llm_gym import cli
from llm_gym.checks import CHECK_NAMES, check_env_id
from llm_gym.cli.check import check_main
from llm_gym.env_source import EnvCard, EnvSource
from llm_gym.grading import extract_single_integer, grade_numeric
from llm_gym.renderers import Message
from llm_gym.rl import ProblemEnv
from llm_gym.rl import EnvFromMessageEnv, MessageEnv, MessageStepResult
from llm_gym.scripted import ScriptedCase

# ---------------------------------------------------------------------------------------------
# A small clean source ("repeat the number N"), and broken variants of it, one defect each.


class EchoEnv(ProblemEnv):
    def __init__(self, renderer, n: int, *, bonus: float = 0.0, hang: bool = False) -> None:
        super().__init__(renderer, format_coef=0.1)
        self.answer, self.bonus, self.hang = n, bonus, hang

    def get_question(self) -> str:
        return f"Repeat the number {self.answer}. Reply with just the number."

    def check_format(self, sample_str: str) -> bool:
        return grade_numeric(sample_str, self.answer).format_ok

    def check_answer(self, sample_str: str) -> bool:
        return grade_numeric(sample_str, self.answer).correct

    def get_reference_answer(self) -> str:
        return str(self.answer)

    async def step(self, action, *, extra=None):
        while self.hang:  # an env bug: a step that never returns
            time.sleep(0.01)
        result = await super().step(action, extra=extra)
        if self.bonus and len(action) > 100:  # long replies get a reward beyond the range
            result.reward += self.bonus
        return result


def _card(env_id: str, **changes: Any) -> EnvCard:
    card = EnvCard(
        id=env_id, family="math",
        description="Repeat a number drawn from the seed; a test-only source for llm-gym check.",
        multi_turn=False, reward_range=(-0.1, 1.0),
        reward_meaning="1 for the number, 0 for another number, -0.1 for no single number",
        difficulty_knobs={"high": "numbers are drawn from 0..high-1, 10-10000 (default 1000)"},
        data_source="generated from the seed", license="Apache-2.0",
        example_episode=[{"role": "user", "content": "Repeat the number 7."},
                         {"role": "assistant", "content": "7"}],
    )
    return dataclasses.replace(card, **changes)


def _gold() -> list[ScriptedCase]:
    return [
        ScriptedCase("the number", "gold", lambda env, ob: str(env.answer), 1.0, 1.0),
        ScriptedCase("another number", "adversarial", lambda env, ob: str(env.answer + 1), -1.0, 0.0),
    ]


class EchoSource(EnvSource):
    card = _card("test/CheckEcho-v0")
    salt = 0
    bonus = 0.0
    hang = False

    def __init__(self, *, renderer, split="train", high: int = 1000, **knobs) -> None:
        super().__init__(renderer=renderer, split=split, **knobs)
        if not isinstance(high, int) or not 10 <= high <= 10_000:
            raise ValueError(f"high must be an int in [10, 10000], got {high!r}")
        self.high = high

    def make_env(self, rng: np.random.Generator) -> EchoEnv:
        while True:
            n = (int(rng.integers(self.high)) + self.salt) % self.high
            if (n % 10 == 0) == (self.split == "test"):  # test: multiples of 10
                return EchoEnv(self.renderer, n, bonus=self.bonus, hang=self.hang)

    def scripted_cases(self) -> list[ScriptedCase]:
        return _gold()


class NondeterministicSource(EchoSource):
    """The task depends on something other than the rng: the process id."""

    card = _card("test/CheckNondeterministic-v0")
    salt = os.getpid()


class IncompleteCardSource(EchoSource):
    card = _card("test/CheckIncompleteCard-v0", description="", license="",
                 difficulty_knobs={}, example_episode=[])


class WrongIdCardSource(EchoSource):
    card = _card("test/SomethingElse-v0", reward_range=(1.0, 0.0))


class FailingGoldSource(EchoSource):
    card = _card("test/CheckFailingGold-v0")

    def scripted_cases(self) -> list[ScriptedCase]:
        return [ScriptedCase("off by one", "gold", lambda env, ob: str(env.answer + 1), 1.0, 1.0)]


class NoCasesSource(EchoSource):
    card = _card("test/CheckNoCases-v0")

    def scripted_cases(self) -> list[ScriptedCase]:
        return []


class NoGoldPossibleSource(EchoSource):
    """A bridge-like source: no reference answers or solver exist upstream, and it says why."""

    card = _card("test/CheckNoGoldPossible-v0")

    def scripted_cases(self) -> list[ScriptedCase]:
        return []

    def no_gold_reason(self) -> str | None:
        return "the upstream library ships no solver"


class PrintingSource(EchoSource):
    """Writes progress to stdout, as some bridged libraries do, from Python and at the fd."""

    card = _card("test/CheckPrinting-v0")

    def make_env(self, rng: np.random.Generator) -> EchoEnv:
        print("building a task...")
        os.write(1, b"...")
        return super().make_env(rng)


class OutOfRangeSource(EchoSource):
    card = _card("test/CheckOutOfRange-v0")
    bonus = 5.0


class HangingSource(EchoSource):
    card = _card("test/CheckHanging-v0")
    hang = True


class LeakySplitSource(EchoSource):
    """split="test" draws from the same numbers as "train"."""

    card = _card("test/CheckLeakySplit-v0")

    def make_env(self, rng: np.random.Generator) -> EchoEnv:
        return EchoEnv(self.renderer, int(rng.integers(self.high)))


class SharedPoolSource(EchoSource):
    """Train and test are the same small pool (10 numbers): a leak a sample always shows."""

    card = _card("test/CheckSharedPool-v0")

    def make_env(self, rng: np.random.Generator) -> EchoEnv:
        return EchoEnv(self.renderer, int(rng.integers(10)))


class SmallDisjointSource(EchoSource):
    """As small a task space, split by parity: one pool would share many numbers, these none."""

    card = _card("test/CheckSmallDisjoint-v0")

    def make_env(self, rng: np.random.Generator) -> EchoEnv:
        return EchoEnv(self.renderer, 2 * int(rng.integers(5)) + (self.split == "test"))


class _HiddenNumber(MessageEnv):
    """A game whose opening is the same for every seed: the secret shows only in the answers."""

    def __init__(self, secret: int) -> None:
        self.secret, self.turns = secret, 0
        self.messages = [Message(role="user", content="I picked a number from 0 to 19. Guess it; "
                                 "I say higher or lower. Reply with just the number.")]

    async def initial_observation(self) -> list[Message]:
        return list(self.messages)

    async def step(self, message: Message) -> MessageStepResult:
        self.turns += 1
        text = str(message["content"]).strip()
        guess = extract_single_integer(text)[0]  # the library's reader: a final answer, no hedge
        guess = -1 if guess is None else guess
        done = guess == self.secret or self.turns >= 5
        reward = 1.0 if guess == self.secret else 0.0
        reply = "right" if guess == self.secret else ("higher" if guess < self.secret else "lower")
        self.messages += [message, Message(role="user", content=reply)]
        return MessageStepResult(reward, done, list(self.messages))


def _bisect(env, text: str) -> str:
    """The gold policy: bisection on the answers so far (the game's own transcript)."""
    low, high = 0, 19
    messages = env.message_env.messages
    for guess, answer in zip(messages[1::2], messages[2::2]):
        if answer["content"] == "higher":
            low = int(guess["content"]) + 1
        elif answer["content"] == "lower":
            high = int(guess["content"]) - 1
    return str((low + high) // 2)


class HiddenNumberSource(EnvSource):
    card = _card("test/CheckHiddenNumber-v0", multi_turn=True, reward_range=(-1.0, 1.0),
                 family="games", reward_meaning="1 when the number is guessed within 5 turns, "
                 "-1 for a reply that does not parse",
                 difficulty_knobs={},
                 example_episode=[{"role": "user", "content": "I picked a number."},
                                  {"role": "assistant", "content": "10"},
                                  {"role": "user", "content": "lower"},
                                  {"role": "assistant", "content": "4"}])
    max_context_tokens = 4096
    salt = 0

    def make_env(self, rng: np.random.Generator) -> EnvFromMessageEnv:
        secret = 2 * int(rng.integers(10)) + (self.split == "test")  # test: odd numbers
        return EnvFromMessageEnv(self.renderer, _HiddenNumber((secret + self.salt) % 20))

    def scripted_cases(self) -> list[ScriptedCase]:
        return [ScriptedCase("bisection", "gold", _bisect, 1.0, 1.0),
                ScriptedCase("always 0", "adversarial", lambda env, ob: "0", 0.0, 1.0)]


class HiddenNondeterministicSource(HiddenNumberSource):
    """The same opening for every seed and in every process; the secret depends on the pid."""

    card = dataclasses.replace(HiddenNumberSource.card, id="test/CheckHiddenNondeterministic-v0")
    salt = os.getpid()


class ClosureTaskSource(EchoSource):
    """The task lives in a closure the check cannot read: the split cannot be told apart."""

    card = _card("test/CheckClosureTask-v0")

    def make_env(self, rng: np.random.Generator) -> EchoEnv:
        env = EchoEnv(self.renderer, 7)
        n = int(rng.integers(10))
        env.get_question = lambda: f"Repeat the number {n}."  # noqa: E731 - hidden on purpose
        env.answer = 7
        return env


class DeclaredLeakSource(EchoSource):
    """Distinct prompts on the two splits, but the declared task key says they are one pool."""

    card = _card("test/CheckDeclaredLeak-v0")

    def make_env(self, rng: np.random.Generator) -> EchoEnv:
        env = EchoEnv(self.renderer, int(rng.integers(10)))
        env.style = self.split  # a cosmetic difference that a raw state key would count
        return env

    def task_key(self, env: EchoEnv) -> int:
        return env.answer


_SOURCES = {cls.card.id: cls for cls in (
    SharedPoolSource, SmallDisjointSource, HiddenNumberSource, HiddenNondeterministicSource,
    ClosureTaskSource, DeclaredLeakSource,
    EchoSource, NondeterministicSource, IncompleteCardSource, FailingGoldSource, NoCasesSource,
    NoGoldPossibleSource, PrintingSource, OutOfRangeSource, LeakySplitSource, HangingSource)}
_SOURCES["test/CheckWrongIdCard-v0"] = WrongIdCardSource


@pytest.fixture(autouse=True, scope="module")
def _registered():
    """The broken ids exist only while this module's tests run (so `llm-gym list` elsewhere in
    the session never sees them)."""
    import gymnasium as gym

    for env_id, cls in _SOURCES.items():
        llm_gym.register_env(env_id, f"{__name__}:{cls.__name__}")
    yield
    for env_id in _SOURCES:
        gym.registry.pop(env_id, None)


def rows_of(env_id: str, **kwargs) -> dict[str, Any]:
    return {row.name: row for row in check_env_id(env_id, **kwargs)}


# ---------------------------------------------------------------------------------------------


def test_the_commands_are_registered():
    assert cli.COMMANDS["check"] == "llm_gym.cli.check:check_main"
    assert cli.COMMANDS["new"] == "llm_gym.cli.new:new_main"
    assert "check" in cli.SUMMARIES and "new" in cli.SUMMARIES


@pytest.mark.parametrize("env_id", ["llm/Math-v0", "llm/MathMulti-v0"])
def test_real_ids_pass(env_id, capsys):
    assert check_main([env_id]) == 0
    out = capsys.readouterr().out
    for name in CHECK_NAMES:
        assert f"  {name}" in out
    assert "=> ok" in out and "fail" not in out


def test_the_clean_test_source_passes_every_check():
    rows = rows_of("test/CheckEcho-v0")
    assert list(rows) == list(CHECK_NAMES)
    assert {name: row.status for name, row in rows.items() if row.status == "fail"} == {}


def test_nondeterminism_across_processes_fails_determinism():
    rows = rows_of("test/CheckNondeterministic-v0", only=["determinism", "check_env"])
    assert rows["check_env"].status == "pass"  # within one process it is consistent
    assert rows["determinism"].status == "fail"
    assert "two processes disagree on 16 of 16 episodes" in rows["determinism"].detail


def test_an_incomplete_card_fails_card():
    row = rows_of("test/CheckIncompleteCard-v0", only=["card"])["card"]
    assert row.status == "fail"
    problems = " ".join(row.data["problems"])
    for what in ("card.description is empty", "card.license is empty", "example_episode is empty",
                 "missing from card.difficulty_knobs: ['high']"):
        assert what in problems


def test_a_wrong_id_and_an_unordered_range_fail_card():
    problems = " ".join(rows_of("test/CheckWrongIdCard-v0", only=["card"])["card"].data["problems"])
    assert "!= the registered id 'test/CheckWrongIdCard-v0'" in problems
    assert "reward_range" in problems


def test_a_failing_gold_case_fails_scripted():
    row = rows_of("test/CheckFailingGold-v0", only=["scripted"])["scripted"]
    assert row.status == "fail"
    assert "gold case 'off by one' scored 0" in row.detail
    assert row.data["runs"] == 2 * 2 * 3  # renderers x splits x seeds


def test_no_cases_fails_scripted_saying_how_to_declare_them():
    row = rows_of("test/CheckNoCases-v0", only=["scripted"])["scripted"]
    assert row.status == "fail"
    assert "scripted_cases()" in row.detail and "ScriptedCase" in row.detail
    assert "'gold'" in row.detail


def test_a_source_that_says_why_no_gold_case_can_exist_skips_scripted_with_the_reason():
    rows = rows_of("test/CheckNoGoldPossible-v0", only=["scripted", "adversarial"])
    assert rows["scripted"].status == "skip"
    assert "no gold case can exist: the upstream library ships no solver" in rows["scripted"].detail
    assert rows["adversarial"].status == "skip"
    # without a reason the same empty list is a failure (test_no_cases_fails_scripted_...)
    assert rows_of("test/CheckNoCases-v0", only=["scripted"])["scripted"].status == "fail"


def test_json_output_is_only_json_when_an_env_prints(capfd):
    assert check_main(["test/CheckPrinting-v0", "--json", "--only", "card,scripted",
                       "--seeds", "1"]) == 0
    out, err = capfd.readouterr()
    report = json.loads(out)
    assert report["ok"] is True and report["results"][0]["env_id"] == "test/CheckPrinting-v0"
    assert "building a task..." in err and "..." in err


def test_a_reward_outside_the_range_fails_fuzz():
    rows = rows_of("test/CheckOutOfRange-v0", only=["fuzz", "context"])
    assert rows["fuzz"].status == "fail"
    assert "outside reward_range" in rows["fuzz"].detail
    assert rows["context"].data["max_observation_tokens"] > 0


def test_a_leaky_split_fails_split():
    row = rows_of("test/CheckLeakySplit-v0", only=["split"])["split"]
    assert row.status == "fail" and "appear in both splits" in row.detail
    assert row.data["overlap"] > 0


def test_the_exit_status_is_1_when_a_row_fails_and_json_has_the_schema(capsys):
    assert check_main(["test/CheckFailingGold-v0", "test/CheckEcho-v0", "--json",
                       "--only", "scripted,card", "--seeds", "2"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert set(report) == {"ok", "results"} and report["ok"] is False
    assert [r["env_id"] for r in report["results"]] == ["test/CheckFailingGold-v0",
                                                         "test/CheckEcho-v0"]
    for result in report["results"]:
        # The schema's keys only: no reported duration is read here (speed lives in benchmarks/).
        assert set(result) == {"env_id", "kwargs", "ok", "checks", "seconds"}
        assert result["kwargs"] == {}
        assert [c["name"] for c in result["checks"]] == ["card", "scripted"]
        for check in result["checks"]:
            assert set(check) == {"name", "status", "detail", "data", "seconds"}
            assert isinstance(check["data"], dict)
            assert check["status"] in ("pass", "fail", "skip") and check["detail"]
    assert [r["ok"] for r in report["results"]] == [False, True]
    assert report["results"][0]["checks"][1]["data"]["runs"] == 2 * 2 * 2


def test_a_hanging_step_fails_its_row_within_the_time_limit():
    rows = rows_of("test/CheckHanging-v0", only=["fuzz", "card"], timeout_s=1.0)
    assert rows["fuzz"].status == "fail" and "ran past its time limit of 1 s" in rows["fuzz"].detail
    assert rows["card"].status == "pass"  # the other checks still run


def test_throughput_is_reported_never_judged():
    row = rows_of("test/CheckEcho-v0", only=["throughput"])["throughput"]
    assert row.status == "pass"
    assert row.data["episodes"] >= 1 and row.data["steps_per_s"] > 0


def test_an_unknown_id_is_one_line_with_did_you_mean(capsys):
    assert check_main(["llm/Mth-v0"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "unknown env id 'llm/Mth-v0'" in err and "Did you mean" in err and "'llm/Math-v0'" in err


def test_usage_errors(capsys):
    assert check_main([]) == 2
    assert check_main(["llm/Math-v0", "--only", "speed"]) == 2
    assert check_main(["llm/Math-v0", "--all"]) == 2
    assert check_main(["CartPole-v1"]) == 2
    assert "not an llm-gym env" in capsys.readouterr().err


def test_the_command_line_is_torch_free():
    code = ("import sys; from llm_gym import cli; rc = cli.main(['check', 'llm/Math-v0', '--only', "
            "'card,split']); print(rc, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         check=True)
    assert out.stdout.strip().splitlines()[-1] == "0 False"


# ---------------------------------------------------------------------------------------------
# the split row: a task key, and what one pool would have shared


def test_a_shared_small_pool_fails_split_naming_a_task():
    row = rows_of("test/CheckSharedPool-v0", only=["split"])["split"]
    assert row.status == "fail" and "tasks appear in both splits" in row.detail
    assert 1 <= row.data["overlap"] <= 10 and "Repeat the number" in row.detail


def test_a_small_disjoint_split_passes_with_the_evidence():
    row = rows_of("test/CheckSmallDisjoint-v0", only=["split"])["split"]
    assert row.status == "pass" and row.data["overlap"] == 0
    assert row.data["train_distinct"] == row.data["test_distinct"] == 5
    assert row.data["one_pool_shared"] >= 3 and row.data["one_pool_none"] <= 0.05
    assert "one pool would share" in row.detail


def test_a_fixed_opening_game_is_split_by_its_hidden_state():
    rows = rows_of("test/CheckHiddenNumber-v0")
    assert {n: r.detail for n, r in rows.items() if r.status == "fail"} == {}
    split = rows["split"]
    assert split.status == "pass" and split.data["fixed_first_observation"] is True
    assert split.data["one_pool_shared"] >= 3  # the secret, read off env.message_env
    det = rows["determinism"]
    assert det.data["distinct_first_observations"] == 1 and det.data["distinct_episodes"] >= 5
    assert "whole episodes were compared" in det.detail


def test_a_hidden_task_that_differs_across_processes_fails_determinism():
    """The opening is the same everywhere; only whole episodes show the pid-dependent secret."""
    row = rows_of("test/CheckHiddenNondeterministic-v0", only=["determinism"])["determinism"]
    assert row.status == "fail" and "two processes disagree" in row.detail
    assert "gold case 'bisection'" in row.detail or "fixed replies" in row.detail


def test_a_task_the_check_cannot_read_is_a_skip_that_says_why():
    row = rows_of("test/CheckClosureTask-v0", only=["split"])["split"]
    assert row.status == "skip" and "cannot tell" in row.detail
    assert "cannot read" in row.detail and "task_key" in row.detail


def test_a_declared_task_key_is_what_split_compares():
    row = rows_of("test/CheckDeclaredLeak-v0", only=["split"])["split"]
    assert row.data["key"] == "task_key"
    assert row.status == "fail" and "declared task keys" in row.detail


# ---------------------------------------------------------------------------------------------
# --kwargs / --kwarg


def test_kwargs_reach_the_checked_env(capsys):
    assert check_main(["test/CheckEcho-v0", "--kwargs", '{"high": 20}', "--only", "split",
                       "--json"]) == 0
    result = json.loads(capsys.readouterr().out)["results"][0]
    assert result["kwargs"] == {"high": 20}
    split = result["checks"][0]["data"]
    # high=20: train is the 18 numbers that are not multiples of 10, test is {0, 10}.
    assert (split["train_distinct"], split["test_distinct"]) == (18, 2)
    assert check_main(["test/CheckEcho-v0", "--kwarg", "high=20", "--only", "split"]) == 0
    assert "(kwargs {\"high\": 20})" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--kwargs", "{high: 20}"], "is not JSON"),
    (["--kwargs", "[20]"], "must be a JSON object"),
    (["--kwarg", "high"], "is not KEY=VALUE"),
    (["--kwargs", '{"hgh": 20}'], "unexpected keyword argument 'hgh'"),
    (["--kwarg", "high=5"], "high must be an int in [10, 10000], got 5"),
])
def test_bad_kwargs_are_one_line_and_exit_2(argv, message, capsys):
    assert check_main(["test/CheckEcho-v0", "--only", "card", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.strip().splitlines()) == 1 and message in captured.err
