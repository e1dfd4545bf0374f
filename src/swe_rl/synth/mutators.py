"""Where bugs can be injected: every procedural mutation of every function of a Python file.

Each finder (of expressions in :mod:`.expression_finders`, of control flow in :mod:`.control_finders`)
walks one function's ``ast`` and proposes :class:`Mutation`s as text edits; a proposal whose text does
not parse or means the same code is dropped. ``covered`` (the lines the test suite executed) keeps only
mutations on lines some test runs.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator

from swe_rl.synth.code_text import CodeText, FunctionScope, Proposal, body_nodes, bound_names, line_of
from swe_rl.synth.control_finders import branches, conditions, returns, statements
from swe_rl.synth.expression_finders import (
    arith_ops,
    bool_ops,
    compare_ops,
    constants,
    name_typo,
    off_by_one,
    swapped_args,
)
from swe_rl.synth.mutations import Mutation, apply_edits, changes_code

Finder = Callable[[CodeText, ast.AST, FunctionScope], Iterator[Proposal]]


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
    src = CodeText(path, text, tree)
    found: dict[str, Mutation] = {}
    module_names = bound_names(tree)
    for qualname, func in functions(tree):
        ctx = FunctionScope(func, module_names)
        for node in [func, *body_nodes(func)]:
            for finder in _FINDERS:
                for kind, desc, edits, at in finder(src, node, ctx):
                    line = at.lineno  # type: ignore[attr-defined]
                    if covered is not None and line not in covered:
                        continue
                    mutated = apply_edits(text, edits)
                    if not changes_code(tree, mutated):
                        continue
                    first = min(line_of(src, e.start) for e in edits)
                    last = max(line_of(src, max(e.start, e.end - 1)) for e in edits)
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


_FINDERS: list[Finder] = [
    compare_ops,
    arith_ops,
    bool_ops,
    conditions,
    off_by_one,
    constants,
    returns,
    statements,
    branches,
    swapped_args,
    name_typo,
]
