"""Model names → metadata and recommended renderer (the cookbook's `tinker_cookbook.model_info`).

Dataset builders call `get_recommended_renderer_name("Qwen/Qwen3-8B")` to pick a renderer for a
model they only know by name. The table below records, per known model, what the cookbook
recommends (its renderer names, best first). `get_recommended_renderer_names` returns that list
as is; `get_recommended_renderer_name` returns the first recommended name that `llm_gym.renderers.
get_renderer` can build here — a built-in (`role_colon` for base models) or one added with
`register_renderer` — and otherwise raises a `ConfigurationError` that names the recommended
renderers and the fix, instead of handing back a name `get_renderer` would reject later.
Importing this module is cheap (no renderer, tokenizer or torch import until a lookup).
"""

from __future__ import annotations

import difflib
import logging
from dataclasses import dataclass
from functools import cache

from llm_gym.exceptions import ConfigurationError

logger = logging.getLogger(__name__)

__all__ = [
    "ModelAttributes",
    "UnknownModelError",
    "get_model_attributes",
    "get_recommended_renderer_name",
    "get_recommended_renderer_names",
    "warn_if_renderer_not_recommended",
]


class UnknownModelError(ConfigurationError, KeyError):
    """The model name is not in the table. A `KeyError` too, as the cookbook raises `KeyError` for
    an unknown model of a known organization, so `except KeyError` keeps working."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


@dataclass
class ModelAttributes:
    """What a training script needs to know about a model to choose defaults (cookbook fields)."""

    organization: str
    version_str: str
    size_str: str
    is_chat: bool
    recommended_renderers: tuple[str, ...]
    is_vl: bool = False
    is_audio_in: bool = False


_ROLE_COLON = ("role_colon",)
_DEEPSEEKV4_1 = ("deepseekv4_1", "deepseekv4_1_low_reasoning", "deepseekv4_1_max_reasoning",
                 "deepseekv4_1_disable_thinking", "deepseekv4_1_preserve_thinking")
_GLM5_3 = ("glm5_3_max_reasoning", "glm5_3_low_reasoning", "glm5_3_high_reasoning")
_NEMOTRON3 = ("nemotron3", "nemotron3_disable_thinking", "nemotron3_preserve_thinking")
_NEMOTRON3_ULTRA = ("nemotron3_ultra", "nemotron3_ultra_disable_thinking",
                    "nemotron3_ultra_medium_thinking", "nemotron3_ultra_preserve_thinking")

# organization -> [(model version, version_str, size_str, is_chat, recommended renderers, is_vl)].
_TABLE: dict[str, list[tuple[str, str, str, bool, tuple[str, ...], bool]]] = {
    "meta-llama": [
        ("Llama-3.1-8B-Instruct", "3.1", "8B", True, ("llama3",), False),
        ("Llama-3.3-70B-Instruct", "3.3", "70B", True, ("llama3",), False),
        ("Llama-3.2-1B", "3.2", "1B", False, _ROLE_COLON, False),
        ("Llama-3.2-3B", "3.2", "3B", False, _ROLE_COLON, False),
        ("Llama-3.1-8B", "3.1", "8B", False, _ROLE_COLON, False),
        ("Llama-3.1-70B", "3.1", "70B", False, _ROLE_COLON, False),
    ],
    "Qwen": [
        ("Qwen3-VL-30B-A3B-Instruct", "3", "30B-A3B", True, ("qwen3_vl_instruct",), True),
        ("Qwen3-VL-235B-A22B-Instruct", "3", "235B-A22B", True, ("qwen3_vl_instruct",), True),
        ("Qwen3-8B-Base", "3", "8B", False, _ROLE_COLON, False),
        ("Qwen3-30B-A3B-Base", "3", "30B-A3B", False, _ROLE_COLON, False),
        ("Qwen3-8B", "3", "8B", True, ("qwen3", "qwen3_disable_thinking"), False),
        ("Qwen3-32B", "3", "32B", True, ("qwen3", "qwen3_disable_thinking"), False),
        ("Qwen3-30B-A3B", "3", "30B-A3B", True, ("qwen3", "qwen3_disable_thinking"), False),
        ("Qwen3-4B-Instruct-2507", "3", "4B", True, ("qwen3_instruct",), False),
        ("Qwen3-30B-A3B-Instruct-2507", "3", "30B-A3B", True, ("qwen3_instruct",), False),
        ("Qwen3-235B-A22B-Instruct-2507", "3", "235B-A22B", True, ("qwen3_instruct",), False),
        *[
            (name, version, size, True,
             ("qwen3_5", "qwen3_5_disable_thinking", "qwen3_5_preserve_thinking"), True)
            for name, version, size in [
                ("Qwen3.5-4B", "3.5", "4B"), ("Qwen3.5-9B", "3.5", "9B"),
                ("Qwen3.5-27B", "3.5", "27B"), ("Qwen3.5-35B-A3B", "3.5", "35B-A3B"),
                ("Qwen3.5-397B-A17B", "3.5", "397B-A17B"), ("Qwen3.6-27B", "3.6", "27B"),
                ("Qwen3.6-35B-A3B", "3.6", "35B-A3B"),
            ]
        ],
        ("Qwen3.5-9B-Base", "3.5", "9B", False, _ROLE_COLON, True),
        ("Qwen3.5-35B-A3B-Base", "3.5", "35B-A3B", False, _ROLE_COLON, True),
        ("Qwen3.8-27B", "3.8", "27B", True,
         ("qwen3_8_xhigh_reasoning", "qwen3_8_disable_thinking", "qwen3_8_medium_reasoning",
          "qwen3_8_low_reasoning"), True),
    ],
    "deepseek-ai": [
        ("DeepSeek-V3.1", "3", "671B-A37B", True, ("deepseekv3", "deepseekv3_thinking"), False),
        ("DeepSeek-V3.1-Base", "3", "671B-A37B", False, _ROLE_COLON, False),
        ("DeepSeek-V4.1-Flash", "4.1", "552B-A16B", True, _DEEPSEEKV4_1, False),
        ("DeepSeek-V4.1-Flash-1017", "4.1", "552B-A16B", True, _DEEPSEEKV4_1, False),
    ],
    "openai": [
        ("gpt-oss-20b", "1", "21B-A3.6B", True, ("gpt_oss_no_sysprompt", "gpt_oss_medium_reasoning"), False),
        ("gpt-oss-120b", "1", "117B-A5.1B", True, ("gpt_oss_no_sysprompt", "gpt_oss_medium_reasoning"), False),
    ],
    "moonshotai": [
        ("Kimi-K2-Thinking", "K2", "1T-A32B", True, ("kimi_k2",), False),
        ("Kimi-K2.5", "K2.5", "1T-A32B", True, ("kimi_k25", "kimi_k25_disable_thinking"), True),
        ("Kimi-K2.6", "K2.6", "1T-A32B", True,
         ("kimi_k26", "kimi_k26_disable_thinking", "kimi_k26_preserve_thinking"), True),
        ("Kimi-K3.1-Pro", "K3.1", "2.8T-A104B", True,
         ("kimi_k31_pro_max_reasoning", "kimi_k31_pro_high_reasoning", "kimi_k31_pro_low_reasoning",
          "kimi_k31_pro_disable_thinking", "kimi_k31_pro_no_reasoning_effort"), True),
    ],
    "zai-org": [
        ("GLM-5.3", "5.3", "744B-A40B", True, _GLM5_3, False),
        ("GLM-5.3-Flash", "5.3", "320B-A18B", True, _GLM5_3, False),
    ],
    "nvidia": [
        ("NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "3", "30B-A3B", True, _NEMOTRON3, False),
        ("NVIDIA-Nemotron-3-Super-120B-A12B-BF16", "3", "120B-A12B", True,
         (*_NEMOTRON3, "nemotron3_low_thinking"), False),
        ("NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16", "3", "550B-A55B", True, _NEMOTRON3_ULTRA, False),
        # Lightning uses the Ultra chat format, without its medium-thinking variant.
        ("NVIDIA-Nemotron-3.5-Lightning-30B-A3B-BF16", "3.5", "30B-A3B", True,
         tuple(r for r in _NEMOTRON3_ULTRA if r != "nemotron3_ultra_medium_thinking"), False),
        ("NVIDIA-Nemotron-3.5-Super-VL-120B-A12B-BF16", "3.5", "120B-A12B", True, _NEMOTRON3_ULTRA, True),
    ],
}

# Thinking Machines' Inkling models (rendered by the separate `tml_renderers` package): version,
# size and whether they take audio (all take images). An `Inkling*` id not listed here gets the
# same renderer, images and audio.
_INKLING_ORG = "thinkingmachines"
_INKLING = {
    "Inkling": ("1", "975B-A41B", True),
    "Inkling-Small": ("1", "276B-A12B", True),
    "Inkling-2-Small": ("2", "594B-A17B", False),
}
_TML_V0 = ("tml_v0",)


@cache
def _models() -> dict[str, ModelAttributes]:
    return {
        f"{org}/{name}": ModelAttributes(org, version, size, is_chat, renderers, is_vl)
        for org, rows in _TABLE.items()
        for name, version, size, is_chat, renderers, is_vl in rows
    }


def get_model_attributes(model_name: str) -> ModelAttributes:
    """Metadata for `model_name` ("org/model", an optional ":checkpoint" suffix is ignored).

    Raises `ValueError` for a name without "/", `UnknownModelError` (a `ConfigurationError` and a
    `KeyError`) for a model not in the table, with the closest known names."""
    model_name = model_name.split(":", 1)[0]
    if "/" not in model_name:
        raise ValueError(f"Model name must be in 'org/model' format, got {model_name!r}")
    org, version = model_name.split("/", 1)
    if org == _INKLING_ORG and version.startswith("Inkling"):
        # An untabled Inkling id resolves too (size and version unknown: the id stands for both),
        # so a new Inkling works before it is listed.
        version_str, size_str, audio_in = _INKLING.get(version, (version, version, True))
        return ModelAttributes(org, version_str, size_str, True, _TML_V0, is_vl=True, is_audio_in=audio_in)
    try:
        return _models()[model_name]
    except KeyError:
        close = difflib.get_close_matches(model_name, list(_models()), n=3)
        hint = f" Did you mean: {', '.join(map(repr, close))}?" if close else ""
        raise UnknownModelError(
            f"Unknown model {model_name!r}: llm_gym.model_info has no entry for it.{hint} Pass a "
            "renderer name explicitly (e.g. 'chat_template' for an HF tokenizer with a chat template, "
            "'role_colon' for a base model)."
        ) from None


def get_recommended_renderer_names(model_name: str) -> list[str]:
    """The cookbook's recommended renderer names for the model, best first (some may not exist in
    llm_gym; `get_recommended_renderer_name` picks one that does)."""
    return list(get_model_attributes(model_name).recommended_renderers)


def _available_renderer_names() -> set[str]:
    from llm_gym.renderers import RENDERERS, get_registered_renderer_names

    return set(RENDERERS) | set(get_registered_renderer_names())


def get_recommended_renderer_name(model_name: str) -> str:
    """The most recommended renderer for the model that `get_renderer` can build in llm_gym.

    Raises `ConfigurationError` when none of the recommended renderers exists here (e.g. the
    "qwen3" chat format), naming them and the two fixes: `register_renderer(name, factory)` or an
    explicit renderer name such as "chat_template"."""
    recommended = get_recommended_renderer_names(model_name)
    available = _available_renderer_names()
    for name in recommended:
        if name in available:
            return name
    raise ConfigurationError(
        f"No renderer recommended for {model_name!r} exists in llm_gym: the cookbook recommends "
        f"{', '.join(map(repr, recommended))}; llm_gym has {', '.join(map(repr, sorted(available)))}. "
        f"Register one with llm_gym.renderers.register_renderer({recommended[0]!r}, factory), or "
        "pass an explicit renderer name (e.g. 'chat_template', which uses the tokenizer's own chat "
        "template)."
    )


def warn_if_renderer_not_recommended(model_name: str, renderer_name: str | None) -> None:
    """Log a warning when `renderer_name` is not among the model's recommended renderers; silent
    for `None` and for models not in the table."""
    if renderer_name is None:
        return
    try:
        recommended = get_recommended_renderer_names(model_name)
    except (ConfigurationError, KeyError, ValueError):
        return
    if renderer_name not in recommended:
        logger.warning(
            "Renderer %r is not recommended for model %r. Recommended renderer(s): %s.",
            renderer_name, model_name, ", ".join(repr(r) for r in recommended),
        )
