"""Policies the trainer can load without a network: the byte tokenizer and the catalog BPE as HF
tokenizers, the `tiny` and `tiny-bpe` Llama presets, and `load_policy` for any local checkpoint.

The environments default to llm-gym's embedded `ByteTokenizer` (ids 0..255 = UTF-8 bytes, then
`<|pad|>`, `<|bos|>`, `<|eos|>`, `<|im_start|>`, `<|im_end|>` = 256..260). `byte_hf_tokenizer()`
builds the same tokenizer as a real `transformers` fast tokenizer (same ids, a ChatML chat template
that matches `ChatMLRenderer` token for token), so a model trained on our envs is an ordinary HF
checkpoint that TRL, `generate` and `AutoTokenizer` load. `resolve_model("tiny")` builds a ~1.08M
parameter Llama with that tokenizer once, into a local cache directory, and returns its path;
`load_policy` loads a path or a locally cached hub name, never downloading.

`resolve_model("tiny-bpe")` is the same Llama with `bpe_hf_tokenizer()`: a 4,096-id byte-level BPE
trained on the catalog's own episodes (`trainers/data/bpe-tiny.json`, built and checked by
`scripts/build_bpe_tokenizer.py`), so a game turn or a tool call is a few tokens instead of one per
byte (`benchmarks/tokens_per_episode.py`). Its chat template is ChatML with tools, token for token
what `ChatMLRenderer` renders, so an env given the preset's directory (`gym.make(id,
tokenizer=preset_env_tokenizer("tiny-bpe"))`, or the model directory itself) with either renderer
produces the ids the model was built for. The `tiny` preset stays byte-level for tests.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
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
    "BPE_TOKENIZER_FILE",
    "CHATML_TEMPLATE",
    "CHATML_TOOLS_TEMPLATE",
    "PRESETS",
    "TINY_BPE_PRESET",
    "TINY_PRESET",
    "bpe_hf_tokenizer",
    "build_tiny_model",
    "byte_hf_tokenizer",
    "check_tokenizer_agreement",
    "check_vocab_compat",
    "init_weights_",
    "load_policy",
    "preset_env_tokenizer",
    "presets_dir",
    "resolve_model",
    "tiny_bpe_config",
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

# CHATML_TEMPLATE plus tools, in the format of `llm_gym.renderers.tools` that `ChatMLRenderer`
# renders: `tools=` are declared in the leading system message (a new one when there is none), an
# assistant turn's `tool_calls` are `<tool_call>` blocks after its text, and tool results are `tool`
# turns. Without tools it renders what CHATML_TEMPLATE renders. (`tojson` is json.dumps with the
# default separators and ensure_ascii=False, as in the renderer.)
CHATML_TOOLS_TEMPLATE = (
    "{% set ns = namespace(messages=messages, system='') %}"
    "{% if tools %}"
    "{% if messages and messages[0]['role'] == 'system' %}"
    "{% set ns.system = messages[0]['content'] + '\n\n' if messages[0]['content'] else '' %}"
    "{% set ns.messages = messages[1:] %}"
    "{% endif %}"
    "{{ '<|im_start|>system\n' + ns.system + '# Tools\n\nYou may call one or more functions to "
    "assist with the user query.\n\nYou are provided with function signatures within "
    "<tools></tools> XML tags:\n<tools>\n' }}"
    "{{ tools | map('tojson') | join('\n') }}"
    "{{ '\n</tools>\n\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n' }}"
    "{% endif %}"
    "{% for message in ns.messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] }}"
    "{% if message['role'] == 'assistant' and message['tool_calls'] %}"
    "{% for call in message['tool_calls'] %}"
    "{% set fn = call['function'] if call['function'] is defined else call %}"
    "{{ ('\n' if message['content'] or not loop.first else '') + '<tool_call>\n' }}"
    "{{ {'name': fn['name'], 'arguments': fn['arguments']} | tojson }}"
    "{{ '\n</tool_call>' }}"
    "{% endfor %}"
    "{% endif %}"
    "{{ '<|im_end|>' + '\n' }}"
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


# The catalog BPE (scripts/build_bpe_tokenizer.py writes it; the wheel ships it as package data).
BPE_TOKENIZER_FILE = Path(__file__).resolve().parent / "data" / "bpe-tiny.json"
_BPE_NAME = "llm-gym/bpe-tiny"


def bpe_hf_tokenizer() -> PreTrainedTokenizerFast:
    """The catalog-trained byte-level BPE (`BPE_TOKENIZER_FILE`) as a `transformers` fast tokenizer.

    4,096 ids: the five special tokens of `ByteTokenizer` first (`<|pad|>`, `<|bos|>`, `<|eos|>`,
    `<|im_start|>`, `<|im_end|>` = 0..4), then the 256 byte chars, then merges. Any text
    round-trips through `encode`/`decode` (it is byte-level; as with every HF tokenizer, a literal
    special-token string in the text encodes to the special id). `chat_template` is
    `CHATML_TOOLS_TEMPLATE`, which tokenizes a conversation exactly as `ChatMLRenderer` does.
    """
    from tokenizers import Tokenizer

    if not BPE_TOKENIZER_FILE.is_file():
        raise FileNotFoundError(
            f"{BPE_TOKENIZER_FILE} is missing: it ships with llm-gym (reinstall it), or rebuild it "
            "from a source checkout with `python scripts/build_bpe_tokenizer.py`"
        )
    tok = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_file(str(BPE_TOKENIZER_FILE)),
        pad_token="<|pad|>",
        bos_token="<|bos|>",
        eos_token="<|eos|>",
        extra_special_tokens=["<|im_start|>", "<|im_end|>"],
        padding_side="left",
        model_max_length=TINY_PRESET.max_position_embeddings,
    )
    tok.chat_template = CHATML_TOOLS_TEMPLATE
    tok.name_or_path = _BPE_NAME
    ids = tok.convert_tokens_to_ids(list(ByteTokenizer.SPECIAL_TOKENS))
    expected = list(range(len(ByteTokenizer.SPECIAL_TOKENS)))  # _TINY_BPE_KWARGS' and stops' ids
    if ids != expected or len(tok) != _TINY_BPE_KWARGS["vocab_size"]:
        raise RuntimeError(
            f"{BPE_TOKENIZER_FILE} has {len(tok)} ids and special ids {ids}; the tiny-bpe preset "
            f"expects {_TINY_BPE_KWARGS['vocab_size']} ids with the specials at {expected}: rebuild "
            "it with `python scripts/build_bpe_tokenizer.py`"
        )
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
# <|im_end|> ends a ChatML turn; <|eos|> ends a document. Part of the recipe's key (build_tiny_model
# derives the same ids from the tokenizer).
_STOP_IDS = [260, 258]


def tiny_config() -> LlamaConfig:
    """A fresh copy of the tiny Llama config (safe to modify)."""
    return LlamaConfig(**_TINY_KWARGS)


TINY_PRESET: LlamaConfig = tiny_config()

# tiny-bpe: the same Llama over the catalog BPE. The embedding grows from 261 to 4,096 rows
# (1.57M parameters in all); in exchange an episode is several times fewer tokens
# (benchmarks/tokens_per_episode.py), so the model learns from much shorter sequences.
_TINY_BPE_KWARGS: dict[str, Any] = {
    **_TINY_KWARGS,
    "vocab_size": 4096,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
}
_TINY_BPE_STOP_IDS = [4, 2]  # <|im_end|>, <|eos|>


def tiny_bpe_config() -> LlamaConfig:
    """A fresh copy of the tiny-bpe Llama config (safe to modify)."""
    return LlamaConfig(**_TINY_BPE_KWARGS)


TINY_BPE_PRESET: LlamaConfig = tiny_bpe_config()


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
    tokenizer: PreTrainedTokenizerFast | None = None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerFast]:
    """Build the tiny Llama (random init from `torch.Generator().manual_seed(seed)`) with
    `tokenizer` (default: the byte HF tokenizer; `config` defaults to `tiny_config()`). Generation
    stops on the tokenizer's `<|im_end|>` and EOS. With `path`, also `save_pretrained` both there,
    giving a checkpoint that `AutoModelForCausalLM`/`AutoTokenizer.from_pretrained(path)` and TRL
    load."""
    config = config or tiny_config()
    tokenizer = tokenizer or byte_hf_tokenizer()
    if config.vocab_size < len(tokenizer):
        raise ValueError(
            f"config.vocab_size={config.vocab_size} is smaller than the tokenizer "
            f"{tokenizer.name_or_path!r}'s {len(tokenizer)} ids; set vocab_size >= {len(tokenizer)}"
        )
    # Constructing the module runs HF's own init with the global RNG; fork it so building a model
    # never perturbs anyone else's random stream. init_weights_ then overwrites every parameter.
    with torch.random.fork_rng(devices=[]):
        model = LlamaForCausalLM(config)
    init_weights_(model, torch.Generator().manual_seed(int(seed)))
    model.generation_config = GenerationConfig(
        bos_token_id=config.bos_token_id,
        eos_token_id=[tokenizer.convert_tokens_to_ids("<|im_end|>"), tokenizer.eos_token_id],
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


def _bpe_tokenizer_key() -> str:
    """A hash of what `bpe_hf_tokenizer()` saves: the shipped file and the chat template."""
    spec = json.dumps(
        {"file": hashlib.sha256(BPE_TOKENIZER_FILE.read_bytes()).hexdigest(),
         "format": _PRESET_FORMAT, "template": CHATML_TOOLS_TEMPLATE},
        sort_keys=True,
    )
    return hashlib.sha256(spec.encode()).hexdigest()[:12]


def _tiny_bpe_preset_key(seed: int) -> str:
    spec = json.dumps(
        {"config": _TINY_BPE_KWARGS, "format": _PRESET_FORMAT, "seed": seed,
         "stops": _TINY_BPE_STOP_IDS, "tokenizer": _bpe_tokenizer_key()},
        sort_keys=True,
    )
    return hashlib.sha256(spec.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class _Preset:
    config: Callable[[], LlamaConfig]
    tokenizer: Callable[[], PreTrainedTokenizerFast]
    key: Callable[[int], str]  # seed -> the cache directory's suffix: a hash of the whole recipe
    # A hash of the tokenizer alone, for `preset_env_tokenizer`; None when the env's default
    # `ByteTokenizer` already has the preset's ids.
    tokenizer_key: Callable[[], str] | None


_PRESETS: dict[str, _Preset] = {
    "tiny": _Preset(tiny_config, byte_hf_tokenizer, _tiny_preset_key, tokenizer_key=None),
    "tiny-bpe": _Preset(tiny_bpe_config, bpe_hf_tokenizer, _tiny_bpe_preset_key,
                        tokenizer_key=_bpe_tokenizer_key),
}
PRESETS = tuple(_PRESETS)


def _build_once(target: Path, marker: str, build: Callable[[Path], Any]) -> str:
    """`target`, built by `build(tmp)` unless `target/marker` exists: in a temporary sibling
    directory, then renamed, so concurrent first uses are safe."""
    if (target / marker).is_file():
        return str(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-build-", dir=target.parent))
    try:
        build(tmp)
        try:
            os.rename(tmp, target)
        except OSError:
            # Another process won the race (target now exists and is non-empty): use theirs.
            if not (target / marker).is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return str(target)


def resolve_model(name_or_path: str | os.PathLike, seed: int = 0) -> str:
    """Map a preset name (`PRESETS`) to its local checkpoint directory; return anything else
    unchanged.

    A preset is built on first use into `presets_dir()/<name>-<hash of its recipe>` (atomically:
    built in a temporary sibling directory, then renamed, so concurrent first uses are safe). The
    `tiny-bpe` recipe includes the shipped tokenizer file, so a rebuilt tokenizer gets a new
    directory.
    """
    name = os.fspath(name_or_path)
    preset = _PRESETS.get(name)
    if preset is None:
        return name
    target = presets_dir() / f"{name}-{preset.key(seed)}"
    return _build_once(target, "config.json", lambda tmp: build_tiny_model(
        tmp, seed=seed, config=preset.config(), tokenizer=preset.tokenizer()))


def preset_env_tokenizer(name: str) -> str | None:
    """What to pass as an env's `tokenizer=` so it tokenizes as preset `name`'s model does: None
    for `tiny` (the env's default `ByteTokenizer` has its ids), else a directory holding only the
    preset's tokenizer (`presets_dir()/<name>-tokenizer-<hash>`, built once, seed-independent),
    which `llm_gym.load_tokenizer` / `gym.make(id, tokenizer=...)` load. Raises ValueError for a
    name that is not a preset."""
    preset = _PRESETS.get(name)
    if preset is None:
        raise ValueError(f"{name!r} is not a preset; choose one of {list(PRESETS)}")
    if preset.tokenizer_key is None:
        return None
    target = presets_dir() / f"{name}-tokenizer-{preset.tokenizer_key()}"
    return _build_once(target, "tokenizer_config.json",
                       lambda tmp: preset.tokenizer().save_pretrained(os.fspath(tmp)))


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
            "cache, and llm-gym never downloads at run time. Use a preset (built locally: "
            f"{', '.join(repr(p) for p in PRESETS)}), pass "
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


# A probe of what an episode's text looks like: words, digits, punctuation, a tool call.
_AGREEMENT_PROBE = 'Guess the number (1-8): 4. Too low!\n<tool_call>\n{"name": "add", "arguments": {"a": 12}}'


def check_tokenizer_agreement(model_tokenizer: Any, env_tokenizer: Any, model_name: str = "") -> None:
    """Raise ValueError when the model's own tokenizer (saved with its checkpoint) encodes text
    differently from the env's: the policy would read and write ids it was not built for (a
    `tiny-bpe` model fed byte ids trains on nonsense without any other error). None for either
    side (a checkpoint without a tokenizer) checks nothing."""
    if model_tokenizer is None or env_tokenizer is None:
        return
    ours = list(model_tokenizer.encode(_AGREEMENT_PROBE, add_special_tokens=False))
    theirs = list(env_tokenizer.encode(_AGREEMENT_PROBE, add_special_tokens=False))
    if ours != theirs:
        env_name = getattr(env_tokenizer, "name_or_path", type(env_tokenizer).__name__)
        raise ValueError(
            f"the model {model_name!r} and the environment tokenize text differently (the env's "
            f"tokenizer is {env_name!r}: {len(theirs)} ids for a probe the model's own tokenizer "
            f"encodes as {len(ours)}); give the env the model's tokenizer: "
            f"--env-kwargs '{{\"tokenizer\": \"<the model's directory>\"}}'"
        )


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
