"""reasoning-gym's splits are disjoint by question: a dataset whose task space is small enough to
repeat a question across generator seeds still never shows a train question on the test split
(`split_of_question` decides, the same in every process), each split keeps about half of the
questions, and a dataset with too few distinct questions for two splits is a one-line error."""

from __future__ import annotations

import importlib
import os

import numpy as np
import pytest

rg = (importlib.import_module("reasoning_gym") if os.environ.get("LLM_GYM_REQUIRE_BRIDGES")
      else pytest.importorskip("reasoning_gym"))

from llm_gym.bridges.reasoning_gym import ReasoningGymSource, split_of_question  # noqa: E402
from llm_gym.renderers import get_renderer  # noqa: E402
from llm_gym.tokenizers import ByteTokenizer  # noqa: E402

RENDERER = get_renderer("role_colon", ByteTokenizer())
# One-digit sums of two terms: ~200 distinct questions, so 300 draws per split repeat many.
SMALL = dict(dataset="basic_arithmetic", min_terms=2, max_terms=2, min_digits=1, max_digits=1,
             size=500)


def _questions(split: str, draws: int) -> list[str]:
    source = ReasoningGymSource(renderer=RENDERER, split=split, **SMALL)
    return [source.make_env(np.random.default_rng(seed)).get_question() for seed in range(draws)]


def test_a_small_task_space_never_shares_a_question_across_splits():
    train, test = _questions("train", 300), _questions("test", 300)
    assert len(set(train)) < 300 and len(set(test)) < 300  # the space is small: repeats happen
    assert not set(train) & set(test)
    assert {split_of_question(q) for q in train} == {"train"}
    assert {split_of_question(q) for q in test} == {"test"}


def test_the_generated_items_would_overlap_without_the_rule():
    """The rule does work: the raw items of the two dataset seeds share questions."""
    raw = {split: {str(ReasoningGymSource(renderer=RENDERER, split=split, **SMALL).entry(i)["question"])
                   for i in range(300)} for split in ("train", "test")}
    assert raw["train"] & raw["test"]


def test_split_of_question_is_stable_and_splits_about_half():
    questions = [f"What is {a} + {b}?" for a in range(40) for b in range(40)]
    share = np.mean([split_of_question(q) == "test" for q in questions])
    assert 0.4 < share < 0.6
    assert split_of_question("What is 3 + 4?") == split_of_question("What is 3 + 4?")


def test_a_dataset_with_one_question_is_a_one_line_error():
    source = ReasoningGymSource(renderer=RENDERER, split="train", **SMALL)
    question = str(source.entry(0)["question"])
    other = "test" if split_of_question(question) == "train" else "train"
    lonely = ReasoningGymSource(renderer=RENDERER, split=other, **SMALL)
    lonely.entry = lambda index: {"question": question, "answer": "0"}  # every item alike
    with pytest.raises(ValueError, match="too small for two disjoint splits"):
        lonely.make_env(np.random.default_rng(0))


def test_items_are_kept_a_while_and_handed_out_as_copies():
    from llm_gym.bridges import reasoning_gym as bridge

    source = ReasoningGymSource(renderer=RENDERER, split="train", **SMALL)
    fresh = ReasoningGymSource(renderer=RENDERER, split="train", **SMALL)
    first = source.entry(3)
    first["question"] = "tampered"
    assert source.entry(3) == fresh.entry(3) != first  # the kept item is untouched
    for index in range(bridge._MAX_CACHED_ENTRIES + 10):
        source.entry(index)
    assert len(source._entries) == bridge._MAX_CACHED_ENTRIES  # bounded


def test_an_item_whose_generator_hangs_is_passed_over_and_remembered(monkeypatch):
    """reasoning-gym's maze loops forever on index 658 of its test split: such an item is cut off,
    the split takes the next one, and the index is not generated again."""
    from llm_gym.bridges import reasoning_gym as bridge

    monkeypatch.setattr(bridge, "_ITEM_TIMEOUT_S", 0.5)
    source = ReasoningGymSource(renderer=RENDERER, split="train", **SMALL)
    real = source.dataset
    calls = []

    class Hangs:
        def __getitem__(self, index):
            calls.append(index)
            while index == 3:
                pass
            return real[index]

    source.dataset = Hangs()
    with pytest.raises(bridge.ItemTimeout, match="ran past 0.5 s on item 3"):
        source.entry(3)
    with pytest.raises(bridge.ItemTimeout):
        source.entry(3)
    assert calls.count(3) == 1  # remembered
    entry = source.split_entry(3)
    assert split_of_question(str(entry["question"])) == "train"
    assert entry == ReasoningGymSource(renderer=RENDERER, split="train", **SMALL).split_entry(4)
