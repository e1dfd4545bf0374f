"""Bounded output capture shared by the backends: keep the head and the tail, count the rest."""

from __future__ import annotations

import os
import time

from swe_rl.sandbox.base import ExecResult


class CappedBuffer:
    """Collects bytes up to ``cap``: the first half and the last half are kept, the middle counted.

    Memory stays O(cap) whatever a command prints, so a 100 MB output cannot exhaust the server.
    """

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0

    @classmethod
    def from_file(cls, fd: int, cap: int) -> CappedBuffer:
        """The head and tail of a file's contents, read with at most ``cap`` bytes in memory."""
        buf = cls(cap)
        buf.total = os.fstat(fd).st_size
        head = min(buf.total, cap // 2) if buf.total > cap else buf.total
        buf._head += os.pread(fd, head, 0)
        if buf.total > cap:
            keep = cap - cap // 2
            buf._tail += os.pread(fd, keep, buf.total - keep)
        return buf

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.cap // 2 - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self._tail += chunk
            keep = self.cap - self.cap // 2
            if len(self._tail) > keep:
                del self._tail[: len(self._tail) - keep]

    def text(self) -> str:
        if self.total <= self.cap:
            data = bytes(self._head + self._tail)
        else:
            omitted = self.total - len(self._head) - len(self._tail)
            marker = f"\n[swe-rl: output capped at {self.cap} bytes; {omitted} bytes omitted]\n".encode()
            data = bytes(self._head) + marker + bytes(self._tail)
        return data.decode("utf-8", "replace")

    def result(self, returncode: int, *, timed_out: bool, started: float) -> ExecResult:
        """The ExecResult of a command that wrote into this buffer (exit 124 when it timed out)."""
        return ExecResult(
            returncode=124 if timed_out else returncode,
            output=self.text(),
            timed_out=timed_out,
            duration=time.monotonic() - started,
            output_bytes=self.total,
        )
