"""The seal's runner-independent part (``swe_rl_seal_core.py``, staged beside the pytest plugin and the unittest
launcher; never imported by swe-rl): the grading's key file, the audit hook, the tripwires and the signed results.

A runner's part (``swe_rl_seal.py`` for pytest, ``swe_rl_seal_unittest.py`` for django's and unittest's
runners) arms a recorder in place of each test's function and tells the hook what the recorder saw, through
audit events the hook takes only from that part's own code objects, on the main thread, with no code of a
changed file on the stack. Everything the hook and the recorders call is bound when :func:`state` runs, before
any code of the repository runs: a module attribute (of this module, ``os.path``, ``hmac``, ``sys``) that the
patched code replaces later is never called by them. docs/SECURITY.md ("Sealed results") has the whole account.

Written for Python 3.6+: no newer syntax. Audit hooks exist from Python 3.8; before it the recorders still
seal what they see and the output says ``"audit": false``.
"""

import contextlib
import hashlib
import hmac
import json
import os
import sys
import types
import zlib

import swe_rl_seal_checks as _checks  # staged beside this file

ARM, RETURNED, FINISH = "swe_rl_seal.arm", "swe_rl_seal.returned", "swe_rl_seal.finish"
SETUP_XFAIL, CLEANED = "swe_rl_seal.setup_xfail", "swe_rl_seal.cleaned"
_FRAME_SOURCES = frozenset(["tb_frame", "gi_frame", "cr_frame", "ag_frame"])
_STOPPED = ("gc.", "ctypes.", "sys.settrace", "sys.setprofile", "sys.monitoring", "sys._current_frames")
_STOPPED_EXACT = frozenset(["code.__new__", "function.__new__", "sys.addaudithook"])
_IMPORT_SYSTEM = (
    "<frozen importlib._bootstrap"  # its frames' file (both modules: _bootstrap, _bootstrap_external)
)
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
OWN_FILES = tuple(
    os.path.realpath(os.path.join(os.path.dirname(__file__), name))
    for name in (
        "swe_rl_seal_core.py",
        "swe_rl_seal_checks.py",
        "swe_rl_seal.py",
        "swe_rl_seal_launch.py",
        "swe_rl_seal_unittest.py",
        "swe_rl_seal_sympy.py",
    )
)

try:
    from _thread import get_ident as _thread_ident
except ImportError:  # pragma: no cover - every CPython has it
    from threading import get_ident as _thread_ident


def take_conf():
    """The grading's key file (``$SWE_RL_SEAL.key``), read and unlinked: (prefix, conf) or (prefix, None)."""
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


def _trusted_roots(extra):
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
    roots.update(os.path.realpath(p) for p in extra)
    with contextlib.suppress(Exception):
        roots.update(os.path.realpath(p) for p in site.getsitepackages())
    return tuple(sorted(r + os.sep for r in roots if r and r != os.sep))


def state(prefix, conf, make_handlers, extra_roots=(), watched=None):
    """The audit hook and the set of the seal's own code objects (the runner's part adds its own to it).
    ``make_handlers(kind, from_patch, trip, outcomes, own_codes)`` gives the runner's handlers of ARM,
    RETURNED, ... (each called with the frame that raised the event first); FINISH is this module's.
    ``watched``: a list the runner's part adds to as more of the runner's modules are imported (their
    :func:`module_snapshot`), checked at the end as the runner's namespaces are."""
    realpath, getframe, ident = os.path.realpath, sys._getframe, _thread_ident
    # the prefix is <repository>/.git/swe-rl/seal (harness/seal.py): the root whatever directory the run is in
    root = realpath(os.path.dirname(os.path.dirname(os.path.dirname(prefix))))
    tainted = frozenset(realpath(os.path.join(root, p)) for p in conf.get("changed", []))
    # the code that imports the seal (the interpreter's entry, the runner's start, a warm runner's loop, which
    # may be code compiled from a string): nothing of the repository has run yet, so all of it is the runner's
    entry, frame = set(), getframe()
    while frame is not None:
        entry.add(frame.f_code)
        frame = frame.f_back
    own = frozenset(OWN_FILES)
    kind, code_kind, from_patch = _classifier(
        root, tainted, _trusted_roots(extra_roots), own, entry, realpath
    )
    trips, own_codes, outcomes = [], set(), {}  # outcomes: name -> "passed" | "xfail" | "failed" | ...

    def trip(reason):
        if reason not in trips and len(trips) < 100:
            trips.append(reason)

    stack = _stack(code_kind, os.path.splitext, os.path.basename, os.path.relpath, root, trip)
    handlers = dict(make_handlers(kind, from_patch, trip, outcomes, own_codes))
    handlers[FINISH] = _finisher(
        prefix, conf["key"].encode("ascii"), kind, trip, outcomes, trips, [] if watched is None else watched
    )
    on_event = _dispatcher(stack, handlers, trip, own_codes, ident, getframe)
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


def _classifier(root, tainted, trusted, own, entry, realpath):
    """``kind(filename)``: 'trusted' (the standard library, site-packages, the seal's files, the code that
    imported it), 'tainted' (a file the patch changed, or code compiled from a string) or 'pristine' (the
    repository's other files); ``code_kind(code)`` the same for a code object; ``from_patch(exc)``."""
    kinds = {}

    def kind(filename):
        found = kinds.get(filename)
        if found is None:
            if filename.startswith("<frozen "):
                found = "trusted"
            elif filename.startswith("<") or not filename:
                found = "tainted"  # compiled from a string: whose it is cannot be told
            else:
                real = realpath(filename)
                found = (
                    "trusted"
                    if real in own
                    else "tainted"
                    if real in tainted
                    else "trusted"
                    if real.startswith(trusted)
                    else "pristine"
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


def _dispatcher(stack, handlers, trip, own_codes, ident, getframe):
    """The hook's body: the seal's own messages, from its own code on the main thread with no code of the
    patch on the stack; and the tripwires."""
    culprit, patch_on_stack, frame_source, stop = stack
    main_thread = ident()
    handle = handlers.get

    def on_event(event, args, depth):
        if event.startswith("swe_rl_seal."):
            caller = getframe(depth)  # the code that raised the event
            handler = handle(event)
            if caller.f_code not in own_codes or ident() != main_thread or patch_on_stack(caller):
                trip(f"{event} from outside the seal's own call path")
            elif handler is not None:
                handler(caller, *args)
            return
        found, what = None, event
        if event == "code.__new__" and getframe(depth).f_code.co_filename.startswith(_IMPORT_SYSTEM):
            pass  # Python 3.8's marshal, loading a module's bytecode for whoever imports it
        elif event.startswith(_STOPPED) or event in _STOPPED_EXACT:
            found = culprit(getframe(depth))
        elif event == "sys._getframe" or (event == "object.__getattr__" and args[1] in _FRAME_SOURCES):
            found, what = frame_source(getframe(depth)), event if event == "sys._getframe" else args[1]
        elif event == "object.__setattr__" and args[1] == "__code__":
            found, what = culprit(getframe(depth)), "a function's __code__ replaced"
        if found is not None:
            stop(what, found)

    return on_event


def _finisher(prefix, key, kind, trip, outcomes, trips, watched):
    """At the run's end: the checks, then the signed results, in a new regular file: whatever the code under
    test put at its path (a FIFO, whose open would wait for a reader until the grading's timeout; a link)
    is removed first, and the file is created exclusively, not followed."""
    mac_of, sha256, dumps, compress = hmac.new, hashlib.sha256, json.dumps, zlib.compress
    unlink, open_fd, fdopen = os.unlink, os.open, os.fdopen
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    hooks, finders, namespaces = _checks.hooks, _checks.finders, _checks.namespaces
    audited = hasattr(sys, "addaudithook")
    snapshot = _checks.snapshot()  # the runner's namespaces as they are when the seal is set up

    def finish(_caller, config):
        hooks(config, kind, trip)
        finders(kind, trip)
        namespaces(snapshot + list(watched), kind, trip)
        data = compress(dumps({"tests": outcomes, "trips": trips, "audit": audited}, sort_keys=True).encode())
        out = prefix + ".out"
        try:  # noqa: SIM105 -- contextlib.suppress would be looked up now, after the code under test ran
            unlink(out)
        except FileNotFoundError:
            pass
        with fdopen(open_fd(out, flags, 0o600), "wb") as fh:
            fh.write(mac_of(key, data, sha256).hexdigest().encode("ascii") + b"\n" + data)

    return finish


def bound_to(function, code_name, kind):
    """Whether ``function`` is the test whose function is named ``code_name``: its code's name is that and its
    file is not one the patch changed, through a decorator's wrappers, none of them the patch's code (the
    repository's own decorators, as a library's, are kept). Nothing of a class the patch defined is looked up."""
    seen = 0
    while seen < 10:
        code = _callable_code(function, kind)
        if code is None:
            return False
        if type(function) is _METHOD:
            function = function.__func__
        wrapped = inner(function)
        if wrapped is None:
            return type(function) is _FUNCTION and code.co_name == code_name
        function, seen = wrapped, seen + 1
    return False


def inner(function):
    """What a wrapper wraps: a decorator's ``__wrapped__``, or the coroutine function of asgiref's
    ``async_to_sync`` (django runs an ``async def`` test through it); None for the function a chain ends at.
    Only the wrapper's own attributes are read (its class is not the patch's: :func:`bound_to` checks)."""
    own = getattr(function, "__dict__", None)
    if type(own) is not dict:
        return None
    wrapped = own.get("__wrapped__")
    if wrapped is None and type(function) is not _FUNCTION:
        wrapped = own.get("awaitable")
    return wrapped


def _callable_code(value, kind):
    """The code that runs when ``value`` is called, where it is not the patch's (None otherwise, or where the
    value's class is the patch's, whose attribute lookups would run its code inside the hook)."""
    if type(value) is _METHOD:
        value = value.__func__
    if type(value) is _FUNCTION:
        code = value.__code__
    else:
        code = None
        for cls in type(value).__mro__[:-1]:  # object's own __call__ is none
            where = _checks.origin(cls)
            if where is None or kind(where) == "tainted":
                return None
            if code is None and "__call__" in vars(cls):
                code = getattr(vars(cls)["__call__"], "__code__", None)
    return code if code is not None and kind(code.co_filename) != "tainted" else None


# compared by ``type(x) is``: ``isinstance`` asks an object its ``__class__``, which a lazy proxy (django's
# settings) answers by running code
_FUNCTION, _METHOD = types.FunctionType, types.MethodType


def _audit_fallback(event, *args):
    """Before Python 3.8: no audit events; the seal's own messages go straight to its state."""
    _DIRECT[0](event, args, 3)  # 0: on_event, 1: the hook, 2: this function, 3: the seal's code


_DIRECT = [None]
audit = getattr(sys, "audit", _audit_fallback)


def install(hook):
    """The hook added (from Python 3.8 an audit hook, which nothing can remove)."""
    if hasattr(sys, "addaudithook"):
        sys.addaudithook(hook)
    else:
        _DIRECT[0] = hook
