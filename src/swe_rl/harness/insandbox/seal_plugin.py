"""The seal on a strict grading's test results: a pytest plugin that runs *inside* a sandbox, in the test process.

Never imported by swe-rl: strict grading (:mod:`swe_rl.harness.seal`) writes this text as ``swe_rl_seal.py``
beside a file of its own for this one grading (``<SWE_RL_SEAL>.key``: the key and the files the patch
changed) and runs pytest with ``-p swe_rl_seal``. pytest imports ``-p`` plugins before any conftest, plugin
entry point or module of the repository. At its import this module takes that file (reads it, unlinks it,
drops ``SWE_RL_SEAL`` from the environment) and adds a Python audit hook (PEP 578: it cannot be removed). The
hook's closure is the only place the key, the evidence and the tripwires live: no module attribute, argument
or object that ordinary attribute access reaches holds them.

Evidence comes from inside the test function's own call, not from pytest's reports: for each test, the
outermost ``pytest_runtest_call`` wrapper asks the hook (``sys.audit``) to arm it; the hook puts a recorder in
place of the test function (``item.obj``, or the method on a unittest case), bound to the function it found
for the test's id (its code's name and file must be the test's). The recorder calls that function with the
arguments pytest had set up when the wrapper ran, and only if it returns does it tell the hook (``sys.audit``)
that the test passed. So whatever other wrappers, hook implementations or report rewriting do, a test whose
function raised is not sealed as passing, and a test never called is not sealed at all. An expected failure
(``XFAIL``, which SWE-bench counts as passing) is sealed when the function raised under an ``xfail`` mark (or
unittest's ``expectedFailure``) present before it ran, or raised ``pytest.xfail()``'s exception from code the
patch did not change.

The hook takes a message only from this module's own code (the calling frame's code object, by identity) and
only where no code of the patch is on the stack (so a forged item driven through pytest's hooks by the
patch's code is not armed); at the session's end it writes ``<SWE_RL_SEAL>.out``: every armed test's outcome,
by name (as pytest's ``-rA`` summary names it), and the tripwires that fired, compressed, with their
HMAC-SHA256 under the key.

Tripwires: the hook sees the audit events of the whole process, and names the code that raised one by the
nearest frame outside the standard library and site-packages. Code of a file the patch changed (or code
compiled from a string) that walks ``gc``, asks for frames (``sys._getframe``, ``inspect.currentframe``,
``tb_frame``, ``gi_frame``, ...), traces or profiles, loads ``ctypes``, makes code objects or functions from
code, or adds an audit hook is stopped (the event raises) and recorded. At the session's end the hook also
checks pytest's hook chain (no hook implementation from a changed file), the import system (no finder from
a changed file) and the runner's namespaces (``builtins``, ``pytest``, ``_pytest``, ``pluggy``, ``unittest``:
nothing added or replaced by code of a changed file; in ``builtins`` and ``pytest`` nothing replaced at all).
A recorded tripwire makes the grading unresolved in strict mode.

Written for Python 3.5+ and pytest 3+: no newer syntax. Audit hooks exist from Python 3.8; before it the
recorders still seal what they see, the state lives in closures, and the output says ``"audit": false``.
"""

import contextlib
import hashlib
import hmac
import json
import os
import sys
import zlib

import pytest

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
_RUNNER_MODULES = ("builtins", "pytest", "_pytest", "pluggy", "unittest")


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
    key = conf["key"].encode("ascii")
    # the prefix is <repository>/.git/swe-rl/seal (harness/seal.py): the root whatever directory pytest runs in
    root = os.path.realpath(os.path.dirname(os.path.dirname(os.path.dirname(prefix))))
    tainted = frozenset(os.path.realpath(os.path.join(root, p)) for p in conf.get("changed", []))
    trusted = _trusted_roots()
    here = os.path.realpath(__file__)
    ident = _thread_ident
    main_thread = ident()
    kinds = {}  # filename -> "trusted" | "pristine" | "tainted"
    outcomes = {}  # name -> "passed" | "xfail" | "failed"
    armed = {}  # id(token) -> (token, name, function, expected)
    trips = []
    busy = set()  # the threads inside the hook (an event there is the hook's own)
    own_codes = set()
    snapshot = []  # (label, namespace owner, what it held at the plugin's import)
    # the code that imports this plugin (the interpreter's entry, pytest's start, a warm runner's loop, which
    # may be code compiled from a string): nothing of the repository has run yet, so all of it is the runner's
    entry = set()
    frame = sys._getframe()
    while frame is not None:
        entry.add(frame.f_code)
        frame = frame.f_back

    def kind(filename):
        found = kinds.get(filename)
        if found is None:
            if filename.startswith("<frozen ") or filename == here:
                found = "trusted"
            elif filename.startswith("<") or not filename:
                found = "tainted"  # compiled from a string: whose it is cannot be told
            else:
                real = os.path.realpath(filename)
                if real in tainted:
                    found = "tainted"
                elif real.startswith(trusted):
                    found = "trusted"
                else:
                    found = "pristine"
            kinds[filename] = found
        return found

    def code_kind(code):
        return "trusted" if code in entry else kind(code.co_filename)

    def trip(reason):
        if reason not in trips and len(trips) < 100:
            trips.append(reason)

    def frames(start):
        frame = start
        while frame is not None:
            yield frame
            frame = frame.f_back

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
        """A frame asked for (the event's own caller, or the caller of a stdlib helper that hands frames
        on) by the patch's code."""
        caller = start
        while caller is not None and code_kind(caller.f_code) == "trusted":
            module = os.path.splitext(os.path.basename(caller.f_code.co_filename))[0]
            if (module, caller.f_code.co_name) not in _FRAME_HELPERS:
                return None
            caller = caller.f_back
        return caller if caller is not None and code_kind(caller.f_code) == "tainted" else None

    def where(frame):
        return f"{os.path.relpath(frame.f_code.co_filename, root)}:{frame.f_lineno}"

    def stop(event, frame):
        trip(f"{event} by the patched code at {where(frame)}")
        raise RuntimeError(f"swe-rl strict grading: {event} is not allowed in the code under test")

    def on_event(event, args, depth):
        if event.startswith("swe_rl_seal."):
            caller = sys._getframe(depth)  # the code that raised the event
            if caller.f_code not in own_codes or ident() != main_thread or patch_on_stack(caller):
                trip(f"{event} from outside the seal's own call path")
                return
            if event == ARM:
                arm(*args)
            elif event == SETUP_XFAIL:
                setup_xfail(*args)
            elif event == RETURNED:
                returned(caller, *args)
            elif event == FINISH:
                finish(*args)
        elif event.startswith(_STOPPED) or event in _STOPPED_EXACT:
            found = culprit(sys._getframe(depth))
            if found is not None:
                stop(event, found)
        elif event == "sys._getframe" or (event == "object.__getattr__" and args[1] in _FRAME_SOURCES):
            found = frame_source(sys._getframe(depth))
            if found is not None:
                stop(event if event == "sys._getframe" else args[1], found)
        elif event == "object.__setattr__" and args[1] == "__code__":
            found = culprit(sys._getframe(depth))
            if found is not None:
                stop("a function's __code__ replaced", found)

    def hook(event, args, depth=2):  # 0: on_event, 1: this hook, 2: the code that raised the event
        me = ident()
        if me in busy:
            return
        busy.add(me)
        try:
            on_event(event, args, depth)
        finally:
            busy.discard(me)

    def arm(item, testcase, funcargs, expected):
        """Put a recorder in place of ``item``'s test function (``testcase``: the unittest case, or None)."""
        name = _name(item)
        if "\n" in name or "\r" in name:
            trip(f"a test whose name holds a line break: {name[:200]!r}")
            return
        function = getattr(testcase, item.name, None) if testcase is not None else item.obj
        if not _bound_to(function, item.nodeid, kind):  # e.g. a test module's name bound to another
            outcomes[name] = "unbound"  # function: whatever it does, it is not this test's evidence
            return
        token = object()

        def recorder(*_args, **_kwargs):
            try:
                result = function(**funcargs)
            except BaseException as exc:
                xfailed = XFAILED is not None and isinstance(exc, XFAILED) and not _from_patch(exc)
                _audit(RETURNED, token, "xfail" if expected or xfailed else "failed")
                raise
            _audit(RETURNED, token, "passed")
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

    def setup_xfail(item, exc):
        """``item``'s setup raised ``pytest.xfail``'s exception (an ``xfail(run=False)`` mark, or
        ``pytest.xfail()`` in a fixture): an expected failure, unless the patch's code raised it."""
        name = _name(item)
        if "\n" not in name and "\r" not in name and not _from_patch(exc):
            outcomes[name] = "xfail"

    def _from_patch(exc):
        tb = exc.__traceback__
        while tb is not None:
            if kind(tb.tb_frame.f_code.co_filename) == "tainted":
                return True
            tb = tb.tb_next
        return False

    def returned(caller, token, outcome):
        entry = armed.pop(id(token), None)
        if entry is None or entry[0] is not token:
            trip("a test's result reported twice or for no armed test")
            return
        if caller.f_locals.get("function") is not entry[2]:
            trip(f"the recorder of {entry[1][:200]} called another function")
            return
        outcomes[entry[1]] = outcome

    def finish(config):
        _check_hooks(config, kind, trip)
        _check_finders(kind, trip)
        _check_namespaces(snapshot, kind, trip)
        payload = {"tests": outcomes, "trips": trips, "audit": hasattr(sys, "addaudithook")}
        data = zlib.compress(json.dumps(payload, sort_keys=True).encode("utf-8"))
        mac = hmac.new(key, data, hashlib.sha256).hexdigest().encode("ascii")
        with open(prefix + ".out", "wb") as fh:
            fh.write(mac + b"\n" + data)

    snapshot.extend(_namespaces())
    return hook, own_codes


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


def _origin(value):
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


def _namespaces():
    """What the runner's modules and their classes hold, by identity, at the plugin's import."""
    found = []
    for name, module in list(sys.modules.items()):
        if module is None or name.split(".")[0] not in _RUNNER_MODULES:
            continue
        space = dict(vars(module))
        found.append((name, module, space))
        for attr, value in space.items():
            if isinstance(value, type) and getattr(value, "__module__", "") == name:
                found.append((f"{name}.{attr}", value, dict(vars(value))))
    return found


def _check_namespaces(snapshot, kind, trip):
    """Nothing added to or replaced in the runner's namespaces by the patch's code; in ``builtins`` and
    ``pytest`` (what tests call: ``pytest.raises``, ``isinstance``, ...) nothing replaced by anyone."""
    for label, owner, before in snapshot:
        strict = label in ("builtins", "pytest")
        for attr, value in list(vars(owner).items()):
            old = before.get(attr, _MISSING)
            if old is value:
                continue
            origin = _origin(value)
            if (strict and old is not _MISSING) or (origin is not None and kind(origin) == "tainted"):
                trip("{}.{} {}".format(label, attr, "added" if old is _MISSING else "replaced"))


_MISSING = object()
_CODE = type(_take_conf.__code__)


def _check_hooks(config, kind, trip):
    manager = getattr(config, "pluginmanager", None)
    relay = getattr(manager, "hook", None)
    for name, caller in list(vars(relay).items() if relay is not None else []):
        get = getattr(caller, "get_hookimpls", None)
        for impl in get() if get is not None else ():
            origin = _origin(getattr(impl, "function", None))
            if origin is not None and kind(origin) == "tainted":
                trip(f"hook {name} implemented by the patched code ({os.path.basename(origin)})")


def _check_finders(kind, trip):
    for finder in list(sys.meta_path) + list(sys.path_hooks):
        origin = _origin(finder)
        if origin is None and not isinstance(finder, type):
            origin = _origin(type(finder))
        if origin is not None and kind(origin) == "tainted":
            trip(f"an import hook of the patched code ({os.path.basename(origin)})")


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
