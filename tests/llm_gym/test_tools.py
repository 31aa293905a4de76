"""Tool calling: `@tool` schemas and runs, and tool calls through every renderer.

Covers the decorator (types, docstrings, validation, sync tools in an executor, errors as tool
messages), the text format of `llm_gym.renderers.tools` on chatml / role_colon (render -> parse
round trips, malformed calls as `UnparsedToolCall`, never an exception, the prefix property across
tool turns), and `chat_template` on the offline Qwen3 tokenizer token-exact with
`apply_chat_template(messages, tools=...)`.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, Literal

import pytest

from llm_gym import get_renderer, load_tokenizer
from llm_gym.renderers import ChatTemplateRenderer, ParseTermination, ToolCall, UnparsedToolCall
from llm_gym.renderers.continuation import Continuation
from llm_gym.renderers.tools import (
    format_assistant_text,
    parse_tool_calls,
    tools_system_prompt,
    with_tools,
)
from llm_gym.tools import ToolInput, ToolResult, handle_tool_call, tool

TOK = load_tokenizer()


@tool
def add(a: int, b: int = 2) -> int:
    """Add two integers.

    Longer explanation that stays in the description.

    Args:
        a: The first addend.
        b (int): The second
            addend, continued.

    Returns:
        The sum.
    """
    return a + b


def call(name: str, id: str | None = None, **arguments) -> ToolCall:
    return ToolCall(function=ToolCall.FunctionBody(name=name, arguments=json.dumps(arguments)), id=id)


# --- @tool ------------------------------------------------------------------------------------
def test_schema_from_signature_and_docstring():
    spec = add.to_spec()
    assert spec["name"] == "add"
    assert spec["description"] == "Add two integers.\n\nLonger explanation that stays in the description."
    assert spec["parameters"] == {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "description": "The first addend."},
            "b": {"type": "integer", "description": "The second addend, continued.", "default": 2},
        },
        "required": ["a"],
    }
    assert add(3, 4) == 7  # still callable as the function


def test_schema_types():
    @tool(name="search", description="Find things.")
    def f(query: Annotated[str, "What to look for"], k: float, tags: list[str], opts: dict[str, int],
          mode: Literal["fast", "exact"] = "fast", limit: int | None = None, flag: bool = False) -> str:
        return ""

    props = f.parameters_schema["properties"]
    assert f.name == "search" and f.description == "Find things."
    assert props["query"] == {"type": "string", "description": "What to look for"}
    assert props["k"] == {"type": "number"}
    assert props["tags"] == {"type": "array", "items": {"type": "string"}}
    assert props["opts"] == {"type": "object", "additionalProperties": {"type": "integer"}}
    assert props["mode"] == {"enum": ["fast", "exact"], "type": "string", "default": "fast"}
    assert props["limit"] == {"type": "integer", "default": None}
    assert props["flag"] == {"type": "boolean", "default": False}
    assert f.parameters_schema["required"] == ["query", "k", "tags", "opts"]


def test_unsupported_annotation_names_the_parameter():
    with pytest.raises(TypeError, match="parameter 'x' of bad"):
        @tool
        def bad(x: complex) -> None: ...


def test_tool_as_method_binds_self():
    class Counter:
        def __init__(self):
            self.n = 10

        @tool
        def bump(self, by: int) -> int:
            """Increase the counter."""
            self.n += by
            return self.n

    c = Counter()
    assert "self" not in c.bump.parameters_schema["properties"]
    result = asyncio.run(c.bump.run(ToolInput({"by": 5}, call_id="x")))
    assert result.messages[0]["content"] == "15" and c.n == 15


def test_run_validates_and_turns_errors_into_tool_messages():
    async def go():
        ok = await add.run(ToolInput({"a": 1, "b": 5}, call_id="c1"))
        bad_type = await add.run(ToolInput({"a": "1"}, call_id="c2"))
        missing = await add.run(ToolInput({}, call_id="c3"))
        unknown = await add.run(ToolInput({"a": 1, "z": 0}, call_id="c4"))
        return ok, bad_type, missing, unknown

    ok, bad_type, missing, unknown = asyncio.run(go())
    assert ok.messages == [{"role": "tool", "content": "6", "tool_call_id": "c1", "name": "add"}]
    assert bad_type.messages[0]["content"].startswith("Error: argument 'a': expected integer")
    assert "missing required argument(s) ['a']" in missing.messages[0]["content"]
    assert "unknown argument(s) ['z']" in unknown.messages[0]["content"]
    assert bad_type.metrics["tool_error/invalid_arguments"] == 1.0


def test_sync_tools_run_in_the_given_executor_async_tools_on_the_loop():
    seen = {}

    @tool
    def where() -> dict:
        """Report the thread."""
        seen["sync"] = threading.current_thread().name
        return {"ok": True}

    @tool
    async def awhere() -> str:
        """Report the thread."""
        seen["async"] = threading.current_thread().name
        return "done"

    async def go():
        with ThreadPoolExecutor(1, thread_name_prefix="tool-pool") as pool:
            r1 = await where.run(ToolInput({}, executor=pool))
        r2 = await awhere.run(ToolInput({}))
        return r1, r2

    r1, r2 = asyncio.run(go())
    assert seen["sync"].startswith("tool-pool") and seen["async"] == threading.main_thread().name
    assert r1.messages[0]["content"] == '{"ok": true}' and r2.messages[0]["content"] == "done"


def test_raising_tool_and_bad_calls_never_raise():
    @tool
    def boom(x: int) -> int:
        """Fail."""
        raise RuntimeError("kaput")

    tools = {"boom": boom}
    bad_json = ToolCall(function=ToolCall.FunctionBody(name="boom", arguments="{nope"))

    async def go():
        return [
            await handle_tool_call(tools, call("boom", id="1", x=1)),
            await handle_tool_call(tools, call("nothere", id="2")),
            await handle_tool_call(tools, bad_json),
        ]

    raised, unknown, undecodable = asyncio.run(go())
    assert raised.messages[0]["content"] == "Error: RuntimeError: kaput"
    assert raised.messages[0]["tool_call_id"] == "1"
    assert "Tool 'nothere' not found" in unknown.messages[0]["content"]
    assert undecodable.metadata["error_type"] == "json_decode_failed"
    assert isinstance(raised, ToolResult)


# --- the text format on chatml / role_colon -----------------------------------------------------
CALLS = [call("add", a=1, b=2), call("add", a=30, b=12)]


@pytest.mark.parametrize("content", ["", "Let me add these."])
@pytest.mark.parametrize("name", ["chatml", "role_colon"])
def test_render_then_parse_round_trip(name, content):
    renderer = with_tools(get_renderer(name, TOK), [add.to_spec()])
    message = {"role": "assistant", "content": content, "tool_calls": CALLS}
    text = format_assistant_text(message)
    assert text.count("<tool_call>\n{\"name\": \"add\", \"arguments\": {") == 2
    assert text.startswith(content + "\n" if content else "<tool_call>")
    action = sampled(renderer, text)
    parsed, termination = renderer.parse_response(action)
    assert termination is ParseTermination.STOP_SEQUENCE
    assert parsed["content"] == content and parsed["tool_calls"] == CALLS
    assert "unparsed_tool_calls" not in parsed
    assert format_assistant_text(parsed) == text


def sampled(renderer, text: str) -> list[int]:
    """What a policy samples for `text`: its tokens and the renderer's end of turn."""
    if renderer.get_stop_sequences() and isinstance(renderer.get_stop_sequences()[0], int):
        return TOK.encode(text) + [renderer.get_stop_sequences()[0]]
    prefix = " " if not text.startswith(" ") else ""
    return TOK.encode(prefix + text + ("" if text.endswith("</tool_call>") else "\n\nUser:"))


MALFORMED = {
    "invalid json": ('<tool_call>\n{"name": "add", "arguments": {"a": 1,}}\n</tool_call>', "Invalid JSON"),
    "no name": ('<tool_call>\n{"arguments": {"a": 1}}\n</tool_call>', "Missing or invalid 'name'"),
    "args not object": ('<tool_call>\n{"name": "add", "arguments": "a=1"}\n</tool_call>', "'arguments'"),
    "not an object": ("<tool_call>\n[1, 2]\n</tool_call>", "not a JSON object"),
    "unterminated": ('<tool_call>\n{"name": "add", "arguments": {"a": 1}}', "unterminated tool block"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
@pytest.mark.parametrize("name", ["chatml", "role_colon"])
def test_malformed_calls_become_unparsed(name, case):
    text, error = MALFORMED[case]
    renderer = with_tools(get_renderer(name, TOK), [add.to_spec()])
    reply = (TOK.encode("Thinking.\n" + text) + [260] if name == "chatml"
             else TOK.encode(" Thinking.\n" + text + "\n\nUser:"))
    parsed, termination = renderer.parse_response(reply)
    assert termination.is_clean
    assert "tool_calls" not in parsed
    [unparsed] = parsed["unparsed_tool_calls"]
    assert isinstance(unparsed, UnparsedToolCall) and error in unparsed.error
    assert unparsed.raw_text == text and parsed["content"] == "Thinking."
    # rendering it back shows what was sampled (history keeps the broken call)
    assert format_assistant_text(parsed) == "Thinking.\n" + text


def test_mixed_valid_and_broken_calls():
    text = format_assistant_text({"role": "assistant", "content": "", "tool_calls": CALLS[:1]})
    message = parse_tool_calls({"role": "assistant", "content": text + "\n<tool_call>\n{bad}\n</tool_call>"})
    assert message["tool_calls"] == CALLS[:1] and len(message["unparsed_tool_calls"]) == 1


def test_parsing_random_text_never_raises():
    rng = random.Random(0)
    pieces = ["<tool_call>", "</tool_call>", "{", "}", '"name"', ":", '"add"', '"arguments"', "\n",
              "<think>", "</think>", "x", "1", ",", "[", "]", "\\", '"']
    renderers = [with_tools(get_renderer(n, TOK), [add.to_spec()]) for n in ("chatml", "role_colon")]
    for _ in range(300):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 30)))
        for r in renderers:
            message, termination = r.parse_response(TOK.encode(text) + [260])
            assert isinstance(message["content"], str) and isinstance(termination, ParseTermination)
            for c in message.get("tool_calls", []):
                assert isinstance(json.loads(c.function.arguments), dict)


def test_no_tools_is_unchanged():
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    for name in ("chatml", "role_colon"):
        r = get_renderer(name, TOK)
        plain = r.build_generation_prompt(messages).to_ints()
        assert with_tools(r, None).build_generation_prompt(messages).to_ints() == plain
        assert r.build_generation_prompt(messages, tools=[]).to_ints() == plain
        assert r.tools is None
        declared = with_tools(r, [add.to_spec()]).build_generation_prompt(messages).to_ints()
        assert declared != plain
        assert TOK.decode(declared).count("# Tools") == 1 and "Be brief.\n\n# Tools" in TOK.decode(declared)
        assert r.build_generation_prompt(messages, tools=[add.to_spec()]).to_ints() == declared
    # role_colon stops after a call only when tools are declared
    rc = get_renderer("role_colon", TOK)
    assert rc.get_stop_sequences() == ["\n\nUser:"]
    assert with_tools(rc, [add.to_spec()]).get_stop_sequences() == ["\n\nUser:", "</tool_call>"]


@pytest.mark.parametrize("name", ["chatml", "role_colon"])
def test_prefix_property_across_tool_turns(name):
    renderer = with_tools(get_renderer(name, TOK), [add.to_spec()])
    continuation = Continuation(renderer)
    messages = [{"role": "user", "content": "What is 1 + 2, and 30 + 12?"}]
    ob = continuation.first(messages)
    assert ob.to_ints() == renderer.build_generation_prompt(messages).to_ints()
    for turn, content in enumerate(["I'll add.", ""]):
        action = sampled(renderer, format_assistant_text(
            {"role": "assistant", "content": content, "tool_calls": CALLS}))
        parsed, termination = renderer.parse_response(action)
        assert termination.is_clean and parsed["tool_calls"] == CALLS
        messages = messages + [parsed] + [
            {"role": "tool", "content": str(3 + 39 * i), "tool_call_id": f"call_{turn}_{i}"} for i in range(2)]
        step = continuation.next(ob, action, messages)
        fresh = renderer.build_generation_prompt(messages).to_ints()
        assert step.mode == "extended"  # the sampled call is the canonical rendering
        assert step.observation.to_ints() == fresh
        assert step.observation.to_ints()[: ob.length + len(action)] == ob.to_ints() + action
        assert fresh[: ob.length + len(action)] == ob.to_ints() + action  # the renderer agrees
        ob = step.observation
    assert "Tool:" in TOK.decode(ob.to_ints()) or "<|im_start|>tool\n42" in TOK.decode(ob.to_ints())


def test_tools_system_prompt_text():
    text = tools_system_prompt([add.to_spec()], "Sys.")
    assert text.startswith("Sys.\n\n# Tools\n\nYou may call one or more functions")
    line = next(ln for ln in text.splitlines() if ln.startswith('{"type": "function"'))
    assert json.loads(line)["function"] == add.to_spec()


# --- chat_template on the offline Qwen3 tokenizer -------------------------------------------------
def openai(messages):
    out = []
    for m in messages:
        m = dict(m)
        if "tool_calls" in m:
            m["tool_calls"] = [{"type": "function", "function": {
                "name": c.function.name, "arguments": json.loads(c.function.arguments)}} for c in m["tool_calls"]]
        out.append(m)
    return out


def template_ids(tok, messages, tools, generation=True):
    out = tok.apply_chat_template(openai(messages), tools=tools, add_generation_prompt=generation, tokenize=True)
    return list(out["input_ids"] if hasattr(out, "keys") else out)


def test_chat_template_tools_token_exact_and_prefix(real_tokenizers):
    _, tok = real_tokenizers("qwen3")
    spec = add.to_spec()
    hf_tools = [{"type": "function", "function": spec}]
    base = ChatTemplateRenderer(tok)
    renderer = with_tools(base, [spec])
    messages = [{"role": "system", "content": "You add."}, {"role": "user", "content": "1 + 2 and 30 + 12?"}]
    ob = renderer.build_generation_prompt(messages)
    assert ob.to_ints() == template_ids(tok, messages, hf_tools)
    assert base.build_generation_prompt(messages).to_ints() == template_ids(tok, messages, None)
    assert base.build_generation_prompt(messages, tools=[spec]).to_ints() == ob.to_ints()
    continuation = Continuation(renderer)
    end = tok.convert_tokens_to_ids("<|im_end|>")
    for turn, content in enumerate(["", "Once more."]):
        text = format_assistant_text({"role": "assistant", "content": content, "tool_calls": CALLS})
        action = list(tok.encode(text, add_special_tokens=False)) + [end]
        parsed, termination = renderer.parse_response(action)
        assert termination is ParseTermination.STOP_SEQUENCE
        assert parsed["tool_calls"] == CALLS and parsed["content"] == content
        messages = messages + [parsed] + [
            {"role": "tool", "content": str(v), "tool_call_id": f"c{turn}{i}"} for i, v in enumerate((3, 42))]
        fresh = renderer.build_generation_prompt(messages).to_ints()
        assert fresh == template_ids(tok, messages, hf_tools)  # token-exact with the HF template
        assert fresh[: ob.length + len(action)] == ob.to_ints() + action  # prefix property
        step = continuation.next(ob, action, messages)
        assert step.mode == "extended" and step.observation.to_ints() == fresh
        ob = step.observation
    decoded = tok.decode(ob.to_ints())
    assert decoded.count("<tool_response>\n42\n</tool_response>") == 2
    # a malformed call on the real tokenizer: unparsed, clean termination
    bad = list(tok.encode('<tool_call>\n{"name": "add", "arguments": {"a": }\n</tool_call>',
                          add_special_tokens=False)) + [end]
    parsed, termination = renderer.parse_response(bad)
    assert termination.is_clean and "Invalid JSON" in parsed["unparsed_tool_calls"][0].error
    assert isinstance(renderer, ChatTemplateRenderer) and base.tools is None
