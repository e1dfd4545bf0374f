"""Mutation finders of control flow: a condition negated or its guard removed, a return value changed, a
statement or a branch deleted."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from swe_rl.synth.code_text import ATOMS, CodeText, FunctionScope, Proposal
from swe_rl.synth.mutations import TextEdit

_DELETABLE = (
    ast.Assign,
    ast.AugAssign,
    ast.AnnAssign,
    ast.Expr,
    ast.If,
    ast.For,
    ast.While,
    ast.With,
    ast.Return,
    ast.Raise,
    ast.Continue,
    ast.Break,
)


def conditions(src: CodeText, node: ast.AST, ctx: FunctionScope) -> Iterator[Proposal]:
    if not isinstance(node, ast.If | ast.While | ast.IfExp):
        return
    test = node.test
    start, end = src.span(test)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        yield (
            "cond_negate",
            "negation removed",
            [TextEdit(start=start, end=end, new=src.seg(test.operand))],
            node,
        )
    else:
        text = src.seg(test)
        new = f"not {text}" if isinstance(test, ATOMS) else f"not ({text})"
        yield "cond_negate", "condition negated", [TextEdit(start=start, end=end, new=new)], node
    if isinstance(node, ast.If) and not node.orelse and src.text[src.span(node)[0] :].startswith("if"):
        yield from _remove_guard(src, node)


def _remove_guard(src: CodeText, node: ast.If) -> Iterator[Proposal]:
    """``if cond:`` dropped, its body kept (dedented): the code runs whether or not it should."""
    first, last = node.body[0], node.body[-1]
    if first.lineno == node.lineno or not src.own_lines(node):
        return
    indent = len(src.lines[node.lineno - 1]) - len(src.lines[node.lineno - 1].lstrip())
    inner = len(src.lines[first.lineno - 1]) - len(src.lines[first.lineno - 1].lstrip())
    cut = inner - indent
    body = src.lines[first.lineno - 1 : (last.end_lineno or last.lineno)]
    if cut <= 0 or any(line.strip() and not line[:cut].isspace() for line in body):
        return
    new = "".join(line[cut:] if line.strip() else line for line in body)
    start, end = src.line_span(node.lineno, node.end_lineno or node.lineno)
    yield (
        "cond_remove",
        "condition removed (body always runs)",
        [TextEdit(start=start, end=end, new=new)],
        node,
    )


def returns(src: CodeText, node: ast.AST, ctx: FunctionScope) -> Iterator[Proposal]:
    if not isinstance(node, ast.Return) or node.value is None:
        return
    value = node.value
    if isinstance(value, ast.Constant) and value.value is None:
        return
    start, end = src.span(value)
    if isinstance(value, ast.Compare | ast.BoolOp) or (
        isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Not)
    ):
        yield (
            "return_change",
            "returned condition negated",
            [TextEdit(start=start, end=end, new=f"not ({src.seg(value)})")],
            node,
        )
    elif not isinstance(value, ast.Constant):
        yield "return_change", "returns None", [TextEdit(start=start, end=end, new="None")], node


def statements(src: CodeText, node: ast.AST, ctx: FunctionScope) -> Iterator[Proposal]:
    for field in ("body", "orelse", "finalbody"):
        block = getattr(node, field, None)
        if not isinstance(block, list):
            continue
        block = [s for s in block if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        if len(block) < 2:
            continue
        for stmt in block:
            if not isinstance(stmt, _DELETABLE) or not src.own_lines(stmt):
                continue
            if isinstance(stmt, ast.Assign) and any(
                isinstance(t, ast.Name) and ctx.assigned.get(t.id, 0) < 2 for t in stmt.targets
            ):
                continue  # the name's only binding: deleting it is a NameError, not a plausible bug
            start, end = src.line_span(stmt.lineno, stmt.end_lineno or stmt.lineno)
            name = type(stmt).__name__.lower()
            yield "stmt_delete", f"`{name}` statement deleted", [TextEdit(start=start, end=end, new="")], stmt


def branches(src: CodeText, node: ast.AST, ctx: FunctionScope) -> Iterator[Proposal]:
    if not isinstance(node, ast.If) or not node.orelse:
        return
    first = node.orelse[0]
    if isinstance(first, ast.If) and src.text[src.span(first)[0] :].startswith("elif"):
        # the elif clause goes; whatever follows it (another elif, an else) attaches to the if
        end = _else_line(src, first) - 1 if first.orelse else (first.end_lineno or first.lineno)
        start, stop = src.line_span(first.lineno, end)
        yield "branch_delete", "`elif` branch deleted", [TextEdit(start=start, end=stop, new="")], first
        return
    else_line = _else_line(src, node)
    if else_line >= first.lineno:
        return
    start, stop = src.line_span(else_line, node.orelse[-1].end_lineno or node.orelse[-1].lineno)
    yield "branch_delete", "`else` branch deleted", [TextEdit(start=start, end=stop, new="")], first


def _else_line(src: CodeText, node: ast.If) -> int:
    """The line of the ``else:`` / ``elif`` that starts ``node.orelse``."""
    first = node.orelse[0]
    if isinstance(first, ast.If) and src.text[src.span(first)[0] :].startswith("elif"):
        return first.lineno
    body_end = node.body[-1].end_lineno or node.body[-1].lineno
    for n in range(body_end + 1, first.lineno + 1):
        if src.lines[n - 1].strip().startswith("else"):
            return n
    return first.lineno
