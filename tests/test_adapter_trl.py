"""TRL adapter: prompt datasets, the env-graded reward function (also inside TRL's real
`GRPOTrainer`, slow), and the `environment_factory` environment for multi-turn envs."""

from __future__ import annotations

import json
import math
import os
import sys

import gymnasium as gym
import numpy as np
import pytest

from tests._adapter_helpers import ensure_catalog

ensure_catalog()

from trainers.adapters._common import text_to_action  # noqa: E402
from trainers.adapters.trl import (  # noqa: E402
    EnvReward,
    TextEnvironment,
    environment_factory,
    grpo_dataset,
    multi_turn_dataset,
)

MATH = "llm/Math-v0"


def gym_score(env_id: str, task_seed: int, text: str, terminated: bool = True, **knobs) -> float:
    """Independent re-scoring through the Gymnasium face: reset on the row's seed, step the text."""
    env = gym.make(env_id, **knobs)
    _obs, info = env.reset(seed=int(task_seed))
    action = text_to_action(env.unwrapped.renderer, text, terminated=terminated)
    _obs, reward, terminated_, _truncated, _info = env.step(np.asarray(action, dtype=np.int64))
    assert terminated_
    return float(reward)


def test_grpo_dataset_rows_match_the_env():
    ds = grpo_dataset(MATH, 6, seed=3)
    assert set(ds.column_names) == {"prompt", "reference_answer", "env_id", "split", "task_seed",
                                    "env_kwargs"}
    assert len(ds) == 6
    for row in ds:
        env = gym.make(MATH)
        _obs, info = env.reset(seed=row["task_seed"])
        question = row["prompt"][-1]["content"]
        assert row["prompt"][-1]["role"] == "user"
        assert question in info["text"]  # the same task as reset(seed=task_seed)
        a, b = question.rstrip("=").split("+")
        assert row["reference_answer"] == str(int(a) + int(b))
    assert grpo_dataset(MATH, 6, seed=3)["task_seed"] == ds["task_seed"]
    assert grpo_dataset(MATH, 6, seed=4)["task_seed"] != ds["task_seed"]


def test_env_reward_grades_like_the_env_and_logs_metrics():
    ds = grpo_dataset(MATH, 4, seed=0, digits=3)
    assert json.loads(ds[0]["env_kwargs"]) == {"digits": 3}
    reward = EnvReward(record=True)
    completions, rows = [], []
    for row in ds:
        for text in (row["reference_answer"], "7", "I think it is", f"\\boxed{{{row['reference_answer']}}}"):
            completions.append([{"role": "assistant", "content": text}])
            rows.append(row)
    logged: dict[str, list[float]] = {}
    extras: dict[str, list] = {}
    rewards = reward(
        prompts=[r["prompt"] for r in rows], completions=completions,
        env_id=[r["env_id"] for r in rows], task_seed=[r["task_seed"] for r in rows],
        split=[r["split"] for r in rows], env_kwargs=[r["env_kwargs"] for r in rows],
        reference_answer=[r["reference_answer"] for r in rows],
        log_metric=lambda k, v: logged.setdefault(k, []).append(v),
        log_extra=lambda k, v: extras.setdefault(k, []).extend(v),
    )
    assert rewards[0::4] == [1.0] * 4  # reference answer
    assert rewards[1::4] == [0.0] * 4  # a well-formed wrong number
    assert rewards[2::4] == pytest.approx([-0.1] * 4)  # no number: format penalty
    assert rewards[3::4] == [1.0] * 4  # \boxed{} is accepted by the env's grader
    for r, row, c in zip(rewards, rows, completions):
        assert r == pytest.approx(gym_score(MATH, row["task_seed"], c[0]["content"], digits=3))
    assert logged["env/correct"] == [pytest.approx(0.5)]
    assert logged["env/format"] == [pytest.approx(0.75)]
    assert extras["correct"] == [s.metrics["correct"] for s in reward.last_batch]
    assert len(reward.history) == 16


def test_env_reward_uses_completion_ids_for_truncation():
    from trainers.models import byte_hf_tokenizer

    tok = byte_hf_tokenizer()
    row = grpo_dataset(MATH, 1, seed=1)[0]
    reward = EnvReward(tokenizer=tok)
    answer = row["reference_answer"]
    ids = tok.encode(answer, add_special_tokens=False)
    out = reward(
        prompts=[row["prompt"]] * 2, completions=[answer, answer],
        completion_ids=[ids + [tok.eos_token_id], ids],  # finished vs cut off at max length
        env_id=[MATH] * 2, task_seed=[row["task_seed"]] * 2,
    )
    assert out[0] == 1.0
    assert out[1] == pytest.approx(gym_score(MATH, row["task_seed"], answer, terminated=False))
    assert out[1] < out[0]  # a truncated response loses the format bonus


def test_bad_inputs_name_the_fix(monkeypatch):
    with pytest.raises(ValueError, match="environment_factory"):
        grpo_dataset("llm/GuessNumber-v0", 2)
    with pytest.raises(ValueError, match="Did you mean 'llm/Math-v0'"):
        grpo_dataset("llm/Maths-v0", 2)
    with pytest.raises(ValueError, match="grpo_dataset"):
        EnvReward()(prompts=[[]], completions=["1"])
    monkeypatch.setitem(sys.modules, "datasets", None)  # as if `datasets` were not installed
    with pytest.raises(ImportError, match=r"pip install 'llm-gym\[train\]'"):
        grpo_dataset(MATH, 2)


def test_text_environment_follows_trl_environment_contract():
    ds = multi_turn_dataset("llm/GuessNumber-v0", 3, seed=0, max_number=8)
    factory = environment_factory("llm/GuessNumber-v0")
    env = factory()
    # TRL exposes every public function other than reset/get_reward as a tool.
    import inspect

    tools = [n for n, _ in inspect.getmembers(type(env), predicate=inspect.isfunction)
             if n not in ("reset", "get_reward") and not n.startswith("_")]
    assert tools == ["act"]
    row = ds[0]
    intro = env.reset(**row)
    assert "Guess my number from 1 to 8" in intro and "<|im_start|>" not in intro
    # Binary search by text only, through the tool; the env's own step grades each message.
    low, high, replies = 1, 8, []
    while not env.done:
        guess = (low + high) // 2
        reply = env.act(str(guess))
        replies.append(reply)
        if reply.startswith("Higher"):
            low = guess + 1
        elif reply.startswith("Lower"):
            high = guess - 1
    assert env.get_reward() == 1.0 and env.metrics["solved"] == 1.0
    assert "episode is over" in replies[-1]
    # Invalid text is a defined reward, not an exception; reset starts a fresh episode.
    env.reset(**ds[1])
    assert env.act("no idea").startswith("Invalid")
    assert env.get_reward() == pytest.approx(-0.1)


@pytest.mark.slow
def test_trl_grpo_trainer_logs_the_envs_rewards(tmp_path):
    """TRL's real GRPOTrainer, a few CPU steps on llm/Math-v0 with a tiny byte-level Llama
    (briefly warm-started so its completions vary): the rewards it logs must be exactly what our
    Gymnasium env gives for the same completions."""
    import torch
    from trl import GRPOConfig, GRPOTrainer

    from trainers.models import build_tiny_model

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    model, tok = build_tiny_model(seed=0)
    # One-digit addition (sums 0-18) with at most 2 completion tokens: one-digit answers end on
    # their stop token and are graded right or wrong, two-digit ones are cut off and get the
    # truncation penalty, so the comparison below covers several outcomes.
    knobs = {"digits": 1}
    train = grpo_dataset(MATH, 16, seed=0, **knobs)
    _warm_start(model, tok, grpo_dataset(MATH, 256, seed=1, **knobs), steps=60)

    reward = EnvReward(tokenizer=tok, record=True)
    args = GRPOConfig(
        output_dir=str(tmp_path), use_cpu=True, bf16=False, per_device_train_batch_size=8,
        num_generations=4, max_completion_length=2, max_steps=3, logging_steps=1,
        report_to="none", save_strategy="no", seed=0, learning_rate=1e-4, temperature=1.0,
    )
    trainer = GRPOTrainer(model=model, reward_funcs=reward, args=args, train_dataset=train,
                          processing_class=tok)
    trainer.train()

    steps = [h for h in trainer.state.log_history if "reward" in h]
    assert len(steps) == 3 and len(reward.history) == 3 * 8
    for i, logged in enumerate(steps):
        batch = reward.history[8 * i: 8 * (i + 1)]
        ours = [gym_score(MATH, s.task_seed, s.completion, s.terminated, **knobs) for s in batch]
        assert [s.reward for s in batch] == pytest.approx(ours)
        assert logged["rewards/llm_gym_env/mean"] == pytest.approx(float(np.mean(ours)), abs=1e-6)
        assert logged["env/correct"] == pytest.approx(np.mean([s.metrics["correct"] for s in batch]))
        assert math.isfinite(logged["loss"])
    assert all(-0.1 - 1e-6 <= s.reward <= 1.0 for s in reward.history)
    # The warm start makes some completions right and some wrong: both outcomes are compared.
    assert len({round(s.reward, 3) for s in reward.history}) >= 2
    assert torch.isfinite(next(model.parameters())).all()


def _warm_start(model, tok, dataset, steps: int) -> None:
    """A few supervised steps on reference answers (prompt via the chat template, loss on the
    answer and EOS), so sampled completions are sometimes well-formed numbers."""
    import torch

    gen = torch.Generator().manual_seed(0)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    rows = list(dataset)
    model.train()
    for _ in range(steps):
        idx = torch.randint(len(rows), (32,), generator=gen).tolist()
        seqs, masks = [], []
        for i in idx:
            prompt = tok.apply_chat_template(rows[i]["prompt"], add_generation_prompt=True,
                                             tokenize=True)
            prompt = list(prompt["input_ids"] if hasattr(prompt, "keys") else prompt)
            answer = tok.encode(rows[i]["reference_answer"], add_special_tokens=False) + [tok.eos_token_id]
            seqs.append(prompt + answer)
            masks.append([0] * len(prompt) + [1] * len(answer))
        width = max(map(len, seqs))
        ids = torch.tensor([s + [tok.pad_token_id] * (width - len(s)) for s in seqs])
        labels = torch.tensor([[t if m else -100 for t, m in zip(s, mk)] + [-100] * (width - len(s))
                               for s, mk in zip(seqs, masks)])
        attn = (torch.arange(width)[None, :] < torch.tensor([len(s) for s in seqs])[:, None]).long()
        loss = model(input_ids=ids, attention_mask=attn, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
