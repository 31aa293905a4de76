"""Scope-based trace logging (the cookbook's `tinker_cookbook.utils.logtree`), minimal version.

Env code calls `logtree.log_text(...)`, `with logtree.scope_header("Prompt"): ...`,
`logtree.log_formatter(ConversationFormatter(...))` and `@logtree.scope_header_decorator`. Outside
`with logtree.init_trace(title, path=...)` every one of these is a no-op (the cookbook's "graceful
degradation"), so an env ported to llm_gym runs unchanged whether or not anyone records a trace.
Inside a trace they build a tree of `Node`s, kept per asyncio task by context variables, that is
written as one HTML file when the trace closes (and on error) and can be exported as JSON
(`Trace.to_dict`). The HTML is plain (one small stylesheet plus the formatters' CSS); the
cookbook's themes and Jinja helpers are not reproduced.
"""

from __future__ import annotations

import functools
import html as html_module
import inspect
import json
import os
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar

__all__ = [
    "Formatter", "Node", "Trace", "details", "flush_trace", "header", "init_trace", "log_formatter",
    "log_html", "log_text", "optional_enable_logging", "scope_details", "scope_disable", "scope_div",
    "scope_header", "scope_header_decorator", "table", "table_from_dict", "table_from_dict_of_lists",
    "write_trace_json",
]

_current_trace: ContextVar["Trace | None"] = ContextVar("lt_current_trace", default=None)
_container_stack: ContextVar["tuple[Node, ...]"] = ContextVar("lt_container_stack", default=())
_header_depth: ContextVar["tuple[int, ...]"] = ContextVar("lt_header_depth", default=())
_logging_disabled: ContextVar[bool] = ContextVar("lt_logging_disabled", default=False)

_CSS = """
body { font-family: system-ui, sans-serif; max-width: 1100px; margin: 1.5rem auto; line-height: 1.4; }
.lt-p { white-space: pre-wrap; margin: 0.25rem 0; }
.lt-section { border-left: 2px solid #e5e7eb; padding-left: 0.75rem; margin: 0.5rem 0; }
table.lt-table { border-collapse: collapse; } .lt-table td, .lt-table th { border: 1px solid #ddd; padding: 2px 6px; }
"""


class Formatter(Protocol):
    """An object that renders itself into a trace: `to_html()` and the `get_css()` it needs
    (optionally `to_data()`, structured data for the JSON export)."""

    def to_html(self) -> str: ...

    def get_css(self) -> str: ...


@dataclass
class Node:
    """One HTML element of the trace; `children` are nodes or raw HTML strings."""

    tag: str
    attrs: dict[str, str] = field(default_factory=dict)
    children: list["Node | str"] = field(default_factory=list)
    data: dict[str, Any] | None = field(default=None, repr=False)

    def to_html(self, indent: int = 0) -> str:
        ind = "  " * indent
        attrs = "".join(f' {k}="{html_module.escape(v, quote=True)}"' for k, v in self.attrs.items())
        if all(isinstance(c, str) for c in self.children):
            return f"{ind}<{self.tag}{attrs}>{''.join(self.children)}</{self.tag}>\n"  # type: ignore[arg-type]
        inner = "".join(c if isinstance(c, str) else c.to_html(indent + 1) for c in self.children)
        return f"{ind}<{self.tag}{attrs}>\n{inner}{ind}</{self.tag}>\n"

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable tree; with `data`, raw HTML children are left out (use `data`)."""
        children = [
            c.to_dict() if isinstance(c, Node) else c
            for c in self.children
            if isinstance(c, Node) or self.data is None
        ]
        out: dict[str, Any] = {"tag": self.tag, "attrs": dict(self.attrs), "children": children}
        if self.data is not None:
            out["data"] = self.data
        return out


class Trace:
    """One trace document; made by `init_trace`."""

    def __init__(self, title: str, path: str | os.PathLike | None, write_on_error: bool = True):
        self.title = title
        self.path = Path(path) if path is not None else None
        self.write_on_error = write_on_error
        self.started_at = datetime.now()
        self.root = Node("body", {"class": "lt-root"})
        self._formatter_css: list[str] = []  # deduplicated, in first-seen order

    def _register_formatter_css(self, css: str) -> None:
        if css and css not in self._formatter_css:
            self._formatter_css.append(css)

    def body_html(self) -> str:
        return self.root.to_html()

    def get_html(self) -> str:
        return self.body_html()

    def head_html(self) -> str:
        css = "\n".join([_CSS, *self._formatter_css])
        return (f"<title>{html_module.escape(self.title)}</title>\n<meta charset=\"UTF-8\">\n"
                f"<style>{css}</style>\n")

    def to_dict(self) -> dict[str, Any]:
        return {"title": self.title, "started_at": self.started_at.isoformat(),
                "path": None if self.path is None else str(self.path), "root": self.root.to_dict()}


def _is_logging_enabled() -> bool:
    return _current_trace.get() is not None and not _logging_disabled.get()


def _append(node: Node) -> None:
    stack = _container_stack.get()
    if not stack:
        raise RuntimeError("logtree: no open container (log calls must run inside init_trace)")
    stack[-1].children.append(node)


@contextmanager
def _in_container(node: Node) -> Iterator[None]:
    token = _container_stack.set(_container_stack.get() + (node,))
    try:
        yield
    finally:
        _container_stack.reset(token)


def _normalize_attrs(**attrs: Any) -> dict[str, str]:
    """`class_` -> `class`, `data__x` -> `data-x`."""
    out = {}
    for key, value in attrs.items():
        if key == "class_":
            key = "class"
        elif key.startswith("data__"):
            key = key.replace("__", "-", 1)
        out[key] = str(value)
    return out


def _write_trace(trace: Trace) -> None:
    if trace.path is None:
        return
    trace.path.parent.mkdir(parents=True, exist_ok=True)
    with open(trace.path, "w") as f:
        f.write(f"<!doctype html>\n<html lang=\"en\">\n<head>\n{trace.head_html()}</head>\n")
        f.write(trace.body_html())
        f.write("</html>\n")


@contextmanager
def init_trace(title: str, path: str | os.PathLike | None = None, *, write_on_error: bool = True
               ) -> Iterator[Trace]:
    """Record everything logged inside the block; write HTML to `path` (if given) at the end,
    and on an exception too when `write_on_error`."""
    trace = Trace(title, path, write_on_error=write_on_error)
    tokens = (_current_trace.set(trace), _container_stack.set((trace.root,)), _header_depth.set((1,)))
    _append(Node("h1", {"class": "lt-title"}, [html_module.escape(title)]))
    try:
        yield trace
    except BaseException as exc:
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        _append(Node("details", {"class": "lt-exc", "open": "open"}, [
            Node("summary", {}, [html_module.escape(f"Exception: {type(exc).__name__}: {exc}")]),
            Node("pre", {}, [html_module.escape(tb)]),
        ]))
        if write_on_error:
            _write_trace(trace)
        raise
    else:
        _write_trace(trace)
    finally:
        _header_depth.reset(tokens[2])
        _container_stack.reset(tokens[1])
        _current_trace.reset(tokens[0])


def flush_trace() -> bool:
    """Write the open trace to its path now; False when there is none (or no path)."""
    trace = _current_trace.get()
    if trace is None or trace.path is None:
        return False
    _write_trace(trace)
    return True


def write_trace_json(trace: Trace, path: str | os.PathLike) -> None:
    """Write `trace.to_dict()` as JSON."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(trace.to_dict(), indent=2))


@contextmanager
def scope_header(title: str, **attrs: Any) -> Iterator[None]:
    """A section with a header one level below the enclosing one (h2, h3, ... up to h6)."""
    if not _is_logging_enabled():
        yield
        return
    section = Node("section", {"class": "lt-section", **_normalize_attrs(**attrs)})
    _append(section)
    depth = _header_depth.get()
    level = min(6, (depth[-1] if depth else 1) + 1)
    section.children.append(Node(f"h{level}", {"class": f"lt-h{level}"}, [html_module.escape(title)]))
    body = Node("div", {"class": "lt-section-body"})
    section.children.append(body)
    token = _header_depth.set(depth + (level,))
    try:
        with _in_container(body):
            yield
    finally:
        _header_depth.reset(token)


F = TypeVar("F", bound=Callable[..., Any])


def scope_header_decorator(title: str | Callable[..., Any]) -> Any:
    """Run the function inside `scope_header(title)`; bare use titles it with the function name.
    Works on sync and async functions."""
    title_str = title if isinstance(title, str) else title.__name__

    def wrap(fn: F) -> F:
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                with scope_header(title_str):
                    return await fn(*args, **kwargs)

            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with scope_header(title_str):
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return wrap if isinstance(title, str) else wrap(title)


@contextmanager
def scope_div(**attrs: Any) -> Iterator[None]:
    """A `<div>` scope (no header level change)."""
    if not _is_logging_enabled():
        yield
        return
    div = Node("div", _normalize_attrs(**attrs))
    _append(div)
    with _in_container(div):
        yield


@contextmanager
def scope_disable() -> Iterator[None]:
    """Log nothing inside the block."""
    token = _logging_disabled.set(True)
    try:
        yield
    finally:
        _logging_disabled.reset(token)


@contextmanager
def optional_enable_logging(enable: bool) -> Iterator[None]:
    """Pass through when `enable`, otherwise `scope_disable()`."""
    if enable:
        yield
    else:
        with scope_disable():
            yield


@contextmanager
def scope_details(summary: str) -> Iterator[None]:
    """A collapsible `<details>` scope."""
    if not _is_logging_enabled():
        yield
        return
    body = Node("div", {"class": "lt-details-body"})
    _append(Node("details", {"class": "lt-details"}, [Node("summary", {}, [html_module.escape(summary)]), body]))
    with _in_container(body):
        yield


def log_text(text: str, *, div_class: str | None = None) -> None:
    """A paragraph of (escaped) text, or a `<div class=div_class>`."""
    if not _is_logging_enabled():
        return
    escaped = html_module.escape(text)
    _append(Node("div", {"class": div_class}, [escaped]) if div_class else Node("p", {"class": "lt-p"}, [escaped]))


def log_html(html: str, *, div_class: str | None = None) -> None:
    """Raw HTML, inserted verbatim."""
    if not _is_logging_enabled():
        return
    _append(Node("div", {"class": div_class} if div_class else {}, [html]))


def log_formatter(formatter: Formatter) -> None:
    """A `Formatter`'s HTML (its CSS added once per trace, its `to_data()` kept for JSON)."""
    if not _is_logging_enabled():
        return
    trace = _current_trace.get()
    assert trace is not None
    trace._register_formatter_css(formatter.get_css())
    node = Node("div", {}, [formatter.to_html()])
    to_data: Callable[[], dict[str, Any] | None] | None = getattr(formatter, "to_data", None)
    node.data = to_data() if callable(to_data) else None
    _append(node)


def details(text: str, *, summary: str = "Details", pre: bool = True) -> None:
    """A collapsed block of text."""
    if not _is_logging_enabled():
        return
    body = Node("pre" if pre else "div", {"class": "lt-details-body"}, [html_module.escape(text)])
    _append(Node("details", {"class": "lt-details"}, [Node("summary", {}, [html_module.escape(summary)]), body]))


def header(text: str, *, level: int | None = None) -> None:
    """An inline header (level 1-6; default: one below the enclosing scope)."""
    if not _is_logging_enabled():
        return
    depth = _header_depth.get()
    h = max(1, min(6, level if level is not None else min(6, (depth[-1] if depth else 1) + 1)))
    _append(Node(f"h{h}", {"class": f"lt-h{h}"}, [html_module.escape(text)]))


def _table_node(columns: Sequence[Any] | None, rows: Sequence[Sequence[Any]], caption: str | None) -> Node:
    node = Node("table", {"class": "lt-table"})
    if caption:
        node.children.append(Node("caption", {}, [html_module.escape(caption)]))
    if columns is not None:
        node.children.append(Node("tr", {}, [Node("th", {}, [html_module.escape(str(c))]) for c in columns]))
    for row in rows:
        node.children.append(Node("tr", {}, [Node("td", {}, [html_module.escape(str(v))]) for v in row]))
    return node


def table(obj: Any, *, caption: str | None = None) -> None:
    """A table from a list of dicts, a list of lists, a dict, or a pandas DataFrame."""
    if not _is_logging_enabled():
        return
    if hasattr(obj, "to_dict") and hasattr(obj, "columns"):  # pandas.DataFrame
        obj = obj.to_dict(orient="records")
    if isinstance(obj, Mapping):
        _append(_table_node(["key", "value"], list(obj.items()), caption))
    elif isinstance(obj, Sequence) and obj and all(isinstance(r, Mapping) for r in obj):
        columns = list(dict.fromkeys(k for r in obj for k in r))
        _append(_table_node(columns, [[r.get(c, "") for c in columns] for r in obj], caption))
    elif isinstance(obj, Sequence):
        _append(_table_node(None, [list(r) for r in obj], caption))
    else:
        raise TypeError(f"logtree.table: cannot make a table from {type(obj).__name__}; "
                        "pass a dict, a list of dicts, a list of lists or a DataFrame")


def table_from_dict(data: Mapping[str, Any], *, caption: str | None = None, key_header: str = "key",
                    value_header: str = "value", sort_by: str | None = None) -> None:
    """A two-column table of a dict's items (`sort_by="key"` or `"value"` orders them)."""
    if not _is_logging_enabled():
        return
    items = list(data.items())
    if sort_by == "key":
        items.sort(key=lambda kv: kv[0])
    elif sort_by == "value":
        items.sort(key=lambda kv: kv[1])
    _append(_table_node([key_header, value_header], items, caption))


def table_from_dict_of_lists(columns: Mapping[str, Sequence[Any]], *, caption: str | None = None) -> None:
    """A table whose columns are the dict's lists (all of one length)."""
    if not _is_logging_enabled():
        return
    lengths = {len(v) for v in columns.values()}
    if len(lengths) > 1:
        raise ValueError(f"table_from_dict_of_lists: columns have different lengths {sorted(lengths)}")
    _append(_table_node(list(columns), list(zip(*columns.values())), caption))
