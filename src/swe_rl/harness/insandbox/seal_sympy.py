"""The seal on a strict grading's test results for sympy's runner (``swe_rl_seal_sympy.py``; never imported by
swe-rl): a launcher that runs *inside* a sandbox and becomes the test process.

Strict grading (:mod:`swe_rl.harness.seal`) runs ``PYTHONHASHSEED=<seed> python swe_rl_seal_sympy.py bin/test
-C --verbose ...``. sympy's ``test()`` runs the tests in a child interpreter with a random ``PYTHONHASHSEED``
unless one is set, and then runs them in its own process; the grading sets a seed of its own (random, one per
grading, as sympy's child would have), so the tests run here, under the seal. The launcher takes the grading's
key file and adds the audit hook (``swe_rl_seal_core``) before the runner or any code of the repository is
imported, and puts a wrapper in place of ``builtins.exec``; then it runs ``bin/test`` as ``__main__``.

sympy's runner (``SymPyTests.test_file``, in sympy/testing/runtests.py, sympy/utilities/runtests.py before 1.6)
compiles each test file, runs its code with ``exec`` into a fresh namespace, then calls each ``test_``
function found there. When the runner's ``exec`` of a test file's code returns, the hook puts a recorder in
place of each test function of that namespace: the test passed only if its function returned (the runner's
skips, expected failures and unexpected passes are exceptions the function raises). A test is named as the
verbose reporter prints it (its function's ``__name__`` when armed; the code's own name, through its
decorators). At each test file the hook also checks the runner's namespaces and sympy's test framework
(``sympy.testing.*``, taken as each module finished its import) for what was swapped since. The results are
written signed when the runner is done; a run that leaves by ``os._exit`` leaves none.

sympy 1.12.1 and later run ``bin/test`` through pytest: nothing is armed, and strict grading calls the run
unverifiable (harness/seal.py ``UNARMED``).

Written for Python 3.6+: no newer syntax.
"""

import builtins
import sys
import types

import swe_rl_seal_checks as _checks  # staged beside these
import swe_rl_seal_core as _core
import swe_rl_seal_launch as _launch

ARM, RETURNED = _core.ARM, _core.RETURNED
USAGE = "usage: swe_rl_seal_sympy.py bin/test [ARG ...]"
# sympy's test framework: the runner and what the tests call (raises, XFAIL, slow, ...), by release
FRAMEWORKS = (
    "sympy.testing",
    "sympy.utilities.pytest",
    "sympy.utilities.runtests",
    "sympy.utilities.randtest",
)
_GENERATOR = 0x20  # inspect.CO_GENERATOR: a test that yields its tests is not one the seal names
_FUNCTION, _CODE = types.FunctionType, types.CodeType
_audit = _core.audit


def _handlers(kind, from_patch, trip, outcomes, own_codes, watched, runner):
    """``arm`` (recorders in place of a test file's test functions) and ``returned`` (what one saw)."""
    armed = {}  # id(token) -> (token, name, function)
    recorders = set()  # the recorders' code objects
    patched, bound_to, namespaces = _checks.patched, _core.bound_to, _checks.namespaces

    def arm(_caller, namespace, filename):
        namespaces(runner + list(watched), kind, trip)  # nothing swapped before this file's tests run
        if kind(filename) != "pristine":  # a test file the patch wrote is not the task's
            return
        framework = _framework_names(watched)
        for name, value in list(namespace.items()):
            if not name.startswith("test_"):
                if name in framework and framework[name] is not value and patched(value, kind) is not None:
                    trip(f"{name} of the test framework bound to the patch's code in {filename[-200:]}")
                continue
            if type(value) is not _FUNCTION or value.__code__.co_flags & _GENERATOR:
                continue
            test = value.__name__
            if "\n" in test or "\r" in test:
                trip(f"a test whose name holds a line break: {test[:200]!r}")
                continue
            # not: the name bound to another function, or a wrapper of the patch's
            if not bound_to(value, test, kind):
                outcomes[test] = "unbound"
                continue
            token = object()
            recorder = _recorder(value, token, _audit)
            own_codes.add(recorder.__code__)
            recorders.add(recorder.__code__)
            armed[id(token)] = (token, test, value)
            outcomes.setdefault(test, "failed")
            namespace[name] = recorder

    def returned(caller, token, exc):
        entry = armed.get(id(token))
        if entry is None or entry[0] is not token:
            trip("a test's result reported for no armed test")
        elif caller.f_locals.get("function") is not entry[2]:
            trip(f"the recorder of {entry[1][:200]} called another function")
        elif not _inside(caller.f_back, recorders):  # a test another test calls: the runner's call counts
            outcomes[entry[1]] = "passed" if exc is None else "failed"

    return {ARM: arm, RETURNED: returned}


def _framework_names(watched):
    """The names sympy's test framework's modules defined when they were imported: name -> value."""
    names = {}
    for _label, owner, before, _rule in watched:
        if type(owner) is types.ModuleType:
            names.update(before)
    return names


def _inside(frame, codes):
    while frame is not None:
        if frame.f_code in codes:
            return True
        frame = frame.f_back
    return False


def _recorder(function, token, audit):
    """What the hook puts in place of a test function: it tells the hook what the function did. It looks to the
    runner as the function does: its name, marks (``_slow``), ``__wrapped__`` and, for a runner that takes a
    test's file from its code (sympy 1.0), its code's file."""

    def recorder(*args, **kwargs):
        try:
            result = function(*args, **kwargs)
        except BaseException as exc:
            audit(RETURNED, token, exc)
            raise
        audit(RETURNED, token, None)
        return result

    recorder.__dict__.update(function.__dict__)
    recorder.__wrapped__ = function
    recorder.__name__, recorder.__qualname__ = function.__name__, function.__qualname__
    recorder.__doc__, recorder.__module__ = function.__doc__, function.__module__
    if hasattr(_CODE, "replace"):  # Python 3.8+
        code = recorder.__code__.replace(
            co_filename=function.__code__.co_filename, co_name="swe_rl_seal_recorder"
        )
        recorder.__code__ = code
    return recorder


def _exec_wrapper(original, audit):
    """``builtins.exec`` as it was, which asks the hook to arm a test file's namespace once the runner's
    ``exec`` of its code returns: code compiled from the file ``__file__`` names, into a namespace holding
    nothing else (``SymPyTests.test_file``'s)."""

    def exec(source, globals=None, locals=None, *args, **kwargs):  # builtins.exec, by its name
        if globals is None:  # the caller's namespaces, as the builtin takes them
            frame = sys._getframe(1)
            globals, locals = frame.f_globals, frame.f_locals if locals is None else locals
        test_file = (
            type(source) is _CODE
            and type(globals) is dict
            and set(globals) <= {"__file__"}
            and globals.get("__file__") == source.co_filename
        )
        result = original(source, globals, locals, *args, **kwargs)
        if test_file:
            audit(ARM, globals, source.co_filename)
        return result

    exec.__doc__ = original.__doc__
    return exec


def _install(prefix, conf):
    wrapper = _exec_wrapper(builtins.exec, _audit)
    builtins.exec = wrapper  # before the state: the runner's namespaces are taken with it in place
    watched = []  # sympy's test framework, taken as each of its modules finishes its import
    _launch.watch(FRAMEWORKS, watched)
    runner = _checks.snapshot()

    def handlers(*args):
        return _handlers(*args, watched=watched, runner=runner)

    hook, own_codes = _core.state(prefix, conf, handlers, watched=watched)
    own_codes.update([wrapper.__code__, _launch.main.__code__])
    _core.install(hook)


if __name__ == "__main__":
    _launch.main(_install, USAGE)
