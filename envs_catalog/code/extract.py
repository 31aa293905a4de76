"""Reading the Python code out of a model's reply: `extract_code`.

The reply is chat text, so the code is usually in a markdown fence. The rule, in one linear scan
of the lines, follows the answer policy of `llm_gym.grading` (the final answer is graded, and a
second answer denies credit). A *solution* is a Python-tagged (`python`/`py`/`python3`, any
case) or untagged block holding a `def` or a `return`; blocks without either (a usage example,
an expected output) are not answers. The chosen block: the last Python-tagged solution; else the
last solution; else the last Python-tagged block; else the last untagged block; else the last
block of any tag; else, with no fence at all, the whole reply. Another solution that differs
from the chosen one is a second program: `"several"`, no code. A
fence is a line starting (after at most three spaces) with three or more backticks, closed by a
line of at least as many backticks and nothing else; a block still open when the reply ends (a
truncated reply) runs to the end. What the code *means* -- a whole function or a body continuing
the prompt -- is decided in the sandbox (`harness._WORKER`), never by parsing it here.
"""

from __future__ import annotations

import re

__all__ = ["extract_code"]

_FENCE = re.compile(r" {0,3}(`{3,})[ \t]*([^`\s]*)(?:[ \t][^`]*)?")  # unambiguous: linear time
_PYTHON_TAGS = {"python", "py", "python3", "py3"}
_SOLUTION = re.compile(r"^[ \t]*(?:async[ \t]+)?def[ \t]|\breturn\b", re.MULTILINE)


def extract_code(text: str) -> tuple[str, str]:
    """`(code, how)`: `how` is "fenced", "fenced_unclosed", "whole" (no fence), "empty"
    (nothing but whitespace, or an empty block) or "several" (two different programs)."""
    blocks: list[tuple[str, list[str], bool]] = []
    tag: str | None = None
    fence = 0
    lines: list[str] = []
    for line in text.splitlines(keepends=True):
        if tag is None:
            m = _FENCE.fullmatch(line.rstrip("\r\n"))
            if m:
                tag, fence, lines = m.group(2).lower(), len(m.group(1)), []
            continue
        stripped = line.strip()
        if len(stripped) >= fence and stripped == "`" * len(stripped):
            blocks.append((tag, lines, True))
            tag = None
        else:
            lines.append(line)
    if tag is not None:
        blocks.append((tag, lines, False))
    if not blocks:
        return (text, "whole") if text.strip() else ("", "empty")
    solutions = [b for b in blocks
                 if (b[0] in _PYTHON_TAGS or b[0] == "") and _SOLUTION.search("".join(b[1]))]
    chosen = (
        next((b for b in reversed(solutions) if b[0] in _PYTHON_TAGS), None)
        or next((b for b in reversed(solutions)), None)
        or next((b for b in reversed(blocks) if b[0] in _PYTHON_TAGS), None)
        or next((b for b in reversed(blocks) if b[0] == ""), None)
        or blocks[-1]
    )
    code = "".join(chosen[1])
    if not code.strip():
        return "", "empty"
    for block in solutions:
        if block is not chosen and "".join(block[1]).strip() != code.strip():
            return "", "several"
    return code, "fenced" if chosen[2] else "fenced_unclosed"
