"""What a name in a module names, for the patch screen (``harness/screen_rules.py``), read from the
module's own imports and simple aliases; never by running it."""

from __future__ import annotations

import ast
from collections.abc import Sequence

from swe_rl.harness.screen_fold import fold_string

IMPORTERS = frozenset({"builtins.__import__", "importlib.import_module", "importlib.__import__"})
NAMESPACES = frozenset({"builtins.globals", "builtins.locals", "builtins.vars"})
# Names a fragment may use without showing their import; not ``gc`` (matplotlib's graphics contexts).
IMPLIED_MODULES = frozenset(
    {"sys", "inspect", "ctypes", "atexit", "builtins", "importlib", "pytest", "pluggy"}
)
FRAME_GETTERS = frozenset({"sys._getframe", "inspect.currentframe"})
# What a frame says about where it is, read and dropped at once: a name, a file, a line (no values).
FRAME_IDENTITY = frozenset({"co_name", "co_qualname", "co_filename", "co_firstlineno"})
# Builtins the screen follows by name (when the file does not bind the name itself).
BUILTIN_NAMES = frozenset(
    {"exec", "eval", "compile", "__import__", "getattr", "setattr", "delattr", "globals", "locals", "vars"}
)


class Resolver:
    """What module or attribute an expression names, as far as imports and simple aliases say."""

    def __init__(self, tree: ast.Module, imports: Sequence[ast.stmt] = ()) -> None:
        self.aliases: dict[str, str] = {}
        bound: set[str] = set()
        for node in [*imports, *ast.walk(tree)]:
            if isinstance(node, ast.Import):
                for a in node.names:
                    self.aliases[a.asname or a.name.split(".")[0]] = (
                        a.name if a.asname else a.name.split(".")[0]
                    )
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                bound.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                bound.add(node.id)
            elif isinstance(node, ast.arg):
                bound.add(node.arg)
        self.builtins = {n for n in BUILTIN_NAMES if n not in bound and n not in self.aliases}
        # A fragment (a hunk's lines) may use ``sys`` without its import: a name nothing binds can only be
        # that module (or a NameError).
        for name in IMPLIED_MODULES - bound - set(self.aliases):
            self.aliases[name] = name
        for node in ast.walk(tree):  # ``m = sys``, ``m = __import__(...)``: the alias names that module
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Name | ast.Call | ast.Subscript)
                and node.targets[0].id not in self.aliases
                and (dotted := self.resolve(node.value))
                and not dotted.startswith("builtins.")
            ):
                self.aliases[node.targets[0].id] = dotted

    def resolve(self, node: ast.expr, depth: int = 0) -> str | None:
        if depth > 20:
            return None
        if isinstance(node, ast.Name):
            if node.id == "__builtins__":
                return "builtins"
            if node.id in self.aliases:
                return self.aliases[node.id]
            return f"builtins.{node.id}" if node.id in self.builtins else None
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value, depth + 1)
            return f"{base}.{node.attr}" if base else None
        if isinstance(node, ast.Call) and node.args:
            func = self.resolve(node.func, depth + 1)
            if func in IMPORTERS:
                name = fold_string(node.args[0])
                return name if isinstance(name, str) else None
            if func == "sys.modules.get":
                name = fold_string(node.args[0])
                return name if isinstance(name, str) else None
            if func == "builtins.getattr" and len(node.args) >= 2:
                name, base = fold_string(node.args[1]), self.resolve(node.args[0], depth + 1)
                return f"{base}.{name}" if base and isinstance(name, str) else None
        if isinstance(node, ast.Subscript):
            return self._resolve_subscript(node, depth)
        return None

    def _resolve_subscript(self, node: ast.Subscript, depth: int) -> str | None:
        key = fold_string(node.slice) if isinstance(node.slice, ast.expr) else None
        if not isinstance(key, str):
            return None
        owner = self.namespace_owner(node.value, depth)
        if owner == "sys.modules":
            return key
        if owner == "builtins.globals":
            return self.aliases.get(key) or (f"builtins.{key}" if key in BUILTIN_NAMES else None)
        return f"{owner}.{key}" if owner else None

    def namespace_owner(self, node: ast.expr, depth: int = 0) -> str | None:
        """For a mapping of names: ``sys.modules``, ``builtins.globals`` (globals()/locals()/vars()), or the
        dotted name whose ``__dict__``/``vars()`` it is."""
        if isinstance(node, ast.Call):
            func = self.resolve(node.func, depth + 1)
            if func in NAMESPACES:
                return self.resolve(node.args[0], depth + 1) if node.args else "builtins.globals"
            return None
        if isinstance(node, ast.Attribute) and node.attr == "__dict__":
            return self.resolve(node.value, depth + 1)
        dotted = self.resolve(node, depth + 1)
        return dotted if dotted in ("sys.modules", "builtins") else None


def named_lookups(tree: ast.Module) -> set[int]:
    """``sys.modules`` nodes that only look one module up (``sys.modules["x"]``, ``sys.modules.get(x)``):
    a constant name names that module, which is judged instead, and a computed one is ``computed_name``;
    a walk or a write is still ``sys.modules`` itself."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        target = None
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            target = node.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
        ):
            target = node.func.value
            skip.add(id(node.func))
        if isinstance(target, ast.Attribute) and target.attr == "modules":
            skip.add(id(target))
    return skip


def identity_reads(tree: ast.Module, r: Resolver) -> set[int]:
    """Frames got and read at once for where they are (``sys._getframe(1).f_code.co_name``, through any
    ``f_back``, or ``.f_lineno``): the frame never escapes and no value of it is read, so none of the
    chain is a finding. pyvista's gold patch (pyvista__pyvista-432) names its caller in an error so."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        chain: list[ast.AST] = []
        cur: ast.AST = node
        if isinstance(cur, ast.Attribute) and cur.attr in FRAME_IDENTITY:
            chain.append(cur)
            cur = cur.value
            if not (isinstance(cur, ast.Attribute) and cur.attr == "f_code"):
                continue
        elif not (isinstance(cur, ast.Attribute) and cur.attr == "f_lineno"):
            continue
        chain.append(cur)
        cur = cur.value
        while isinstance(cur, ast.Attribute) and cur.attr == "f_back":
            chain.append(cur)
            cur = cur.value
        if isinstance(cur, ast.Call) and r.resolve(cur.func) in FRAME_GETTERS:
            skip.update(id(n) for n in [*chain, cur, cur.func])
    return skip
