"""Modules stay readable: none over 400 lines, and no function over 60 lines outside the CLI (whose commands
are mostly their options' declarations). A nested function counts as part of the one it is in."""

from __future__ import annotations

import ast
from pathlib import Path

import swe_rl

PACKAGE = Path(swe_rl.__file__).parent
MAX_MODULE, MAX_FUNCTION = 400, 60


def long_functions(source: str, limit: int) -> list[tuple[str, int]]:
    """(name, lines) of the outermost functions and methods of ``source`` longer than ``limit`` lines."""
    found = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                size = (child.end_lineno or child.lineno) - child.lineno + 1
                if size > limit:
                    found.append((child.name, size))
            else:
                visit(child)  # classes, and functions under if/try at module level

    visit(ast.parse(source))
    return found


def test_the_measure_counts_a_nested_function_in_its_parent() -> None:
    inner = "\n".join(f"        x{i} = {i}" for i in range(8))
    source = f"def outer():\n    def inner():\n{inner}\n    return inner\n\n\nclass C:\n    def m(self):\n        pass\n"
    assert long_functions(source, 5) == [("outer", 11)] and long_functions(source, 11) == []


def test_no_module_and_no_function_is_too_long() -> None:
    modules, functions = {}, {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("tasks/builtin/repos/"):  # the builtin tasks' own libraries, not swe-rl
            continue
        text = path.read_text()
        if len(text.splitlines()) > MAX_MODULE:
            modules[rel] = len(text.splitlines())
        if not rel.startswith("cli/") and (long := long_functions(text, MAX_FUNCTION)):
            functions[rel] = long
    assert modules == {} and functions == {}
