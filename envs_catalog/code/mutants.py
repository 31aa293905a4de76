"""One-edit mutants of a trusted reference solution, and whether a set of hidden tests kills them.

A generated code task (`pyfunc`, `bugfix`) is only as good as its hidden tests: a wrong program
that passes them all earns full reward. This module measures and enforces that with mutation
testing. `mutants(source, entry_point)` parses the reference function with `ast` and returns every
program one edit away from it, by class (`MUTANT_CLASSES`): a statement dropped, a comparison
operator replaced (`< <= > >= == !=`, `in`/`not in`), an integer constant (slice bounds included)
moved by one, an arithmetic operator replaced (`+ - * // %`), the operands of a non-commutative
operator or the first two arguments of a call swapped, a call removed (`f(x)` -> `x`,
`s.upper()` -> `s`), a related builtin or method swapped (`max`/`min`, `upper`/`lower`), `and`/`or`
exchanged, a unary operator removed, a comprehension's filter dropped, a conditional expression
replaced by one branch, a boolean constant flipped, one character deleted from a string constant.

Mutants are our own reference code mutated -- never model output -- so they run in-process
(`load`, `run`), with a small builtins table (no `open`, `__import__`, `eval`) and a guard written
into the code itself: `load` rewrites the function's syntax tree so that every function call, loop
iteration and comprehension item spends one step of a per-call budget (`STEP_BUDGET`), past which
the call is abandoned as if it had raised, and so that `*`, `**` and `<<` refuse results past
`MAX_SIZE` (digits of an int, items of a sequence) and `range` past `MAX_SIZE` items. So a mutant
never hangs the host or fills its memory, and whether it ran out of budget depends on the code and
the input only -- never on the machine's load, another tracer or a signal handler. An exception that is not an
`Exception` (a time limit's, KeyboardInterrupt) always propagates.

`score` classifies each mutant against a reference (the trusted expected outputs, type-strict as
the harness compares: `harness.strict_equal`) on the hidden tests plus a sample of inputs drawn
from the task's own input distribution: **trivial** when it raises (or runs out of budget) on
every one of those inputs -- any test at all kills it, so it says nothing about the tests and is
left out of the rate --, **distinguishable** otherwise when its outcome differs from the reference
on at least one of them, and **killed** when it differs on at least one hidden test. The kill rate
is killed / distinguishable. `kill_masks` and `cover` are the pieces test generators use to pick
hidden inputs that kill every mutant a candidate pool can distinguish.
"""

from __future__ import annotations

import ast
import builtins
import copy
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence, cast

from .harness import strict_equal

__all__ = ["MAX_SIZE", "MUTANT_CLASSES", "SAFE_BUILTINS", "Mutant", "MutationScore", "RAISED",
           "STEP_BUDGET", "cover", "kill_masks", "load", "mutants", "run", "same", "score"]

MUTANT_CLASSES = ("drop", "compare", "constant", "arith", "swap", "call", "builtin", "boolop",
                  "unary", "filter", "branch", "bool", "string")
STEP_BUDGET = 20_000  # calls + loop iterations + comprehension items per call: ~100x a reference's
MAX_SIZE = 100_000  # digits of an int, items of a str/list/tuple/range that a guarded op may make
_MAX_STRING_DELETIONS = 8  # longer string constants get their first 8 deletions only

_ORDER_OPS = (ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq)
_PAIRED_CMP = {ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}
_ARITH_OPS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)
_NON_COMMUTATIVE = (ast.Add, ast.Sub, ast.FloorDiv, ast.Mod, ast.Div, ast.Pow)  # + also joins str
_NAME_SWAPS = {"max": "min", "min": "max", "any": "all", "all": "any"}
_ATTR_SWAPS = {"upper": "lower", "lower": "upper", "isupper": "islower", "islower": "isupper",
               "startswith": "endswith", "endswith": "startswith", "lstrip": "rstrip",
               "rstrip": "lstrip"}
_TYPE_NAMES = {"dict", "list", "str", "int", "set", "tuple"}  # receivers of dict.fromkeys and co
_SYMBOL = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%",
           ast.Div: "/", ast.Pow: "**", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
           ast.Eq: "==", ast.NotEq: "!=", ast.In: "in", ast.NotIn: "not in", ast.Is: "is",
           ast.IsNot: "is not", ast.And: "and", ast.Or: "or"}

SAFE_BUILTINS: dict[str, Any] = {  # all a generated reference (and a mutant of it) may call
    name: getattr(builtins, name)
    for name in ("abs", "all", "any", "bool", "chr", "dict", "divmod", "enumerate", "filter", "int",
                 "isinstance", "len", "list", "map", "max", "min", "ord", "range", "reversed",
                 "set", "sorted", "str", "sum", "tuple", "zip", "Exception", "ValueError",
                 "ZeroDivisionError")
}


@dataclass(frozen=True)
class Mutant:
    kind: str  # one of MUTANT_CLASSES
    line: int  # 1-based line, in the reference source, of the statement or expression edited
    what: str  # "> -> >=", "3 -> 4", "drop", "max -> min", ...
    source: str  # the whole mutated source, re-printed by ast.unparse


# -- generating ------------------------------------------------------------------------------------

_Edit = tuple[str, str, Callable[[], None], Callable[[], None]]  # kind, what, apply, undo


def _put(parent: ast.AST, field: str, index: int | None, new: Any) -> tuple[Callable[[], None],
                                                                             Callable[[], None]]:
    """apply/undo that set `parent.field` (or its `index`-th item) to `new` and back."""
    if index is None:
        old = getattr(parent, field)
        return (lambda: setattr(parent, field, new)), (lambda: setattr(parent, field, old))
    items = getattr(parent, field)
    old_item = items[index]

    def apply() -> None:
        items[index] = new

    def undo() -> None:
        items[index] = old_item

    return apply, undo


def _edit(kind: str, what: str, parent: ast.AST, field: str, index: int | None, new: Any) -> _Edit:
    return (kind, what, *_put(parent, field, index, new))


def _children(node: ast.AST) -> Iterator[tuple[str, int | None, ast.AST]]:
    for field, value in ast.iter_fields(node):
        if isinstance(value, ast.AST):
            yield field, None, value
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, ast.AST):
                    yield field, i, item


def _is_docstring(stmt: ast.stmt) -> bool:
    return (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str))


def _edits(parent: ast.AST, field: str, index: int | None, node: ast.AST) -> Iterator[_Edit]:
    """The single-site edits of `node`, which sits at `parent.field[index]`."""
    if isinstance(node, ast.stmt) and index is not None and field in ("body", "orelse",
                                                                       "finalbody"):
        body = getattr(parent, field)
        rest = body[:index] + body[index + 1:]
        yield ("drop", "drop", *_put(parent, field, None, rest or [ast.Pass()]))
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            if isinstance(op, _ORDER_OPS):
                for new in _ORDER_OPS:
                    if not isinstance(op, new):
                        yield _edit("compare", f"{_SYMBOL[type(op)]} -> {_SYMBOL[new]}", node,
                                    "ops", i, new())
            elif type(op) in _PAIRED_CMP:
                new = _PAIRED_CMP[type(op)]
                yield _edit("compare", f"{_SYMBOL[type(op)]} -> {_SYMBOL[new]}", node, "ops", i,
                            new())
    elif isinstance(node, ast.Constant):
        value = node.value
        if type(value) is bool:
            yield _edit("bool", f"{value} -> {not value}", node, "value", None, not value)
        elif type(value) is int:
            for new in (value + 1, value - 1):
                yield _edit("constant", f"{value} -> {new}", node, "value", None, new)
        elif type(value) is str:
            seen = {value}
            for i in range(min(len(value), _MAX_STRING_DELETIONS)):
                new = value[:i] + value[i + 1:]
                if new not in seen:
                    seen.add(new)
                    yield _edit("string", f"{value!r} -> {new!r}", node, "value", None, new)
    elif isinstance(node, ast.Slice):
        for bound in ("lower", "upper"):
            expr = getattr(node, bound)
            if expr is not None and not isinstance(expr, ast.Constant):  # constants: "constant"
                for op, sign in ((ast.Add, "+"), (ast.Sub, "-")):
                    yield _edit("constant", f"{bound} bound {sign} 1", node, bound, None,
                                ast.BinOp(expr, op(), ast.Constant(1)))
    elif isinstance(node, ast.BinOp):
        if isinstance(node.op, _ARITH_OPS):
            for new in _ARITH_OPS:
                if not isinstance(node.op, new):
                    yield _edit("arith", f"{_SYMBOL[type(node.op)]} -> {_SYMBOL[new]}", node, "op",
                                None, new())
        if isinstance(node.op, _NON_COMMUTATIVE):
            yield _edit("swap", f"operands of {_SYMBOL[type(node.op)]}", parent, field, index,
                        ast.BinOp(node.right, node.op, node.left))
    elif isinstance(node, ast.UnaryOp):
        yield _edit("unary", f"drop {type(node.op).__name__}", parent, field, index, node.operand)
    elif isinstance(node, ast.BoolOp):
        new = ast.Or if isinstance(node.op, ast.And) else ast.And
        yield _edit("boolop", f"{_SYMBOL[type(node.op)]} -> {_SYMBOL[new]}", node, "op", None,
                    new())
    elif isinstance(node, ast.IfExp):
        yield _edit("branch", "always the if branch", parent, field, index, node.body)
        yield _edit("branch", "always the else branch", parent, field, index, node.orelse)
    elif isinstance(node, ast.If):
        yield _edit("branch", "negated condition", node, "test", None,
                    ast.UnaryOp(ast.Not(), node.test))
    elif isinstance(node, ast.comprehension):
        for i in range(len(node.ifs)):
            yield _edit("filter", "drop the filter", node, "ifs", None,
                        node.ifs[:i] + node.ifs[i + 1:])
    elif isinstance(node, ast.Call):
        yield from _call_edits(parent, field, index, node)


def _call_edits(parent: ast.AST, field: str, index: int | None, node: ast.Call) -> Iterator[_Edit]:
    func, args = node.func, node.args
    plain = [a for a in args if not isinstance(a, ast.Starred)]
    name = ast.unparse(func)
    if isinstance(func, ast.Attribute) and not isinstance(func.value, ast.Constant) and not (
            isinstance(func.value, ast.Name) and func.value.id in _TYPE_NAMES):
        yield _edit("call", f"drop .{func.attr}()", parent, field, index, func.value)
    elif plain:  # f(x) -> x; also str.join / dict.fromkeys, whose receiver is a constant or type
        yield _edit("call", f"drop {name}()", parent, field, index, plain[0])
    if len(plain) >= 2 and plain[:2] == args[:2]:
        yield _edit("swap", f"arguments of {name}()", node, "args", None,
                    [args[1], args[0], *args[2:]])
    if isinstance(func, ast.Name) and func.id in _NAME_SWAPS:
        yield _edit("builtin", f"{func.id} -> {_NAME_SWAPS[func.id]}", func, "id", None,
                    _NAME_SWAPS[func.id])
    if isinstance(func, ast.Attribute) and func.attr in _ATTR_SWAPS:
        yield _edit("builtin", f"{func.attr} -> {_ATTR_SWAPS[func.attr]}", func, "attr", None,
                    _ATTR_SWAPS[func.attr])


def _find_function(tree: ast.Module, entry_point: str) -> ast.FunctionDef:
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == entry_point:
            return stmt
    raise ValueError(f"no top-level 'def {entry_point}(...)' in the reference source; pass the "
                     "name of the function to mutate as entry_point")


def mutants(source: str, entry_point: str) -> list[Mutant]:
    """Every distinct single-edit mutant of the body of `def entry_point` in `source`, in a fixed
    order (statement by statement, each statement's nodes breadth first). Mutants whose text equals
    the reference's or an earlier mutant's are left out; whether a mutant *behaves* differently is
    `score`'s question."""
    tree = ast.parse(source)
    function = _find_function(tree, entry_point)
    body = function.body
    # Only the edited statement is re-printed: the rest of the text is printed once.
    where = tree.body.index(function)
    before = "".join(ast.unparse(s) + "\n" for s in tree.body[:where])
    after = "".join(ast.unparse(s) + "\n" for s in tree.body[where + 1:])
    docstring = body[:1] if _is_docstring(body[0]) else []
    function.body = docstring or [ast.Pass()]
    header = ast.unparse(function) + "\n"  # the signature and the docstring, as a docstring
    if not docstring:
        header = header.rsplit("\n", 2)[0] + "\n"  # without the `pass`
    function.body = body
    parts = ["" if s in docstring else _indent(ast.unparse(s)) for s in body]

    def text(i: int, part: str | None) -> str:
        lines = parts[:i] + ([part] if part is not None else []) + parts[i + 1:]
        return before + header + ("".join(lines) or ("" if docstring else _indent("pass"))) + after

    seen = {text(0, parts[0])}
    out: list[Mutant] = []
    for top_index, top in enumerate(body):
        if top in docstring:
            continue
        _add(out, seen, Mutant("drop", top.lineno, "drop", text(top_index, None)))
        queue: list[tuple[ast.AST, str, int | None, ast.AST, int]] = [
            (function, "body", top_index, top, top.lineno)]
        while queue:
            parent, field, index, node, line = queue.pop(0)
            for kind, what, apply, undo in list(_edits(parent, field, index, node)):
                if parent is function and kind == "drop":
                    continue  # done above, without re-printing
                apply()
                try:
                    part = _indent(ast.unparse(ast.fix_missing_locations(top)))
                finally:
                    undo()
                _add(out, seen, Mutant(kind, line, what, text(top_index, part)))
            queue += [(node, f, i, child, getattr(child, "lineno", line))
                      for f, i, child in _children(node)
                      if not isinstance(child, (ast.expr_context, ast.operator, ast.cmpop,
                                                ast.boolop, ast.unaryop))]
    return out


def _indent(text: str) -> str:
    return "".join("    " + line + "\n" for line in text.splitlines())


def _add(out: list[Mutant], seen: set[str], mutant: Mutant) -> None:
    if mutant.source not in seen:
        seen.add(mutant.source)
        out.append(mutant)


# -- running ---------------------------------------------------------------------------------------

class _OverBudget(BaseException):
    """Raised inside a guarded call that ran past its step budget or made a value past `MAX_SIZE`
    (a BaseException, so that an `except Exception` in the guarded code cannot swallow it)."""


class _Raised:
    """The outcome of a call that raised or ran out of budget (equal to no expected value)."""

    def __repr__(self) -> str:
        return "RAISED"


RAISED = _Raised()

# Names the guard adds to a loaded function's globals (not valid in the references' own code,
# which never uses dunder-wrapped names).
_METER, _STEP, _OP = "__meter__", "__step__", "__guarded_op__"
_GUARDED_OPS = (ast.Mult, ast.Pow, ast.LShift)


class _Meter:
    """The step budget of one loaded function; `run` refills it before each call."""

    def __init__(self) -> None:
        self.left = 0

    def step(self) -> bool:
        self.left -= 1
        if self.left < 0:
            raise _OverBudget
        return True  # so that it can stand as a comprehension filter


def _guarded_op(op: str, left: Any, right: Any) -> Any:
    """`left * right`, `left ** right` or `left << right`, refused (as over budget) when the
    result would pass `MAX_SIZE` digits or items -- checked before the work is done."""
    if op == "*":
        if isinstance(left, int) and isinstance(right, int):
            if (left.bit_length() + right.bit_length()) * 0.302 > MAX_SIZE:
                raise _OverBudget
        elif isinstance(left, (str, list, tuple, bytes)) and isinstance(right, int):
            if len(left) * right > MAX_SIZE:
                raise _OverBudget
        elif isinstance(right, (str, list, tuple, bytes)) and isinstance(left, int):
            if len(right) * left > MAX_SIZE:
                raise _OverBudget
        return cast(Any, left) * right  # any operands `*` takes (the checks above only narrow)
    if op == "**":
        if isinstance(left, int) and isinstance(right, int) and right > 0 and abs(left) > 1:
            if left.bit_length() * right * 0.302 > MAX_SIZE:
                raise _OverBudget
        return left**right
    if isinstance(left, int) and isinstance(right, int) and right > 0:
        if (left.bit_length() + right) * 0.302 > MAX_SIZE:
            raise _OverBudget
    return left << right


def _guarded_range(*args: Any) -> range:
    made = range(*args)
    if len(made) > MAX_SIZE:
        raise _OverBudget
    return made


class _Guard(ast.NodeTransformer):
    """Writes the step budget and the size guards into a function's syntax tree: a step at the
    top of every function body and loop body and in every comprehension's filters, and `*`,
    `**`, `<<` (also augmented, `n *= k`) through `_guarded_op`."""

    def _stepped(self, body: list[ast.stmt]) -> list[ast.stmt]:
        return [ast.Expr(ast.Call(ast.Name(_STEP, ast.Load()), [], [])), *body]

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        self.generic_visit(node)
        node.body = self._stepped(node.body)
        return node

    def visit_For(self, node: ast.For) -> ast.AST:
        self.generic_visit(node)
        node.body = self._stepped(node.body)
        return node

    def visit_While(self, node: ast.While) -> ast.AST:
        self.generic_visit(node)
        node.body = self._stepped(node.body)
        return node

    def visit_comprehension(self, node: ast.comprehension) -> ast.AST:
        self.generic_visit(node)
        node.ifs = [ast.Call(ast.Name(_STEP, ast.Load()), [], []), *node.ifs]
        return node

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        if not isinstance(node.op, _GUARDED_OPS):
            return node
        return ast.Call(ast.Name(_OP, ast.Load()),
                        [ast.Constant(_SYMBOL_OF[type(node.op)]), node.left, node.right], [])

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        self.generic_visit(node)
        if not isinstance(node.op, _GUARDED_OPS) or not isinstance(node.target, ast.Name):
            return node
        value = ast.Call(ast.Name(_OP, ast.Load()),
                         [ast.Constant(_SYMBOL_OF[type(node.op)]),
                          ast.Name(node.target.id, ast.Load()), node.value], [])
        return ast.Assign([ast.Name(node.target.id, ast.Store())], value)


_SYMBOL_OF = {ast.Mult: "*", ast.Pow: "**", ast.LShift: "<<"}


def load(source: str, entry_point: str) -> Callable[..., Any] | None:
    """The function `source` defines, guarded (see the module docstring) and exec'd with
    `SAFE_BUILTINS` only; None when the source does not compile or load. `source` must be trusted
    code (a reference or its mutant), never a model's reply: model code runs only in
    `llm_gym.sandbox`."""
    meter = _Meter()
    namespace: dict[str, Any] = {
        "__builtins__": {**SAFE_BUILTINS, "range": _guarded_range},
        _METER: meter, _STEP: meter.step, _OP: _guarded_op,
    }
    try:
        tree = ast.fix_missing_locations(_Guard().visit(ast.parse(source)))
        exec(compile(tree, "<mutant>", "exec"), namespace)  # noqa: S102 - trusted, generated
    except Exception:
        return None
    fn = namespace.get(entry_point)
    return fn if callable(fn) else None


def _copier(arg: Any) -> Callable[[Any], Any]:
    """How to give each call its own copy of `arg`, so that a mutant that edits its input in place
    cannot change what the next call sees: nothing for immutable values, a shallow copy for a list
    or dict of immutable values, a deep copy otherwise."""
    if isinstance(arg, (int, str, float, bytes, bool, type(None))):
        return _identity
    if type(arg) is list and all(type(v) in _ATOMS for v in arg):
        return list.copy
    if type(arg) is dict and all(type(v) in _ATOMS for v in arg.values()):
        return dict.copy
    return copy.deepcopy


def _identity(arg: Any) -> Any:
    return arg


_ATOMS = (int, str, float, bool, bytes, type(None))


def run(fn: Callable[[Any], Any], inputs: Sequence[Any], *, budget: int = STEP_BUDGET,
        copiers: Sequence[Callable[[Any], Any]] | None = None) -> list[Any]:
    """`fn(x)` for each input (each call on its own copy), `RAISED` where the call raised an
    exception, ran past `budget` steps or made a value past `MAX_SIZE`. `fn` must come from
    `load`. `copiers`: `_copier` of each input, when the caller runs many functions on the same
    inputs."""
    meter = getattr(fn, "__globals__", {}).get(_METER)
    if not isinstance(meter, _Meter):
        raise TypeError(f"run takes a function made by mutants.load, got {fn!r}")
    copiers = copiers if copiers is not None else [_copier(x) for x in inputs]
    out: list[Any] = []
    for x, fresh in zip(inputs, copiers):
        arg = fresh(x)
        meter.left = budget
        try:
            out.append(fn(arg))
        except (_OverBudget, Exception):
            out.append(RAISED)
    return out


def same(got: Any, want: Any) -> bool:
    """`harness.strict_equal` (type-strict, floats within tolerance), with fast paths."""
    if got.__class__ is not want.__class__:
        return False
    if type(want) is int or type(want) is str:
        return got == want
    if type(want) is list and got != want and float not in map(type, want):
        return False  # unequal and no float to be close: strict_equal would say so, slower
    return strict_equal(got, want)


# -- choosing and scoring tests --------------------------------------------------------------------

def kill_masks(fns: Sequence[Callable[[Any], Any] | None], inputs: Sequence[Any],
               expected: Sequence[Any]) -> list[int]:
    """For each function, a bit mask of the inputs it gets wrong (bit i: `inputs[i]`); a function
    that failed to load (None) gets every bit."""
    full = (1 << len(inputs)) - 1
    copiers = [_copier(x) for x in inputs]
    masks = []
    for fn in fns:
        if fn is None:
            masks.append(full)
            continue
        mask = 0
        for i, got in enumerate(run(fn, inputs, copiers=copiers)):
            if not same(got, expected[i]):
                mask |= 1 << i
        masks.append(mask)
    return masks


def cover(masks: Sequence[int], *, chosen: int = 0) -> list[int]:
    """Indices of inputs that, with the inputs already in the `chosen` mask, kill every function
    whose mask is non-zero: greedy set cover (each step takes the input killing the most functions
    not yet killed, the lowest index on ties), so at most ln(n)+1 times the fewest possible."""
    alive = [m for m in masks if m and not m & chosen]
    picked: list[int] = []
    while alive:
        counts: dict[int, int] = {}
        for m in alive:
            bit = 0
            while m >> bit:
                if m >> bit & 1:
                    counts[bit] = counts.get(bit, 0) + 1
                bit += 1
        best = min(counts, key=lambda i: (-counts[i], i))
        picked.append(best)
        alive = [m for m in alive if not m >> best & 1]
    return picked


@dataclass(frozen=True)
class MutationScore:
    mutants: int  # generated (distinct texts)
    trivial: int  # raise or run out of budget on every input looked at: left out of the rate
    distinguishable: int  # differ from the reference on a hidden test or a sampled input
    killed: int  # distinguishable ones that fail at least one hidden test
    survivors: tuple[Mutant, ...]  # distinguishable, not killed
    killed_by_kind: dict[str, tuple[int, int]]  # kind -> (killed, distinguishable)

    @property
    def kill_rate(self) -> float:
        return self.killed / self.distinguishable if self.distinguishable else 1.0


def score(source: str, entry_point: str, tests: Sequence[tuple[Any, Any]],
          sample: Sequence[tuple[Any, Any]], *,
          candidates: Sequence[Mutant] | None = None) -> MutationScore:
    """How well `tests` (hidden `(input, expected)` pairs) tell the function in `source` from its
    mutants (`candidates`, default `mutants(source, entry_point)`), judged on `tests` plus
    `sample` (`(input, expected)` pairs drawn from the task's input distribution, expected from
    the trusted reference). See the module docstring for the classes."""
    found = list(mutants(source, entry_point) if candidates is None else candidates)
    test_inputs, test_expected = [x for x, _ in tests], [y for _, y in tests]
    sample_inputs, sample_expected = [x for x, _ in sample], [y for _, y in sample]
    trivial = killed = distinguishable = 0
    survivors: list[Mutant] = []
    by_kind: dict[str, list[int]] = {}
    for mutant in found:
        fn = load(mutant.source, entry_point)
        outs = run(fn, test_inputs + sample_inputs) if fn is not None else []
        if fn is None or all(o is RAISED for o in outs):
            trivial += 1
            continue
        wrong = [not same(o, y) for o, y in zip(outs, test_expected + sample_expected)]
        is_killed = any(wrong[:len(tests)])
        if not any(wrong):
            continue
        distinguishable += 1
        killed += is_killed
        tally = by_kind.setdefault(mutant.kind, [0, 0])
        tally[0] += is_killed
        tally[1] += 1
        if not is_killed:
            survivors.append(mutant)
    return MutationScore(len(found), trivial, distinguishable, killed, tuple(survivors),
                         {k: (v[0], v[1]) for k, v in sorted(by_kind.items())})
