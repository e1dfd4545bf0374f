"""A process started by the spawner, driven from asyncio: pipes as streams, a pidfd for liveness."""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import signal
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


async def finish_in_thread(
    call: Callable[..., T], *args: Any, adopt: Callable[[T], Awaitable[None] | None]
) -> T:
    """``call(*args)`` in a thread. A thread cannot be stopped: cancelled, this waits for it to end (however
    often it is cancelled meanwhile), hands what it made to ``adopt`` (whose owner then undoes it, as on
    any failure) and raises the cancellation. So a cancelled caller knows everything the call made."""
    task = asyncio.ensure_future(asyncio.to_thread(call, *args))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        while not task.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(task)
        if not task.cancelled() and task.exception() is None:
            adopted = adopt(task.result())
            if adopted is not None:
                await adopted
        raise


class SpawnedProcess:
    """stdin/stdout/stderr streams of a process that is not our child (the spawner is its parent)."""

    def __init__(
        self,
        pid: int,
        stdin: asyncio.StreamWriter,
        stdout: asyncio.StreamReader,
        stderr: asyncio.StreamReader,
    ) -> None:
        self.pid = pid
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
        self._child: tuple[int, int] | None = None
        self._child_pidfd: int | None = None
        try:
            self._pidfd: int | None = os.pidfd_open(pid)
        except OSError:
            self._pidfd = None  # already gone

    @classmethod
    async def attach(cls, pid: int, stdin_fd: int, stdout_fd: int, stderr_fd: int) -> SpawnedProcess:
        loop = asyncio.get_running_loop()
        stdout = asyncio.StreamReader(limit=2**20)
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(stdout), os.fdopen(stdout_fd, "rb", 0)
        )
        stderr = asyncio.StreamReader(limit=2**20)
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(stderr), os.fdopen(stderr_fd, "rb", 0)
        )
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(stdin_fd, "wb", 0)
        )
        stdin = asyncio.StreamWriter(transport, protocol, None, loop)
        return cls(pid, stdin, stdout, stderr)

    @property
    def alive(self) -> bool:
        return self._pidfd is not None and not _exited(self._pidfd)

    def kill(self) -> None:
        if self._pidfd is not None and self.alive:
            with contextlib.suppress(ProcessLookupError, OSError):
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)

    async def wait(self, timeout: float = 5.0) -> None:
        """Until the process is gone (or ``timeout``)."""
        if self._pidfd is not None and self.alive:
            await all_exited([self._pidfd], time.monotonic() + timeout)

    def child(self) -> tuple[int, int]:
        """The pid of its only child (bwrap's: the sandbox's shell) and when that started (clock ticks since
        boot), read once and kept with a pidfd of it; ProcessLookupError when there is none, or it has exited
        since (its pid may be another process's then)."""
        if self._child is None:
            pid = only_child(self.pid)
            start = start_ticks(pid)
            pidfd = os.pidfd_open(pid)
            if start is None or start_ticks(pid) != start:  # the pidfd is of the process read
                os.close(pidfd)
                raise ProcessLookupError(pid)
            self._child, self._child_pidfd = (pid, start), pidfd
        if self._child_pidfd is None or _exited(self._child_pidfd):
            raise ProcessLookupError(self._child[0])
        return self._child

    def close(self) -> None:
        self.stdin.close()
        for fd in (self._pidfd, self._child_pidfd):
            if fd is not None:
                os.close(fd)
        self._pidfd = self._child_pidfd = None


def _exited(pidfd: int) -> bool:
    """Whether the process of ``pidfd`` has exited (its pidfd is readable then)."""
    return bool(select.select([pidfd], [], [], 0)[0])


async def all_exited(pidfds: list[int], deadline: float) -> None:
    """Until every process of ``pidfds`` has exited (a pidfd becomes readable then), or ``deadline``
    (time.monotonic())."""
    loop = asyncio.get_running_loop()
    waiting = []
    for fd in pidfds:
        done = loop.create_future()
        loop.add_reader(fd, _settle, loop, fd, done)
        waiting.append(done)
    try:
        if waiting:
            await asyncio.wait(waiting, timeout=max(0.0, deadline - time.monotonic()))
    finally:
        for fd in pidfds:
            loop.remove_reader(fd)


def _settle(loop: asyncio.AbstractEventLoop, fd: int, done: asyncio.Future[None]) -> None:
    loop.remove_reader(fd)
    if not done.done():
        done.set_result(None)


def only_child(pid: int) -> int:
    """The pid of ``pid``'s only (or first) child; ProcessLookupError when it has none."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        children = []
    if not children:
        raise ProcessLookupError(pid)
    return int(children[0])


def state_and_start(pid: int) -> tuple[str, int] | None:
    """``pid``'s state letter and when it started, in clock ticks since boot (/proc/<pid>/stat, read after
    the command name, which may hold anything); None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return fields[0], int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def start_ticks(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot; None when it is gone."""
    found = state_and_start(pid)
    return found[1] if found is not None else None


def boot_ticks() -> int:
    """Now, in the unit of :func:`start_ticks`."""
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * os.sysconf("SC_CLK_TCK"))


def kill_started_since(pids: Iterable[int], since: int) -> None:
    """SIGKILL each of ``pids`` that started at or after ``since`` (a timed-out command's processes,
    ``setsid`` ones included, and nothing that was running before it)."""
    for pid in pids:
        started = start_ticks(pid)
        if started is not None and started >= since:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
