"""The `tiny-bpe` preset: the shipped catalog BPE round-trips any text and rebuilds identically
(`scripts/build_bpe_tokenizer.py`), its chat template tokenizes as `ChatMLRenderer` does, the preset
loads and plays envs, episodes are several times shorter than in bytes, and `tiny` is unchanged."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

import gymnasium as gym  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

import llm_gym  # noqa: E402, F401  (registers the ids)
from llm_gym.scripted import aplay_scripted_episode, reply_tokens  # noqa: E402
from llm_gym.text_env import TextEnv  # noqa: E402
from llm_gym.tokenizers import ByteTokenizer  # noqa: E402
from llm_gym.wrappers.source import env_source_for_id  # noqa: E402
from trainers.grpo.fit import first_gold_case  # noqa: E402
from trainers.models import (  # noqa: E402
    BPE_TOKENIZER_FILE,
    PRESETS,
    TINY_BPE_PRESET,
    bpe_hf_tokenizer,
    build_tiny_model,
    load_policy,
    preset_env_tokenizer,
    resolve_model,
)

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "build_bpe_tokenizer.py"


def _load_script():
    spec = importlib.util.spec_from_file_location("build_bpe_tokenizer", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bpe():
    return bpe_hf_tokenizer()


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """A private LLM_GYM_HOME for the module (presets are built into it once)."""
    path = tmp_path_factory.mktemp("llm_gym_home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LLM_GYM_HOME", str(path))
        yield path


@pytest.fixture(scope="module")
def tokenizer_dir(home):
    return preset_env_tokenizer("tiny-bpe")


def _gold_episode(env_id: str, seed: int, **make_kwargs):
    """(all token ids of `env_id`'s first gold episode on the test split, its return, the env's
    tokenizer, the sampled tokens)."""
    env = env_source_for_id(env_id, "test", **make_kwargs)
    source = env.source
    case = first_gold_case(source)
    trajectory, _ = asyncio.run(
        aplay_scripted_episode(source, case, source.make_env(np.random.default_rng(seed))))
    last = trajectory.transitions[-1]
    ids = last.ob.to_ints() + list(last.ac.tokens)
    sampled = sum(len(t.ac.tokens) for t in trajectory.transitions)
    return ids, sum(t.reward for t in trajectory.transitions), env.tokenizer, sampled


# --- the tokenizer ---------------------------------------------------------------------------------
def test_shipped_tokenizer_is_small_with_byte_tokenizer_specials(bpe):
    assert BPE_TOKENIZER_FILE.stat().st_size < 300_000
    assert len(bpe) == TINY_BPE_PRESET.vocab_size == 4096
    assert bpe.convert_tokens_to_ids(list(ByteTokenizer.SPECIAL_TOKENS)) == [0, 1, 2, 3, 4]
    assert (bpe.pad_token_id, bpe.bos_token_id, bpe.eos_token_id) == (0, 1, 2)
    assert {0, 1, 2, 3, 4} <= set(bpe.all_special_ids)
    # digits are never merged, so a number has one tokenization
    assert bpe.encode("Answer: 15701", add_special_tokens=False)[-5:] == bpe.convert_tokens_to_ids(list("15701"))


@settings(max_examples=300, deadline=None)
@given(text=st.one_of(st.text(), st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=127))))
def test_any_text_round_trips(bpe, text):
    ids = bpe.encode(text, add_special_tokens=False)
    assert bpe.decode(ids) == text
    assert all(0 <= i < len(bpe) for i in ids)


def test_text_with_special_token_strings_round_trips(bpe):
    text = "say <|im_end|> then\n<|im_start|>user\n12 + 30"
    ids = bpe.encode(text, add_special_tokens=False)
    assert 4 in ids and 3 in ids  # as every HF tokenizer: special strings become special ids
    assert bpe.decode(ids) == text


# --- rebuilding ------------------------------------------------------------------------------------
def test_rebuild_is_deterministic_on_a_reduced_corpus():
    script = _load_script()
    ids, seeds = ["llm/GuessNumber-v0", "llm/Calculator-v0"], range(3)
    texts = script.corpus(ids, seeds)
    assert texts == script.corpus(ids, seeds)
    assert any("<tool_call>" in t for t in texts) and "user\nHigher." in texts
    first = script.train_tokenizer(texts, vocab_size=600).to_str()
    assert script.train_tokenizer(texts, vocab_size=600).to_str() == first
    assert script.build(ids, seeds, vocab_size=600) == first + "\n"
    # another process with another str hash seed and one thread builds the same file
    code = (f"import importlib.util, sys; spec = importlib.util.spec_from_file_location('b', {str(SCRIPT)!r}); "
            "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); "
            f"sys.stdout.write(m.build({ids!r}, range(3), vocab_size=600))")
    env = {**os.environ, "PYTHONHASHSEED": "12345", "RAYON_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=REPO, timeout=300, check=True).stdout
    assert out == first + "\n"


@pytest.mark.slow  # plays ~2,800 gold episodes (the code envs run their tests in a sandbox): over 10 s
def test_full_rebuild_equals_the_shipped_file():
    script = _load_script()
    assert script.build() == BPE_TOKENIZER_FILE.read_text(encoding="utf-8"), (
        "trainers/data/bpe-tiny.json is stale: run `python scripts/build_bpe_tokenizer.py`")


# --- the chat template and renderers ---------------------------------------------------------------
@pytest.mark.parametrize("env_id", ["llm/GuessNumber-v0", "llm/Calculator-v0", "llm/Retrieval-v0"])
def test_chat_template_tokenizes_like_chatml_renderer(tokenizer_dir, env_id):
    for seed in range(2):
        by_template, ret_t, tok, _ = _gold_episode(env_id, seed, tokenizer=tokenizer_dir)
        by_chatml, ret_c, _, _ = _gold_episode(env_id, seed, tokenizer=tokenizer_dir, renderer="chatml")
        as_bytes, ret_b, byte_tok, _ = _gold_episode(env_id, seed)
        assert by_template == by_chatml
        assert tok.decode(by_template) == byte_tok.decode(as_bytes)
        assert ret_t == ret_c == ret_b


def test_chat_template_without_tools_is_plain_chatml(bpe):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2"},
                {"role": "assistant", "content": "4"}, {"role": "tool", "content": "\n x"}]
    text = bpe.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+2<|im_end|>\n"
                    "<|im_start|>assistant\n4<|im_end|>\n<|im_start|>tool\n\n x<|im_end|>\n"
                    "<|im_start|>assistant\n")


# --- the preset ------------------------------------------------------------------------------------
def test_preset_builds_loads_and_is_cached(home):
    assert PRESETS == ("tiny", "tiny-bpe")
    path = resolve_model("tiny-bpe")
    assert Path(path).parent == home / "presets" and Path(path).name.startswith("tiny-bpe-")
    assert resolve_model("tiny-bpe") == path
    assert resolve_model("tiny-bpe", seed=1) != path
    model, tok = load_policy("tiny-bpe")
    assert model.config.vocab_size == len(tok) == 4096
    assert model.generation_config.eos_token_id == [4, 2]
    assert 1.4e6 < sum(p.numel() for p in model.parameters()) < 1.8e6
    text = "<tool_call>\n{\"name\": \"calculator\"}\n</tool_call> Higher. ü 😀"
    assert tok.encode(text, add_special_tokens=False) == bpe_hf_tokenizer().encode(text, add_special_tokens=False)
    ids = torch.tensor([tok.apply_chat_template([{"role": "user", "content": "Guess"}],
                                                add_generation_prompt=True)["input_ids"]])
    with torch.no_grad():
        assert model(ids).logits.shape == (1, ids.shape[1], 4096)


def test_preset_env_tokenizer(tokenizer_dir, home):
    assert preset_env_tokenizer("tiny") is None  # the env's default ByteTokenizer is tiny's
    with pytest.raises(ValueError, match="not a preset"):
        preset_env_tokenizer("tiny-bytes")
    assert Path(tokenizer_dir).parent == home / "presets"
    assert preset_env_tokenizer("tiny-bpe") == tokenizer_dir
    tok = AutoTokenizer.from_pretrained(tokenizer_dir, local_files_only=True)
    assert len(tok) == 4096 and tok.chat_template == bpe_hf_tokenizer().chat_template


def test_gym_env_with_the_preset_plays_a_gold_episode(tokenizer_dir):
    env = gym.make("llm/GuessNumber-v0", tokenizer=tokenizer_dir)
    try:
        inner = env.unwrapped
        assert isinstance(inner, TextEnv)
        case = first_gold_case(inner.source)
        obs, _ = env.reset(seed=3)
        total, done = 0.0, False
        for _ in range(case.max_turns):
            reply = case.reply(inner.current_env, inner.tokenizer.decode(obs.tolist()))
            obs, reward, terminated, truncated, _ = env.step(reply_tokens(inner.renderer, reply))
            total += float(reward)
            done = terminated or truncated
            if done:
                break
        assert done and total == pytest.approx(case.high)
        assert len(inner.tokenizer) == 4096
    finally:
        env.close()


def test_gold_guess_number_episode_is_under_half_the_byte_tokens(tokenizer_dir):
    for seed in range(3):
        bpe_ids, _, _, _ = _gold_episode("llm/GuessNumber-v0", seed, tokenizer=tokenizer_dir)
        byte_ids, _, _, _ = _gold_episode("llm/GuessNumber-v0", seed)
        assert len(bpe_ids) < 0.5 * len(byte_ids)
    _, _, _, bpe_sampled = _gold_episode("llm/Calculator-v0", 0, tokenizer=tokenizer_dir)
    _, _, _, byte_sampled = _gold_episode("llm/Calculator-v0", 0)
    assert bpe_sampled < 0.5 * byte_sampled  # the tool call shrinks too


# --- tiny stays as it was --------------------------------------------------------------------------
def test_tiny_preset_recipe_is_unchanged():
    from trainers import models

    # The directory key of `tiny` (bit-identical builds): change it only on purpose.
    assert models._tiny_preset_key(0) == "5a0aedc249a4"
    model, tok = build_tiny_model(seed=0)
    assert model.generation_config.eos_token_id == models._STOP_IDS == [260, 258]
    assert len(tok) == 261 and tok.name_or_path == "llm-gym/byte-hf"


# --- the trainer with the preset -------------------------------------------------------------------
def test_trainer_knows_the_presets_torch_free():
    from trainers.grpo.fit import MODEL_PRESETS, check_model

    assert MODEL_PRESETS == PRESETS  # fit.py keeps its own copy to stay torch-free
    for name in PRESETS:
        check_model(name)  # no ConfigError: built locally, nothing to download


def test_run_env_gives_the_env_the_presets_tokenizer(tokenizer_dir):
    from trainers.grpo.config import GRPOConfig
    from trainers.grpo.fit import run_env, run_env_kwargs

    env = "llm/GuessNumber-v0"
    assert run_env_kwargs(GRPOConfig(env=env, model="tiny")) == {}
    assert run_env_kwargs(GRPOConfig(env=env, model="tiny-bpe")) == {"tokenizer": tokenizer_dir}
    given = GRPOConfig(env=env, model="tiny-bpe", env_kwargs={"tokenizer": "byte"})
    assert run_env_kwargs(given) == {"tokenizer": "byte"}  # what the user names is kept
    env_tok, stops = run_env(GRPOConfig(env=env, model="tiny-bpe")).tokenizer_and_stops()
    assert len(env_tok) == 4096 and stops == [4, 2]  # <|im_end|>, then EOS
    assert env_tok.encode("Higher", add_special_tokens=False) == bpe_hf_tokenizer().encode(
        "Higher", add_special_tokens=False)


def test_a_model_and_an_env_that_tokenize_differently_are_refused(bpe):
    from trainers.models import byte_hf_tokenizer, check_tokenizer_agreement

    check_tokenizer_agreement(bpe, bpe_hf_tokenizer())
    check_tokenizer_agreement(byte_hf_tokenizer(), ByteTokenizer())  # the tiny preset and the env default
    check_tokenizer_agreement(None, ByteTokenizer())  # a checkpoint without a tokenizer: nothing to compare
    with pytest.raises(ValueError, match="tokenize text differently.*tokenizer"):
        check_tokenizer_agreement(bpe, ByteTokenizer(), "tiny-bpe")
    with pytest.raises(ValueError, match="tokenize text differently"):
        check_tokenizer_agreement(byte_hf_tokenizer(), bpe)
