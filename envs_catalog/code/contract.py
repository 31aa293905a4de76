"""`SolutionAnswer`: the answer contract of the code envs that grade a function (HumanEval,
PyFunc, BugFix) -- the program their sandbox runs is the program this contract reads.

It is `llm_gym.grading.ProgramAnswer` (the last fenced ```python block that is a program, else
the whole reply; another such block with different code voids the credit) with one addition:
the task's `stub` (the signature and docstring shown in the prompt) may be continued. A text is a
program when it is

- a module defining the entry point at top level, indented or not ("function": any valid module,
  so a `from __future__` import, a module docstring, a shebang or an encoding line may open it);
- else the body of the stub's function: indented lines that continue it ("body"), or lines whose
  indentation was lost ("body_indented": indented by four spaces here), which together with the
  stub make a module whose entry point returns something. A block without a `return` in the
  function's own body (a usage example, `print(solve([1, 2]))`) is not a program.

The value is the program's source: the module, or the stub followed by the body. The sandbox
(`harness`) runs the task's prompt and then this program, as a module of its own.
"""

from __future__ import annotations

import ast
import textwrap
from typing import Any

from llm_gym.grading.contracts import ProgramAnswer

__all__ = ["SolutionAnswer", "instruction"]

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _tree(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _defines(tree: ast.Module, name: str) -> bool:
    return any(isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name
               for node in tree.body)


def _returns(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether `fn` itself returns a value somewhere (nested functions and classes aside)."""
    todo: list[ast.AST] = list(fn.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Return):
            return True
        if not isinstance(node, _SCOPES):
            todo.extend(ast.iter_child_nodes(node))
    return False


class SolutionAnswer(ProgramAnswer):
    """A program defining `entry_point`, or a body continuing `stub` (see the module docstring).
    `name` is what the prompt asks for ("the complete function", "the complete corrected
    function")."""

    default_name = "the complete function"

    def __init__(self, *, entry_point: str, stub: str = "", **kwargs: Any) -> None:
        super().__init__(entry_point=entry_point, **kwargs)
        self.stub = stub if not stub or stub.endswith("\n") else stub + "\n"

    def program(self, text: str) -> tuple[str, str] | None:
        """`(how, source)`: how `text` is a program ("function", "body", "body_indented") and
        the program's source; None when it is none."""
        source = text.strip("\n")
        if not source.strip():
            return None
        flat = textwrap.dedent(source)
        tree = _tree(flat)
        if tree is not None and _defines(tree, self.entry_point):
            return "function", flat
        if not self.stub:
            return None
        lines = source.split("\n")
        first = next(line for line in lines if line.strip())
        if first[:1] in (" ", "\t"):
            how, body = "body", source
        else:
            how, body = "body_indented", "\n".join("    " + line if line.strip() else line for line in lines)
        program = self.stub + body + "\n"
        tree = _tree(program)
        if tree is None:
            return None
        fns = [node for node in tree.body
               if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == self.entry_point]
        return (how, program) if fns and _returns(fns[-1]) else None

    def parse(self, text: str) -> str | None:
        found = self.program(text)
        return None if found is None else found[1]

    def describe(self) -> str:
        return (f"a Python function {self.entry_point} (a module defining it, or the body continuing the "
                "prompt's stub), in a ```python code block")

    def instruction(self, *, brief: bool = False) -> str:
        return (f"Reply with {self.name} (its signature and body) in a single ```python code block; "
                "use only the standard library.")


def instruction(name: str = SolutionAnswer.default_name) -> str:
    """The prompt's answer instruction for a function asked as `name` ("the complete function"),
    from the contract its env grades with."""
    return SolutionAnswer(entry_point="f", name=name).instruction()
