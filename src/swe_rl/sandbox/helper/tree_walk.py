"""Emptying a directory tree a sandbox made, however deep: the reset worker (reset_worker.py) empties the
sandbox's ``/tmp``, ``/dev/shm`` and ``$HOME`` with it.

A command can nest directories as deep as its disk allows. A recursive walk (``shutil.rmtree`` on this
Python, or one of our own) stops at the interpreter's recursion limit (~1,000 levels), and one that names
whole paths stops at PATH_MAX (4,096 bytes: 1,500 levels of ``d/`` are under it, of ``deep/`` over). So
:func:`empty_tree` keeps a stack of its own and works by names relative to one open directory: it goes down
with ``openat(name)`` and back up with ``openat("..")``, and checks that each step reached the directory it
expects (device and inode), so a directory moved meanwhile is an error, never a walk out of the tree.

Runs in the spawner's helper (``python -S``, this folder first on its path): the standard library only.
"""

from __future__ import annotations

import os
import stat


class _Dir:
    """A directory on the way down: its name in its parent, its path, (device, inode), the names in it left
    to look at, and whether something under it is left."""

    def __init__(self, name: str, path: str, ident: tuple[int, int], names: list[str]) -> None:
        self.name, self.path, self.ident, self.names, self.kept = name, path, ident, names, False


def empty_tree(top: int, path: str, skip: frozenset[str] = frozenset()) -> bool:
    """Remove everything under the directory open as ``top`` (which stays open, and stays). ``path`` names it,
    only to compare with ``skip``: a directory whose path is there (a mount point of the same filesystem) or
    that is on another device (a mount) is left, and so are its parents. True when something was left.
    Raises OSError, also when a directory was moved during the walk."""
    dev = os.fstat(top).st_dev
    fd = os.dup(top)
    stack = [_Dir("", path.rstrip("/"), (dev, os.fstat(fd).st_ino), os.listdir(fd))]
    try:
        while True:
            here = stack[-1]
            if here.names:
                name = here.names.pop()
                sub = f"{here.path}/{name}"
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if sub in skip or st.st_dev != dev:
                    here.kept = True
                elif stat.S_ISDIR(st.st_mode):
                    fd = _step(fd, name, (st.st_dev, st.st_ino))
                    stack.append(_Dir(name, sub, (st.st_dev, st.st_ino), os.listdir(fd)))
                else:
                    os.unlink(name, dir_fd=fd)
                continue
            if len(stack) == 1:
                return here.kept
            stack.pop()
            fd = _step(fd, "..", stack[-1].ident)
            if here.kept:
                stack[-1].kept = True
            else:
                os.rmdir(here.name, dir_fd=fd)
    finally:
        os.close(fd)


def _step(fd: int, name: str, expected: tuple[int, int]) -> int:
    """The directory ``name`` of the one open as ``fd`` (closed), which must be ``expected`` (device, inode)."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    new = os.open(name, flags, dir_fd=fd)
    st = os.fstat(new)
    if (st.st_dev, st.st_ino) != expected:
        os.close(new)
        raise OSError(f"a directory was moved while its tree was being removed ({name})")
    os.close(fd)
    return new
