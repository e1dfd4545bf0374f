"""The seal on a strict grading's test results: a pytest plugin that runs *inside* a sandbox, in the test process.

Never imported by swe-rl: strict grading (:mod:`swe_rl.harness.seal`) writes this text as ``swe_rl_seal.py``
beside a key of its own for this one grading (``<SWE_RL_SEAL>.key``) and runs pytest with ``-p swe_rl_seal``.
pytest imports ``-p`` plugins before any conftest, plugin entry point or module of the repository: at its
import this module takes the key (reads the file, unlinks it, drops ``SWE_RL_SEAL`` from the environment),
so from then on the key is held only by the closures below, not by a file, a variable of the environment,
an argument or a module attribute. At the session's end it writes ``<SWE_RL_SEAL>.out``: the names of the
tests whose results count as passing (as pytest's ``-rA`` summary names them), compressed, with their
HMAC-SHA256 under the key. The grader (``seal.py``) trusts a passing test in the log only if the sealed
results pass it too.

What counts as passing: a call-phase report ``passed`` whose call this plugin saw end without an exception
(its wrapper of ``pytest_runtest_call`` is the innermost one a plugin can register: ``trylast``, registered
before every conftest and every module of the repository), or an expected failure (``XFAIL``) whose call
raised with an ``xfail`` mark or ``pytest.xfail()``, or whose setup raised ``pytest.xfail``'s exception. So the
results a test run printed and then left (``os._exit``) before the session ended, a report rewritten to a
pass after its test raised, and a pass printed for a test that never ran are not sealed.

Written for Python 3.5+ and pytest 3+: no newer syntax.
"""

import contextlib
import hashlib
import hmac
import json
import os
import zlib

import pytest

XFAILED = getattr(getattr(pytest, "xfail", None), "Exception", None)


def _take_key():
    prefix = os.environ.pop("SWE_RL_SEAL", "")
    if not prefix:
        return "", b""
    try:
        with open(prefix + ".key", "rb") as fh:
            key = fh.read()
    except OSError:
        return prefix, b""
    finally:
        with contextlib.suppress(OSError):
            os.unlink(prefix + ".key")
    return prefix, key


def _hooks(prefix, key):
    seen = {}  # nodeid -> (whether its call raised, whether a failure was expected), as the innermost
    # call wrapper saw it
    passing = set()  # names, as the -rA summary prints them
    config = []

    def name(nodeid):
        relative = getattr(config[0], "cwd_relative_nodeid", None) if config else None
        return relative(nodeid) if relative is not None else nodeid

    def sessionstart(session):
        config[:] = [session.config]

    def runtest_setup(item):
        outcome = yield
        excinfo = getattr(outcome, "excinfo", None)
        if excinfo and excinfo[0] is XFAILED:  # xfail(run=False), or pytest.xfail() in a fixture
            seen[item.nodeid] = (None, True)

    def runtest_call(item):
        outcome = yield
        excinfo = getattr(outcome, "excinfo", None)
        kinds = [excinfo[0]] if excinfo else []
        kinds += [getattr(info, "type", None) for info in getattr(item, "_excinfo", None) or ()]  # unittest's
        marker = getattr(item, "get_closest_marker", None) or getattr(item, "get_marker", None)
        expected = bool(marker and marker("xfail")) or any(kind is XFAILED for kind in kinds)
        seen[item.nodeid] = (bool(kinds), expected)

    def runtest_logreport(report):
        raised, expected = seen.get(report.nodeid, (None, False))
        if hasattr(report, "wasxfail"):  # XFAIL, which SWE-bench counts as passing, when skipped
            # an expected failure whose call raised, or whose setup did (run=False, pytest.xfail() in a
            # fixture): not a failure rewritten to XFAIL afterwards
            if report.skipped and expected and raised is not False:
                passing.add(name(report.nodeid))
        elif report.when == "call" and report.passed and raised is False:
            passing.add(name(report.nodeid))

    def sessionfinish(session, exitstatus):
        payload = zlib.compress(json.dumps({"passing": sorted(passing)}).encode("utf-8"))
        mac = hmac.new(key, payload, hashlib.sha256).hexdigest().encode("ascii")
        with open(prefix + ".out", "wb") as fh:
            fh.write(mac + b"\n" + payload)

    return sessionstart, runtest_setup, runtest_call, runtest_logreport, sessionfinish


_PREFIX, _KEY = _take_key()
if _KEY:
    _start, _setup, _call, _report, _finish = _hooks(_PREFIX, _KEY)
    pytest_sessionstart = pytest.hookimpl(tryfirst=True)(_start)
    pytest_runtest_setup = pytest.hookimpl(hookwrapper=True, trylast=True)(_setup)
    pytest_runtest_call = pytest.hookimpl(hookwrapper=True, trylast=True)(_call)
    pytest_runtest_logreport = pytest.hookimpl(trylast=True)(_report)
    pytest_sessionfinish = pytest.hookimpl(trylast=True)(_finish)
    del _start, _setup, _call, _report, _finish
del _PREFIX, _KEY
