"""Policies the trainer can load without a network: the byte tokenizer as an HF tokenizer, the
`tiny` Llama preset, and `load_policy` for any local checkpoint.

The environments default to llm-gym's embedded `ByteTokenizer` (ids 0..255 = UTF-8 bytes, then
`<|pad|>`, `<|bos|>`, `<|eos|>`, `<|im_start|>`, `<|im_end|>` = 256..260). `byte_hf_tokenizer()`
builds the same tokenizer as a real `transformers` fast tokenizer (same ids, a ChatML chat template
that matches `ChatMLRenderer` token for token), so a model trained on our envs is an ordinary HF
checkpoint that TRL, `generate` and `AutoTokenizer` load. `resolve_model("tiny")` builds a ~1.08M
parameter Llama with that tokenizer once, into a local cache directory, and returns its path;
`load_policy` loads a path or a locally cached hub name, never downloading.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, cast

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    GenerationConfig,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
    PreTrainedTokenizerFast,
)

from llm_gym.tokenizers import ByteTokenizer, vocab_size_of

__all__ = [
    "CHATML_TEMPLATE",
    "TINY_PRESET",
    "build_tiny_model",
    "byte_hf_tokenizer",
    "check_vocab_compat",
    "init_weights_",
    "load_policy",
    "presets_dir",
    "resolve_model",
    "tiny_config",
]

# ChatML exactly as `llm_gym.renderers.ChatMLRenderer` renders it: every turn is
# "<|im_start|>{role}\n{content}<|im_end|>\n"; the generation prompt is "<|im_start|>assistant\n".
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable unicode char map (the alphabet of the `ByteLevel` pre-tokenizer).

    Spelled out here because `transformers` 5 no longer exports it; `tokenizers`'
    `ByteLevel.alphabet()` gives the same set of chars but not the byte each one stands for.
    """
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    chars = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return dict(zip(printable, map(chr, chars)))


def byte_hf_tokenizer() -> PreTrainedTokenizerFast:
    """The embedded byte tokenizer as a `transformers` fast tokenizer with identical ids.

    Construction: a byte-level BPE with no merges whose vocabulary maps each byte's `ByteLevel`
    char to the byte's value, so every UTF-8 byte is its own token (0..255); the five specials are
    added tokens 256..260. `len(tok) == 261`, `pad/bos/eos` are set, `<|im_start|>`/`<|im_end|>`
    are extra special tokens, and `chat_template` is ChatML.

    One deliberate difference from `ByteTokenizer`: like every HF tokenizer, this one turns the
    literal text "<|im_end|>" into the special id when it encodes text (that is how the chat
    template's output is tokenized); `ByteTokenizer.encode` keeps it as bytes.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    byte_to_char = _bytes_to_unicode()
    vocab = {byte_to_char[b]: b for b in range(ByteTokenizer.NUM_BYTES)}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    # use_regex=False: no word splitting is needed when every byte is a token; no prefix space so
    # " x" and "x" stay distinct exactly as their bytes are.
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    # Added in id order, so they take ids 256..260 as in ByteTokenizer.
    core.add_special_tokens(
        [AddedToken(t, special=True, normalized=False) for t in ByteTokenizer.SPECIAL_TOKENS]
    )
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token="<|pad|>",
        bos_token="<|bos|>",
        eos_token="<|eos|>",
        extra_special_tokens=["<|im_start|>", "<|im_end|>"],
        padding_side="left",  # decoder-only generation pads on the left
        model_max_length=TINY_PRESET.max_position_embeddings,
    )
    tok.chat_template = CHATML_TEMPLATE
    tok.name_or_path = "llm-gym/byte-hf"
    reference = ByteTokenizer()
    ids = tok.convert_tokens_to_ids(list(ByteTokenizer.SPECIAL_TOKENS))
    if ids != [reference.convert_tokens_to_ids(t) for t in ByteTokenizer.SPECIAL_TOKENS]:
        # Guards against a tokenizers/transformers release that orders added tokens differently.
        raise RuntimeError(f"byte HF tokenizer special ids {ids} differ from ByteTokenizer's")
    return tok


# --- the tiny preset -------------------------------------------------------------------------
# Sized like the model the DESIGN facts were measured on (1.08M parameters). vocab_size is exactly
# the tokenizer's 261 ids (not rounded up to 264): every id the model can sample then decodes, and
# the sampler's logprobs are over the same support as the trainer's forward pass.
_TINY_KWARGS: dict[str, Any] = dict(
    vocab_size=261,
    hidden_size=128,
    intermediate_size=512,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=4,
    max_position_embeddings=2048,  # GuessNumber-length episodes (~700 byte tokens) fit
    initializer_range=0.02,
    rms_norm_eps=1e-6,
    tie_word_embeddings=True,
    pad_token_id=256,
    bos_token_id=257,
    eos_token_id=258,
)
# Bump when the build recipe changes, so cached preset directories are rebuilt.
_PRESET_FORMAT = 1
_STOP_IDS = [260, 258]  # <|im_end|> ends a ChatML turn; <|eos|> ends a document


def tiny_config() -> LlamaConfig:
    """A fresh copy of the tiny Llama config (safe to modify)."""
    return LlamaConfig(**_TINY_KWARGS)


TINY_PRESET: LlamaConfig = tiny_config()


@torch.no_grad()
def init_weights_(model: torch.nn.Module, generator: torch.Generator) -> None:
    """Re-initialise every parameter from `generator` only, as HF's Llama init does: normal(0,
    initializer_range) for linear and embedding weights, ones for RMSNorm weights, zeros for
    biases, and a zero embedding row for the pad token. Parameters are visited in a fixed order,
    so one seed gives one model whatever the global RNG holds."""
    std = float(getattr(model.config, "initializer_range", 0.02))
    for name, param in model.named_parameters():
        if name.endswith("norm.weight"):
            param.fill_(1.0)
        elif name.endswith(".bias"):
            param.zero_()
        else:
            sample = torch.randn(param.shape, generator=generator, dtype=torch.float32)
            param.copy_(sample.mul_(std).to(param.dtype))
    pad = getattr(model.config, "pad_token_id", None)
    if pad is not None:
        cast(Any, model).get_input_embeddings().weight[pad].zero_()  # a transformers model


def build_tiny_model(
    path: str | os.PathLike | None = None,
    seed: int = 0,
    config: LlamaConfig | None = None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerFast]:
    """Build the tiny Llama (random init from `torch.Generator().manual_seed(seed)`) with the byte
    HF tokenizer. With `path`, also `save_pretrained` both there, giving a checkpoint that
    `AutoModelForCausalLM`/`AutoTokenizer.from_pretrained(path)` and TRL load."""
    config = config or tiny_config()
    tokenizer = byte_hf_tokenizer()
    if config.vocab_size < len(tokenizer):
        raise ValueError(
            f"config.vocab_size={config.vocab_size} is smaller than the byte tokenizer's "
            f"{len(tokenizer)} ids; set vocab_size >= {len(tokenizer)}"
        )
    # Constructing the module runs HF's own init with the global RNG; fork it so building a model
    # never perturbs anyone else's random stream. init_weights_ then overwrites every parameter.
    with torch.random.fork_rng(devices=[]):
        model = LlamaForCausalLM(config)
    init_weights_(model, torch.Generator().manual_seed(int(seed)))
    model.generation_config = GenerationConfig(
        bos_token_id=config.bos_token_id,
        eos_token_id=list(_STOP_IDS),
        pad_token_id=config.pad_token_id,
    )
    model.eval()
    if path is not None:
        model.save_pretrained(os.fspath(path))
        tokenizer.save_pretrained(os.fspath(path))
    return model, tokenizer


def presets_dir() -> Path:
    """Where built presets live: `$LLM_GYM_HOME/presets`, else `~/.cache/llm_gym/presets`."""
    home = os.environ.get("LLM_GYM_HOME")
    base = Path(home) if home else Path.home() / ".cache" / "llm_gym"
    return base / "presets"


def _tiny_preset_key(seed: int) -> str:
    spec = json.dumps(
        {"config": _TINY_KWARGS, "format": _PRESET_FORMAT, "seed": seed, "stops": _STOP_IDS},
        sort_keys=True,
    )
    return hashlib.sha256(spec.encode()).hexdigest()[:12]


PRESETS = ("tiny",)


def resolve_model(name_or_path: str | os.PathLike, seed: int = 0) -> str:
    """Map a preset name to its local checkpoint directory; return anything else unchanged.

    `"tiny"` is built on first use into `presets_dir()/tiny-<hash of its recipe>` (atomically:
    built in a temporary sibling directory, then renamed, so concurrent first uses are safe).
    """
    name = os.fspath(name_or_path)
    if name != "tiny":
        return name
    target = presets_dir() / f"tiny-{_tiny_preset_key(seed)}"
    if (target / "config.json").is_file():
        return str(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tiny-build-", dir=target.parent))
    try:
        build_tiny_model(tmp, seed=seed)
        try:
            os.rename(tmp, target)
        except OSError:
            # Another process won the race (target now exists and is non-empty): use theirs.
            if not (target / "config.json").is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return str(target)


def load_policy(
    name_or_path: str | os.PathLike,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
) -> tuple[PreTrainedModel, Any]:
    """Load `(model, hf_tokenizer)` from a preset name, a local directory or the local HF cache.

    Never downloads (`local_files_only=True`); when the checkpoint is not local the error says how
    to get it. The model is returned on `device` in `dtype`, in eval mode.
    """
    path = resolve_model(name_or_path)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=dtype)
    except OSError as exc:
        raise OSError(
            f"model {path!r} is neither a local checkpoint directory nor in the local Hugging Face "
            "cache, and llm-gym never downloads at run time. Use model='tiny' (built locally), pass "
            f"a directory written by save_pretrained, or download once on a connected machine "
            f"(`huggingface-cli download {path}`)."
        ) from exc
    # transformers' to() is @wraps(nn.Module.to), whose signature pyright then reads as unbound
    model.to(device)  # pyright: ignore[reportArgumentType]
    model.eval()
    return model, tokenizer


def _embedding_rows(model: torch.nn.Module) -> int:
    get: Callable[[], Any] | None = getattr(model, "get_input_embeddings", None)
    emb = get() if callable(get) else None
    if emb is not None and hasattr(emb, "weight"):
        return int(emb.weight.shape[0])
    return int(cast(Any, model).config.vocab_size)  # a transformers config


def check_vocab_compat(model: torch.nn.Module, env_tokenizer: Any) -> None:
    """Raise ValueError when the env's tokenizer can produce ids the model has no embedding for."""
    rows = _embedding_rows(model)
    needed = vocab_size_of(env_tokenizer)
    if rows < needed:
        name = getattr(env_tokenizer, "name_or_path", type(env_tokenizer).__name__)
        raise ValueError(
            f"the model has {rows} embedding rows but the environment's tokenizer {name!r} uses "
            f"{needed} token ids. Make the env use the model's tokenizer (e.g. "
            f"gym.make(..., tokenizer=<the model's path>)), or enlarge the model's vocabulary "
            f"with model.resize_token_embeddings({needed})."
        )
