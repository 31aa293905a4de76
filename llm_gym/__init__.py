"""llm-gym: reinforcement-learning environments for language models.

Two faces of one environment: the seed API in `llm_gym.rl` (async `Env` / `EnvGroupBuilder` /
`RLDataset`, the Tinker cookbook's abstractions) and Gymnasium (`gym.make("llm/Math-v0")`, token
spaces, vector envs). Importing this package is cheap and torch-free.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llm_gym.completers import (
    MessageCompleter,
    StopCondition,
    TokenCompleter,
    TokensWithLogprobs,
)
from llm_gym.model_input import EncodedTextChunk, ModelInput
from llm_gym.renderers import Message, ParseTermination, Renderer, get_renderer
from llm_gym.tokenizers import ByteTokenizer, InvalidTokenError, load_tokenizer
from llm_gym.registration import make, register_catalogs, register_env

__version__ = "0.1.0"

if TYPE_CHECKING:  # what the lazy names below are, for type checkers (no import at run time)
    from llm_gym.spaces import TokenSequence
    from llm_gym.text_env import TextEnv
    from llm_gym.tools import FunctionTool, tool
    from llm_gym.wrappers.grouping import GymEnvGroupBuilder, GymRLDataset
    from llm_gym.wrappers.text import TextActions
    from llm_gym.wrappers.vector import GroupAdvantages

# The Gymnasium face, imported on first use so `import llm_gym` stays light.
_LAZY = {
    "TextEnv": "llm_gym.text_env",
    "TokenSequence": "llm_gym.spaces",
    "GymEnvGroupBuilder": "llm_gym.wrappers.grouping",
    "GymRLDataset": "llm_gym.wrappers.grouping",
    "GroupAdvantages": "llm_gym.wrappers.vector",
    "TextActions": "llm_gym.wrappers.text",
    "tool": "llm_gym.tools",  # tools as Python callables (`@tool`)
    "FunctionTool": "llm_gym.tools",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'llm_gym' has no attribute {name!r}")


# Register every catalog's ids with Gymnasium (string entry points: no env module is imported).
register_catalogs()

__all__ = [
    "ByteTokenizer",
    "GroupAdvantages",
    "GymEnvGroupBuilder",
    "GymRLDataset",
    "FunctionTool",
    "TextActions",
    "TextEnv",
    "tool",
    "TokenSequence",
    "make",
    "register_catalogs",
    "register_env",
    "EncodedTextChunk",
    "InvalidTokenError",
    "Message",
    "MessageCompleter",
    "ModelInput",
    "ParseTermination",
    "Renderer",
    "StopCondition",
    "TokenCompleter",
    "TokensWithLogprobs",
    "get_renderer",
    "load_tokenizer",
]
