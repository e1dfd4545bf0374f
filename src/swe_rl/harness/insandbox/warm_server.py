"""The warm test runner's server: runs *inside* a sandbox, with the env's Python (3.6 or later).

Never imported by swe-rl: :mod:`swe_rl.harness.warm` ships this file's text and starts it with
``python -c``. One server serves one use (a grading) and then leaves: it is started right after the reset
that ends the previous use (or with the sandbox), so its interpreter draws its own string-hash secret, as a
cold one does, and holds no state of any earlier use. It imports pytest and its builtin plugins while the
host gets the grading ready, then forks one child for the one test run a client (``warm_client.py``) asks
for, with the client's stdin, stdout and stderr, working directory, environment, umask and arguments; the
child runs pytest's own entry point (``runpy``, as ``python -m pytest`` or the ``pytest`` script would) and
leaves as the interpreter's shutdown does, less its teardown of every module (:func:`leave`). A cold run pays
interpreter start-up and ``import pytest`` on the grading's path; here they were paid beside it.

A run is refused (the client then runs the command cold, unchanged) when it could differ from a cold
one: another interpreter, another ``PYTHON*``/locale/``TZ`` setting than the server started with (they
act at interpreter start-up), a module the server preloaded that the cold run would import from
elsewhere (a file the patch added on ``sys.path``, e.g. ``pytest.py`` at the root of a ``python -m``
run), a module a preloaded one tried to import and could not that the run would now find (the cold run
would import the patch's file: ``org/python/core.py``, which ``copy`` tries), its own limits or
scheduling changed since it started, or it imported any module from the repository (pytest's own
repository: a fork would test the unpatched code). The server is not dumpable, so a test run cannot
ptrace or rewrite it.

Reach. The server listens on one address the host chose for its one use, given through a private channel
(``SWE_RL_WARM_CHANNEL``: two FIFOs of the sandbox's ctl directory, which no command can list, unlinked once
the server has opened them; the host writes ``arm 1 ADDRESS`` there before the server starts, and the server
answers ``armed 1`` once it listens, before it imports anything), and it accepts exactly one connection: it
closes the listener as soon as it has accepted one, before anything of the patch runs. When that
connection's run is over, or it was dropped, or the host sends ``disarm GEN`` (answered ``disarmed GEN``) or
closes its end, the server ends whatever it holds (its listener, its connection, the fds a request passed,
the child forked for it, killed and reaped) and exits: it never serves twice, and the reset that ends the
use ends whatever is left. A connection that has not sent its whole request within REQUEST_SECONDS is
dropped; a request with more than three fds or over MAX_REQUEST bytes too. Once imported, the server says
``ready SECONDS`` (how long the imports took) on the channel.

Protocol (an abstract unix socket of the sandbox's network namespace): the client sends a 4-byte
length and its NUL-separated request (``warm_client.py`` says its fields) with its fds 0-2 attached; the server answers ``cold <reason>`` or
``forked <pid>``, then ``exit <wait status>``. Written for Python 3.6: no newer syntax.
"""

import sys

del sys.path[0]  # `python -c` put the working directory first: nothing is imported from it

import os  # noqa: E402
import time  # noqa: E402

STARTED = time.monotonic()


def launch():
    """Fork at once: the launching command (the host's exec) returns as soon as the child has opened the host's
    channel, printing the child's pid and start time (nothing, where the env cannot import pytest); the child
    goes on alone: it listens on its address, then imports pytest. Returns the channel's fds (in the child)."""
    import importlib.util

    if importlib.util.find_spec("pytest") is None:  # a path scan, no import
        sys.stdout.write("no server: no pytest\n")
        sys.stdout.flush()
        os._exit(0)
    commands, answers = os.environ["SWE_RL_WARM_CHANNEL"].split(":")
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid:
        os.close(ready_w)
        if os.read(ready_r, 1) == b"1":  # the pid, and its start time: a pid alone can be handed out again
            sys.stdout.write(f"{pid} {start_ticks(pid)}\n")
            sys.stdout.flush()
        os._exit(0)
    os.close(ready_r)
    try:  # before the host unlinks the names (it does once the launcher has returned)
        fds = (os.open(commands, os.O_RDONLY | os.O_NONBLOCK), os.open(answers, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        os._exit(0)
    os.write(ready_w, b"1")
    os.close(ready_w)
    return fds


def start_ticks(pid):
    """When ``pid`` started, in clock ticks since boot (field 22 of /proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat") as fh:
        return int(fh.read().rsplit(")", 1)[1].split()[19])


FIFOS = launch()
import atexit  # noqa: E402
import ctypes  # noqa: E402
import gc  # noqa: E402
import importlib  # noqa: E402
import random  # noqa: E402
import resource  # noqa: E402
import runpy  # noqa: E402
import signal  # noqa: E402

os.environ.pop("SWE_RL_WARM_CHANNEL")  # the host's FIFOs ("COMMANDS:ANSWERS"), opened by launch()


def which(name):
    """Where the test command finds ``name`` on PATH (as the client finds it)."""
    for folder in os.environ.get("PATH", "").split(":"):
        path = os.path.join(folder, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return ""


EXE = which("python")  # the interpreter as the test command finds it on PATH
SCRIPT = which("pytest")  # the pytest script, where the command runs it
REPO = os.path.realpath(os.environ.pop("SWE_RL_WARM_REPO"))  # the repository a patch changes
EXTRA = [n for n in os.environ.pop("SWE_RL_WARM_PRELOAD", "").split(",") if n]  # the env's own dependencies
os.environ.pop("SWE_RL_WARM_SERVER", None)
SERVING = os.environ.pop("SWE_RL_WARM_SERVING")
START_ENV = dict(os.environ)
# with every PYTHON* and LC_* variable: read at start-up, or cached by a module the server imported
STARTUP_KEYS = ("LANG", "TZ", "TMPDIR", "HOME")
ARM_SECONDS = 10.0  # the host wrote the address before it launched the server: it is there at once

# The serving loop (insandbox/warm_serving.py: Use, Channel, serve), shipped beside this text in
# SWE_RL_WARM_SERVING: its definitions join this namespace.
exec(compile(SERVING, "warm_serving.py", "exec"))
del SERVING


def own_limits():
    """What a command of the sandbox could change in this process and every child would inherit: resource
    limits (``prlimit``), niceness, scheduling policy and CPU affinity. Taken when the server starts (right
    after the reset, or with the sandbox: the sandbox's own), checked before the fork."""
    limits = tuple(
        resource.getrlimit(getattr(resource, n)) for n in sorted(dir(resource)) if n.startswith("RLIMIT_")
    )
    return (
        limits,
        os.getpriority(os.PRIO_PROCESS, 0),
        os.sched_getscheduler(0),
        sorted(os.sched_getaffinity(0)),
    )


def begin():
    """In the child, before any import of pytest's: a session of its own, not dumpable, the one address read
    from the host's channel and listened on. Returns the use, the channel and the wake-up pipe's read end."""
    os.setsid()
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: no ptrace, no /proc/<pid>/mem, no fds
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    os.chdir("/")
    channel = Channel(*FIFOS)  # noqa: F821  # warm_serving.py's
    use = Use()  # noqa: F821  # warm_serving.py's
    parts = (channel.first(ARM_SECONDS) or "").split()
    try:
        if len(parts) != 3 or parts[0] != "arm":
            raise ValueError("no address from the host")
        use.listen(parts[2])
    except (OSError, ValueError) as exc:  # the address is taken: the run's client finds no server, runs cold
        channel.say("failed " + (parts[1:2] or ["0"])[0] + " " + str(exc).replace("\n", " "))
        os._exit(0)
    channel.say("armed " + parts[1])
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    return use, channel, wake_r


LIMITS = own_limits()  # inherited from the launching command: the sandbox's
USE, HOST, WAKE = begin()


class Missing:
    """Asked last by every import while the server preloads: the top-level names no finder found. A
    preloaded module may have cached such a failure (``copy`` and ``pickle`` try ``org.python.core`` on
    Python <= 3.11, ``subprocess`` tries ``msvcrt``): a run that would find one now is cold."""

    names = set()

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if path is None:
            cls.names.add(name)
        return None


sys.meta_path.append(Missing)
import pytest  # noqa: E402,F401

try:  # pytest's builtin plugins, which every run loads
    from _pytest.config import default_plugins  # type: ignore[attr-defined]

    for _name in default_plugins:
        try:
            importlib.import_module("_pytest." + _name)
        except Exception:  # an optional plugin's dependency is missing: pytest skips it too
            continue
except ImportError:
    pass
# pytest's usual lazy imports (a run makes them anyway), then the caller's
for _name in ["pdb", "faulthandler", "sysconfig", *EXTRA]:
    try:
        importlib.import_module(_name)
    except Exception:  # not importable here: the run imports it itself, or fails as cold
        continue

sys.meta_path.remove(Missing)
MISSING = sorted(Missing.names - set(sys.modules))
PRELOADED = {
    name.partition(".")[0]
    for name, module in list(sys.modules.items())
    if getattr(getattr(module, "__spec__", None), "origin", None) not in (None, "built-in", "frozen")
} - {"__main__"}
NEVER_LOADED = [name for name in ("sitecustomize", "usercustomize") if name not in sys.modules]
# A module loaded from the repository (pytest's own repository, an extra name that is the project) is the
# code a patch changes: a forked run would test the unpatched one. Then every run is cold.
OWN = sorted(
    name
    for name, module in list(sys.modules.items())
    if os.path.realpath(getattr(getattr(module, "__spec__", None), "origin", None) or "/").startswith(
        REPO + os.sep
    )
)


def startup_setting(key):
    return key.startswith(("PYTHON", "LC_")) or key in STARTUP_KEYS


def find(name):
    """Where ``import name`` would load it from with the current ``sys.path``, without importing it."""
    for finder in sys.meta_path:
        spec = finder.find_spec(name, None)
        if spec is not None:
            return spec.origin, tuple(spec.submodule_search_locations or ())
    return None


def loaded(name):
    spec = sys.modules[name].__spec__
    return spec.origin, tuple(spec.submodule_search_locations or ())


def child_path(request):
    first = request["cwd"] if request["mode"] == "module" else os.path.dirname(os.path.realpath(SCRIPT))
    seal = request["env"].get("SWE_RL_SEAL")  # the seal plugin's folder, which a cold run has on PYTHONPATH
    return [first, *([os.path.dirname(seal)] if seal else []), *sys.path]


def refusal(request):
    """Why this run could differ from a cold one; None when it cannot."""
    if OWN:
        return "the repository's own module " + OWN[0] + " is preloaded"
    if own_limits() != LIMITS:
        return "the server's limits or scheduling were changed"
    if os.path.realpath(request["exe"]) != os.path.realpath(EXE):
        return "another interpreter: " + request["exe"]
    if request["mode"] == "script" and os.path.realpath(request.get("script", "")) != os.path.realpath(
        SCRIPT
    ):
        return "another pytest script: " + request.get("script", "")
    keys = {k for k in list(request["env"]) + list(START_ENV) if startup_setting(k)}
    for key in sorted(keys):
        if request["env"].get(key) != START_ENV.get(key):
            return "start-up setting " + key + " differs"
    importlib.invalidate_caches()
    own = sys.path[:]
    sys.path[:] = child_path(request)
    try:
        for name in sorted(PRELOADED):
            if name in sys.modules and find(name) != loaded(name):
                return "module " + name + " would load from elsewhere"
        for name in MISSING:
            if find(name) is not None:
                return "module " + name + ", which the server could not import, would load"
        for name in NEVER_LOADED:
            if find(name) is not None:
                return name + " would run at start-up"
    finally:
        sys.path[:] = own
    return None


class Run:
    """One test run, in the forked child: becomes the cold process's state, then runs pytest."""

    def __init__(self, request, fds):
        self.request = request
        self.fds = fds

    def start(self):
        request = self.request
        ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE: a cold process is dumpable
        for target, fd in enumerate(self.fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.umask(request["umask"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.path[:] = child_path(request)
        random.seed()
        see_all_objects()
        try:
            if request["mode"] == "module":
                sys.argv[:] = ["-m"] + request["args"]
                runpy.run_module("pytest", run_name="__main__", alter_sys=True)
            else:
                sys.argv[:] = [request["script"]] + request["args"]
                runpy.run_path(request["script"], run_name="__main__")
        except SystemExit as done:  # how pytest's entry points end
            code = 0 if done.code is None else done.code  # pytest's ExitCode: an int, as for the interpreter
            if not isinstance(code, int) or not 0 <= code <= 255:
                raise  # a message or an odd status: the interpreter's own handling says it
            leave(int(code))
        leave(0)


def leave(code):
    """Exit with ``code`` as the interpreter's shutdown would, in its order: wait for the threads that are
    not daemons, run the atexit callbacks, flush stdout and stderr (a failed flush exits 120). What is left
    out is the teardown of every module and object, ~10 ms of a forked run (most of them the server's):
    output a ``__del__`` would print at that point does not appear (a cold run's may)."""
    threading = sys.modules.get("threading")
    if threading is not None:
        threading._shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:  # as Py_FinalizeEx: the status says the output may be lost
            code = 120
    os._exit(code)


def freeze():
    """Move every object the server made into the collector's permanent generation (Python 3.7+): a child's
    collections (pytest runs two at its end) then skip them, and do not write to, and so copy, the pages
    they share with the server. A third of a small run's time (60 -> 44 ms, the builtin inikit env)."""
    if hasattr(gc, "freeze"):
        gc.collect()
        gc.freeze()


def see_all_objects():
    """In a child: ``gc.get_objects`` and ``gc.get_referrers`` leave the permanent generation out, so a test
    that looks through them would miss the objects the cold run has (pytest's own, the preloaded modules').
    Their first call puts every frozen object back, then answers as in a cold run."""
    if not hasattr(gc, "unfreeze"):
        return
    for name in ("get_objects", "get_referrers"):
        original = getattr(gc, name)

        def thawed(*args, _original=original, **kwargs):
            gc.unfreeze()
            return _original(*args, **kwargs)

        thawed.__name__ = thawed.__qualname__ = name
        thawed.__doc__ = original.__doc__
        setattr(gc, name, thawed)


freeze()
HOST.say(f"ready {time.monotonic() - STARTED:.3f}")
RUN = serve(HOST, WAKE, refusal, Run, USE)  # noqa: F821  # warm_serving.py's; returns in the forked child
RUN.start()
