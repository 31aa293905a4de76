"""The byte tokenizer as an HF tokenizer, the tiny preset, offline loading, vocab checks."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from llm_gym.renderers import ChatMLRenderer  # noqa: E402
from llm_gym.tokenizers import ByteTokenizer  # noqa: E402
from trainers.models import (  # noqa: E402
    TINY_PRESET,
    build_tiny_model,
    byte_hf_tokenizer,
    check_vocab_compat,
    load_policy,
    resolve_model,
)

TEXTS = [
    "hello world",
    "  leading and trailing spaces  ",
    "tabs\tand\nnewlines\r\n",
    "héllo ü Straße 日本語",
    "emoji 😀👍🏽 family 👨‍👩‍👧",
    "",
]


@pytest.fixture(scope="module")
def hf_tok():
    return byte_hf_tokenizer()


@pytest.mark.parametrize("text", TEXTS)
def test_encode_decode_parity_with_byte_tokenizer(hf_tok, text):
    ref = ByteTokenizer()
    ids = hf_tok.encode(text, add_special_tokens=False)
    assert ids == ref.encode(text) == list(text.encode("utf-8"))
    assert hf_tok.decode(ids) == ref.decode(ids) == text


def test_special_ids_match(hf_tok):
    ref = ByteTokenizer()
    assert len(hf_tok) == ref.vocab_size == 261
    assert hf_tok.pad_token_id == ref.pad_token_id == 256
    assert hf_tok.bos_token_id == ref.bos_token_id == 257
    assert hf_tok.eos_token_id == ref.eos_token_id == 258
    assert hf_tok.convert_tokens_to_ids(["<|im_start|>", "<|im_end|>"]) == [259, 260]
    specials = [256, 257, 258, 259, 260]
    assert hf_tok.decode(specials) == ref.decode(specials) == "".join(ref.SPECIAL_TOKENS)
    assert hf_tok.decode([104, 105, 260], skip_special_tokens=True) == "hi"
    assert set(specials) <= set(hf_tok.all_special_ids)


def test_chat_template_matches_chatml_renderer(hf_tok):
    renderer = ChatMLRenderer(ByteTokenizer())
    convos = [
        [{"role": "user", "content": "What is 12+35?"}],
        [
            {"role": "system", "content": "Answer with a number."},
            {"role": "user", "content": "ü + 😀 = ?"},
            {"role": "assistant", "content": "47"},
            {"role": "user", "content": "and again\n"},
        ],
    ]
    for messages in convos:
        got = hf_tok.apply_chat_template(messages, add_generation_prompt=True)["input_ids"]
        assert got == renderer.build_generation_prompt(messages).to_ints()
    # Without a generation prompt, the template renders the finished conversation.
    full = convos[1]
    tokens, _ = renderer.build_supervised_example(full)
    assert hf_tok.apply_chat_template(full)["input_ids"] == tokens.to_ints()


def test_renderer_accepts_hf_tokenizer(hf_tok):
    msgs = [{"role": "user", "content": "2+2"}]
    a = ChatMLRenderer(hf_tok).build_generation_prompt(msgs)
    b = ChatMLRenderer(ByteTokenizer()).build_generation_prompt(msgs)
    assert a == b


def test_tiny_preset_size_and_determinism():
    assert TINY_PRESET.vocab_size >= 261 and TINY_PRESET.tie_word_embeddings
    m0, _ = build_tiny_model(seed=0)
    m0b, _ = build_tiny_model(seed=0)
    m1, _ = build_tiny_model(seed=1)
    n_params = sum(p.numel() for p in m0.parameters())
    assert 0.8e6 < n_params < 1.5e6
    for p, q in zip(m0.parameters(), m0b.parameters()):
        assert torch.equal(p, q)
    assert not torch.equal(m0.lm_head.weight, m1.lm_head.weight)
    # building does not touch the global RNG
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    build_tiny_model(seed=5)
    assert torch.equal(torch.rand(3), expected)


def test_save_and_reload_round_trip(tmp_path, hf_tok):
    model, _ = build_tiny_model(tmp_path, seed=0)
    tok = AutoTokenizer.from_pretrained(tmp_path, local_files_only=True)
    for text in TEXTS:
        assert tok.encode(text, add_special_tokens=False) == hf_tok.encode(text, add_special_tokens=False)
    assert tok.pad_token_id == 256 and tok.eos_token_id == 258 and len(tok) == 261
    msgs = [{"role": "user", "content": "hi"}]
    assert (
        tok.apply_chat_template(msgs, add_generation_prompt=True)["input_ids"]
        == hf_tok.apply_chat_template(msgs, add_generation_prompt=True)["input_ids"]
    )
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path, local_files_only=True)
    ids = torch.tensor([[259, 104, 105, 10]])
    with torch.no_grad():
        assert torch.allclose(model(ids).logits, reloaded(ids).logits, atol=1e-6)


def test_resolve_model_tiny_is_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("LLM_GYM_HOME", str(tmp_path))
    path = resolve_model("tiny")
    assert path.startswith(str(tmp_path)) and "tiny-" in path
    mtime = (tmp_path / "presets").stat().st_mtime_ns
    assert resolve_model("tiny") == path  # second call reuses the directory
    assert (tmp_path / "presets").stat().st_mtime_ns == mtime
    assert [p.name for p in (tmp_path / "presets").iterdir()] == [path.rsplit("/", 1)[1]]
    assert resolve_model("some/other-model") == "some/other-model"
    model, tok = load_policy("tiny", dtype=torch.bfloat16)
    assert model.dtype == torch.bfloat16 and len(tok) == 261
    assert not model.training


def test_load_policy_missing_is_offline_error(tmp_path):
    with pytest.raises(OSError, match="never downloads"):
        load_policy(str(tmp_path / "does-not-exist"))
    with pytest.raises(OSError, match="huggingface-cli download"):
        load_policy("no-such-org/no-such-model-xyz")


def test_check_vocab_compat():
    model, tok = build_tiny_model(seed=0)
    check_vocab_compat(model, ByteTokenizer())  # 261 rows for 261 ids: fine
    check_vocab_compat(model, tok)

    class BigVocab:
        name_or_path = "big-vocab"

        def __len__(self):
            return 1000

    with pytest.raises(ValueError, match=r"261 embedding rows.*1000.*resize_token_embeddings"):
        check_vocab_compat(model, BigVocab())
