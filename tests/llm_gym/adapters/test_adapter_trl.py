"""TRL adapter: prompt datasets, the env-graded reward function (also inside TRL's real
`GRPOTrainer`, slow), and the `environment_factory` environment for multi-turn envs."""

from __future__ import annotations

import json
import math
import os
import re
import sys

import gymnasium as gym
import numpy as np
import pytest

from tests._adapter_helpers import ensure_catalog

ensure_catalog()

from llm_gym.adapters._common import text_to_action  # noqa: E402
from llm_gym.adapters.trl import (  # noqa: E402
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
    found = re.search(r"Guess my number from (\d+) to (\d+)\.", intro)
    assert found and "<|im_start|>" not in intro
    low, high, replies = int(found.group(1)), int(found.group(2)), []
    assert high - low + 1 == 8  # max_number=8: a range of 8 numbers
    # Binary search by text only, through the tool; the env's own step grades each message.
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


@pytest.mark.slow
def test_trl_environment_factory_drives_a_real_tool_loop_with_the_qwen3_template(
    tmp_path, real_tokenizer_root
):
    """TRL's real `GRPOTrainer(environment_factory=...)` tool loop, a few CPU steps: the offline
    Qwen3 tokenizer with TRL's own Qwen3 chat template (tool calling, response parsing), a tiny
    Llama sized to its 151k vocabulary, briefly warm-started to emit `act` tool calls. TRL parses
    the sampled `<tool_call>`s, calls our `TextEnvironment.act`, feeds the observations back and
    takes `get_reward()`. Every episode is re-scored independently through the Gymnasium face
    (reset on its seed, step its messages), and TRL's logged mean rewards must match."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
    from trl import GRPOConfig, GRPOTrainer
    from trl.chat_template_utils import qwen3_chat_template

    from tests._real_tokenizers import skip_unless_available, tokenizer_dir

    skip_unless_available("qwen3")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    env_id, knobs = "llm/GuessNumber-v0", {"max_number": 8, "max_turns": 4}
    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir("qwen3", real_tokenizer_root)))
    tok.chat_template = qwen3_chat_template  # TRL recognises it: tool calls parse back
    end = tok.convert_tokens_to_ids("<|im_end|>")
    records: list[dict] = []

    class Recording(TextEnvironment):
        def reset(self, **row):
            self._record = {"task_seed": int(row["task_seed"]), "messages": []}
            records.append(self._record)
            return super().reset(**row)

        def act(self, message: str) -> str:
            """Send your next move or message to the environment.

            Args:
                message: Your move or reply, as plain text.

            Returns:
                The environment's reply: its next observation, or the final result when the episode is over.
            """
            self._record["messages"].append(message)
            return super().act(message)

        def get_reward(self) -> float:
            self._record["reward"] = super().get_reward()
            return self._record["reward"]

    dataset = multi_turn_dataset(env_id, 16, seed=0, **knobs)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
                         max_position_embeddings=2048, tie_word_embeddings=True,
                         eos_token_id=end, pad_token_id=tok.pad_token_id)
    model = LlamaForCausalLM(config)
    _warm_start_tool_calls(model, tok, dataset, Recording(env_id, **knobs), steps=140)
    records.clear()

    args = GRPOConfig(
        output_dir=str(tmp_path), use_cpu=True, bf16=False, per_device_train_batch_size=4,
        num_generations=4, max_completion_length=96, max_steps=3, logging_steps=1,
        report_to="none", save_strategy="no", seed=0, learning_rate=1e-4, temperature=1.0,
        max_tool_calling_iterations=4,
    )
    trainer = GRPOTrainer(model=model, args=args, train_dataset=dataset, processing_class=tok,
                          environment_factory=lambda: Recording(env_id, **knobs))
    trainer.train()

    steps = [h for h in trainer.state.log_history if "reward" in h]
    assert len(steps) == 3 and len(records) == 3 * 4
    assert sum(h["tools/call_frequency"] for h in steps) > 0  # TRL parsed and ran tool calls
    assert sum(len(r["messages"]) for r in records) >= 4
    for i, logged in enumerate(steps):
        batch = records[4 * i: 4 * (i + 1)]
        assert logged["reward"] == pytest.approx(float(np.mean([r["reward"] for r in batch])), abs=1e-6)
    for record in records:  # independent re-score: the Gymnasium face, the episode's messages
        env = gym.make(env_id, **knobs)
        env.reset(seed=record["task_seed"])
        total, done = 0.0, False
        for message in record["messages"]:
            if done:
                break
            action = text_to_action(env.unwrapped.renderer, message, terminated=True)
            _ob, reward, terminated, truncated, _info = env.step(np.asarray(action, dtype=np.int64))
            total, done = total + float(reward), terminated or truncated
        assert record["reward"] == pytest.approx(total)
    assert all(-0.4 - 1e-6 <= r["reward"] <= 1.0 for r in records)


def _warm_start_tool_calls(model, tok, dataset, env, steps: int) -> None:
    """Teach the tiny model the shape of a first move: an `act` tool call with a guess, rendered
    by the tokenizer's template with the environment's tool schema (loss on the assistant turn)."""
    import torch

    examples = []
    for row in dataset:
        messages = [dict(m) for m in row["prompt"]]
        messages[-1]["content"] += env.reset(**row)
        prompt = tok.apply_chat_template(messages, tools=[env.act], add_generation_prompt=True,
                                         tokenize=False)
        prompt_ids = tok(prompt, add_special_tokens=False)["input_ids"]
        for guess in range(1, 9):
            call = {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
                "name": "act", "arguments": {"message": str(guess)}}}]}
            full = tok.apply_chat_template(messages + [call], tools=[env.act], tokenize=False)
            assert full.startswith(prompt)
            examples.append((tok(full, add_special_tokens=False)["input_ids"], len(prompt_ids)))
    gen = torch.Generator().manual_seed(0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(steps):
        batch = [examples[i] for i in torch.randint(len(examples), (8,), generator=gen).tolist()]
        width = max(len(ids) for ids, _ in batch)
        ids = torch.tensor([s + [tok.pad_token_id] * (width - len(s)) for s, _ in batch])
        attn = (torch.arange(width)[None, :] < torch.tensor([len(s) for s, _ in batch])[:, None]).long()
        hidden = model.model(input_ids=ids, attention_mask=attn).last_hidden_state
        # logits only where the answer is predicted: a 151k-wide head over every position is GBs
        rows, cols, targets = zip(*[(b, j, s[j + 1]) for b, (s, p) in enumerate(batch)
                                    for j in range(p - 1, len(s) - 1)])
        logits = model.lm_head(hidden[list(rows), list(cols)])
        loss = torch.nn.functional.cross_entropy(logits, torch.tensor(targets))
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
