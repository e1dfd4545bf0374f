"""swe-rl synth: record the lines of the watched files that the test suite executes.

A pytest plugin (synth/runner.py stages it in the testbed's ``.git/swe-rl-synth/`` and loads it with
``-p swe_rl_synth_trace``), run by the env's own Python, which may be any from 3.5: no f-strings, no variable
annotations (types are comments for mypy), the standard library only. It reads the watched paths (relative to the
working directory, the testbed) from ``watch.json`` beside it and writes the lines executed in each to
``lines.json`` beside it.
"""

import json
import os
import sys
import threading

MYPY = False
if MYPY:
    from types import FrameType  # noqa: F401 (in type comments)
    from typing import Any  # noqa: F401

_here = os.path.dirname(os.path.abspath(__file__))
_root = os.getcwd()
with open(os.path.join(_here, "watch.json")) as _fh:
    _watch = {os.path.join(_root, p) for p in json.load(_fh)}
_seen = {}  # type: dict[str, set[int]]


def _local(frame, event, arg):  # type: (FrameType, str, Any) -> Any
    if event == "line":
        _seen.setdefault(frame.f_code.co_filename, set()).add(frame.f_lineno)
    return _local


def _global(frame, event, arg):  # type: (FrameType, str, Any) -> Any
    if frame.f_code.co_filename in _watch:
        _seen.setdefault(frame.f_code.co_filename, set()).add(frame.f_lineno)
        return _local
    return None


def pytest_configure(config):  # type: (object) -> None
    threading.settrace(_global)
    sys.settrace(_global)


def pytest_unconfigure(config):  # type: (object) -> None
    sys.settrace(None)
    out = {os.path.relpath(f, _root): sorted(lines) for f, lines in _seen.items()}
    with open(os.path.join(_here, "lines.json"), "w") as fh:
        json.dump(out, fh)
