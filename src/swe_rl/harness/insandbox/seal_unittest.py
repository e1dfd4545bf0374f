"""The seal on a strict grading's test results for django's and unittest's runners (``swe_rl_seal_unittest.py``;
never imported by swe-rl): a launcher that runs *inside* a sandbox and becomes the test process.

Strict grading (:mod:`swe_rl.harness.seal`) runs ``python swe_rl_seal_unittest.py ./tests/runtests.py ...``
(django's runner, or any script that runs unittest's test cases) or ``python swe_rl_seal_unittest.py -m
unittest ...``. The launcher takes the grading's key file and adds the audit hook (``swe_rl_seal_core``) before
the runner or any code of the repository is imported, wraps the standard library's ``TestCase.run`` (which
every django and unittest test case runs through), then runs the runner as ``__main__``.

Evidence comes from inside each test's run: before ``TestCase.run`` runs a test, the hook arms two recorders on
the test case, in place of its test method (bound to the function ``_testMethodName`` names) and of its
``doCleanups``. The test passed only if its method returned and unittest's outcome was still a success after
``tearDown`` and the cleanups (a failed subtest, a failing ``tearDown``). A test case whose class, or any class
it inherits, the patch defined is not sealed. A test is named as the runner describes it at verbosity 2:
``str(test)`` and, where its method has a docstring, the docstring's first line on a line of its own (what
django's log parser keys). The results are written signed when the runner is done (``SystemExit``
included); a run that leaves by ``os._exit`` leaves none.

Written for Python 3.6+: no newer syntax.
"""

import unittest.case as _case

import swe_rl_seal_core as _core  # staged beside these
import swe_rl_seal_launch as _launch

ARM, RETURNED, CLEANED = _core.ARM, _core.RETURNED, _core.CLEANED
NAMED = "swe_rl_seal.named"
_audit = _core.audit
_MISSING = object()
USAGE = "usage: swe_rl_seal_unittest.py SCRIPT [ARG ...] | -m MODULE [ARG ...]"
FRAMEWORKS = ("django.test",)  # the repository's test framework, whose namespaces the end checks take too


def _handlers(kind, from_patch, trip, outcomes, own_codes):
    """``named`` (a test case's name, taken when it is made), ``arm`` (the recorders on it), ``returned``
    (what its method did), ``cleaned`` (the outcome after its cleanups). A recorder holds only its function
    and its token: nothing of the state."""
    armed = {}  # id(token) -> [token, names, function, cleanups, expected, returned]
    made = {}  # id(test case) -> (test case, its str(), its docstring) when it was made
    patched, audit, bound_to = _core._checks.patched, _audit, _core.bound_to

    def patched_class(testcase):
        classes = (*type(testcase).__mro__, type(type(testcase)))
        return any(patched(cls, kind) is not None for cls in classes)

    def named(_caller, testcase):
        if patched_class(testcase):  # the patch's: its str() and docstring
            return
        try:
            made[id(testcase)] = (testcase, str(testcase), getattr(testcase, "_testMethodDoc", None))
        except Exception:  # a class whose str() needs more than __init__ gave it: its tests are not sealed
            return

    def arm(_caller, testcase, expected):
        first = made.pop(id(testcase), None)
        if first is None or first[0] is not testcase or patched_class(testcase):
            return  # not made by its class's __init__ since the seal began (a copy), or the patch's class
        method_name = testcase._testMethodName
        function = getattr(testcase, method_name, None)
        bound = bound_to(function, method_name, kind)  # not: the name bound to another function
        names = _names(testcase, first[1:], function if bound else None, trip)
        if not bound:  # (a partialmethod's test too: its name is not its code's)
            outcomes.update(dict.fromkeys(names, "unbound"))  # not this test's evidence, whatever it does
            return
        if not names:
            return
        cleanups, token = testcase.doCleanups, object()
        recorder, recorded_cleanups = _recorders(function, cleanups, token, audit)
        # what unittest reads off the method (skip and expected-failure marks)
        recorder.__dict__.update(getattr(getattr(function, "__func__", function), "__dict__", {}))
        own_codes.update([recorder.__code__, recorded_cleanups.__code__])
        armed[id(token)] = [token, names, function, cleanups, bool(expected), False]
        outcomes.update(dict.fromkeys(names, "failed"))
        setattr(testcase, method_name, recorder)
        testcase.doCleanups = recorded_cleanups

    returned, cleaned = _reporters(trip, outcomes, armed)
    return {NAMED: named, ARM: arm, RETURNED: returned, CLEANED: cleaned}


def _reporters(trip, outcomes, armed):
    """``returned`` (what a test's method did) and ``cleaned`` (its outcome after its cleanups), from the
    recorders of the armed tests: each from its own recorder's frame, for its own token."""

    def entry_of(caller, token, local, index):
        entry = armed.get(id(token))
        if entry is None or entry[0] is not token:
            trip("a test's result reported twice or for no armed test")
        elif caller.f_locals.get(local) is not entry[index]:
            trip(f"the recorder of {entry[1][0][:200]} called another function")
        else:
            return entry
        return None

    def returned(caller, token, exc):
        entry = entry_of(caller, token, "function", 2)
        if entry is not None:
            entry[5] = exc is None

    def cleaned(caller, token, success):
        entry = entry_of(caller, token, "cleanups", 3)
        if entry is not None:
            del armed[id(token)]
            passed = entry[5] and success and not entry[4]  # an expected failure that passed is a failure
            outcomes.update(dict.fromkeys(entry[1], "passed" if passed else "failed"))

    return returned, cleaned


def _recorders(function, cleanups, token, audit):
    """What the hook puts in place of a test's method and of its ``doCleanups``: each tells it what it saw."""

    def recorder(*_args, **_kwargs):
        try:
            result = function()
        except BaseException as exc:
            audit(RETURNED, token, exc)
            raise
        audit(RETURNED, token, None)
        return result

    def recorded_cleanups(*args, **kwargs):
        success = cleanups(*args, **kwargs)
        audit(CLEANED, token, success is True)
        return success

    return recorder, recorded_cleanups


def _names(testcase, first, function, trip):
    """The names the runner gives the test: ``str(test)``, and with the docstring's first line (the one
    unittest's ``shortDescription`` takes) where the method has a docstring. ``first``: its ``str()`` and
    docstring when it was made; a test renamed since, whose docstring is not its code's, or whose name
    holds a line break names no test. ``function``: the test's function (bound to its name), or None."""
    plain, doc = str(testcase), getattr(testcase, "_testMethodDoc", None)
    if (plain, doc) != first:
        trip(f"a test renamed while the tests ran: {first[0][:200]!r} became {plain[:200]!r}")
        return []
    if "\n" in plain or "\r" in plain:  # a class or method renamed before its tests were made
        trip(f"a test whose name holds a line break: {plain[:200]!r}")
        return []
    if function is not None and doc is not None and doc != _code_doc(function):
        trip(f"the docstring of {plain[:200]} is not its code's")
        return []
    line = doc.strip().split("\n")[0].strip() if isinstance(doc, str) else ""  # a carriage return kept
    return [plain, plain + "\n" + line] if line else [plain]


def _code_doc(function):
    """The docstring the test function's code holds (its first constant), through its decorators' wrappers."""
    for _ in range(10):
        function = getattr(function, "__func__", function)
        wrapped = _core.inner(function)
        if wrapped is None:
            break
        function = wrapped
    code = getattr(function, "__code__", None)
    consts = getattr(code, "co_consts", ())
    return consts[0] if consts and isinstance(consts[0], str) else None


def _install(prefix, conf):
    original_run, original_init = _case.TestCase.run, _case.TestCase.__init__

    subtest, main_thread, ident = getattr(_case, "_SubTest", ()), _core._thread_ident(), _core._thread_ident

    def init(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        if not isinstance(self, subtest) and ident() == main_thread:  # a subtest is made inside a test
            _audit(NAMED, self)

    def run(self, result=None):
        name = self._testMethodName
        saved = {key: vars(self).get(key, _MISSING) for key in (name, "doCleanups")}
        method = getattr(self, name, None)
        expected = getattr(self, "__unittest_expecting_failure__", False) or getattr(
            method, "__unittest_expecting_failure__", False
        )
        _audit(ARM, self, expected)
        try:
            return original_run(self, result)
        finally:
            for key, value in saved.items():  # the test case as it was (a rerun arms it again)
                if value is _MISSING:
                    vars(self).pop(key, None)
                else:
                    vars(self)[key] = value

    for mine, theirs in ((run, original_run), (init, original_init)):
        mine.__doc__, mine.__name__, mine.__qualname__ = theirs.__doc__, theirs.__name__, theirs.__qualname__
    # before the state: the runner's namespaces are taken with them in place
    _case.TestCase.run, _case.TestCase.__init__ = run, init
    watched = []  # django's test framework, taken as each of its modules finishes its import
    _launch.watch(FRAMEWORKS, watched)
    hook, own_codes = _core.state(prefix, conf, _handlers, watched=watched)
    own_codes.update([run.__code__, init.__code__, _launch.main.__code__])
    _core.install(hook)


if __name__ == "__main__":
    _launch.main(_install, USAGE)
