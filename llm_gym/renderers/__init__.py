"""Renderers: chat messages ⇄ tokens (`get_renderer(name, tokenizer)`).

| name            | for                                   | stops on                 |
|-----------------|---------------------------------------|--------------------------|
| `chatml`        | byte tokenizer (default), Qwen-style  | `<|im_end|>` id, EOS     |
| `chat_template` | any HF tokenizer with a chat template | EOS, end-of-turn id      |
| `role_colon`    | base models                           | the text "\\n\\nUser:"   |
"""

from __future__ import annotations

from typing import Any

from llm_gym.renderers.base import (
    Message,
    ParseTermination,
    Renderer,
    TrainOnWhat,
    ensure_text,
    get_text_content,
)
from llm_gym.renderers.chat_template import ChatTemplateRenderer
from llm_gym.renderers.chatml import ChatMLRenderer
from llm_gym.renderers.role_colon import RoleColonRenderer

RENDERERS = {
    "chatml": ChatMLRenderer,
    "chat_template": ChatTemplateRenderer,
    "role_colon": RoleColonRenderer,
}


def get_renderer(name: str | Renderer | None, tokenizer: Any) -> Renderer:
    """Return the renderer called `name` over `tokenizer`.

    `None` or "auto" picks: `chatml` for the byte tokenizer, `chat_template` for an HF tokenizer
    with a chat template, `role_colon` otherwise. A `Renderer` instance is returned as is.
    """
    if isinstance(name, Renderer):
        return name
    if name is None or name == "auto":
        from llm_gym.tokenizers import ByteTokenizer

        if isinstance(tokenizer, ByteTokenizer):
            name = "chatml"
        elif getattr(tokenizer, "chat_template", None):
            name = "chat_template"
        else:
            name = "role_colon"
    if name not in RENDERERS:
        raise ValueError(f"unknown renderer {name!r}; choose one of {sorted(RENDERERS)} or 'auto'")
    return RENDERERS[name](tokenizer)


__all__ = [
    "ChatMLRenderer",
    "ChatTemplateRenderer",
    "Message",
    "ParseTermination",
    "RENDERERS",
    "Renderer",
    "RoleColonRenderer",
    "TrainOnWhat",
    "ensure_text",
    "get_renderer",
    "get_text_content",
]
