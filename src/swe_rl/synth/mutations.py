"""Mutations as text edits: what one injected bug changes, applying it, and combining several.

A mutation is found on the ``ast`` of a source file but applied as edits to the file's text, so the
rest of the file keeps its formatting and the gold patch (the reverse diff) is as small as the bug.
"""

from __future__ import annotations

import ast
import hashlib
import itertools
import types
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

MutationKind = Literal[
    "op_compare",
    "op_arith",
    "op_bool",
    "off_by_one",
    "cond_negate",
    "cond_remove",
    "return_change",
    "constant_change",
    "stmt_delete",
    "branch_delete",
    "args_swap",
    "name_typo",
]
MUTATION_KINDS: tuple[str, ...] = MutationKind.__args__  # type: ignore[attr-defined]

Difficulty = Literal["one-line", "multi-line", "multi-location"]
DIFFICULTIES: tuple[str, ...] = ("one-line", "multi-line", "multi-location")


class TextEdit(BaseModel):
    """Replace ``text[start:end]`` (character offsets in the file) by ``new``."""

    model_config = ConfigDict(frozen=True)

    start: int
    end: int
    new: str


class Mutation(BaseModel):
    """One procedural bug at one place of one function."""

    model_config = ConfigDict(frozen=True)

    kind: MutationKind
    path: str = Field(description="File, relative to the repository root.")
    function: str = Field(description="Qualified name of the function holding the bug ('Class.method').")
    line: int = Field(description="First line (1-based) the bug touches in the unmutated file.")
    end_line: int = Field(description="Last line it touches.")
    description: str = Field(description="What changed, e.g. '`<=` -> `<`'.")
    edits: tuple[TextEdit, ...]

    @property
    def function_key(self) -> str:
        return f"{self.path}::{self.function}"

    @property
    def one_line(self) -> bool:
        return self.line == self.end_line and not any("\n" in e.new for e in self.edits)

    @property
    def key(self) -> str:
        """A stable identity: file, place and replacement."""
        parts = [self.kind, self.path, *(f"{e.start}:{e.end}:{e.new}" for e in self.edits)]
        return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


class Candidate(BaseModel):
    """One or several mutations in one function, tried as one task."""

    model_config = ConfigDict(frozen=True)

    mutations: tuple[Mutation, ...] = Field(min_length=1)

    @property
    def path(self) -> str:
        return self.mutations[0].path

    @property
    def function_key(self) -> str:
        return self.mutations[0].function_key

    @property
    def difficulty(self) -> Difficulty:
        if len(self.mutations) > 1:
            return "multi-location"
        return "one-line" if self.mutations[0].one_line else "multi-line"

    @property
    def kinds(self) -> list[str]:
        return sorted({m.kind for m in self.mutations})

    @property
    def key(self) -> str:
        return hashlib.sha256("+".join(m.key for m in self.mutations).encode()).hexdigest()[:16]

    def apply(self, text: str) -> str:
        return apply_edits(text, [e for m in self.mutations for e in m.edits])


def apply_edits(text: str, edits: Sequence[TextEdit]) -> str:
    """``text`` with every edit made; edits must not overlap (ValueError otherwise)."""
    ordered = sorted(edits, key=lambda e: (e.start, e.end))
    for before, after in itertools.pairwise(ordered):
        if after.start < before.end:
            raise ValueError("overlapping edits")
    out = text
    for edit in reversed(ordered):
        out = out[: edit.start] + edit.new + out[edit.end :]
    return out


def overlaps(a: Mutation, b: Mutation) -> bool:
    """Whether two mutations of one file touch overlapping lines (combining them would be muddled)."""
    return a.path == b.path and not (a.end_line < b.line or b.end_line < a.line)


def changes_code(original: ast.Module, mutated_text: str) -> bool:
    """The mutated text parses and means something else than the original (not a formatting change)."""
    try:
        mutated = ast.parse(mutated_text)
    except (SyntaxError, ValueError):
        return False
    return ast.dump(mutated) != ast.dump(original)


def same_bytecode(path: str, original: str, mutated: str) -> bool:
    """Whether the mutated text compiles to exactly the original's code objects, line numbers aside.

    Proof that the mutant is equivalent without running a test: ``return None`` deleted at the end
    of a function, a local variable's annotation changed (never evaluated), and the like. Docstrings
    count (doctests and ``__doc__`` can see them), and constants compare by type and ``repr``
    (``1``, ``1.0`` and ``True`` are equal in a tuple but not in a program).
    """
    try:
        mutated_code = compile(mutated, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return _code_key(compile(original, path, "exec", dont_inherit=True)) == _code_key(mutated_code)


_CODE_FIELDS = (
    *("co_argcount", "co_posonlyargcount", "co_kwonlyargcount", "co_flags", "co_code"),
    *("co_names", "co_varnames", "co_freevars", "co_cellvars", "co_name", "co_qualname"),
    "co_exceptiontable",
)


def _code_key(value: object) -> object:
    """A code object or constant as comparable data, without co_firstlineno, co_linetable, filename."""
    if isinstance(value, types.CodeType):
        fields = tuple(getattr(value, f, None) for f in _CODE_FIELDS)
        return ("code", fields, tuple(_code_key(c) for c in value.co_consts))
    if isinstance(value, tuple):
        return ("tuple", tuple(_code_key(v) for v in value))
    if isinstance(value, frozenset):
        return ("frozenset", tuple(sorted(repr(_code_key(v)) for v in value)))
    return (type(value).__name__, repr(value))


def combinations(
    singles: Iterable[Candidate], texts: Mapping[str, str], *, max_per_function: int = 12
) -> list[Candidate]:
    """Pairs and triples of non-overlapping single mutations in the same function whose combined
    text still parses (two deletions can empty a block), sorted by key. ``texts``: path -> source."""
    by_function: dict[str, list[Mutation]] = {}
    for cand in singles:
        by_function.setdefault(cand.function_key, []).append(cand.mutations[0])
    out: list[Candidate] = []
    for muts in by_function.values():
        muts = sorted(muts, key=lambda m: m.key)[:max_per_function]
        for size in (2, 3):
            for group in itertools.combinations(muts, size):
                if any(overlaps(a, b) for a, b in itertools.combinations(group, 2)):
                    continue
                combo = Candidate(mutations=tuple(sorted(group, key=lambda m: (m.line, m.key))))
                try:
                    ast.parse(combo.apply(texts[combo.path]))
                except (SyntaxError, ValueError):
                    continue
                out.append(combo)
    return sorted(out, key=lambda c: c.key)
