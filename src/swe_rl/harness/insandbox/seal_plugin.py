"""The seal on a strict grading's test results: a pytest plugin that runs *inside* a sandbox, in the test process.

Never imported by swe-rl: strict grading (:mod:`swe_rl.harness.seal`) stages this text as ``swe_rl_seal.py``
beside a file of its own for this one grading (``<SWE_RL_SEAL>.key``: the key and the paths the patch changed)
and runs pytest with ``-p swe_rl_seal``, imported before any conftest or module of the repository. At its import
it takes that file (reads and unlinks it) and adds a Python audit hook; the key, the evidence and the tripwires
live only in that hook's closure, and everything the hook and the recorders call is bound there at import.

Evidence comes from inside each test function's call: the plugin's ``pytest_runtest_call`` wrapper asks the
hook to arm the test, and the hook puts a recorder in place of the test function (bound to the function its id
names), which tells the hook the test passed only if the function returned. The hook takes messages only from
this module's code, on the main thread, with no code of a changed file on the stack. Tripwires: code of a
changed file (or compiled from a string) that walks ``gc``, asks for frames, traces, loads ``ctypes``, makes
code objects or adds an audit hook is stopped and recorded; at the session's end the hook chain, the import
hooks and the runner's namespaces are checked. The results (each test's outcome by name, and the tripwires)
are written signed at the session's end. docs/SECURITY.md ("Sealed results") has the whole account.

Written for Python 3.6+ and pytest 3+: no newer syntax. Audit hooks exist from Python 3.8; before it the
recorders still seal what they see and the output says ``"audit": false``.
"""

import contextlib
import hashlib
import hmac
import json
import os
import sys
import zlib

import pytest
import swe_rl_seal_checks as _checks  # staged beside this file

XFAILED = getattr(getattr(pytest, "xfail", None), "Exception", None)
ARM, RETURNED, FINISH = "swe_rl_seal.arm", "swe_rl_seal.returned", "swe_rl_seal.finish"
SETUP_XFAIL = "swe_rl_seal.setup_xfail"
_FRAME_SOURCES = frozenset(["tb_frame", "gi_frame", "cr_frame", "ag_frame"])
_STOPPED = ("gc.", "ctypes.", "sys.settrace", "sys.setprofile", "sys.monitoring", "sys._current_frames")
_STOPPED_EXACT = frozenset(["code.__new__", "function.__new__", "sys.addaudithook"])
# standard-library functions that hand frames to their caller: a frame event inside one is its caller's
_FRAME_HELPERS = frozenset(
    [
        ("inspect", "currentframe"),
        ("inspect", "stack"),
        ("inspect", "getouterframes"),
        ("inspect", "getinnerframes"),
        ("inspect", "trace"),
        ("traceback", "walk_stack"),
        ("traceback", "walk_tb"),
        ("__init__", "<lambda>"),  # logging.currentframe
    ]
)


def _take_conf():
    prefix = os.environ.pop("SWE_RL_SEAL", "")
    if not prefix:
        return "", None
    try:
        with open(prefix + ".key", "rb") as fh:
            conf = json.loads(fh.read().decode("utf-8"))
    except (OSError, ValueError):
        return prefix, None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(prefix + ".key")
    return prefix, conf


def _trusted_roots():
    """Where the standard library and installed packages live (real paths): code there is the runner's."""
    import site
    import sysconfig

    paths = sysconfig.get_paths()
    roots = {
        os.path.realpath(paths[name])
        for name in ("stdlib", "platstdlib", "purelib", "platlib")
        if paths.get(name)
    }
    roots.add(os.path.dirname(os.path.realpath(os.__file__)))
    roots.add(os.path.dirname(os.path.realpath(os.path.dirname(pytest.__file__))))  # pytest's site-packages
    with contextlib.suppress(Exception):
        roots.update(os.path.realpath(p) for p in site.getsitepackages())
    return tuple(sorted(r + os.sep for r in roots if r and r != os.sep))


def _state(prefix, conf):
    """The audit hook and the plugin's own code objects. Everything the hook and the recorders call is bound
    here, before any code of the repository runs: a module attribute (this module's, ``os.path``'s, ``hmac``'s,
    ``sys``'s) that the patched code replaces later is never called by them."""
    realpath, getframe, ident = os.path.realpath, sys._getframe, _thread_ident
    # the prefix is <repository>/.git/swe-rl/seal (harness/seal.py): the root whatever directory pytest runs in
    root = realpath(os.path.dirname(os.path.dirname(os.path.dirname(prefix))))
    tainted = frozenset(realpath(os.path.join(root, p)) for p in conf.get("changed", []))
    # the code that imports this plugin (the interpreter's entry, pytest's start, a warm runner's loop, which
    # may be code compiled from a string): nothing of the repository has run yet, so all of it is the runner's
    entry, frame = set(), getframe()
    while frame is not None:
        entry.add(frame.f_code)
        frame = frame.f_back
    kind, code_kind, from_patch = _classifier(
        root, tainted, _trusted_roots(), realpath(__file__), entry, realpath
    )
    trips, own_codes, outcomes = [], set(), {}  # outcomes: name -> "passed" | "xfail" | "failed" | "unbound"

    def trip(reason):
        if reason not in trips and len(trips) < 100:
            trips.append(reason)

    stack = _stack(code_kind, os.path.splitext, os.path.basename, os.path.relpath, root, trip)
    recorders = _recorders(kind, from_patch, trip, outcomes, own_codes, _audit, XFAILED, _name, _bound_to)
    finish = _finisher(prefix, conf["key"].encode("ascii"), kind, trip, outcomes, trips)
    on_event = _dispatcher(stack, recorders, finish, trip, own_codes, ident, getframe)
    busy = set()  # the threads inside the hook (an event there is the hook's own)

    def hook(event, args, depth=2):  # 0: on_event, 1: this hook, 2: the code that raised the event
        me = ident()
        if me in busy:
            return
        busy.add(me)
        try:
            on_event(event, args, depth)
        finally:
            busy.discard(me)

    return hook, own_codes


def _classifier(root, tainted, trusted, here, entry, realpath):
    """``kind(filename)``: 'trusted' (the standard library, site-packages, this plugin, the code that imported
    it), 'tainted' (a file the patch changed, or code compiled from a string) or 'pristine' (the repository's
    other files); ``code_kind(code)`` the same for a code object; ``from_patch(exc)``."""
    kinds = {}

    def kind(filename):
        found = kinds.get(filename)
        if found is None:
            if filename.startswith("<frozen ") or filename == here:
                found = "trusted"
            elif filename.startswith("<") or not filename:
                found = "tainted"  # compiled from a string: whose it is cannot be told
            else:
                real = realpath(filename)
                found = (
                    "tainted" if real in tainted else "trusted" if real.startswith(trusted) else "pristine"
                )
            kinds[filename] = found
        return found

    def code_kind(code):
        return "trusted" if code in entry else kind(code.co_filename)

    def from_patch(exc):  # whether the exception came through a frame of the patch's code
        tb = exc.__traceback__
        while tb is not None:
            if kind(tb.tb_frame.f_code.co_filename) == "tainted":
                return True
            tb = tb.tb_next
        return False

    return kind, code_kind, from_patch


def _stack(code_kind, splitext, basename, relpath, root, trip):
    """What the hook asks of a stack: the patch's frame an event belongs to (``culprit``), whether any frame
    is the patch's, the patch's frame that asked for a frame, and ``stop`` (record and refuse)."""

    def frames(start):
        while start is not None:
            yield start
            start = start.f_back

    def culprit(start):
        """The nearest frame from ``start`` down that is not the runner's, where it is the patch's. An event
        of a runner's module being imported (its ``<module>`` code) is that module's, whoever imports it."""
        for frame in frames(start):
            found = code_kind(frame.f_code)
            if found != "trusted":
                return frame if found == "tainted" else None
            if frame.f_code.co_name == "<module>":
                return None
        return None

    def patch_on_stack(start):
        return any(code_kind(frame.f_code) == "tainted" for frame in frames(start))

    def frame_source(start):
        """The event's own caller, or the caller of a stdlib helper that hands frames on, where the patch's."""
        caller = start
        while caller is not None and code_kind(caller.f_code) == "trusted":
            if (
                splitext(basename(caller.f_code.co_filename))[0],
                caller.f_code.co_name,
            ) not in _FRAME_HELPERS:
                return None
            caller = caller.f_back
        return caller if caller is not None and code_kind(caller.f_code) == "tainted" else None

    def stop(event, frame):
        trip(f"{event} by the patched code at {relpath(frame.f_code.co_filename, root)}:{frame.f_lineno}")
        raise RuntimeError(f"swe-rl strict grading: {event} is not allowed in the code under test")

    return culprit, patch_on_stack, frame_source, stop


def _dispatcher(stack, recorders, finish, trip, own_codes, ident, getframe):
    """The hook's body: the plugin's own messages, from its own code on the main thread with no code of the
    patch on the stack; and the tripwires."""
    culprit, patch_on_stack, frame_source, stop = stack
    arm, setup_xfail, returned = recorders
    main_thread = ident()

    def on_event(event, args, depth):
        if event.startswith("swe_rl_seal."):
            caller = getframe(depth)  # the code that raised the event
            if caller.f_code not in own_codes or ident() != main_thread or patch_on_stack(caller):
                trip(f"{event} from outside the seal's own call path")
            elif event == ARM:
                arm(*args)
            elif event == SETUP_XFAIL:
                setup_xfail(*args)
            elif event == RETURNED:
                returned(caller, *args)
            elif event == FINISH:
                finish(*args)
            return
        found, what = None, event
        if event.startswith(_STOPPED) or event in _STOPPED_EXACT:
            found = culprit(getframe(depth))
        elif event == "sys._getframe" or (event == "object.__getattr__" and args[1] in _FRAME_SOURCES):
            found, what = frame_source(getframe(depth)), event if event == "sys._getframe" else args[1]
        elif event == "object.__setattr__" and args[1] == "__code__":
            found, what = culprit(getframe(depth)), "a function's __code__ replaced"
        if found is not None:
            stop(what, found)

    return on_event


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


def _finisher(prefix, key, kind, trip, outcomes, trips):
    """At the session's end: the checks, then the signed results."""
    mac_of, sha256, dumps, compress, write = hmac.new, hashlib.sha256, json.dumps, zlib.compress, open
    hooks, finders, namespaces, origin = _checks.hooks, _checks.finders, _checks.namespaces, _checks.origin
    audited = hasattr(sys, "addaudithook")
    snapshot = _checks.snapshot()  # the runner's namespaces as they are at the plugin's import

    def finish(config):
        hooks(config, kind, trip, origin)
        finders(kind, trip, origin)
        namespaces(snapshot, kind, trip, origin)
        data = compress(dumps({"tests": outcomes, "trips": trips, "audit": audited}, sort_keys=True).encode())
        with write(prefix + ".out", "wb") as fh:
            fh.write(mac_of(key, data, sha256).hexdigest().encode("ascii") + b"\n" + data)

    return finish


try:
    from _thread import get_ident as _thread_ident
except ImportError:  # pragma: no cover - every CPython has it
    from threading import get_ident as _thread_ident


def _name(item):
    config = getattr(item, "config", None)
    relative = getattr(config, "cwd_relative_nodeid", None)
    return relative(item.nodeid) if relative is not None else item.nodeid


def _bound_to(function, nodeid, kind):
    """Whether ``function`` is the test ``nodeid`` names: its code's name is the id's last part (less
    parameters) and its file is not one the patch changed (through a decorator's wrappers, none of them
    the patch's code: the repository's own decorators, as a library's, are kept)."""
    function = getattr(function, "__func__", function)
    seen = 0
    while getattr(function, "__wrapped__", None) is not None and seen < 10:  # a decorator's wrapper
        code = getattr(function, "__code__", None)
        if code is None or kind(code.co_filename) == "tainted":
            return False
        function, seen = function.__wrapped__, seen + 1
    code = getattr(function, "__code__", None)
    if code is None or kind(code.co_filename) == "tainted":
        return False
    parts = nodeid.split("::")
    return len(parts) >= 2 and code.co_name == parts[-1].split("[", 1)[0]


def _audit_fallback(event, *args):
    """Before Python 3.8: no audit events; the plugin's own messages go straight to its state."""
    _DIRECT[0](event, args, 3)  # 0: on_event, 1: the hook, 2: this function, 3: the plugin's code


_DIRECT = [None]
_audit = getattr(sys, "audit", _audit_fallback)


def _install(prefix, conf):
    hook, own_codes = _state(prefix, conf)

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
    if hasattr(sys, "addaudithook"):
        sys.addaudithook(hook)
    else:
        _DIRECT[0] = hook
    return runtest_setup, runtest_call, sessionfinish


_PREFIX, _CONF = _take_conf()
if _CONF:
    _setup, _call, _finish = _install(_PREFIX, _CONF)
    pytest_runtest_setup = pytest.hookimpl(hookwrapper=True, tryfirst=True)(_setup)
    pytest_runtest_call = pytest.hookimpl(hookwrapper=True, tryfirst=True)(_call)
    pytest_sessionfinish = pytest.hookimpl(trylast=True)(_finish)
    del _setup, _call, _finish
del _PREFIX, _CONF
