"""Sealed test results: what a strict grading's passing test needs besides a ``PASSED`` line in the log.

The test log is the test process's output, and code of the patch runs in that process: it can print
``PASSED`` lines for every test and leave (``os._exit``) before pytest's real results, or after them, or
rewrite pytest's reports as they are made. The official harness, which reads the log alone, resolves all of
these (docs/SECURITY.md, ``log_forging``). A strict grading of a pytest test command therefore also runs a
plugin (``insandbox/seal_plugin.py``) that hands back, in a file, the tests whose results count as passing,
signed with a key made for this one grading; a test the log passes is passing only if those sealed results
pass it too.

The key never appears in a command line, an environment variable or the log: it is written as a file of
its own (``Sandbox.write_file``, with the paths the patch changed, which the plugin's tripwires watch) that
the plugin reads and unlinks when pytest imports it, before any conftest or module of the repository is
imported. The sealed results are data: each test's outcome by name, and the tripwires that fired. A name
is keyed as the task's parser keys one summary line of it, and never re-read as log text. What a patch's
code can still do, and why, is in docs/SECURITY.md ("Sealed results").
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
import shlex
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from swe_rl.errors import OutputLimitError, SandboxError
from swe_rl.harness.official import log_reader
from swe_rl.harness.warm import PYTEST_COMMAND
from swe_rl.sandbox.base import Sandbox

_HERE = Path(__file__).with_name("insandbox")
MODULE = "swe_rl_seal"
LAUNCHER = f"{MODULE}_unittest.py"  # django's and unittest's runners run under it
SYMPY_LAUNCHER = f"{MODULE}_sympy.py"  # sympy's runner (``bin/test``) runs under it
# what is staged, by the name the seal's modules import each other by
STAGED = {
    f"{MODULE}.py": (_HERE / "seal_plugin.py").read_text(),  # pytest's plugin
    f"{MODULE}_core.py": (_HERE / "seal_core.py").read_text(),
    f"{MODULE}_checks.py": (_HERE / "seal_checks.py").read_text(),
    f"{MODULE}_launch.py": (_HERE / "seal_launch.py").read_text(),
    LAUNCHER: (_HERE / "seal_unittest.py").read_text(),
    SYMPY_LAUNCHER: (_HERE / "seal_sympy.py").read_text(),
}
# django's runner (``./tests/runtests.py ...``, by a Python or by its shebang) and ``python -m unittest ...``
UNITTEST_COMMAND = re.compile(
    r"^(?:(?P<python>python3?(?:\.\d+)?) )?(?P<script>(?:\./)?tests/runtests\.py)(?=\s|$)"
    r"|^(?P<module_python>python3?(?:\.\d+)?) -m unittest(?=\s|$)"
)
# sympy's ``bin/test``, after any variable assignments (swebench's command sets PYTHONWARNINGS)
SYMPY_COMMAND = re.compile(
    r"^(?P<assign>(?:[A-Za-z_]\w*=(?:'[^']*'|\"[^\"]*\"|[^\s'\"]*) +)*)(?P<script>(?:\./)?bin/test)(?=\s|$)"
)
# tox running its env's commands in the interpreter it runs in (tox-current-env's ``--current-env``), the test
# directives after ``--`` (swebench's sphinx command, ``tox --current-env -epy39 -v --``): the tox.ini strict
# grading keeps (a patch's change to it is reverted) runs pytest on ``{posargs}``, which then loads the plugin
TOX_COMMAND = re.compile(r"^tox(?P<options>(?: +(?:--current-env|-e ?[\w.,-]+|-v+|-q+))+) +--(?=\s|$)")
# repositories that are their own tests' runner: a patch changes the runner, and the tests run it inside itself
# (pytest's ``testdir.inline_run``), so the seal's evidence would be the code under test's (graded unverifiable)
SELF_HOSTED = {"pytest-dev/pytest": "pytest"}  # repository: the test framework it is
ENV = "SWE_RL_SEAL"  # the path prefix of the key (.key) and of the sealed results (.out)
SEALED_PASS = ("passed", "xfail")  # the plugin's outcomes that count as passing
UNAUDITED = "unverifiable: no audit hooks before Python 3.8"  # a SealCheck state
UNARMED = "unverifiable: sympy's runner ran no test file by its own runner"  # a SealCheck state (pytest's)
PLUGGED = ("pytest", "tox")  # the runners pytest's plugin seals (the others run under a launcher)
MAX_SEALED = 16 * 1024 * 1024  # the names of a few hundred thousand tests, compressed


def runner_of(test_cmd: str) -> str | None:
    """Which seal a test command can run with: 'pytest' (``pytest ...``, ``python -m pytest ...``: the plugin),
    'tox' (``tox --current-env -e ENV ... --``: the plugin, in the pytest run tox.ini's commands make),
    'unittest' (django's ``tests/runtests.py``, ``python -m unittest``: a launcher), 'sympy' (sympy's
    ``bin/test``: a launcher), or None (anything else, a tox that makes envs of its own among them: graded
    strict as unverifiable)."""
    if PYTEST_COMMAND.match(test_cmd) is not None:
        return "pytest"
    tox = TOX_COMMAND.match(test_cmd)
    if tox is not None and "--current-env" in tox.group("options").split():
        return "tox"
    if UNITTEST_COMMAND.match(test_cmd) is not None:
        return "unittest"
    if SYMPY_COMMAND.match(test_cmd) is not None:
        return "sympy"
    return None


def self_hosted(repo: str, runner: str | None) -> bool:
    """Whether ``runner`` (:func:`runner_of`) runs the tests by a framework that is ``repo`` itself (tox by
    pytest)."""
    framework = "pytest" if runner in PLUGGED else runner
    return runner is not None and SELF_HOSTED.get(repo) == framework


@dataclass
class Seal:
    """One grading's key and where its files go (``scratch``: the grading files' directory, relative to the
    repository's root, where the eval script runs)."""

    scratch: str
    key: bytes
    changed: tuple[str, ...] = ()  # the paths the patch changed (relative to the repository's root)
    runner: str = "pytest"  # :func:`runner_of`
    hash_seed: int = 0  # sympy's runner: the PYTHONHASHSEED its tests run with (sympy's child would pick one)

    @classmethod
    def new(cls, scratch: str, changed: Sequence[str] = (), runner: str = "pytest") -> Seal:
        key, seed = secrets.token_hex(32).encode(), secrets.randbelow(2**32)
        return cls(scratch, key, tuple(changed), runner, seed)

    @property
    def prefix(self) -> str:
        return f"{self.scratch}/seal"

    def files(self) -> dict[str, bytes]:
        """The seal's modules, staged with the eval script (the key goes apart: :meth:`put_key`)."""
        return {f"{self.scratch}/{name}": text.encode() for name, text in STAGED.items()}

    async def put_key(self, box: Sandbox) -> None:
        conf = {"key": self.key.decode(), "changed": list(self.changed)}
        await box.write_file(f"{self.prefix}.key", json.dumps(conf).encode())

    def plugged(self, test_cmd: str) -> str:
        """``test_cmd`` (a command :func:`runner_of` names this seal's runner for) run with the seal: pytest
        loading the plugin, django's, unittest's or sympy's runner under its launcher."""
        if runner_of(test_cmd) != self.runner:
            raise ValueError(f"not a {self.runner} command: {test_cmd!r}")
        match = PYTEST_COMMAND.match(test_cmd) or TOX_COMMAND.match(test_cmd)
        if match is not None:  # tox: the first of the arguments its commands' {posargs} hand pytest
            return f"{match.group(0)} -p {MODULE}{test_cmd[match.end() :]}"
        if self.runner == "sympy":
            return self._sympy(test_cmd)
        match = UNITTEST_COMMAND.match(test_cmd)
        assert match is not None
        launcher = f"{shlex.quote(self.scratch)}/{LAUNCHER}"
        if match.group("script"):
            return f"{match.group('python') or 'python'} {launcher} {match.group('script')}{test_cmd[match.end() :]}"
        return f"{match.group('module_python')} {launcher} -m unittest{test_cmd[match.end() :]}"

    def _sympy(self, test_cmd: str) -> str:
        """``bin/test`` (by its shebang, ``python``) under the launcher, with a hash seed of this grading's
        unless the command sets one: sympy's ``test()`` then runs the tests in its own process."""
        match = SYMPY_COMMAND.match(test_cmd)
        assert match is not None
        assign = match.group("assign")
        if not re.search(r"(?:^| )PYTHONHASHSEED=", assign):
            assign += f"PYTHONHASHSEED={self.hash_seed} "
        launcher = f"{shlex.quote(self.scratch)}/{SYMPY_LAUNCHER}"
        return f"{assign}python {launcher} {match.group('script')}{test_cmd[match.end() :]}"

    def variables(self, *, cold: bool) -> str:
        """The assignments the plugged command runs with: ``SWE_RL_SEAL`` (an absolute path: a test may
        change directory) and, for a cold run, ``PYTHONPATH`` to find the plugin (the warm runner's client
        sends no such setting to its server, which finds the plugin itself, and sets it where it runs cold)."""
        folder = shlex.quote(self.scratch)
        found = ""
        if cold and self.runner in PLUGGED:  # the launcher of unittest's runners finds its modules itself
            found = f' PYTHONPATH="$PWD/{folder}${{PYTHONPATH:+:$PYTHONPATH}}"'
        return f'{ENV}="$PWD/{shlex.quote(self.prefix)}"{found}'

    async def read(self, box: Sandbox) -> bytes | None:
        """The sealed results the run left; None where it left none. The test run's code may have made the
        file anything (a FIFO that blocks a read, a symlink, a huge file): only a regular file is copied, at
        most MAX_SEALED bytes, to a name of this read's own, and the copy is read."""
        copy = f"{self.prefix}.{secrets.token_hex(8)}"
        out = shlex.quote(f"{self.prefix}.out")
        command = (
            f"if [ -f {out} ] && [ ! -L {out} ]; then head -c {MAX_SEALED} {out} > {shlex.quote(copy)} && "
            "echo copied; fi"
        )
        if "copied" not in (await box.exec(command, timeout=60)).output:
            return None
        try:
            return await box.read_file(copy)
        except OutputLimitError:
            return None
        except SandboxError:
            raise
        except OSError:  # the copy was taken away or replaced meanwhile: the run's doing
            return None

    def check(self, data: bytes | None, report: dict[str, Any], parser: str) -> SealCheck:
        """Whether every test that swebench's ``report`` counts as passing is passed by the sealed results
        ``data``: every sealed test the task's parser keys as that name (from one summary line of its own)
        passed, and there is at least one. A tripwire that fired confirms nothing."""
        # a name that is no pytest id (a parser's own line) is not a test of pytest's to seal
        passing = [name for name in _success(report) if "::" in name or self.runner not in PLUGGED]
        sealed = self._open(data)
        if sealed is not None and sealed[1]:
            return SealCheck("tripped", passing, sealed[1])
        if not passing:
            return SealCheck("nothing to confirm", [])
        if sealed is None:
            return SealCheck("missing or not signed with this grading's key", passing)
        if not sealed[2]:  # before Python 3.8: no audit hook, the evidence is in closures any code can walk
            return SealCheck(UNAUDITED, passing)
        if not sealed[0] and self.runner == "sympy":  # bin/test ran its tests through pytest (sympy 1.12.1+)
            return SealCheck(UNARMED, passing)
        read, line = log_reader(parser), _LINES[self.runner]
        keyed: dict[str, list[str]] = {}
        for name, outcome in sealed[0].items():
            key = _key(name, read, line)
            if key is not None:
                keyed.setdefault(key, []).append(outcome)
        unconfirmed = [
            name for name in passing if not keyed.get(name) or any(o not in SEALED_PASS for o in keyed[name])
        ]
        return SealCheck("confirmed" if not unconfirmed else "contradicted", unconfirmed)

    def _open(self, data: bytes | None) -> tuple[dict[str, str], list[str], bool] | None:
        if not data or b"\n" not in data:
            return None
        mac, _, payload = data.partition(b"\n")
        expected = hmac.new(self.key, payload, hashlib.sha256).hexdigest().encode()
        if not hmac.compare_digest(mac, expected):
            return None
        try:
            sealed = json.loads(zlib.decompress(payload))
            tests, trips = sealed["tests"], sealed["trips"]
        except (ValueError, KeyError, TypeError, zlib.error):
            return None
        if not isinstance(tests, dict) or not isinstance(trips, list):
            return None
        outcomes = {n: o for n, o in tests.items() if isinstance(n, str) and isinstance(o, str)}
        return outcomes, [str(t) for t in trips], sealed.get("audit") is True


# how the runner prints one passing test: pytest's summary line; unittest's verbose line, its description
# (``str(test)``, then the docstring's first line on a line of its own) and " ... ok"; sympy's verbose line
_LINES = {
    "pytest": ("PASSED {}", 0),
    "tox": ("PASSED {}", 0),
    "unittest": ("{} ... ok", 1),
    "sympy": ("{} ok", 0),
}


def _key(name: str, read: Callable[[str], dict[str, str]], line: tuple[str, int]) -> str | None:
    """The name the task's parser (``read``) gives the runner's line for a pass of ``name``: one name at
    most. A name holding more line breaks than the runner's description has is no test's (the seal trips);
    unittest's description ends in its docstring's first line, the test author's text as its code holds it."""
    template, breaks = line
    if name.count("\n") > breaks or ("\r" in name and not breaks):  # a docstring's line may hold a "\r"
        return None
    text = template.format(name)
    if breaks:  # as the log is read (text mode, as swebench reads it): a carriage return breaks a line
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    keys = list(read(text))
    return keys[0] if len(keys) == 1 else None


@dataclass
class SealCheck:
    """``state``: 'confirmed', 'contradicted', 'tripped', 'missing or not signed ...', or 'nothing to
    confirm'; ``unconfirmed``: the tests the log passes that the sealed results do not; ``trips``: the
    tripwires that fired in the test process (then nothing is confirmed)."""

    state: str
    unconfirmed: list[str]
    trips: list[str] = field(default_factory=list)

    @property
    def holds(self) -> bool:
        return not self.unconfirmed and not self.trips


def _success(report: dict[str, Any]) -> list[str]:
    status = report.get("tests_status") or {}
    return [
        name
        for kind in ("FAIL_TO_PASS", "PASS_TO_PASS")
        for name in (status.get(kind) or {}).get("success", [])
    ]
