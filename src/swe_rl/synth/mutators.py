"""Where bugs can be injected: every procedural mutation of every function of a Python file.

Each finder walks one function's ``ast`` and proposes :class:`Mutation`s as text edits; a proposal
whose text does not parse or means the same code is dropped. ``covered`` (the lines the test suite
executed) keeps only mutations on lines some test runs.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator

from swe_rl.synth.mutations import Mutation, MutationKind, TextEdit, apply_edits, changes_code

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
_ATOMS = (ast.Name, ast.Constant, ast.Call, ast.Attribute, ast.Subscript)
_ADDITIVE = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod)
_NUMERIC_CALLS = {"len", "int", "min", "max", "abs", "round", "floor", "ceil", "sum", "ord"}
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


class _Source:
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


Finder = Callable[[_Source, ast.AST, "_Ctx"], Iterator[tuple[MutationKind, str, list[TextEdit], ast.AST]]]


class _Ctx:
    def __init__(self, func: ast.FunctionDef | ast.AsyncFunctionDef, module_names: frozenset[str]) -> None:
        self.func = func
        self.module_names = module_names
        self.numeric = _numeric_names(func)
        self.assigned: dict[str, int] = {}
        for node in ast.walk(func):  # parameters count as a binding too
            if (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)) or isinstance(node, ast.arg):
                name = node.id if isinstance(node, ast.Name) else node.arg
                self.assigned[name] = self.assigned.get(name, 0) + 1


def functions(tree: ast.Module) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Top-level functions and methods (nested ones belong to their enclosing function)."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node.name, node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    yield f"{node.name}.{item.name}", item


def find_mutations(path: str, text: str, tree: ast.Module, covered: set[int] | None = None) -> list[Mutation]:
    """Every mutation of every function in the file, on covered lines only when ``covered`` is given."""
    src = _Source(path, text, tree)
    found: dict[str, Mutation] = {}
    module_names = _bound_names(tree)
    for qualname, func in functions(tree):
        ctx = _Ctx(func, module_names)
        for node in [func, *_body_nodes(func)]:
            for finder in _FINDERS:
                for kind, desc, edits, at in finder(src, node, ctx):
                    line = at.lineno  # type: ignore[attr-defined]
                    if covered is not None and line not in covered:
                        continue
                    mutated = apply_edits(text, edits)
                    if not changes_code(tree, mutated):
                        continue
                    first = min(_line_of(src, e.start) for e in edits)
                    last = max(_line_of(src, max(e.start, e.end - 1)) for e in edits)
                    mutation = Mutation(
                        kind=kind,
                        path=path,
                        function=qualname,
                        line=first,
                        end_line=last,
                        description=desc,
                        edits=tuple(sorted(edits, key=lambda e: e.start)),
                    )
                    found.setdefault(mutation.key, mutation)
    return sorted(found.values(), key=lambda m: (m.line, m.kind, m.key))


def _line_of(src: _Source, offset: int) -> int:
    import bisect

    return bisect.bisect_right(src.starts, offset)


def _bound_names(tree: ast.Module) -> frozenset[str]:
    """Every identifier the module mentions, plus the builtins: a typo must not land on one of them."""
    import builtins

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


def _body_nodes(func: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[ast.AST]:
    body = func.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    for stmt in body:
        yield from ast.walk(stmt)


def _numeric_names(func: ast.AST) -> set[str]:
    """Local names that hold numbers by the look of their assignments (indices, counts, bounds)."""
    names: set[str] = set()
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and _numeric_expr(node.value, names):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            if _numeric_expr(node.value, names):
                names.add(node.target.id)
        elif isinstance(node, ast.For) and isinstance(node.iter, ast.Call):
            callee = _call_name(node.iter)
            if callee == "range" and isinstance(node.target, ast.Name):
                names.add(node.target.id)
            elif callee == "enumerate" and isinstance(node.target, ast.Tuple) and node.target.elts:
                first = node.target.elts[0]
                if isinstance(first, ast.Name):
                    names.add(first.id)
    return names


def _call_name(node: ast.Call) -> str:
    func = node.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _numeric_expr(node: ast.AST, names: set[str]) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int) and not isinstance(node.value, bool)
    if isinstance(node, ast.BinOp):
        return isinstance(node.op, _ADDITIVE) and (
            _numeric_expr(node.left, names) or _numeric_expr(node.right, names)
        )
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return _numeric_expr(node.operand, names)
    if isinstance(node, ast.Call):
        return _call_name(node) in _NUMERIC_CALLS
    return isinstance(node, ast.Name) and node.id in names


def _shift(src: _Source, node: ast.expr, delta: int) -> str:
    """The expression's text moved by ``delta`` (a constant changes value, anything else gets ``+ 1``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return str(node.value + delta)
    text = src.seg(node)
    if not isinstance(node, _ATOMS) and not (isinstance(node, ast.BinOp) and isinstance(node.op, _ADDITIVE)):
        text = f"({text})"
    return f"{text} {'+' if delta > 0 else '-'} {abs(delta)}"


def _gap_edit(src: _Source, left: ast.AST, right: ast.AST, pattern: str, new: str) -> TextEdit | None:
    """Replace the operator found between two operands."""
    start = src.offset(left.end_lineno, left.end_col_offset)  # type: ignore[attr-defined]
    end = src.offset(right.lineno, right.col_offset)  # type: ignore[attr-defined]
    gap = src.text[start:end]
    matches = list(re.finditer(pattern, gap))
    if len(matches) != 1:
        return None
    m = matches[0]
    return TextEdit(start=start + m.start(), end=start + m.end(), new=new)


# -- finders ----------------------------------------------------------------------------------------
def _compare(
    src: _Source, node: ast.AST, ctx: _Ctx
) -> Iterator[tuple[MutationKind, str, list[TextEdit], ast.AST]]:
    if not isinstance(node, ast.Compare):
        return
    left: ast.AST = node.left
    for op, right in zip(node.ops, node.comparators, strict=True):
        pattern, new = _COMPARE_SWAP[type(op)]
        edit = _gap_edit(src, left, right, pattern, new)
        if edit is not None:
            old = src.text[edit.start : edit.end]
            yield "op_compare", f"`{old}` -> `{new}`", [edit], node
        left = right


def _arith(
    src: _Source, node: ast.AST, ctx: _Ctx
) -> Iterator[tuple[MutationKind, str, list[TextEdit], ast.AST]]:
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITH_SWAP:
        if any(
            isinstance(s, ast.JoinedStr) or (isinstance(s, ast.Constant) and isinstance(s.value, str))
            for s in (node.left, node.right)
        ):
            return  # string concatenation or %-formatting: a swap is a TypeError, not a bug
        pattern, new = _ARITH_SWAP[type(node.op)]
        edit = _gap_edit(src, node.left, node.right, pattern, new)
        if edit is not None:
            yield "op_arith", f"`{src.text[edit.start : edit.end]}` -> `{new}`", [edit], node
    elif isinstance(node, ast.AugAssign) and type(node.op) in _ARITH_SWAP:
        pattern, new = _ARITH_SWAP[type(node.op)]
        edit = _gap_edit(src, node.target, node.value, pattern + "=", new + "=")
        if edit is not None:
            yield "op_arith", f"`{src.text[edit.start : edit.end]}` -> `{new}=`", [edit], node


def _boolop(
    src: _Source, node: ast.AST, ctx: _Ctx
) -> Iterator[tuple[MutationKind, str, list[TextEdit], ast.AST]]:
    if not isinstance(node, ast.BoolOp):
        return
    old, new = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
    edits = []
    for left, right in zip(node.values, node.values[1:], strict=False):
        edit = _gap_edit(src, left, right, rf"\b{old}\b", new)
        if edit is None:
            return
        edits.append(edit)
    yield "op_bool", f"`{old}` -> `{new}`", edits, node


def _conditions(
    src: _Source, node: ast.AST, ctx: _Ctx
) -> Iterator[tuple[MutationKind, str, list[TextEdit], ast.AST]]:
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
        new = f"not {text}" if isinstance(test, _ATOMS) else f"not ({text})"
        yield "cond_negate", "condition negated", [TextEdit(start=start, end=end, new=new)], node
    if isinstance(node, ast.If) and not node.orelse and src.text[src.span(node)[0] :].startswith("if"):
        yield from _remove_guard(src, node)


def _remove_guard(src: _Source, node: ast.If) -> Iterator[tuple[MutationKind, str, list[TextEdit], ast.AST]]:
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


def _off_by_one(
    src: _Source, node: ast.AST, ctx: _Ctx
) -> Iterator[tuple[MutationKind, str, list[TextEdit], ast.AST]]:
    bounds: list[ast.expr] = []
    if isinstance(node, ast.Subscript):
        if isinstance(node.slice, ast.Slice):  # slice bounds and range() arguments are integers
            bounds = [b for b in (node.slice.lower, node.slice.upper) if b is not None]
        elif _numeric_expr(node.slice, ctx.numeric):  # a plain index may be a dict key: look first
            bounds = [node.slice]
    elif isinstance(node, ast.Call) and _call_name(node) == "range" and not node.keywords:
        bounds = list(node.args[:2])
    for bound in bounds:
        if isinstance(bound, ast.Starred):
            continue
        start, end = src.span(bound)
        for delta in (1, -1):
            new = _shift(src, bound, delta)
            yield (
                "off_by_one",
                f"`{src.seg(bound)}` -> `{new}`",
                [TextEdit(start=start, end=end, new=new)],
                node,
            )


def _constants(
    src: _Source, node: ast.AST, ctx: _Ctx
) -> Iterator[tuple[MutationKind, str, list[TextEdit], ast.AST]]:
    if isinstance(node, ast.Subscript | ast.Call) and list(_off_by_one(src, node, ctx)):
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


def _returns(
    src: _Source, node: ast.AST, ctx: _Ctx
) -> Iterator[tuple[MutationKind, str, list[TextEdit], ast.AST]]:
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


def _statements(
    src: _Source, node: ast.AST, ctx: _Ctx
) -> Iterator[tuple[MutationKind, str, list[TextEdit], ast.AST]]:
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


def _branches(
    src: _Source, node: ast.AST, ctx: _Ctx
) -> Iterator[tuple[MutationKind, str, list[TextEdit], ast.AST]]:
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


def _else_line(src: _Source, node: ast.If) -> int:
    """The line of the ``else:`` / ``elif`` that starts ``node.orelse``."""
    first = node.orelse[0]
    if isinstance(first, ast.If) and src.text[src.span(first)[0] :].startswith("elif"):
        return first.lineno
    body_end = node.body[-1].end_lineno or node.body[-1].lineno
    for n in range(body_end + 1, first.lineno + 1):
        if src.lines[n - 1].strip().startswith("else"):
            return n
    return first.lineno


def _args(
    src: _Source, node: ast.AST, ctx: _Ctx
) -> Iterator[tuple[MutationKind, str, list[TextEdit], ast.AST]]:
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


def _typo(
    src: _Source, node: ast.AST, ctx: _Ctx
) -> Iterator[tuple[MutationKind, str, list[TextEdit], ast.AST]]:
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


_FINDERS: list[Finder] = [
    _compare,
    _arith,
    _boolop,
    _conditions,
    _off_by_one,
    _constants,
    _returns,
    _statements,
    _branches,
    _args,
    _typo,
]
