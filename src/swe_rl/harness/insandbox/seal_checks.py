"""The seal plugin's checks at the session's end (``swe_rl_seal_checks.py``, staged beside ``swe_rl_seal.py``;
never imported by swe-rl): pytest's hook chain, the import system's finders and the runner's namespaces, each
against the patch's files (``kind``: the plugin's classification of a file). The plugin binds these functions
at its import, before any code of the repository runs; they keep no state.

Written for Python 3.6+: no newer syntax.
"""

import functools
import os
import sys
import types

RUNNER_MODULES = ("builtins", "pytest", "_pytest", "pluggy", "unittest")
STRICT = ("builtins", "pytest")  # modules whose every name tests may call
_MISSING = object()


def origin(value):
    """The file that defined ``value`` (a function, method, class or descriptor), or None."""
    found = origins(value)
    return found[0] if found else None


def origins(value):
    """The files that defined ``value`` and what it wraps or closes over (a decorator's wrapper, a bound
    method's function, a partial's, a property's accessors): a callable of the patch's stays the patch's
    inside a wrapper of the standard library's. Nothing of an object of another type is looked up but its
    class (an attribute of it could be the patch's code, run inside the audit hook)."""
    found, todo, seen = [], [value], 0
    while todo and seen < 32:
        value, seen = todo.pop(), seen + 1
        kind = type(value)
        if kind is _FUNCTION:
            found.append(value.__code__.co_filename)
            cells = [c for c in value.__closure__ or () if _filled(c)]
            todo.extend(c.cell_contents for c in cells if type(c.cell_contents) in (_FUNCTION, _METHOD))
            todo.extend(w for w in [vars(value).get("__wrapped__")] if w is not None)
        elif kind in (_METHOD, classmethod, staticmethod):
            todo.append(value.__func__)
        elif kind is property:
            todo.extend(f for f in (value.fget, value.fset, value.fdel) if f is not None)
        elif kind is functools.partial:
            todo.append(value.func)
        elif issubclass(kind, type):  # a class (its own type, never its __class__: a proxy answers that)
            module = sys.modules.get(vars(value).get("__module__") or "", None)
            where = vars(module).get("__file__") if module is not None else None
            found.extend([where] if isinstance(where, str) else [])
        else:
            todo.append(kind)
    return found


def _filled(cell):
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


def patched(value, kind):
    """The first file of the patch's among :func:`origins` of ``value``, or None."""
    for where in origins(value):
        if kind(where) == "tainted":
            return where
    return None


def snapshot():
    """What the runner's modules and their classes hold, by identity, at the plugin's import."""
    found = []
    for name, module in list(sys.modules.items()):
        if module is not None and name.split(".")[0] in RUNNER_MODULES:
            found.extend(module_snapshot(name, module, framework=name.split(".")[0] == "unittest"))
    return found


def module_snapshot(name, module, framework=False):
    """What one module and the classes it defines hold, by identity, now: (label, owner, its namespace, the
    rule :func:`namespaces` applies). ``framework``: a test framework's module (``unittest``, django's and
    sympy's), where what tests call may be replaced by no one."""
    rule = "any" if name in STRICT else "callables" if framework else "patched"
    space = dict(vars(module))
    found = [(name, module, space, rule)]
    for attr, value in space.items():
        if issubclass(type(value), type) and vars(value).get("__module__") == name:
            found.append((f"{name}.{attr}", value, dict(vars(value)), rule))
    return found


def namespaces(snapshot, kind, trip):
    """Nothing added to or replaced in the runner's namespaces by the patch's code; in ``builtins`` and
    ``pytest`` (what tests call: ``pytest.raises``, ``isinstance``, ...) nothing replaced by anyone; in a test
    framework's modules and classes no callable replaced, or added to a class, by library code or the
    framework's own (:func:`_swapped`)."""
    framework = _framework_files(snapshot)
    for label, owner, before, rule in snapshot:
        for attr, value in list(vars(owner).items()):
            old = before.get(attr, _MISSING)
            if old is value:
                continue
            if (
                (rule == "any" and old is not _MISSING)
                or (rule == "callables" and _swapped(owner, old, value, kind, framework))
                or patched(value, kind) is not None
            ):
                trip("{}.{} {}".format(label, attr, "added" if old is _MISSING else "replaced"))


def _framework_files(snapshot):
    files = set()
    for _label, owner, before, rule in snapshot:
        where = before.get("__file__") if rule == "callables" and type(owner) is types.ModuleType else None
        if isinstance(where, str):
            files.add(os.path.realpath(where))
    return files


def _swapped(owner, old, value, kind, framework):
    """Under the framework rule: a callable put in place of a callable (or added to a class, where it shadows
    what the class inherits) whose code is a library's (the standard library's, an installed package's) or the
    framework's own: an assertion swapped for another assertion, ``raises`` for ``functools.partial``, a
    reporter's failure for its pass. What the repository's own runner sets there (django's runtests.py sets
    ``ParallelTestSuite.process_setup``) and a value the framework fills in itself (``unittest``'s interrupt
    handler, a lazy import) are no swap."""
    if not _callable(value) or not (_callable(old) or (old is _MISSING and issubclass(type(owner), type))):
        return False
    found = [where for where in origins(value) if where]
    if not found:  # a C type or function (``functools.partial``): no file, a library's
        return True
    return any(kind(where) == "trusted" or os.path.realpath(where) in framework for where in found)


def _callable(value):
    """Whether ``value`` is code a test calls (a function, a class, a descriptor of one), by its type alone."""
    kind = type(value)
    return kind in _CALLABLE_TYPES or issubclass(kind, type) or "__call__" in vars(kind)


def hooks(config, kind, trip):
    manager = getattr(config, "pluginmanager", None)
    relay = getattr(manager, "hook", None)
    for name, caller in list(vars(relay).items() if relay is not None else []):
        get = getattr(caller, "get_hookimpls", None)
        for impl in get() if get is not None else ():
            where = patched(getattr(impl, "function", None), kind)
            if where is not None:
                trip(f"hook {name} implemented by the patched code ({os.path.basename(where)})")


def finders(kind, trip):
    for finder in list(sys.meta_path) + list(sys.path_hooks):
        where = patched(finder, kind)
        if where is not None:
            trip(f"an import hook of the patched code ({os.path.basename(where)})")


_FUNCTION, _METHOD = types.FunctionType, types.MethodType
_CALLABLE_TYPES = (
    _FUNCTION,
    _METHOD,
    types.BuiltinFunctionType,
    classmethod,
    staticmethod,
    property,
    functools.partial,
)
