"""Message content helpers: content parts, `<think>` / `<tool_call>` block parsing, parse failures.

The cookbook's content-level functions in `tinker_cookbook.renderers.base`, under the same names and
with the same results (`tests/conformance/test_cookbook_renderers.py` compares them), so env code
that inspects a parsed message keeps working after the import switch. `llm_gym.renderers.base`
re-exports everything here. Renderers produce the two failure signals `classify_parse_failure`
folds together: the `ParseTermination` of `parse_response` (structural: the framing broke) and
`message["unparsed_tool_calls"]` (content: a tool block did not parse). Images and audio are out
of scope: `ContentPart` is text or thinking, and other part types raise `RendererError`.
"""

from __future__ import annotations

import enum
import json
import re
from typing import Union

from llm_gym.exceptions import RendererError
from llm_gym.renderers.base import Message, ParseTermination, TextPart, ThinkingPart, ToolCall, UnparsedToolCall

__all__ = [
    "PARSE_FAILURE_DETAIL_MAX_CHARS",
    "UNTERMINATED_TOOL_BLOCK_ERROR",
    "ContentPart",
    "ParseFailureKind",
    "classify_parse_failure",
    "detect_unterminated_tool_block",
    "ensure_list",
    "format_content_as_string",
    "has_thinking",
    "parse_content_blocks",
    "parse_think_blocks",
    "remove_thinking",
]

ContentPart = Union[TextPart, ThinkingPart]
"""A part of list-form message content (the cookbook's union also has image and audio parts)."""

PARSE_FAILURE_DETAIL_MAX_CHARS = 16384
"""`classify_parse_failure` details and unterminated-block `raw_text` are cut to this length (a
policy can emit megabytes; logs should not carry them)."""

UNTERMINATED_TOOL_BLOCK_ERROR = "unterminated tool block"
"""Prefix of the `UnparsedToolCall.error` that `detect_unterminated_tool_block` produces."""

_THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL)
_THINK_OR_TOOL = re.compile(r"<think>(.*?)</think>|<tool_call>(.*?)</tool_call>", re.DOTALL)


class ParseFailureKind(str, enum.Enum):
    """Which way a sampled response failed to parse.

    STRUCTURAL: the response did not end cleanly (`ParseTermination.MALFORMED`); the turn's
    boundary is unknown, so it cannot be retried. CONTENT: it ended cleanly but a tool block inside
    did not parse (`message["unparsed_tool_calls"]`); the conversation is intact and a corrective
    message can ask again.
    """

    STRUCTURAL = "structural"
    CONTENT = "content"

    def __str__(self) -> str:
        return self.value


def ensure_list(content: str | list[ContentPart]) -> list[ContentPart]:
    """List-form content: a string becomes one text part; a list is returned as is."""
    if isinstance(content, str):
        return [TextPart(type="text", text=content)]
    return content


def has_thinking(content: str | list[ContentPart]) -> bool:
    """Whether content carries reasoning: a thinking part, or an opening `<think>` in a string
    (closed or not)."""
    if isinstance(content, list):
        return any(part["type"] == "thinking" for part in content)
    return "<think>" in content


def remove_thinking(parts: list[ContentPart]) -> list[ContentPart]:
    """`parts` without its thinking parts (a new list)."""
    return [part for part in parts if part["type"] != "thinking"]


def format_content_as_string(content: str | list[ContentPart], separator: str = "\n") -> str:
    """Content as one readable string: thinking parts as `<think>...</think>`, text parts as they
    are, joined by `separator`. For logs and string APIs; prompts come from the renderer."""
    if isinstance(content, str):
        return content
    pieces = []
    for part in content:
        # compared directly (not through a variable) so the checker narrows `part` to its part type
        if part["type"] == "thinking":
            pieces.append(f"<think>{part['thinking']}</think>")
        elif part["type"] == "text":
            pieces.append(part["text"])
        else:
            raise RendererError(f"Unknown content part type: {part['type']}")
    return separator.join(pieces)


def _tool_call_from_json(body: str, raw_text: str) -> ToolCall | UnparsedToolCall:
    """One `<tool_call>` body (`{"name": ..., "arguments": {...}, "id": ...}`) as a `ToolCall`,
    or an `UnparsedToolCall` saying what is wrong with it."""
    try:
        payload = json.loads(body.strip())
    except json.JSONDecodeError as exc:
        return UnparsedToolCall(raw_text=raw_text, error=f"Invalid JSON: {exc}")
    if not isinstance(payload, dict):
        return UnparsedToolCall(raw_text=raw_text, error="Tool call is not a JSON object")
    name, arguments, call_id = payload.get("name"), payload.get("arguments"), payload.get("id")
    if not isinstance(name, str):
        return UnparsedToolCall(raw_text=raw_text, error="Missing or invalid 'name' field")
    if not isinstance(arguments, dict):
        return UnparsedToolCall(raw_text=raw_text, error="Missing or invalid 'arguments' field")
    return ToolCall(
        function=ToolCall.FunctionBody(name=name, arguments=json.dumps(arguments)),
        id=call_id if isinstance(call_id, str) else None,
    )


def _split_blocks(content: str, pattern: re.Pattern, tool_calls: list | None) -> list[ContentPart]:
    """Text and thinking parts of `content` in order (empty ones dropped, whitespace kept, so
    rendering the parts back gives the text); tool-call matches go to `tool_calls`."""
    parts: list[ContentPart] = []
    pos = 0
    for match in pattern.finditer(content):
        if match.start() > pos:
            parts.append(TextPart(type="text", text=content[pos:match.start()]))
        if match.group(1) is not None:
            if match.group(1):
                parts.append(ThinkingPart(type="thinking", thinking=match.group(1)))
        elif tool_calls is not None:
            tool_calls.append(_tool_call_from_json(match.group(2), match.group(0)))
        pos = match.end()
    if pos < len(content):
        parts.append(TextPart(type="text", text=content[pos:]))
    return parts


def parse_think_blocks(content: str) -> list[ContentPart] | None:
    """`content` split at `<think>...</think>` blocks into text and thinking parts, or None when
    it has no `<think>`."""
    if "<think>" not in content:
        return None
    return _split_blocks(content, _THINK, None)


def parse_content_blocks(content: str) -> tuple[list[ContentPart], list[ToolCall | UnparsedToolCall]] | None:
    """`content` split into text/thinking parts and the tool calls of its `<tool_call>{json}
    </tool_call>` blocks (in order; a bad block becomes an `UnparsedToolCall`), or None when it has
    neither `<think>` nor `<tool_call>`."""
    if "<think>" not in content and "<tool_call>" not in content:
        return None
    tool_calls: list[ToolCall | UnparsedToolCall] = []
    parts = _split_blocks(content, _THINK_OR_TOOL, tool_calls)
    return parts, tool_calls


def detect_unterminated_tool_block(content: str, open_marker: str, close_marker: str) -> UnparsedToolCall | None:
    """An `UnparsedToolCall` for a tool block opened with `open_marker` more often than closed
    (its `raw_text` runs from the last opening), or None when the markers balance."""
    opens = content.count(open_marker)
    if opens == 0 or opens <= content.count(close_marker):
        return None
    return UnparsedToolCall(
        raw_text=content[content.rfind(open_marker):][:PARSE_FAILURE_DETAIL_MAX_CHARS],
        error=f"{UNTERMINATED_TOOL_BLOCK_ERROR}: '{open_marker}' opened without a matching '{close_marker}'",
    )


def classify_parse_failure(message: Message, termination: ParseTermination) -> tuple[ParseFailureKind, str] | None:
    """`(kind, detail)` for a `parse_response` result that failed, None for a clean one.
    A structural failure wins over content failures in the same response."""
    if not termination.is_clean:
        return (
            ParseFailureKind.STRUCTURAL,
            f"response did not terminate cleanly (termination={termination.value}): expected the "
            "renderer's stop signal or EOS, so the message framing is broken",
        )
    unparsed = message.get("unparsed_tool_calls") or []
    if unparsed:
        detail = "\n".join(call.error for call in unparsed)
        return ParseFailureKind.CONTENT, detail[:PARSE_FAILURE_DETAIL_MAX_CHARS]
    return None
