"""The ctl directory of an ns sandbox: files of host root's through which a command's output (and a file that
write_file passes in) goes between this process and the sandbox, out of the commands' reach (see ns.py)."""

from __future__ import annotations

import os

from swe_rl.sandbox.shell import FILE_CAP

CTL = "/run/ctl"  # the per-command output files, inside the sandbox
# The ctl tmpfs holds the output files (a command that prints more gets "No space left on device")
# and the files write_file passes in; its pages count against the sandbox's memory limit.
CTL_BYTES = 3 * FILE_CAP


def create_ctl_file(ctl: int, name: str, mode: int) -> int:
    """A new file of host root's in the ctl directory; the mode lets the sandbox write or read it."""
    fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=ctl)
    os.fchmod(fd, mode)  # past the umask
    return fd


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def read_all(fd: int, size: int) -> bytes:
    chunks, offset = [], 0
    while offset < size and (chunk := os.pread(fd, min(size - offset, 1 << 20), offset)):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)
