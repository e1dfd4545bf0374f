"""The warm test runner: pytest imported beside the grading, in a fresh interpreter for each grading, and forked.

A cold grading run starts an interpreter and imports pytest (most of a small suite's run on these
machines: docs/experiments/benchmark-notes.md) on the grading's path; a sandbox that grades many patches
(reset in place between them) can pay that beside the grading instead. :func:`start` launches the server
(``insandbox/warm_server.py``) in a sandbox that keeps processes (:class:`.base.KeepsProcesses`) with the
env's Python, armed for one use, and returns as soon as it listens: it imports pytest while the host applies
the patch (grade_many.py launches it right after the reset that ends the previous grading, so its imports
also overlap the next agent's run). :func:`hook` rewrites a test command that runs pytest (``pytest ...``,
``python -m pytest ...``) into the client (``insandbox/warm_client.py``), which asks the server for a forked
run with the command's own stdin, stdout, stderr, directory and environment, and exits as the run did.
Anything else, or a run the server refuses (another interpreter, another start-up setting, a preloaded module
the patch shadows), runs cold and unchanged; the eval script's output says which (:data:`RUNNER_MARK`), and
:func:`runner_of` reads it back.

A true sample of a cold run: a server serves one use and then leaves, and the next use gets a new one,
started after the reset. So each grading's test process has an interpreter of its own, whose string-hash
secret was drawn when it started (as a cold run's is: no ``PYTHONHASHSEED``), with no state of any earlier
grading; a forked run inherits only what the server did before the patch was there (imports from the env).

One use at a time: the server listens only on the address :func:`start` gave it for its one use (a grading),
through a private channel no process of the sandbox can open (sandbox/channel.py), and accepts one
connection on it; once that connection's run is over, or :meth:`WarmRunner.disarm` or :meth:`WarmRunner.close`
(before the reset that ends the use) came, it lets go of everything that use gave it, its forked run
included, and exits. So nothing a test run does, however many connections it makes or fds it passes, reaches
the next use: the next server is not started yet, and the address of the next use is not known. Each of
those exchanges has a deadline; a server that misses one is not used (the tests run cold, and the reset ends
it). The server never imports the repository's code and is not dumpable (no ptrace, no ``/proc/<pid>/mem``,
no fds), and the client checks the socket's peer is the server (its pid, started when the server did); a run
can only kill or stop the server, and then its own tests run cold.
"""

from __future__ import annotations

import asyncio
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
READY_SECONDS = 120.0  # imports (pytest's, the env's) on a loaded machine


class WarmRunner:
    """A server running in one sandbox for one use, and this process's end of its channel."""

    def __init__(self, pid: int, start_ticks: int, address: str, channel: HelperChannel) -> None:
        self.pid = pid
        self.start_ticks = (
            start_ticks  # when it started (clock ticks since boot): with the pid, what names it
        )
        self.address: str | None = address  # its one use's address, where the one connection goes
        self.import_seconds: float | None = None  # how long its imports took, once :meth:`ready` said so
        self._channel = channel

    async def alive(self, box: Sandbox) -> bool:
        """Whether the server still runs in ``box`` (not stopped, traced or a zombie): the process with its
        pid, started when it did. A test run can kill the server and fork until a process of its own gets
        the pid (4,194,304 pids go by in ~15 minutes here)."""
        found = await process_state(box, self.pid)
        return found is not None and found[0] in ("R", "S", "D") and found[1] == self.start_ticks

    async def ready(self, timeout: float = READY_SECONDS) -> bool:
        """Wait until the server has done its imports (:attr:`import_seconds`); False when it did not say so
        in time, or left (a client that connects earlier waits for it in any case)."""
        if self.import_seconds is not None:
            return True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while (line := await self._channel.receive(max(0.0, deadline - loop.time()))) is not None:
            verb, _, seconds = line.partition(" ")
            if verb == "ready":
                self.import_seconds = float(seconds)
                return True
            if verb == "failed":
                return False
        return False

    async def disarm(self) -> bool:
        """End the use now: the server lets go of everything it gave (its listener, connection, fds and
        forked run) and exits; True once it said so."""
        self.address = None
        try:
            self._channel.send("disarm 2")
        except OSError:
            return False
        while (line := await self._channel.receive(ARM_SECONDS)) is not None:
            if line == "disarmed 2":
                return True
        return False

    def close(self) -> None:
        """Let the server go: it reads the end of its channel, lets go of its use and exits (the reset that
        ends the use ends it anyway)."""
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
    """Launch a server in ``box`` (its Python must import pytest) for one use, a test run of the repository at
    ``repo`` (a run is cold where the server imported a module from it), armed: it listens on its address
    when this returns, and imports pytest on its own after that. Launch it where nothing of a use has run
    yet (right after a reset, or in a new sandbox). ``preload``: more modules to import once (the env's
    dependencies, never the repository's); ``env``: variables the test runs will have too (a start-up
    setting that differs makes a run cold). None when it cannot start there (a backend that keeps no
    processes, an env without pytest): the runs stay cold. The server answers ``armed 1`` once it listens
    (``failed 1 REASON`` where it cannot: the run's client then finds no server and runs cold)."""
    if not isinstance(box, KeepsProcesses):
        return None
    channel = await box.open_channel()
    address = f"swe-rl-warm-{secrets.token_hex(16)}"
    command = (
        f"SWE_RL_WARM_CHANNEL={channel.paths} SWE_RL_WARM_REPO={shlex.quote(repo)} "
        f"SWE_RL_WARM_PRELOAD={shlex.quote(','.join(preload))} "
        'exec python -c "$SWE_RL_WARM_SERVER" </dev/null 2>&1'
    )
    variables = {**(env or {}), "SWE_RL_WARM_SERVER": SERVER, "SWE_RL_WARM_SERVING": SERVING}
    try:
        channel.send(f"arm 1 {address}")  # waits in the FIFO: the server reads it before anything else
        result = await box.exec(f"cd / && {command}", timeout=timeout, env=variables)
    except BaseException:
        channel.close()
        raise
    channel.seal()  # the server has opened both FIFOs, or never will
    fields = result.output.strip().splitlines()[-1:] if result.returncode == 0 else []
    parts = fields[0].split() if fields else []
    if len(parts) != 2 or not parts[0].isdigit() or not parts[1].isdigit():
        channel.close()
        return None
    # it listens within milliseconds, long before the test run's client comes (which waits for it if not)
    return WarmRunner(int(parts[0]), int(parts[1]), address, channel)


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
