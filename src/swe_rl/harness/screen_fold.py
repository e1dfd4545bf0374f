"""Constant folding for the patch screen (``harness/screen.py``): what an expression is whatever runs it.

Two questions, both answered without running anything: does a string expression always produce one name
(``"get_" + "objects"``, ``"".join(["_get", "frame"])``, ``bytes.fromhex("6763").decode()``: a name written
as a computation only to hide it), and does a return expression always produce one value or one truth
(``True``, ``not False``, ``1``, ``bool(1)``, ``True or other``, ``self is self``, ``x == x``). Anything it
cannot decide is :data:`UNKNOWN`; the folder never guesses a constant.
"""

from __future__ import annotations

import ast
import base64
import codecs
import operator
from dataclasses import dataclass
from typing import Any

UNKNOWN: Any = object()
TRUTHY: Any = object()  # a value unknown, its truth always True (a non-empty literal, a function object)
FALSY: Any = object()
NOT_IMPLEMENTED: Any = object()
_MAX_STR = 4096

_STR_METHODS = frozenset(
    {
        "lower",
        "upper",
        "strip",
        "lstrip",
        "rstrip",
        "replace",
        "format",
        "join",
        "decode",
        "encode",
        "swapcase",
    }
)
_DECODERS = {
    "base64.b64decode": base64.b64decode,
    "base64.urlsafe_b64decode": base64.urlsafe_b64decode,
    "base64.b32decode": base64.b32decode,
    "base64.b16decode": base64.b16decode,
    "bytes.fromhex": bytes.fromhex,
    "binascii.unhexlify": bytes.fromhex,
    "codecs.decode": codecs.decode,
}
_BINOPS = {ast.Add: operator.add, ast.Mod: operator.mod, ast.Mult: operator.mul}
_SAME_TRUE = (ast.Is, ast.Eq, ast.LtE, ast.GtE)
_SAME_FALSE = (ast.IsNot, ast.NotEq, ast.Lt, ast.Gt)
_CMP = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}


def _small(value: Any) -> bool:
    return not isinstance(value, str | bytes) or len(value) <= _MAX_STR


def fold_string(node: ast.expr) -> str | bytes | None:
    """The one str (or bytes) ``node`` always evaluates to, or None when it may differ."""
    value = _fold(node, depth=0)
    return value if isinstance(value, str | bytes) and _small(value) else None


def _fold(node: ast.expr, depth: int) -> Any:
    if depth > 30:
        return UNKNOWN
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.List | ast.Tuple):
        items = [_fold(e, depth + 1) for e in node.elts]
        return UNKNOWN if any(i is UNKNOWN for i in items) else items
    if isinstance(node, ast.JoinedStr):
        parts = [_fold(v.value if isinstance(v, ast.FormattedValue) else v, depth + 1) for v in node.values]
        return "".join(map(str, parts)) if all(p is not UNKNOWN for p in parts) else UNKNOWN
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _fold(node.left, depth + 1), _fold(node.right, depth + 1)
        return _apply(_BINOPS[type(node.op)], left, right)
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        return _slice(node, depth)
    if isinstance(node, ast.Call):
        return _fold_call(node, depth)
    return UNKNOWN


def _apply(fn: Any, *args: Any) -> Any:
    if any(a is UNKNOWN for a in args):
        return UNKNOWN
    if fn is operator.mul and not all(isinstance(a, int) and abs(a) < _MAX_STR for a in args[1:]):
        return UNKNOWN
    try:
        value = fn(*args)
    except Exception:
        return UNKNOWN
    return value if _small(value) else UNKNOWN


def _slice(node: ast.Subscript, depth: int) -> Any:
    base = _fold(node.value, depth + 1)
    s = node.slice
    assert isinstance(s, ast.Slice)
    bounds = [None if b is None else _fold(b, depth + 1) for b in (s.lower, s.upper, s.step)]
    if base is UNKNOWN or any(b is UNKNOWN for b in bounds):
        return UNKNOWN
    return _apply(lambda v: v[slice(*bounds)], base)


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return "?"


def _fold_call(node: ast.Call, depth: int) -> Any:
    args = [_fold(a, depth + 1) for a in node.args]
    if node.keywords or any(a is UNKNOWN for a in args):
        return UNKNOWN
    name = _dotted(node.func)
    if name in _DECODERS:
        return _apply(_DECODERS[name], *args)
    if name == "chr" and len(args) == 1:
        return _apply(chr, *args)
    if name in ("str", "bytes") and len(args) <= 2 and all(isinstance(a, str | bytes) for a in args):
        return _apply(str if name == "str" else bytes, *args)
    if isinstance(node.func, ast.Attribute) and node.func.attr in _STR_METHODS:
        owner = _fold(node.func.value, depth + 1)
        if isinstance(owner, str | bytes):
            args = [a if not isinstance(a, list) else [str(x) for x in a] for a in args]
            return _apply(getattr(type(owner), node.func.attr), owner, *args)
    return UNKNOWN


def fold_result(node: ast.expr | None, depth: int = 0) -> Any:
    """What a return expression always gives: a value, :data:`TRUTHY`/:data:`FALSY` (its truth is fixed,
    the value not), :data:`NOT_IMPLEMENTED`, or :data:`UNKNOWN`. ``None`` (a bare ``return``) is None."""
    if node is None:
        return None
    if depth > 30:
        return UNKNOWN
    if isinstance(node, ast.Name) and node.id == "NotImplemented":
        return NOT_IMPLEMENTED
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp):
        inner = fold_result(node.operand, depth + 1)
        if isinstance(node.op, ast.Not):
            truth = truth_of(inner)
            return UNKNOWN if truth is None else (not truth)
        return _apply({ast.USub: operator.neg, ast.UAdd: operator.pos}.get(type(node.op), _none), inner)
    if isinstance(node, ast.BoolOp):
        return _fold_boolop(node, depth)
    if isinstance(node, ast.Compare):
        return _fold_compare(node, depth)
    if isinstance(node, ast.IfExp):
        return _fold_ifexp(node, depth)
    if isinstance(node, ast.NamedExpr):
        return fold_result(node.value, depth + 1)
    if isinstance(node, ast.Lambda):
        return TRUTHY
    if isinstance(node, ast.List | ast.Tuple | ast.Set | ast.Dict):
        return TRUTHY if (node.keys if isinstance(node, ast.Dict) else node.elts) else FALSY
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        return _fold_builtin_call(node, depth)
    return _fold(node, depth)


def _none(_: Any) -> Any:
    return UNKNOWN


def truth_of(value: Any) -> bool | None:
    """The truth of a folded result, None when it is not fixed."""
    if value is UNKNOWN or value is NOT_IMPLEMENTED:
        return None
    if value is TRUTHY or value is FALSY:
        return value is TRUTHY
    try:
        return bool(value)
    except Exception:
        return None


def _fold_boolop(node: ast.BoolOp, depth: int) -> Any:
    """``a or b``: the first truthy operand wins, so a known-truthy operand fixes the truth whatever came
    before it (``x or True`` is truthy; its value is ``x`` when ``x`` is truthy). ``and`` likewise."""
    wanted = isinstance(node.op, ast.Or)
    values = [fold_result(v, depth + 1) for v in node.values]
    if all(v is not UNKNOWN for v in values):
        for v in values[:-1]:
            if truth_of(v) is wanted:
                return v
        return values[-1]
    if any(truth_of(v) is wanted for v in values):
        return TRUTHY if wanted else FALSY
    return UNKNOWN


def _fold_compare(node: ast.Compare, depth: int) -> Any:
    if len(node.ops) != 1:
        return UNKNOWN
    op, right = node.ops[0], node.comparators[0]
    if ast.dump(node.left) == ast.dump(right):  # ``x is x``, ``other == other``: the operand does not matter
        if isinstance(op, _SAME_TRUE):
            return True
        if isinstance(op, _SAME_FALSE):
            return False
    left_v, right_v = fold_result(node.left, depth + 1), fold_result(right, depth + 1)
    fn = _CMP.get(type(op))
    if fn is None or any(v in (UNKNOWN, TRUTHY, FALSY, NOT_IMPLEMENTED) for v in (left_v, right_v)):
        return UNKNOWN
    return _apply(fn, left_v, right_v)


def _fold_ifexp(node: ast.IfExp, depth: int) -> Any:
    test = truth_of(fold_result(node.test, depth + 1))
    body, orelse = fold_result(node.body, depth + 1), fold_result(node.orelse, depth + 1)
    if test is not None:
        return body if test else orelse
    tb, to = truth_of(body), truth_of(orelse)
    if tb is not None and tb == to:
        return TRUTHY if tb else FALSY
    return UNKNOWN


def _fold_builtin_call(node: ast.Call, depth: int) -> Any:
    assert isinstance(node.func, ast.Name)
    name = node.func.id
    if name in ("bool", "int", "float", "str", "len", "abs"):
        if not node.args:
            return {"bool": False, "int": 0, "float": 0.0, "str": ""}.get(name, UNKNOWN)
        if len(node.args) == 1:
            inner = fold_result(node.args[0], depth + 1)
            if name == "bool":
                truth = truth_of(inner)
                return UNKNOWN if truth is None else truth
            if inner in (TRUTHY, FALSY, NOT_IMPLEMENTED):
                return UNKNOWN
            return _apply({"int": int, "float": float, "str": str, "len": len, "abs": abs}[name], inner)
    return _fold(node, depth)


@dataclass(frozen=True)
class Finding:
    """One place of a file: ``key`` is what the differential counts (the rule and what it names)."""

    rule: str
    detail: str
    line: int
    reason: str

    @property
    def key(self) -> tuple[str, str]:
        return (self.rule, self.detail)
