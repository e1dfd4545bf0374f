"""The seal plugin's checks at the session's end (``swe_rl_seal_checks.py``, staged beside ``swe_rl_seal.py``;
never imported by swe-rl): pytest's hook chain, the import system's finders and the runner's namespaces, each
against the patch's files (``kind``: the plugin's classification of a file). The plugin binds these functions
at its import, before any code of the repository runs, and hands them ``origin``; they keep no state.

Written for Python 3.6+: no newer syntax.
"""

import os
import sys

RUNNER_MODULES = ("builtins", "pytest", "_pytest", "pluggy", "unittest")
_MISSING = object()


def origin(value):
    """The file that defined ``value`` (a function, method, class or descriptor), or None."""
    if not isinstance(value, type):
        for candidate in (value, getattr(value, "__func__", None), getattr(value, "fget", None)):
            code = getattr(candidate, "__code__", None)
            if isinstance(code, _CODE):
                return code.co_filename
    else:
        module = sys.modules.get(getattr(value, "__module__", ""), None)
        return getattr(module, "__file__", None)
    return None


def snapshot():
    """What the runner's modules and their classes hold, by identity, at the plugin's import."""
    found = []
    for name, module in list(sys.modules.items()):
        if module is None or name.split(".")[0] not in RUNNER_MODULES:
            continue
        space = dict(vars(module))
        found.append((name, module, space))
        for attr, value in space.items():
            if isinstance(value, type) and getattr(value, "__module__", "") == name:
                found.append((f"{name}.{attr}", value, dict(vars(value))))
    return found


def namespaces(snapshot, kind, trip, origin_of):
    """Nothing added to or replaced in the runner's namespaces by the patch's code; in ``builtins`` and
    ``pytest`` (what tests call: ``pytest.raises``, ``isinstance``, ...) nothing replaced by anyone."""
    for label, owner, before in snapshot:
        strict = label in ("builtins", "pytest")
        for attr, value in list(vars(owner).items()):
            old = before.get(attr, _MISSING)
            if old is value:
                continue
            origin = origin_of(value)
            if (strict and old is not _MISSING) or (origin is not None and kind(origin) == "tainted"):
                trip("{}.{} {}".format(label, attr, "added" if old is _MISSING else "replaced"))


def hooks(config, kind, trip, origin_of):
    manager = getattr(config, "pluginmanager", None)
    relay = getattr(manager, "hook", None)
    for name, caller in list(vars(relay).items() if relay is not None else []):
        get = getattr(caller, "get_hookimpls", None)
        for impl in get() if get is not None else ():
            origin = origin_of(getattr(impl, "function", None))
            if origin is not None and kind(origin) == "tainted":
                trip(f"hook {name} implemented by the patched code ({os.path.basename(origin)})")


def finders(kind, trip, origin_of):
    for finder in list(sys.meta_path) + list(sys.path_hooks):
        origin = origin_of(finder)
        if origin is None and not isinstance(finder, type):
            origin = origin_of(type(finder))
        if origin is not None and kind(origin) == "tainted":
            trip(f"an import hook of the patched code ({os.path.basename(origin)})")


_CODE = type(origin.__code__)
