"""Tool calls in text: the one format `chatml` and `role_colon` render and every renderer parses.

The format is Hermes/Qwen's, the one Qwen2.5/Qwen3 chat templates write, so a model trained on
either sees the same text:

* **tool specs** go in the system prompt (`tools_system_prompt`): the system text, a blank line,
  then a `# Tools` section listing each `ToolSpec` as one JSON line
  `{"type": "function", "function": {...}}` inside `<tools></tools>`, and the instruction to answer
  with `<tool_call></tool_call>` blocks;
* **an assistant turn with calls** is its text, then (after a newline when there is text) one block
  per call, blocks joined by a newline:
  `<tool_call>\\n{"name": "calc", "arguments": {"expr": "2+3"}}\\n</tool_call>`;
* **a tool result** is a message with role `tool` and `tool_call_id`; `chatml` renders it as an
  ordinary `<|im_start|>tool\\n...<|im_end|>` turn, `role_colon` as `Tool: ...`.

`parse_tool_calls` is the inverse of `format_assistant_text`: it fills `tool_calls` and
`unparsed_tool_calls` (malformed JSON, a missing name, an unterminated block: an
`UnparsedToolCall` with the error, never an exception) and leaves in `content` the text around the
blocks. Renderers get their tools with `with_tools(renderer, tools)` (a shallow copy that renders
them in every prompt, so `EnvFromMessageEnv` and `Continuation` need no tool argument);
`chat_template` passes them to the HF template's own `tools=`.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any, Sequence

from llm_gym.renderers.base import Message, ToolCall, ToolSpec, UnparsedToolCall, ensure_text
from llm_gym.renderers.content import detect_unterminated_tool_block, parse_content_blocks

__all__ = [
    "TOOL_CALL_CLOSE",
    "TOOL_CALL_OPEN",
    "format_assistant_text",
    "format_tool_call",
    "openai_tool_calls",
    "parse_tool_calls",
    "prepend_tools_to_messages",
    "tools_system_prompt",
    "with_tools",
]

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"
_BLOCK = re.compile(r"<tool_call>.*?</tool_call>", re.DOTALL)


def _spec_json(spec: ToolSpec) -> str:
    # HF's `tojson` filter: json.dumps with ensure_ascii=False and the default separators.
    return json.dumps({"type": "function", "function": dict(spec)}, ensure_ascii=False)


def tools_system_prompt(tools: Sequence[ToolSpec], system_prompt: str = "") -> str:
    """The system text that declares `tools` (Qwen2.5/Qwen3's wording, character for character)."""
    lines = "\n".join(_spec_json(t) for t in tools)
    section = (
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
        f"{lines}\n</tools>\n\nFor each function call, return a json object with function name and "
        "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
        '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
    )
    return f"{system_prompt}\n\n{section}" if system_prompt else section


def prepend_tools_to_messages(messages: Sequence[Message], tools: Sequence[ToolSpec] | None) -> list[Message]:
    """`messages` with the tools section added to the leading system message (a new system message
    when there is none); `messages` itself (as a list) when `tools` is empty."""
    messages = list(messages)
    if not tools:
        return messages
    if messages and messages[0].get("role") == "system":
        first = dict(messages[0])
        first["content"] = tools_system_prompt(tools, ensure_text(first["content"]))
        return [first, *messages[1:]]  # type: ignore[list-item]
    return [Message(role="system", content=tools_system_prompt(tools)), *messages]


def _arguments(call: ToolCall) -> Any:
    try:
        return json.loads(call.function.arguments)
    except (TypeError, ValueError):
        return call.function.arguments  # kept as written; a template shows the string


def format_tool_call(call: ToolCall) -> str:
    """One `<tool_call>` block: `{"name": ..., "arguments": {...}}` (no id, as Qwen writes it)."""
    payload = {"name": call.function.name, "arguments": _arguments(call)}
    return f"{TOOL_CALL_OPEN}\n{json.dumps(payload, ensure_ascii=False)}\n{TOOL_CALL_CLOSE}"


def format_assistant_text(message: Message) -> str:
    """The text of `message` with its tool calls: content, a newline when there is content, then
    the parsed calls' blocks and the unparsed calls' raw text, joined by newlines. A message
    without calls is its content unchanged."""
    # Message is total=False, but one without content raises KeyError here, as before.
    content = ensure_text(message["content"])  # pyright: ignore[reportTypedDictNotRequiredAccess]
    calls = list(message.get("tool_calls") or [])
    unparsed = list(message.get("unparsed_tool_calls") or [])
    if not calls and not unparsed:
        return content
    blocks = [format_tool_call(c) for c in calls] + [u.raw_text for u in unparsed]
    return (content + "\n" if content else "") + "\n".join(blocks)


def parse_tool_calls(message: Message) -> Message:
    """Fill `message`'s `tool_calls` / `unparsed_tool_calls` from the `<tool_call>` blocks of its
    string content, in place, and leave the text around them as `content` (the one newline before
    the first block and whitespace-only text between blocks dropped). Returns `message`. A message
    without `<tool_call>` is untouched."""
    content = message.get("content")
    if not isinstance(content, str) or TOOL_CALL_OPEN not in content:
        return message
    parsed = parse_content_blocks(content)
    results = parsed[1] if parsed is not None else []
    calls = [r for r in results if isinstance(r, ToolCall)]
    unparsed = [r for r in results if isinstance(r, UnparsedToolCall)]
    dangling = detect_unterminated_tool_block(content, TOOL_CALL_OPEN, TOOL_CALL_CLOSE)
    pieces = _BLOCK.split(content)
    if dangling is not None:  # the open block runs to the end: its text is the unparsed call's
        last = pieces[-1]
        cut = last.rfind(TOOL_CALL_OPEN)
        tail_call = last[cut:]
        pieces[-1] = last[:cut]
        unparsed.append(UnparsedToolCall(raw_text=tail_call, error=dangling.error))
    head = pieces[0].removesuffix("\n") if len(pieces) > 1 or dangling else pieces[0]
    rest = "".join(p for p in pieces[1:] if p.strip())
    message["content"] = head + rest
    if calls:
        message["tool_calls"] = calls
    if unparsed:
        message["unparsed_tool_calls"] = unparsed
    return message


def openai_tool_calls(calls: Sequence[ToolCall]) -> list[dict[str, Any]]:
    """`calls` as the OpenAI/HF message field (`arguments` as a dict, as chat templates expect)."""
    out = []
    for c in calls:
        if not isinstance(c, ToolCall):  # already in the OpenAI shape
            out.append(c)
            continue
        entry: dict[str, Any] = {"type": "function",
                                 "function": {"name": c.function.name, "arguments": _arguments(c)}}
        if c.id is not None:
            entry["id"] = c.id
        out.append(entry)
    return out


def with_tools(renderer: Any, tools: Sequence[ToolSpec] | None) -> Any:
    """A shallow copy of `renderer` that declares `tools` in every prompt it builds (and, for
    `role_colon`, also stops after a `</tool_call>`). The tokenizer is shared; `renderer` is left
    as it was. `tools=None` or `[]` gives a copy without tools."""
    bound = copy.copy(renderer)
    bound.tools = [dict(t) for t in tools] if tools else None  # type: ignore[misc]
    return bound
