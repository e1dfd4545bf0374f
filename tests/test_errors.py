"""Every exception class swe-rl defines is in its one tree (swe_rl.errors), wherever it is defined."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import swe_rl
from swe_rl.errors import SweRlError

SRC = Path(swe_rl.__file__).parent
BUILTIN_REPOS = SRC / "tasks" / "builtin" / "repos"  # the builtin tasks' own code, not swe-rl's


def _exception_classes() -> list[tuple[str, str]]:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if BUILTIN_REPOS in path.parents:
            continue
        module = ".".join(("swe_rl", *path.relative_to(SRC).with_suffix("").parts)).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.name.endswith(("Error", "Exception")):
                found.append((module, node.name))
    return found


def test_every_exception_class_is_a_swe_rl_error():
    found = _exception_classes()
    names = {name for _, name in found}
    # control: the scan sees classes defined outside errors.py
    assert {"ServiceError", "SweRlError", "InfraError"} <= names, names
    outside = [
        f"{module}.{name}"
        for module, name in found
        if not issubclass(getattr(importlib.import_module(module), name), SweRlError)
    ]
    assert outside == []
