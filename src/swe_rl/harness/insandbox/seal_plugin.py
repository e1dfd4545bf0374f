"""The seal on a strict grading's test results: a pytest plugin that runs *inside* a sandbox, in the test process.

Never imported by swe-rl: strict grading (:mod:`swe_rl.harness.seal`) stages this text as ``swe_rl_seal.py``
beside ``swe_rl_seal_core.py`` (the audit hook, the tripwires, the signed results), ``swe_rl_seal_checks.py``
and a file of its own for this one grading (``<SWE_RL_SEAL>.key``: the key and the paths the patch changed),
and runs pytest with ``-p swe_rl_seal``, imported before any conftest or module of the repository. At its
import it takes that file (reads and unlinks it) and adds the audit hook; the key, the evidence and the
tripwires live only in that hook's closure.

Evidence comes from inside each test function's call: the plugin's ``pytest_runtest_call`` wrapper asks the
hook to arm the test, and the hook puts a recorder in place of the test function (bound to the function its id
names), which tells the hook the test passed only if the function returned. At the session's end pytest's hook
chain is checked too. docs/SECURITY.md ("Sealed results") has the whole account.

Written for Python 3.6+ and pytest 3+: no newer syntax.
"""

import os

import pytest
import swe_rl_seal_core as _core  # staged beside this file

XFAILED = getattr(getattr(pytest, "xfail", None), "Exception", None)
ARM, RETURNED, FINISH, SETUP_XFAIL = _core.ARM, _core.RETURNED, _core.FINISH, _core.SETUP_XFAIL
_audit = _core.audit


def _handlers(kind, from_patch, trip, outcomes, own_codes):
    arm, setup_xfail, returned = _recorders(
        kind, from_patch, trip, outcomes, own_codes, _audit, XFAILED, _name, _bound_to
    )
    return {
        ARM: lambda _caller, *args: arm(*args),
        SETUP_XFAIL: lambda _caller, *args: setup_xfail(*args),
        RETURNED: returned,
    }


def _recorders(kind, from_patch, trip, outcomes, own_codes, audit, xfailed_type, name_of, bound_to):
    """``arm`` (a recorder in place of a test's function), ``setup_xfail`` and ``returned`` (what a recorder
    saw). A recorder holds only its function, its arguments and its token: nothing of the state."""
    armed = {}  # id(token) -> (token, name, function, whether a failure is expected)

    def xfailed(exc):  # pytest.xfail()'s exception, not raised through the patch's code
        return xfailed_type is not None and isinstance(exc, xfailed_type) and not from_patch(exc)

    def arm(item, testcase, funcargs, expected):
        name = name_of(item)
        if "\n" in name or "\r" in name:
            trip(f"a test whose name holds a line break: {name[:200]!r}")
            return
        function = getattr(testcase, item.name, None) if testcase is not None else item.obj
        if not bound_to(function, item.nodeid, kind):  # e.g. a test module's name bound to another
            outcomes[name] = "unbound"  # function: whatever it does, it is not this test's evidence
            return
        token = object()

        def recorder(*_args, **_kwargs):
            try:
                result = function(**funcargs)
            except BaseException as exc:
                audit(RETURNED, token, exc)
                raise
            audit(RETURNED, token, None)
            return result

        # what unittest and pytest read off the method (skip and expected-failure marks)
        recorder.__dict__.update(getattr(getattr(function, "__func__", function), "__dict__", {}))
        own_codes.add(recorder.__code__)
        armed[id(token)] = (token, name, function, expected)
        outcomes[name] = "failed"
        if testcase is not None:
            setattr(testcase, item.name, recorder)
        else:
            item.obj = recorder

    def setup_xfail(item, exc):  # an xfail(run=False) mark, or pytest.xfail() in a fixture
        name = name_of(item)
        if xfailed(exc) and "\n" not in name and "\r" not in name:
            outcomes[name] = "xfail"

    def returned(caller, token, exc):
        entry = armed.pop(id(token), None)
        if entry is None or entry[0] is not token:
            trip("a test's result reported twice or for no armed test")
        elif caller.f_locals.get("function") is not entry[2]:
            trip(f"the recorder of {entry[1][:200]} called another function")
        else:
            failed = "xfail" if entry[3] or xfailed(exc) else "failed"
            outcomes[entry[1]] = "passed" if exc is None else failed

    return arm, setup_xfail, returned


def _name(item):
    config = getattr(item, "config", None)
    relative = getattr(config, "cwd_relative_nodeid", None)
    return relative(item.nodeid) if relative is not None else item.nodeid


def _bound_to(function, nodeid, kind):
    """Whether ``function`` is the test ``nodeid`` names: its code's name is the id's last part, less
    parameters (:func:`swe_rl_seal_core.bound_to`)."""
    parts = nodeid.split("::")
    return len(parts) >= 2 and _core.bound_to(function, parts[-1].split("[", 1)[0], kind)


def _install(prefix, conf):
    pytest_site = os.path.dirname(
        os.path.dirname(os.path.realpath(pytest.__file__))
    )  # pytest's site-packages
    hook, own_codes = _core.state(prefix, conf, _handlers, extra_roots=[pytest_site])

    def runtest_setup(item):
        outcome = yield
        excinfo = getattr(outcome, "excinfo", None)
        if excinfo and XFAILED is not None and excinfo[0] is XFAILED:
            _audit(SETUP_XFAIL, item, excinfo[1])

    def runtest_call(item):
        testcase = getattr(item, "_testcase", None)
        function = getattr(testcase, item.name, None) if testcase is not None else getattr(item, "obj", None)
        info = getattr(item, "_fixtureinfo", None)
        names = getattr(info, "argnames", ()) if testcase is None else ()
        funcargs = {name: item.funcargs[name] for name in names if name in getattr(item, "funcargs", {})}
        marker = getattr(item, "get_closest_marker", None) or getattr(item, "get_marker", None)
        expected = bool(marker and marker("xfail")) or bool(
            getattr(function, "__unittest_expecting_failure__", False)
            or getattr(testcase, "__unittest_expecting_failure__", False)
        )
        _audit(ARM, item, testcase, funcargs, expected)
        try:
            yield
        finally:
            if testcase is None and hasattr(item, "obj"):
                item.obj = function

    def sessionfinish(session, exitstatus):
        _audit(FINISH, session.config)

    own_codes.update([runtest_setup.__code__, runtest_call.__code__, sessionfinish.__code__])
    _core.install(hook)
    return runtest_setup, runtest_call, sessionfinish


_PREFIX, _CONF = _core.take_conf()
if _CONF:
    _setup, _call, _finish = _install(_PREFIX, _CONF)
    pytest_runtest_setup = pytest.hookimpl(hookwrapper=True, tryfirst=True)(_setup)
    pytest_runtest_call = pytest.hookimpl(hookwrapper=True, tryfirst=True)(_call)
    pytest_sessionfinish = pytest.hookimpl(trylast=True)(_finish)
    del _setup, _call, _finish
del _PREFIX, _CONF
