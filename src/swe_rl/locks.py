"""Locks between processes on one host, on lock files: who builds an env, mounts an image, packs a cache.

:func:`exclusive` is the ``filelock`` library's lock (``flock(2)`` underneath). :class:`Flock` is ``flock(2)``
by hand, kept for the two things that library cannot do: a shared lock (readers beside readers, a writer
alone: builds beside builds, a pack alone, envs/store/packing.py's ``pack_lock``) and a lock on a directory (a pack
store's work directory, locked while in use so that one a killed build left is known by its free lock:
envs/store/gitpacks.py). Both are flocks, so each sees the other's (and any other program's) on the same file.

A lock file is made where missing and never removed: every waiter locks the same inode.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout


@contextmanager
def exclusive(path: Path, *, blocking: bool = True) -> Iterator[bool]:
    """Hold an exclusive lock on the file ``path`` (made if missing) for the with block; yields True once held,
    waiting as long as another holds it. With ``blocking=False`` it yields False at once instead."""
    # thread_local=False: the hold is the process's, as a flock is, whichever thread lets go
    lock = FileLock(path, thread_local=False)
    try:
        lock.acquire(blocking=blocking)
    except Timeout:
        yield False
        return
    try:
        yield True
    finally:
        lock.release()


class Flock:
    """``flock(2)`` on a file (made if missing) or, with ``directory``, on a directory; ``shared`` or
    exclusive. What ``filelock`` cannot do (see the module's text); a with block holds it."""

    def __init__(self, path: Path, *, shared: bool = False, directory: bool = False) -> None:
        self.path = path
        self.shared = shared
        self.directory = directory
        self._fd: int | None = None

    def acquire(self, *, blocking: bool = True) -> bool:
        """Take it, waiting while another holds it in a mode that excludes this one; with ``blocking=False``,
        False at once instead. OSError when ``path`` cannot be opened (a directory that is gone)."""
        flags = os.O_RDONLY | os.O_DIRECTORY if self.directory else os.O_WRONLY | os.O_CREAT | os.O_APPEND
        fd = os.open(self.path, flags, 0o666)
        mode = fcntl.LOCK_SH if self.shared else fcntl.LOCK_EX
        try:
            fcntl.flock(fd, mode if blocking else mode | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return True

    def release(self) -> None:
        """Let go and close the file; nothing when not held."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def __enter__(self) -> Flock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


__all__ = ["Flock", "exclusive"]
