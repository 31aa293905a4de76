"""Formatters for `llm_gym.utils.logtree` (the cookbook's `utils.logtree_formatters`).

A formatter renders itself as HTML (`to_html`), names the CSS it needs (`get_css`) and exposes
structured data for the JSON export (`to_data`). `ConversationFormatter(messages=...)` shows a
chat transcript, one styled block per message, with thinking and tool-call parts set apart.
"""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

__all__ = ["CONVERSATION_CSS", "ConversationFormatter"]


def _part_html(part: Any) -> str:
    kind = part.get("type") if isinstance(part, dict) else None
    if kind == "text":
        return f'<span class="lt-text-part">{html.escape(part["text"])}</span>'
    if kind == "thinking":
        return (f'<details class="lt-thinking-part"><summary>Thinking</summary>'
                f"<pre>{html.escape(part['thinking'])}</pre></details>")
    if kind == "tool_call":
        fn = part["tool_call"].function
        call = html.escape(f"{fn.name}({fn.arguments})")
        return f'<div class="lt-tool-call-part">Tool call: <code>{call}</code></div>'
    if kind == "unparsed_tool_call":
        return (f'<div class="lt-unparsed-tool-call-part">Unparsed tool call: <code>'
                f'{html.escape(part["raw_text"])}</code> ({html.escape(part["error"])})</div>')
    if kind == "image":
        return '<span class="lt-image-part">[Image]</span>'
    raise ValueError(f"Unknown content part type: {kind!r} (expected text, thinking, tool_call, "
                     "unparsed_tool_call or image)")


def _content_html(content: Any) -> str:
    if isinstance(content, str):
        return f'<span class="lt-text-part">{html.escape(content)}</span>'
    return "\n".join(_part_html(part) for part in content)


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _jsonable(dataclasses.asdict(value))
    if hasattr(value, "model_dump"):  # pydantic objects (the cookbook's tool calls)
        return cast(Any, value).model_dump(mode="json")
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


@dataclass
class ConversationFormatter:
    """A list of chat messages (`{"role", "content", ...}`) rendered as a conversation."""

    messages: Sequence[Any]

    def to_html(self) -> str:
        lines = ['<div class="lt-conversation">']
        for message in self.messages:
            role = html.escape(message["role"])
            lines += [
                f'  <div class="lt-message lt-message-{role}">',
                f'    <span class="lt-message-role">{role}:</span>',
                f'    <div class="lt-message-content">{_content_html(message["content"])}</div>',
                "  </div>",
            ]
        lines.append("</div>")
        return "\n".join(lines)

    def to_data(self) -> dict[str, Any]:
        return {"type": "conversation", "messages": [_jsonable(dict(m)) for m in self.messages]}

    def get_css(self) -> str:
        return CONVERSATION_CSS


CONVERSATION_CSS = """
.lt-conversation { display: flex; flex-direction: column; gap: 0.35rem; margin: 0.25rem 0; }
.lt-message { padding: 0.5rem 0.6rem; border-radius: 6px; border-left: 3px solid #2563eb; background: #f9fafb; }
.lt-message-role { font-weight: 600; color: #2563eb; display: inline-block; min-width: 64px; }
.lt-message-user { border-left-color: #059669; } .lt-message-system { border-left-color: #6b7280; }
.lt-message-content { white-space: pre-wrap; }
.lt-thinking-part pre { white-space: pre-wrap; color: #6b7280; }
"""
