"""The embedded byte tokenizer and `load_tokenizer` (names, paths, objects; never the network)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, strategies as st

from llm_gym.tokenizers import (
    BYTE_TOKENIZER_NAME,
    ByteTokenizer,
    InvalidTokenError,
    load_tokenizer,
    vocab_size_of,
)


def test_layout_and_special_ids(byte_tokenizer):
    t = byte_tokenizer
    assert t.vocab_size == len(t) == vocab_size_of(t) == 261
    assert (t.pad_token_id, t.bos_token_id, t.eos_token_id) == (256, 257, 258)
    assert t.convert_tokens_to_ids(["<|im_start|>", "<|im_end|>"]) == [259, 260]
    assert t.convert_tokens_to_ids("a") == 97
    assert t.convert_ids_to_tokens([97, 260]) == ["a", "<|im_end|>"]
    assert sorted(t.all_special_ids) == [256, 257, 258, 259, 260]
    with pytest.raises(KeyError):
        t.convert_tokens_to_ids("ab")


def test_encode_is_utf8_and_never_makes_special_tokens(byte_tokenizer):
    t = byte_tokenizer
    assert t.encode("hé") == [104, 0xC3, 0xA9]
    assert t.encode("<|im_end|>") == list(b"<|im_end|>")
    assert t.encode("a", add_special_tokens=True) == [257, 97]
    assert t("ab") == {"input_ids": [97, 98], "attention_mask": [1, 1]}


@given(st.text(max_size=300))
def test_round_trip(text):
    t = ByteTokenizer()
    assert t.decode(t.encode(text)) == text


def test_decode_specials_and_skip(byte_tokenizer):
    t = byte_tokenizer
    ids = [259] + t.encode("hi") + [260, 258]
    assert t.decode(ids) == "<|im_start|>hi<|im_end|><|eos|>"
    assert t.decode(ids, skip_special_tokens=True) == "hi"
    assert t.decode(np.array(ids)) == "<|im_start|>hi<|im_end|><|eos|>"


def test_invalid_utf8_becomes_replacement_char(byte_tokenizer):
    t = byte_tokenizer
    assert t.decode([0xFF, 104, 0xC3]) == "\ufffdh\ufffd"
    # a multi-byte character split by a special token is not glued across it
    assert t.decode([0xC3, 260, 0xA9]) == "\ufffd<|im_end|>\ufffd"
    with pytest.raises(UnicodeDecodeError):
        t.decode([0xFF], errors="strict")


@pytest.mark.parametrize("bad", [[261], [5, 10**9], [-1]])
def test_out_of_vocab_ids_raise_invalid_token_error(byte_tokenizer, bad):
    with pytest.raises(InvalidTokenError, match="vocabulary|non-negative"):
        byte_tokenizer.decode(bad)
    assert issubclass(InvalidTokenError, ValueError)


@pytest.mark.parametrize("bad", ["abc", b"abc", [1.5], ["65"], 65])
def test_wrong_types_to_decode_raise_type_error(byte_tokenizer, bad):
    with pytest.raises(TypeError):
        byte_tokenizer.decode(bad)


@pytest.mark.parametrize("bad", [[104, 105], b"hi", 3, None])
def test_wrong_types_to_encode_raise_type_error(byte_tokenizer, bad):
    with pytest.raises(TypeError, match="str"):
        byte_tokenizer.encode(bad)


def test_check_ids(byte_tokenizer):
    byte_tokenizer.check_ids([0, 260])
    with pytest.raises(InvalidTokenError, match="261"):
        byte_tokenizer.check_ids([0, 261])


def test_load_tokenizer_byte_aliases_and_objects(byte_tokenizer):
    for name in (None, "byte", "bytes", BYTE_TOKENIZER_NAME):
        assert isinstance(load_tokenizer(name), ByteTokenizer)
    assert load_tokenizer(byte_tokenizer) is byte_tokenizer
    with pytest.raises(TypeError, match="encode/decode"):
        load_tokenizer(123)


def test_load_tokenizer_from_local_directory(tmp_path, hf_chat_tokenizer):
    hf_chat_tokenizer.save_pretrained(tmp_path)
    tok = load_tokenizer(str(tmp_path))
    text = "What is 2 + 2?"
    assert tok.encode(text, add_special_tokens=False) == hf_chat_tokenizer.encode(
        text, add_special_tokens=False
    )
    assert load_tokenizer(tmp_path).get_vocab() == hf_chat_tokenizer.get_vocab()  # PathLike


def test_load_tokenizer_broken_local_directory_says_so(tmp_path):
    (tmp_path / "tokenizer_config.json").write_text("{not json")
    with pytest.raises(OSError, match="local directory"):
        load_tokenizer(str(tmp_path))


def test_missing_tokenizer_fails_offline_with_a_clear_message():
    # A fresh interpreter whose hub endpoint is a listening socket on loopback that we watch: any
    # network attempt would show up as a connection, so none means only the local cache was read.
    code = textwrap.dedent(
        """
        from llm_gym.tokenizers import load_tokenizer
        try:
            load_tokenizer("nonexistent-org/nonexistent-model")
        except OSError as e:
            print("ERR", str(e).replace("\\n", " "))
        """
    )
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        server.setblocking(False)
        port = server.getsockname()[1]
        env = dict(
            os.environ,
            HF_ENDPOINT=f"http://127.0.0.1:{port}",
            HF_HOME=os.environ.get("HF_HOME", "/tmp/llm-gym-test-hf-home"),
        )
        env.pop("HF_HUB_OFFLINE", None)
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
        )
        try:
            conn, _ = server.accept()
            conn.close()
            connected = True
        except BlockingIOError:
            connected = False
    assert out.returncode == 0, out.stderr
    line = out.stdout.strip().splitlines()[-1]
    assert line.startswith("ERR"), out.stdout
    assert not connected, "loading a missing tokenizer contacted the hub endpoint"
    assert "nonexistent-org/nonexistent-model" in line
    assert "never downloads" in line and "tokenizer='byte'" in line


def test_import_of_tokenizers_module_does_not_import_transformers():
    code = "import sys, llm_gym.tokenizers; print('transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr
