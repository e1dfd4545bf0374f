"""Mutation finders of expressions: a comparison, arithmetic or boolean operator swapped, an index or bound
off by one, a constant changed, two arguments swapped, a local name misspelled."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from swe_rl.synth.code_text import CodeText, FunctionScope, Proposal, call_name, gap_edit, numeric_expr, shift
from swe_rl.synth.mutations import TextEdit

_COMPARE_SWAP: dict[type[ast.cmpop], tuple[str, str]] = {
    ast.Lt: (r"<", "<="),
    ast.LtE: (r"<=", "<"),
    ast.Gt: (r">", ">="),
    ast.GtE: (r">=", ">"),
    ast.Eq: (r"==", "!="),
    ast.NotEq: (r"!=", "=="),
    ast.In: (r"\bin\b", "not in"),
    ast.NotIn: (r"\bnot\s+in\b", "in"),
    ast.Is: (r"\bis\b", "is not"),
    ast.IsNot: (r"\bis\s+not\b", "is"),
}
_ARITH_SWAP: dict[type[ast.operator], tuple[str, str]] = {
    ast.Add: (r"\+", "-"),
    ast.Sub: (r"-", "+"),
    ast.Mult: (r"\*", "/"),
    ast.Div: (r"/", "*"),
    ast.FloorDiv: (r"//", "/"),
    ast.Mod: (r"%", "//"),
    ast.BitAnd: (r"&", "|"),
    ast.BitOr: (r"\|", "&"),
    ast.LShift: (r"<<", ">>"),
    ast.RShift: (r">>", "<<"),
}


def compare_ops(src: CodeText, node: ast.AST, ctx: FunctionScope) -> Iterator[Proposal]:
    if not isinstance(node, ast.Compare):
        return
    left: ast.AST = node.left
    for op, right in zip(node.ops, node.comparators, strict=True):
        pattern, new = _COMPARE_SWAP[type(op)]
        edit = gap_edit(src, left, right, pattern, new)
        if edit is not None:
            old = src.text[edit.start : edit.end]
            yield "op_compare", f"`{old}` -> `{new}`", [edit], node
        left = right


def arith_ops(src: CodeText, node: ast.AST, ctx: FunctionScope) -> Iterator[Proposal]:
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITH_SWAP:
        if any(
            isinstance(s, ast.JoinedStr) or (isinstance(s, ast.Constant) and isinstance(s.value, str))
            for s in (node.left, node.right)
        ):
            return  # string concatenation or %-formatting: a swap is a TypeError, not a bug
        pattern, new = _ARITH_SWAP[type(node.op)]
        edit = gap_edit(src, node.left, node.right, pattern, new)
        if edit is not None:
            yield "op_arith", f"`{src.text[edit.start : edit.end]}` -> `{new}`", [edit], node
    elif isinstance(node, ast.AugAssign) and type(node.op) in _ARITH_SWAP:
        pattern, new = _ARITH_SWAP[type(node.op)]
        edit = gap_edit(src, node.target, node.value, pattern + "=", new + "=")
        if edit is not None:
            yield "op_arith", f"`{src.text[edit.start : edit.end]}` -> `{new}=`", [edit], node


def bool_ops(src: CodeText, node: ast.AST, ctx: FunctionScope) -> Iterator[Proposal]:
    if not isinstance(node, ast.BoolOp):
        return
    old, new = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
    edits = []
    for left, right in zip(node.values, node.values[1:], strict=False):
        edit = gap_edit(src, left, right, rf"\b{old}\b", new)
        if edit is None:
            return
        edits.append(edit)
    yield "op_bool", f"`{old}` -> `{new}`", edits, node


def off_by_one(src: CodeText, node: ast.AST, ctx: FunctionScope) -> Iterator[Proposal]:
    bounds: list[ast.expr] = []
    if isinstance(node, ast.Subscript):
        if isinstance(node.slice, ast.Slice):  # slice bounds and range() arguments are integers
            bounds = [b for b in (node.slice.lower, node.slice.upper) if b is not None]
        elif numeric_expr(node.slice, ctx.numeric):  # a plain index may be a dict key: look first
            bounds = [node.slice]
    elif isinstance(node, ast.Call) and call_name(node) == "range" and not node.keywords:
        bounds = list(node.args[:2])
    for bound in bounds:
        if isinstance(bound, ast.Starred):
            continue
        start, end = src.span(bound)
        for delta in (1, -1):
            new = shift(src, bound, delta)
            yield (
                "off_by_one",
                f"`{src.seg(bound)}` -> `{new}`",
                [TextEdit(start=start, end=end, new=new)],
                node,
            )


def constants(src: CodeText, node: ast.AST, ctx: FunctionScope) -> Iterator[Proposal]:
    if isinstance(node, ast.Subscript | ast.Call) and list(off_by_one(src, node, ctx)):
        return
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, ast.Constant) or isinstance(node, ast.Subscript | ast.Slice):
            continue
        start, end = src.span(child)
        value = child.value
        if isinstance(value, bool):
            yield (
                "constant_change",
                f"`{value}` -> `{not value}`",
                [TextEdit(start=start, end=end, new=str(not value))],
                child,
            )
        elif isinstance(value, int) and src.text[start:end].isdigit():
            for new in sorted({value + 1, value - 1 if value else 2}):
                yield (
                    "constant_change",
                    f"`{value}` -> `{new}`",
                    [TextEdit(start=start, end=end, new=str(new))],
                    child,
                )


def swapped_args(src: CodeText, node: ast.AST, ctx: FunctionScope) -> Iterator[Proposal]:
    if not isinstance(node, ast.Call) or any(isinstance(a, ast.Starred) for a in node.args):
        return
    for a, b in zip(node.args, node.args[1:], strict=False):
        ta, tb = src.seg(a), src.seg(b)
        if ta == tb:
            continue
        (sa, ea), (sb, eb) = src.span(a), src.span(b)
        yield (
            "args_swap",
            f"arguments `{ta}` and `{tb}` swapped",
            [
                TextEdit(start=sa, end=ea, new=tb),
                TextEdit(start=sb, end=eb, new=ta),
            ],
            node,
        )


def name_typo(src: CodeText, node: ast.AST, ctx: FunctionScope) -> Iterator[Proposal]:
    """A local name misspelled where it is read (one inner letter dropped): a NameError at run time."""
    if not isinstance(node, ast.Name) or not isinstance(node.ctx, ast.Load) or node.id not in ctx.assigned:
        return
    name = node.id
    if len(name) < 4:
        return
    cut = len(name) // 2  # >= 2: the first letter stays, so the typo is an identifier too
    typo = name[:cut] + name[cut + 1 :]
    if typo in ctx.module_names:
        return
    start, end = src.span(node)
    yield "name_typo", f"`{name}` -> `{typo}`", [TextEdit(start=start, end=end, new=typo)], node
