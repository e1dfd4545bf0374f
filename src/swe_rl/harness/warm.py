"""The warm test runner: pytest imported once per sandbox, forked for each test run.

A cold grading run starts an interpreter and imports pytest (most of a small suite's run on these
machines: docs/experiments/benchmark-notes.md); a sandbox that grades many patches (reset in place between them) can pay
that once. :func:`start` launches the server (``insandbox/warm_server.py``) in a sandbox that keeps
processes (:class:`.base.KeepsProcesses`) with the env's Python; :func:`hook` rewrites a test command that
runs pytest (``pytest ...``, ``python -m pytest ...``) into the client (``insandbox/warm_client.py``),
which asks the server for a forked run with the command's own stdin, stdout, stderr, directory and
environment, and exits as the run did. Anything else, or a run the server refuses (another interpreter,
another start-up setting, a preloaded module the patch shadows), runs cold and unchanged; the eval
script's output says which (:data:`RUNNER_MARK`), and :func:`runner_of` reads it back.

One use at a time: the server listens only once :meth:`WarmRunner.arm` has given it an address for one use
(a grading), through a private channel no process of the sandbox can open (sandbox/channel.py), and
accepts one connection on it; :meth:`WarmRunner.disarm` (before the reset that ends the use) makes it let
go of everything that use gave it, its forked run included. So nothing a test run does, however many
connections it makes or fds it passes, reaches the next use: the address of the next one is not known yet
and the server is not listening. Each of those exchanges has a deadline; a server that misses one is not
used again (the tests run cold, and the reset ends it). The server never imports the repository's code and
is not dumpable (no ptrace, no ``/proc/<pid>/mem``, no fds), and the client checks the socket's peer is the
server (its pid, started when the server did); a run can only kill or stop the server, and then the next
runs are cold until it is started again (:meth:`WarmRunner.alive`).
"""

from __future__ import annotations

import re
import secrets
import shlex
from collections.abc import Sequence
from pathlib import Path

from swe_rl.sandbox.base import HelperChannel, KeepsProcesses, Sandbox

_HERE = Path(__file__).with_name("insandbox")
SERVER = (_HERE / "warm_server.py").read_text()
SERVING = (_HERE / "warm_serving.py").read_text()  # the server's loop, shipped beside it
CLIENT = (_HERE / "warm_client.py").read_text()
RUNNER_MARK = ">>>>> swe-rl test runner:"
# a test command that runs pytest: ``pytest ...`` or ``python[3[.x]] -m pytest ...`` (seal.py plugs its plugin in
# the same commands)
PYTEST_COMMAND = re.compile(r"^(?:(?P<word>python3?(?:\.\d+)?) -m pytest|(?P<script>pytest))(?=\s|$)")


ARM_SECONDS = 10.0  # the server answers in microseconds; past this it is taken for wedged


class WarmRunner:
    """A server running in one sandbox, and this process's end of its channel."""

    def __init__(self, pid: int, start_ticks: int, import_seconds: float, channel: HelperChannel) -> None:
        self.pid = pid
        self.start_ticks = (
            start_ticks  # when it started (clock ticks since boot): with the pid, what names it
        )
        self.import_seconds = import_seconds
        self.address: str | None = None  # while armed: where the one connection of this use goes
        self._channel = channel
        self._generation = 0

    async def alive(self, box: Sandbox) -> bool:
        """Whether the server still runs in ``box`` (not stopped, traced or a zombie): the process with its
        pid, started when it did. A test run can kill the server and fork until a process of its own gets
        the pid (4,194,304 pids go by in ~15 minutes here); that one is not kept by a reset."""
        found = await process_state(box, self.pid)
        return found is not None and found[0] in ("R", "S", "D") and found[1] == self.start_ticks

    async def arm(self) -> bool:
        """Give the server a new address for the coming use (:attr:`address`); False when it did not take it
        in time (the use's tests then run cold)."""
        address = f"swe-rl-warm-{secrets.token_hex(16)}"
        self.address = address if await self._exchange("arm", address) else None
        return self.address is not None

    async def disarm(self) -> bool:
        """Make the server let go of everything the current use gave it (its listener, connection, fds and
        forked run); True once it said so. Before the reset that ends the use: False means it cannot be kept."""
        self.address = None
        return await self._exchange("disarm")

    async def _exchange(self, verb: str, *args: str) -> bool:
        self._generation += 1
        expected = f"{verb}ed {self._generation}"
        try:
            self._channel.send(" ".join([verb, str(self._generation), *args]))
        except OSError:
            return False
        while (line := await self._channel.receive(ARM_SECONDS)) is not None:
            if line == expected:
                return True
            if line.startswith(("armed ", "disarmed ", "failed ")) and line.split()[1] == str(
                self._generation
            ):
                return False  # this exchange's answer, and not the one hoped for
        return False  # older answers that came late are passed over; none in time: not answered

    def close(self) -> None:
        """Let the server go: it reads the end of its channel and exits (a reset ends it anyway)."""
        self.address = None
        self._channel.close()


async def process_state(box: Sandbox, pid: int) -> tuple[str, int] | None:
    """``pid``'s state letter and start time (clock ticks since boot) in ``box``; None when it is gone.
    Read from the host where the backend can (ns: ``NsSandbox.process_state``), else by a command."""
    if isinstance(box, KeepsProcesses):
        return await box.process_state(pid)
    result = await box.exec(f"cat /proc/{pid}/stat 2>/dev/null", timeout=30)
    fields = result.output.rpartition(")")[2].split()  # after the command name, which may hold anything
    if result.returncode != 0 or len(fields) <= 19 or not fields[19].isdigit():
        return None
    return fields[0], int(fields[19])


async def start(
    box: Sandbox,
    repo: str,
    *,
    preload: Sequence[str] = (),
    env: dict[str, str] | None = None,
    timeout: float = 120,
) -> WarmRunner | None:
    """Launch the server in ``box`` (its Python must import pytest), for test runs of the repository at
    ``repo`` (a run is cold where the server imported a module from it), unarmed. ``preload``: more modules
    to import once (the env's dependencies, never the repository's); ``env``: variables the test runs will
    have too (a start-up setting that differs makes a run cold). None when it cannot start there (a backend
    that keeps no processes, an env without pytest): the runs stay cold."""
    if not isinstance(box, KeepsProcesses):
        return None
    channel = await box.open_channel()
    command = (
        'SWE_RL_WARM_EXE="$(command -v python)" SWE_RL_WARM_SCRIPT="$(command -v pytest || true)" '
        f"SWE_RL_WARM_CHANNEL={channel.paths} SWE_RL_WARM_REPO={shlex.quote(repo)} "
        f"SWE_RL_WARM_PRELOAD={shlex.quote(','.join(preload))} "
        'exec python -c "$SWE_RL_WARM_SERVER" </dev/null 2>&1'
    )
    variables = {**(env or {}), "SWE_RL_WARM_SERVER": SERVER, "SWE_RL_WARM_SERVING": SERVING}
    try:
        result = await box.exec(f"cd / && {command}", timeout=timeout, env=variables)
    except BaseException:
        channel.close()
        raise
    channel.seal()  # the server has opened both FIFOs, or never will
    fields = result.output.strip().splitlines()[-1:] if result.returncode == 0 else []
    parts = fields[0].split() if fields else []
    if len(parts) != 3 or not parts[0].isdigit() or not parts[2].isdigit():
        channel.close()
        return None
    return WarmRunner(int(parts[0]), int(parts[2]), float(parts[1]), channel)


NOTE = '"$swe_rl_runner_note"'
"""The shell word of the file the client writes which way it ran (set by :func:`note_line`)."""


def note_line(scratch: str) -> str:
    """Shell run first in the eval script, in the repo's root: the client notes which way it ran in the
    grading files' directory ``scratch``."""
    return f'swe_rl_runner_note="$PWD/{scratch}/runner"; : > "$swe_rl_runner_note"'


def hook(test_cmd: str, runner: WarmRunner | None) -> str | None:
    """``test_cmd`` with its pytest invocation sent to ``runner``'s server; None when it does not start
    with one (or there is no runner, or it is not armed): it runs as written."""
    match = PYTEST_COMMAND.match(test_cmd)
    if runner is None or runner.address is None or match is None:
        return None
    mode, word = ("module", match.group("word")) if match.group("word") else ("script", "pytest")
    args = test_cmd[match.end() :]
    server = f"{runner.pid}:{runner.start_ticks}"
    client = f"python -I -S -c {shlex.quote(CLIENT)} {runner.address} {server} {NOTE} {mode} {word} --"
    return client + args


def report_line() -> str:
    """Shell that prints which way the tests ran: the eval script's last line of output."""
    return (  # bash's own read: no process
        'swe_rl_ran=; IFS= read -r -n 200 swe_rl_ran < "$swe_rl_runner_note" 2>/dev/null; '
        f'echo "{RUNNER_MARK} ${{swe_rl_ran:-unknown}}"'
    )


def runner_of(output: str) -> tuple[str, str]:
    """``output`` without the runner's line (the last), and what it said ("" where there is none: the
    tests ran as written)."""
    body = output.rstrip("\n")
    head, _, last = body.rpartition("\n")
    if not last.startswith(RUNNER_MARK):
        return output, ""
    return (head + "\n" if head else ""), last[len(RUNNER_MARK) :].strip()
