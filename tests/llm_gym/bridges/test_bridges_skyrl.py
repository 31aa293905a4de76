"""The SkyRL-gym bridge against the real, pinned skyrl-gym: every registered `skyrl/<id>` passes
`check_env` and a scripted episode over a small SkyRL-format dataset written here, the committed
table matches the package, a missing dataset says how to make one, and rows with a split are used
only for it. Runs where skyrl-gym is installed (`make test`: .venv has [all])."""

from __future__ import annotations

import gc
import importlib
import json
import os
import warnings
from importlib import metadata

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

# make test sets LLM_GYM_REQUIRE_BRIDGES (.venv has [all]): a missing package fails, not skips.
skyrl_gym = (importlib.import_module("skyrl_gym") if os.environ.get("LLM_GYM_REQUIRE_BRIDGES")
      else pytest.importorskip("skyrl_gym"))

import llm_gym  # noqa: E402,F401
from llm_gym.bridges import SKYRL  # noqa: E402
from llm_gym.tokenizers import ByteTokenizer  # noqa: E402

TOK = ByteTokenizer()
IDS = list(SKYRL.entries)
ANSWER = {"skyrl/gsm8k": "#### {}", "skyrl/gsm8k_multi_turn": "#### {}", "skyrl/aime": "Answer: {}"}


def say(text: str) -> list[int]:
    return TOK.encode(text) + [260]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    path = tmp_path_factory.mktemp("skyrl") / "rows.jsonl"
    rows = []
    for i, (a, b) in enumerate([(3, 4), (6, 7), (12, 30), (5, 5)]):
        rows.append({
            "prompt": [{"role": "system", "content": "Finish with '#### <number>'."},
                       {"role": "user", "content": f"What is {a} + {b}?"}],
            "env_class": "gsm8k",
            "reward_spec": {"method": "rule", "ground_truth": str(a + b)},
            "extra_info": {"max_turns": 3},
            "split": "test" if i == 3 else "train",
        })
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    return str(path)


def test_pinned_version_and_the_committed_table_match_the_package():
    assert metadata.version("skyrl-gym") == SKYRL.version
    names = {e["env_name"] for e in SKYRL.entries.values()}
    assert names | set(SKYRL.skipped) == set(skyrl_gym.registry)


@pytest.mark.parametrize("env_id", IDS)
def test_every_id_passes_check_env_and_a_scripted_episode(env_id, dataset):
    env = gym.make(env_id, dataset=dataset)
    _, info = env.reset(seed=2)
    assert "Finish with" in info["text"]  # the row's system message is kept
    row = env.unwrapped.current_env.string_env.row
    _, reward, terminated, *_ = env.step(say(ANSWER[env_id].format(row["reward_spec"]["ground_truth"])))
    assert reward == 1.0 and terminated
    env.reset(seed=2)
    _, reward, *_ = env.step(say("I do not know"))
    assert reward == env.unwrapped.reward_range[0]
    gc.collect()  # earlier tests' garbage: its ResourceWarnings are not this block's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(gym.make(env_id, dataset=dataset).unwrapped)
    assert [str(w.message) for w in caught] == []


def test_multi_turn_gets_more_tries(dataset):
    env = gym.make("skyrl/gsm8k_multi_turn", dataset=dataset)
    _, info = env.reset(seed=0)
    ob, reward, terminated, _, info = env.step(say("#### 0"))
    assert not terminated and "tentative numeric answer" in TOK.decode(list(ob))
    truth = env.unwrapped.current_env.string_env.row["reward_spec"]["ground_truth"]
    _, reward, terminated, *_ = env.step(say(f"#### {truth}"))
    assert terminated and reward == 1.0


def test_splits_are_kept(dataset):
    test_env = gym.make("skyrl/gsm8k", dataset=dataset, split="test")
    questions = set()
    for seed in range(6):
        _, info = test_env.reset(seed=seed)
        questions.add(info["text"].rsplit("What is", 1)[1][:8])
    assert questions == {" 5 + 5?<"}


@pytest.mark.parametrize("env_id", IDS)
def test_every_card_has_an_example_played_on_the_first_row(env_id, dataset):
    from llm_gym.checks.card import _card_problems
    from llm_gym.checks.common import _resolve_target

    source = gym.make(env_id, dataset=dataset).unwrapped.source
    card = source.card
    roles = [m["role"] for m in card.example_episode]
    assert roles[:2] == ["system", "user"] and roles[-1] == "assistant"
    assert card.example_episode[1]["content"] == "What is 3 + 4?"  # the split's first row
    assert card.example_episode[-1]["content"] == ANSWER[env_id].format(7)  # its right answer
    assert roles.count("assistant") == (2 if card.multi_turn else 1)
    if card.multi_turn:  # a wrong answer first, and the env's real feedback on it
        assert "tentative numeric answer" in card.example_episode[3]["content"]
    target = _resolve_target(env_id)
    target.kwargs["dataset"] = dataset
    assert _card_problems(env_id, source, target) == []


@pytest.mark.parametrize("env_id", IDS)
def test_without_a_dataset_the_demo_rows_play_and_the_card_says_so(env_id):
    from llm_gym.bridges.skyrl import ANSWER_FORMATS, DEMO, demo_rows

    env = gym.make(env_id)
    assert "demo rows" in env.unwrapped.source.card.description
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped)
    answer = ANSWER_FORMATS.get(env_id.split("/")[1], "#### {}")
    for seed in range(3):
        env.reset(seed=seed)
        truth = env.unwrapped.current_env.string_env.row["reward_spec"]["ground_truth"]
        _, reward, terminated, *_ = env.step(say(answer.format(truth)))
        assert terminated and reward == 1.0
    rows = demo_rows(env_id.split("/")[1])
    assert rows == demo_rows(env_id.split("/")[1])  # the same rows on every call
    questions = {split: {r["prompt"][0]["content"] for r in rows if r["split"] == split}
                 for split in ("train", "test")}
    assert len(rows) == 200 and questions["test"] and not questions["train"] & questions["test"]
    assert gym.make(env_id, dataset=DEMO).unwrapped.source.rows == [r for r in rows if r["split"] == "train"]


@pytest.mark.parametrize("env_id", IDS)
def test_a_second_answer_earns_nothing_and_emphasis_is_read(env_id):
    env = gym.make(env_id)
    low = env.unwrapped.reward_range[0]
    answer = ANSWER[env_id]
    for seed in range(4):
        env.reset(seed=seed)
        truth = int(env.unwrapped.current_env.string_env.row["reward_spec"]["ground_truth"])
        _, reward, *_, info = env.step(say(f"{answer.format(truth)}\nAlternatively {answer.format(truth + 1)}"))
        assert reward == low
        # gsm8k's reader would have paid the first "####"; AIME's already refuses this one.
        assert info["metrics"]["env/answer_refused"] == float(env_id != "skyrl/aime")
        env.reset(seed=seed)
        _, reward, *_ = env.step(say(f"{answer.format(f'**{truth}**')}"))
        assert reward == 1.0
