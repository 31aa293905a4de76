"""Tools as Python callables: the `@tool` decorator, the `Tool` protocol and its input/result types.

Names follow the Tinker cookbook's `tinker_cookbook.tool_use` (`tool`, `FunctionTool`, `Tool`,
`ToolInput`, `ToolResult`, `handle_tool_call`), so tool code moves over with an import switch.
`@tool` reads a function's signature and docstring into an OpenAI function schema (`ToolSpec`):
parameter types become JSON-schema types (`str` string, `int` integer, `float` number, `bool`
boolean, `list[X]` array, `dict` object, `Literal[...]` enum, `X | None` optional), descriptions
come from `Annotated[T, "text"]` or the docstring's `Args:` section, and parameters without a
default are required. `FunctionTool.run` validates the arguments against that schema, awaits an
async function, runs a plain one in a `concurrent.futures` executor (the loop's default thread pool
unless one is given), and turns every failure -- bad arguments, an exception inside the tool -- into
a `tool` message that says what went wrong, never an exception. The env that runs tools is
`llm_gym.rl.tool_env`; how calls look in text is `llm_gym.renderers.tools`.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import re
import types as _types
import typing
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, runtime_checkable

from llm_gym.renderers.base import Message, ToolCall, ToolSpec

__all__ = [
    "FunctionTool",
    "Tool",
    "ToolInput",
    "ToolResult",
    "error_tool_result",
    "handle_tool_call",
    "simple_tool_result",
    "tool",
]


@dataclass
class ToolInput:
    """One invocation: the parsed `arguments`, the call's id, and the executor the env offers for
    blocking work (None: the loop's default)."""

    arguments: dict[str, Any]
    call_id: str | None = None
    executor: Executor | None = None


@dataclass
class ToolResult:
    """What a tool returns: the messages to append (normally one `tool` message), whether the
    episode should stop, and metrics/metadata for logs."""

    messages: list[Message]
    should_stop: bool = False
    metrics: dict[str, float] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Tool(Protocol):
    """Anything with a name, description, parameter schema and an async `run`."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def parameters_schema(self) -> dict[str, Any]: ...

    async def run(self, input: ToolInput) -> ToolResult: ...

    def to_spec(self) -> ToolSpec: ...


def simple_tool_result(content: str | list[Any], *, call_id: str | None = None, name: str | None = None,
                       should_stop: bool = False, metrics: dict[str, float] | None = None,
                       metadata: dict[str, Any] | None = None) -> ToolResult:
    """A `ToolResult` holding one `tool` message with `content`: a string, or a list of content
    parts (text, images) for a multimodal result; `metadata` is kept for debugging, not shown
    to the model."""
    message = Message(role="tool", content=content)
    if call_id is not None:
        message["tool_call_id"] = call_id
    if name is not None:
        message["name"] = name
    return ToolResult(messages=[message], should_stop=should_stop, metrics=dict(metrics or {}),
                      metadata=dict(metadata or {}))


def error_tool_result(error: str, *, call_id: str | None = None, name: str | None = None,
                      error_type: str = "tool_error") -> ToolResult:
    """A `tool` message `Error: ...` with metrics `tool_error` and `tool_error/<error_type>`."""
    result = simple_tool_result(f"Error: {error}", call_id=call_id, name=name,
                                metrics={"tool_error": 1.0, f"tool_error/{error_type}": 1.0})
    result.metadata["error_type"] = error_type
    return result


# --- schema from a signature -----------------------------------------------------------------
_SCALARS = {str: "string", bool: "boolean", int: "integer", float: "number"}
_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Params|Returns|Return|Raises|Yields|Examples?|Notes?)\s*:\s*$")
_ARG_LINE = re.compile(r"^(\s*)(\*{0,2}\w+)\s*(?:\(([^)]*)\))?\s*:\s*(.*)$")


def _json_schema(annotation: Any, where: str) -> dict[str, Any]:
    """JSON schema for one annotation; TypeError naming `where` for types it cannot express."""
    if annotation is inspect.Parameter.empty or annotation is Any:
        return {}
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        schema = _json_schema(args[0], where)
        texts = [a for a in args[1:] if isinstance(a, str)]
        if texts:
            schema["description"] = texts[0]
        return schema
    if origin is typing.Union or origin is _types.UnionType:
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return _json_schema(options[0], where)
        return {"anyOf": [_json_schema(a, where) for a in options]}
    if origin is typing.Literal:
        schema = {"enum": list(args)}
        kinds = {_SCALARS.get(type(a)) for a in args}
        if len(kinds) == 1 and None not in kinds:
            schema["type"] = kinds.pop()
        return schema
    if annotation in _SCALARS:
        return {"type": _SCALARS[annotation]}
    if annotation in (list, tuple, set, frozenset) or origin in (list, tuple, set, frozenset) or (
        origin is not None and origin.__name__ in ("Sequence", "Iterable")
    ):
        schema: dict[str, Any] = {"type": "array"}
        if args and args[-1] is not Ellipsis:
            schema["items"] = _json_schema(args[0], where)
        return schema
    if annotation is dict or origin is dict or (origin is not None and origin.__name__ == "Mapping"):
        schema = {"type": "object"}
        if len(args) == 2:
            schema["additionalProperties"] = _json_schema(args[1], where)
        return schema
    raise TypeError(
        f"@tool cannot describe {where}: annotation {annotation!r} has no JSON-schema type; use "
        "str, int, float, bool, list[...], dict[...], Literal[...] or X | None"
    )


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """(description: the text before the first section, parameter -> description from `Args:`)."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    indent: int | None = None
    for line in lines:
        head = _SECTION.match(line)
        if head:
            section, current, indent = head.group(1).lower(), None, None
            continue
        if section is None:
            description.append(line)
            continue
        if section not in ("args", "arguments", "parameters", "params") or not line.strip():
            continue
        m = _ARG_LINE.match(line)
        if m and (indent is None or len(m.group(1)) <= indent):
            indent = len(m.group(1))
            name = m.group(2).lstrip("*")
            current = name
            params[name] = m.group(4).strip()
        elif current is not None:
            params[current] = (params[current] + " " + line.strip()).strip()
    return "\n".join(description).strip(), params


class FunctionTool:
    """A Python callable exposed as a `Tool` (build it with `@tool`). Calling the object calls
    the function; `await t.run(ToolInput(...))` is the env's path."""

    def __init__(self, fn: Callable[..., Any], *, name: str | None = None,
                 description: str | None = None, executor: Executor | None = None) -> None:
        if not callable(fn):
            raise TypeError(f"@tool needs a function, got {type(fn).__name__}")
        self.fn = fn
        self.executor = executor
        self._name = name or fn.__name__
        doc_description, doc_params = _parse_docstring(inspect.getdoc(fn))
        self._description = description if description is not None else doc_description
        self._schema = self._build_schema(doc_params)
        functools.update_wrapper(self, fn)

    def _build_schema(self, doc_params: dict[str, str]) -> dict[str, Any]:
        try:
            hints = typing.get_type_hints(self.fn, include_extras=True)
        except Exception:  # unresolvable forward references: fall back to the raw annotations
            hints = {}
        properties: dict[str, Any] = {}
        required: list[str] = []
        for pname, param in inspect.signature(self.fn).parameters.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                continue
            if pname in ("self", "cls") and param.annotation is inspect.Parameter.empty:
                continue
            schema = _json_schema(hints.get(pname, param.annotation), f"parameter {pname!r} of {self._name}")
            if pname in doc_params and "description" not in schema:
                schema["description"] = doc_params[pname]
            if param.default is inspect.Parameter.empty:
                required.append(pname)
            elif param.default is None or isinstance(param.default, (str, int, float, bool)):
                schema["default"] = param.default
            properties[pname] = schema
        return {"type": "object", "properties": properties, "required": required}

    @property
    def name(self) -> str:
        return self._name

    @property
    def description(self) -> str:
        return self._description

    @property
    def parameters_schema(self) -> dict[str, Any]:
        return json.loads(json.dumps(self._schema))  # a copy callers may edit

    def to_spec(self) -> ToolSpec:
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters_schema)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __get__(self, obj: Any, objtype: type | None = None) -> "FunctionTool":
        if obj is None:
            return self
        return FunctionTool(self.fn.__get__(obj, objtype), name=self._name,
                            description=self._description, executor=self.executor)

    def __repr__(self) -> str:
        return f"FunctionTool({self._name!r})"

    def validate(self, arguments: Any) -> str | None:
        """Why `arguments` do not fit the schema (one sentence), or None when they do."""
        if not isinstance(arguments, dict):
            return f"arguments must be a JSON object, got {type(arguments).__name__}"
        props = self._schema["properties"]
        unknown = sorted(set(arguments) - set(props))
        if unknown:
            return f"unknown argument(s) {unknown} for {self._name}; expected {sorted(props)}"
        missing = [p for p in self._schema["required"] if p not in arguments]
        if missing:
            return f"missing required argument(s) {missing} for {self._name}"
        for key, value in arguments.items():
            problem = _type_problem(value, props[key])
            if problem:
                return f"argument {key!r}: {problem}"
        return None

    async def run(self, input: ToolInput) -> ToolResult:
        call_id = input.call_id
        problem = self.validate(input.arguments)
        if problem:
            return error_tool_result(problem, call_id=call_id, name=self._name, error_type="invalid_arguments")
        try:
            if inspect.iscoroutinefunction(self.fn) or inspect.iscoroutinefunction(getattr(self.fn, "__call__", None)):
                value = await self.fn(**input.arguments)
            else:
                loop = asyncio.get_running_loop()
                value = await loop.run_in_executor(
                    self.executor or input.executor, functools.partial(self.fn, **input.arguments)
                )
                if inspect.isawaitable(value):
                    value = await value
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a tool's bug is the episode's information, not a crash
            return error_tool_result(f"{type(exc).__name__}: {exc}", call_id=call_id, name=self._name,
                                     error_type="exception")
        if isinstance(value, ToolResult):
            for m in value.messages:
                if m.get("role") == "tool" and call_id is not None:
                    m.setdefault("tool_call_id", call_id)
            return value
        return simple_tool_result(_as_text(value), call_id=call_id, name=self._name)


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def _type_problem(value: Any, schema: dict[str, Any]) -> str | None:
    if "enum" in schema and value not in schema["enum"]:
        return f"{value!r} is not one of {schema['enum']}"
    if "anyOf" in schema:
        if value is None or any(_type_problem(value, s) is None for s in schema["anyOf"]):
            return None
        return f"{value!r} matches none of the allowed types"
    kind = schema.get("type")
    if value is None and schema.get("default", 0) is None:
        return None
    ok = {
        None: True,
        "string": isinstance(value, str),
        "boolean": isinstance(value, bool),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, (int, float)) and not isinstance(value, bool),
        "array": isinstance(value, list),
        "object": isinstance(value, dict),
    }.get(kind, True)
    if not ok:
        return f"expected {kind}, got {type(value).__name__} {value!r:.40}"
    if kind == "array" and "items" in schema:
        assert isinstance(value, list)  # (ok above)
        for item in value:
            problem = _type_problem(item, schema["items"])
            if problem:
                return f"item {problem}"
    return None


def tool(fn: Callable[..., Any] | None = None, *, name: str | None = None,
         description: str | None = None, executor: Executor | None = None) -> Any:
    """Make `fn` a `FunctionTool`: `@tool` or `@tool(name=..., description=..., executor=...)`.

        @tool
        def add(a: int, b: int) -> int:
            \"\"\"Add two integers.

            Args:
                a: The first addend.
                b: The second addend.
            \"\"\"
            return a + b

        add.to_spec()  # {"name": "add", "description": "Add two integers.", "parameters": {...}}
    """
    if fn is None:
        return lambda f: FunctionTool(f, name=name, description=description, executor=executor)
    return FunctionTool(fn, name=name, description=description, executor=executor)


async def handle_tool_call(tools: dict[str, Tool], tool_call: ToolCall, *,
                           executor: Executor | None = None, call_id: str | None = None) -> ToolResult:
    """Run one parsed call: unknown names and undecodable arguments become error messages."""
    name = tool_call.function.name
    call_id = call_id if call_id is not None else (tool_call.id or "")
    if name not in tools:
        return error_tool_result(f"Tool '{name}' not found; available: {sorted(tools)}",
                                 call_id=call_id, name=name, error_type="tool_not_found")
    try:
        arguments = json.loads(tool_call.function.arguments)
    except (TypeError, ValueError) as exc:
        return error_tool_result(f"Failed to parse tool arguments: {exc}", call_id=call_id, name=name,
                                 error_type="json_decode_failed")
    tool_obj = tools[name]
    try:
        return await tool_obj.run(ToolInput(arguments=arguments, call_id=call_id, executor=executor))
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # a third-party Tool whose run raises
        return error_tool_result(f"{type(exc).__name__}: {exc}", call_id=call_id, name=name,
                                 error_type="exception")
