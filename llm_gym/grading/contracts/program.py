"""`ProgramAnswer`: a Python module that defines an entry point.

A program is declared by a fenced code block (```python, ```py or a bare fence) that defines the
entry point at its top level; the last such block is the answer, and another one with different
code voids the credit, as a second declared answer does under the policy. With no such block,
the whole reply is the program when it parses as one. Any valid module is a program: a
`from __future__` import, a module docstring, a shebang or an encoding line before the function
are fine (`parse` checks with `ast`; nothing is executed here -- running it is the sandbox's job).
The reply is read literally (no Unicode folding), so the program read is the program run.
"""

from __future__ import annotations

import ast
import re
from typing import Any, ClassVar

from llm_gym.grading.contracts.base import AnswerContract
from llm_gym.grading.policy import Declaration

__all__ = ["ProgramAnswer"]

_FENCED = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*(?P<lang>[\w+.-]*)[^\n]*\n(?P<body>.*?)^[ \t]*\1[ \t]*$",
                     re.MULTILINE | re.DOTALL)
_CODE_LANGS = ("", "python", "py", "python3")


def _defines(tree: ast.Module, name: str) -> bool:
    return any(isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name
               for node in tree.body)


class ProgramAnswer(AnswerContract):
    """A Python module defining `entry_point` at top level. Values are the source text."""

    kind: ClassVar[str] = "program"
    multiline: ClassVar[bool] = True
    literal: ClassVar[bool] = True  # the program read is the program run: no character folding
    placeholder: ClassVar[str] = "program"

    def __init__(self, *, entry_point: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.entry_point = entry_point

    def parse(self, text: str) -> str | None:
        source = text.strip("\n")
        if not source.strip():
            return None
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        return source if _defines(tree, self.entry_point) else None

    def read_slot(self, slot: str) -> Any:
        return self.parse(slot)

    def find_declarations(self, visible: str) -> list[Declaration] | None:
        found = []
        for m in _FENCED.finditer(visible):
            if m.group("lang").lower() in _CODE_LANGS and self.parse(m.group("body")) is not None:
                found.append(Declaration("fence", m.group("body"), m.start()))
        return found

    def last_answer(self, visible: str) -> Declaration | None:
        return Declaration("whole", visible, 0) if visible.strip() else None

    def mentions(self, text: str) -> bool:
        return bool(text.strip())

    def same(self, a: Any, b: Any) -> bool:
        try:
            return ast.dump(ast.parse(a)) == ast.dump(ast.parse(b))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return a == b

    def format(self, value: Any) -> str:
        return f"```python\n{str(value).strip()}\n```"

    def describe(self) -> str:
        return f"a Python program defining {self.entry_point}, in a ```python code block"

    def instruction(self) -> str:
        return f"Reply with the complete program defining `{self.entry_point}` in a single ```python code block."
