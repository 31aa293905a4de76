"""The split row's held-out count (issue 23): a multi-turn env's held-out evaluation needs at
least `HELD_OUT_EPISODES` (100) distinct episodes, so the row counts the test split's distinct
task keys; a native catalog env whose checked knobs leave fewer fails, naming the count and the
knobs; a third-party (or bridged) env's row reports it and passes. GuessNumber plays both parts:
its `range_starts=1` is the classic game, 2 held-out secrets of 1..20."""

from __future__ import annotations

import pytest

from envs_catalog.games.guess_number import GuessNumberSource
from llm_gym import register_env
from llm_gym.checks import HELD_OUT_EPISODES, check_env_id
from llm_gym.checks.split import _estimated_size

GUESS = "llm/GuessNumber-v0"


class ThirdPartyGuess(GuessNumberSource):
    """The same game from a module outside the catalog (a third-party package)."""


def split_row(env_id: str, **kwargs):
    (row,) = check_env_id(env_id, only=["split"], env_kwargs=kwargs or None)
    return row


def test_the_default_guess_number_has_at_least_100_distinct_held_out_episodes():
    row = split_row(GUESS)
    assert row.status == "pass", row.detail
    assert row.data["held_out_distinct"] >= HELD_OUT_EPISODES == 100
    assert "distinct held-out episodes" in row.detail


def test_a_native_multi_turn_env_whose_knobs_leave_few_held_out_episodes_fails():
    row = split_row(GUESS, range_starts=1)
    assert row.status == "fail", row.detail
    assert row.data["held_out_distinct"] == 2 and row.data["held_out_estimate"] < 100
    assert "only 2 distinct held-out episodes" in row.detail
    assert "change the knobs set here (range_starts=1)" in row.detail


def test_registered_knobs_that_leave_few_are_named_by_the_cards_knobs():
    """A native source registered with small knobs (80 held-out tasks of 8 x 100): nothing was
    set on the command line, so the row lists the knobs to change."""
    register_env("splittest/SmallGuess-v0", "envs_catalog.games.guess_number:GuessNumberSource",
                 max_number=8)
    row = split_row("splittest/SmallGuess-v0")
    assert row.status == "fail", row.detail
    assert row.data["held_out_distinct"] <= 80 and row.data["held_out_seeds"] > 300
    assert "'range_starts'" in row.detail and "'max_number'" in row.detail


def test_a_native_env_that_declares_why_its_split_is_small_gets_a_warning(monkeypatch):
    """`EnvSource.small_held_out_reason` (TextWorld: each game costs seconds to compile): the row
    reports the count with the declared reason and passes."""
    monkeypatch.setattr(GuessNumberSource, "small_held_out_reason",
                        lambda self: "a stand-in reason" if self.range_starts == 1 else None)
    row = split_row(GUESS, range_starts=1)
    assert row.status == "pass", row.detail
    assert "only 2 distinct held-out episodes" in row.detail
    assert "as the source declares: a stand-in reason" in row.detail


def test_a_third_party_env_reports_the_count_without_failing():
    register_env("splittest/ThirdPartyGuess-v0",
                 "tests.llm_gym.checks.test_split_held_out:ThirdPartyGuess", range_starts=1)
    row = split_row("splittest/ThirdPartyGuess-v0")
    assert row.status == "pass", row.detail
    assert row.data["held_out_distinct"] == 2
    assert "warning: its test split gives only 2 distinct held-out episodes" in row.detail


@pytest.mark.parametrize("keys, low, high", [
    (["a", "b"] * 50, 2, 2),  # every key seen many times: the pool is what was seen
    ([str(i) for i in range(40)] * 3, 40, 40),
    ([str(i) for i in range(60)], 1000, float("inf")),  # all new: a pool far larger than seen
])
def test_the_pool_estimate(keys, low, high):
    assert low <= _estimated_size(keys) <= high
