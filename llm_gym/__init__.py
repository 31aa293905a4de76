"""llm-gym: reinforcement-learning environments for language models.

Two faces of one environment: the seed API in `llm_gym.rl` (async `Env` / `EnvGroupBuilder` /
`RLDataset`, the Tinker cookbook's abstractions) and Gymnasium (`gym.make("llm/Math-v0")`, token
spaces, vector envs). Importing this package is cheap and torch-free.
"""

from __future__ import annotations

from llm_gym.completers import (
    MessageCompleter,
    StopCondition,
    TokenCompleter,
    TokensWithLogprobs,
)
from llm_gym.model_input import EncodedTextChunk, ModelInput
from llm_gym.renderers import Message, ParseTermination, Renderer, get_renderer
from llm_gym.tokenizers import ByteTokenizer, InvalidTokenError, load_tokenizer

__version__ = "0.1.0"

__all__ = [
    "ByteTokenizer",
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
