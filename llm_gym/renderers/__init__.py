"""Renderers: chat messages ⇄ tokens (`get_renderer(name, tokenizer)`).

| name            | for                                   | stops on                 |
|-----------------|---------------------------------------|--------------------------|
| `chatml`        | byte tokenizer (default), Qwen-style  | `<|im_end|>` id, EOS     |
| `chat_template` | any HF tokenizer with a chat template | EOS, end-of-turn id      |
| `role_colon`    | base models                           | the text "\\n\\nUser:"   |

Tool calls (Hermes/Qwen `<tool_call>` blocks; `tools.py`) are declared with `with_tools(renderer,
specs)` and parsed into `message["tool_calls"]` by every renderer's `parse_response`.

Multi-turn envs build each next prompt with `Continuation(renderer)` (`continuation.py`), which keeps
the prefix property for every renderer or reports the fallback it took.

Custom renderers are added by name with `register_renderer(name, factory)`, the cookbook's registry:
`factory(tokenizer, image_processor)` returns a `Renderer`, and `get_renderer(name, tokenizer)`
looks registered names up before the built-in ones.
"""

from __future__ import annotations

from typing import Any, Callable

from llm_gym.renderers.base import (
    Message,
    ParseTermination,
    RenderContext,
    RenderedMessage,
    Renderer,
    Role,
    TextPart,
    ThinkingPart,
    ToolCall,
    ToolSpec,
    TrainOnWhat,
    UnparsedToolCall,
    ensure_text,
    get_text_content,
)
from llm_gym.renderers.content import (
    ContentPart,
    ParseFailureKind,
    classify_parse_failure,
    ensure_list,
    format_content_as_string,
    has_thinking,
    parse_content_blocks,
    parse_think_blocks,
    remove_thinking,
)
from llm_gym.renderers.chat_template import ChatTemplateRenderer
from llm_gym.renderers.chatml import ChatMLRenderer
from llm_gym.renderers.role_colon import RoleColonRenderer
from llm_gym.renderers.continuation import Continuation, ContinuationStep
from llm_gym.renderers.tools import parse_tool_calls, tools_system_prompt, with_tools

RENDERERS = {
    "chatml": ChatMLRenderer,
    "chat_template": ChatTemplateRenderer,
    "role_colon": RoleColonRenderer,
}


_CUSTOM_RENDERERS: dict[str, Callable[[Any, Any], Renderer]] = {}


def register_renderer(name: str, factory: Callable[[Any, Any], Renderer]) -> None:
    """Make `get_renderer(name, tokenizer)` return `factory(tokenizer, image_processor)`.
    A namespaced name ("Org/my_renderer") keeps clear of the built-in ones."""
    _CUSTOM_RENDERERS[name] = factory


def get_registered_renderer_names() -> list[str]:
    """Names added with `register_renderer` (not the built-in ones)."""
    return list(_CUSTOM_RENDERERS)


def is_renderer_registered(name: str) -> bool:
    """Whether `name` was added with `register_renderer`."""
    return name in _CUSTOM_RENDERERS


def unregister_renderer(name: str) -> bool:
    """Remove a registered name; False if it was not registered."""
    return _CUSTOM_RENDERERS.pop(name, None) is not None


def get_renderer(
    name: str | Renderer | None, tokenizer: Any, image_processor: Any = None,
    model_name: str | None = None,
) -> Renderer:
    """Return the renderer called `name` over `tokenizer`.

    Registered names (`register_renderer`) come first. `None` or "auto" picks: `chatml` for the
    byte tokenizer, `chat_template` for an HF tokenizer with a chat template, `role_colon`
    otherwise. A `Renderer` instance is returned as is. `image_processor` is passed to registered
    factories only; `model_name` is accepted for the cookbook's signature (our renderers pickle
    with their tokenizer and need no name).
    """
    if isinstance(name, Renderer):
        return name
    if isinstance(name, str) and name in _CUSTOM_RENDERERS:
        return _CUSTOM_RENDERERS[name](tokenizer, image_processor)
    if name is None or name == "auto":
        from llm_gym.tokenizers import ByteTokenizer

        if isinstance(tokenizer, ByteTokenizer):
            name = "chatml"
        elif getattr(tokenizer, "chat_template", None):
            name = "chat_template"
        else:
            name = "role_colon"
    if name not in RENDERERS:
        raise ValueError(
        f"unknown renderer {name!r}; choose one of {sorted(RENDERERS)} or 'auto', or add it "
        "with register_renderer()"
    )
    return RENDERERS[name](tokenizer)


__all__ = [
    "ChatMLRenderer",
    "ChatTemplateRenderer",
    "ContentPart",
    "Continuation",
    "ContinuationStep",
    "Message",
    "ParseFailureKind",
    "ParseTermination",
    "RENDERERS",
    "RenderContext",
    "RenderedMessage",
    "Renderer",
    "Role",
    "RoleColonRenderer",
    "TextPart",
    "ThinkingPart",
    "ToolCall",
    "ToolSpec",
    "TrainOnWhat",
    "UnparsedToolCall",
    "classify_parse_failure",
    "ensure_list",
    "ensure_text",
    "format_content_as_string",
    "get_registered_renderer_names",
    "get_renderer",
    "get_text_content",
    "has_thinking",
    "is_renderer_registered",
    "parse_content_blocks",
    "parse_think_blocks",
    "register_renderer",
    "remove_thinking",
    "parse_tool_calls",
    "tools_system_prompt",
    "unregister_renderer",
    "with_tools",
]
