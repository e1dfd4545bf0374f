"""A Python file's text seen through its ast, for the mutation finders: a node's character span, whole-line
spans, the operator between two operands, an expression moved by one; and what a function's names hold."""

from __future__ import annotations

import ast
import bisect
import builtins
import re
from collections.abc import Iterator

from swe_rl.synth.mutations import MutationKind, TextEdit

# what a finder proposes: the kind, a description, the edits, the node whose line the mutation is on
Proposal = tuple[MutationKind, str, list[TextEdit], ast.AST]

ATOMS = (ast.Name, ast.Constant, ast.Call, ast.Attribute, ast.Subscript)
_ADDITIVE = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod)
_NUMERIC_CALLS = {"len", "int", "min", "max", "abs", "round", "floor", "ceil", "sum", "ord"}


class CodeText:
    """A file's text with ast positions (UTF-8 byte columns) turned into character offsets."""

    def __init__(self, path: str, text: str, tree: ast.Module) -> None:
        self.path, self.text, self.tree = path, text, tree
        self.lines = text.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def offset(self, lineno: int, col: int) -> int:
        line = self.lines[lineno - 1]
        return self.starts[lineno - 1] + len(line.encode("utf-8")[:col].decode("utf-8", "replace"))

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (
            self.offset(node.lineno, node.col_offset),  # type: ignore[attr-defined]
            self.offset(node.end_lineno, node.end_col_offset),  # type: ignore[attr-defined]
        )

    def seg(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.text[start:end]

    def line_span(self, first: int, last: int) -> tuple[int, int]:
        """Offsets of whole lines ``first..last`` (1-based), newline included."""
        return self.starts[first - 1], self.starts[last]

    def own_lines(self, node: ast.stmt) -> bool:
        """The statement alone on its lines: nothing before it on its first line or after it on its last."""
        start, end = self.span(node)
        first, last = self.line_span(node.lineno, node.end_lineno or node.lineno)
        rest = self.text[end:last].strip()
        return not self.text[first:start].strip() and (not rest or rest.startswith("#"))


class FunctionScope:
    """One function under mutation: the module's names, its numeric locals, how often each name is bound."""

    def __init__(self, func: ast.FunctionDef | ast.AsyncFunctionDef, module_names: frozenset[str]) -> None:
        self.func = func
        self.module_names = module_names
        self.numeric = _numeric_names(func)
        self.assigned: dict[str, int] = {}
        for node in ast.walk(func):  # parameters count as a binding too
            if (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)) or isinstance(node, ast.arg):
                name = node.id if isinstance(node, ast.Name) else node.arg
                self.assigned[name] = self.assigned.get(name, 0) + 1


def line_of(src: CodeText, offset: int) -> int:
    return bisect.bisect_right(src.starts, offset)


def bound_names(tree: ast.Module) -> frozenset[str]:
    """Every identifier the module mentions, plus the builtins: a typo must not land on one of them."""
    names = set(dir(builtins))
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
    return frozenset(names)


def body_nodes(func: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[ast.AST]:
    body = func.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    for stmt in body:
        yield from ast.walk(stmt)


def _numeric_names(func: ast.AST) -> set[str]:
    """Local names that hold numbers by the look of their assignments (indices, counts, bounds)."""
    names: set[str] = set()
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and numeric_expr(node.value, names):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            if numeric_expr(node.value, names):
                names.add(node.target.id)
        elif isinstance(node, ast.For) and isinstance(node.iter, ast.Call):
            callee = call_name(node.iter)
            if callee == "range" and isinstance(node.target, ast.Name):
                names.add(node.target.id)
            elif callee == "enumerate" and isinstance(node.target, ast.Tuple) and node.target.elts:
                first = node.target.elts[0]
                if isinstance(first, ast.Name):
                    names.add(first.id)
    return names


def call_name(node: ast.Call) -> str:
    func = node.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def numeric_expr(node: ast.AST, names: set[str]) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int) and not isinstance(node.value, bool)
    if isinstance(node, ast.BinOp):
        return isinstance(node.op, _ADDITIVE) and (
            numeric_expr(node.left, names) or numeric_expr(node.right, names)
        )
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return numeric_expr(node.operand, names)
    if isinstance(node, ast.Call):
        return call_name(node) in _NUMERIC_CALLS
    return isinstance(node, ast.Name) and node.id in names


def shift(src: CodeText, node: ast.expr, delta: int) -> str:
    """The expression's text moved by ``delta`` (a constant changes value, anything else gets ``+ 1``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return str(node.value + delta)
    text = src.seg(node)
    if not isinstance(node, ATOMS) and not (isinstance(node, ast.BinOp) and isinstance(node.op, _ADDITIVE)):
        text = f"({text})"
    return f"{text} {'+' if delta > 0 else '-'} {abs(delta)}"


def gap_edit(src: CodeText, left: ast.AST, right: ast.AST, pattern: str, new: str) -> TextEdit | None:
    """Replace the operator found between two operands."""
    start = src.offset(left.end_lineno, left.end_col_offset)  # type: ignore[attr-defined]
    end = src.offset(right.lineno, right.col_offset)  # type: ignore[attr-defined]
    gap = src.text[start:end]
    matches = list(re.finditer(pattern, gap))
    if len(matches) != 1:
        return None
    m = matches[0]
    return TextEdit(start=start + m.start(), end=start + m.end(), new=new)
