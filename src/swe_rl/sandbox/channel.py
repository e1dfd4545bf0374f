"""A private line channel between this process and one helper process an ns sandbox keeps (a warm test runner).

Two FIFOs in the sandbox's ctl directory (ctl_files.py: host root's, which the sandbox can neither list nor
create files in), with random names: the helper opens them by the names it was started with (the commands
one to read, the answers one to write), and :meth:`FifoChannel.seal` then unlinks both names, so no process
of the sandbox can open them again, whatever it learns (the helper's memory, which a forked child has, holds
the names). What is left are the helper's fds (a non-dumpable helper's fds are closed to the sandbox's other
processes) and this process's, which hold each FIFO open for reading and writing: neither side ever sees an
end of file while this one lives, and when this one closes, the helper reads the end of its commands.

Every read here has a deadline (:meth:`FifoChannel.receive`): a helper that does not answer is not waited for.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets

from swe_rl.sandbox.ctl_files import CTL

_MAX_LINE = 1 << 16


class FifoChannel:
    """Commands to one helper, answers from it, a line each (see the module's docstring)."""

    def __init__(self, ctl: int) -> None:
        """``ctl``: an fd of the sandbox's ctl directory, as the host sees it (duplicated: the caller keeps its own)."""
        self._ctl: int | None = os.dup(ctl)
        self._names = (secrets.token_hex(16), secrets.token_hex(16))
        self._fds: list[int] = []
        try:
            for name, mode in zip(
                self._names, (0o604, 0o602), strict=True
            ):  # the helper reads one, writes one
                os.mkfifo(name, mode, dir_fd=self._ctl)
                os.chmod(name, mode, dir_fd=self._ctl)  # past the umask
                self._fds.append(os.open(name, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=self._ctl))
        except OSError:
            self.close()
            raise
        self._buffer = b""

    @property
    def paths(self) -> str:
        """``COMMANDS:ANSWERS``, the FIFOs' paths inside the sandbox, for the helper to open before :meth:`seal`."""
        return f"{CTL}/{self._names[0]}:{CTL}/{self._names[1]}"

    def seal(self) -> None:
        """Unlink both names: from now on only the fds already open reach the channel."""
        if self._ctl is None:
            return
        for name in self._names:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=self._ctl)
        os.close(self._ctl)
        self._ctl = None

    def send(self, line: str) -> None:
        """Write one command (OSError when the channel is closed, or full: the helper reads nothing)."""
        if not self._fds:
            raise OSError("the channel is closed")
        data = line.encode() + b"\n"
        if os.write(self._fds[0], data) != len(data):
            raise OSError("the helper's channel is full")

    async def receive(self, timeout: float) -> str | None:
        """The helper's next answer line; None when none came within ``timeout`` seconds (or it is closed)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while b"\n" not in self._buffer:
            if not self._fds or (left := deadline - loop.time()) <= 0:
                return None
            try:
                data = os.read(self._fds[1], 4096)
            except BlockingIOError:
                if not await _readable(self._fds[1], left):
                    return None
                continue
            self._buffer = (self._buffer + data)[-_MAX_LINE:]
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode(errors="replace")

    def close(self) -> None:
        """Close this end (the helper reads the end of its commands and leaves); idempotent."""
        self.seal()
        fds, self._fds = self._fds, []
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)


async def _readable(fd: int, timeout: float) -> bool:
    """Whether ``fd`` became readable within ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    ready = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, wake)
    try:
        await asyncio.wait_for(ready, timeout)
    except TimeoutError:
        return False
    finally:
        loop.remove_reader(fd)
    return True


__all__ = ["FifoChannel"]
