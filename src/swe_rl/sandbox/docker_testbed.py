"""The docker backend's testbed volume: what a testbed takes on a tmpfs, the volume's bounds, and the testbed as
a tar (sandbox/docker.py mounts the volume at the workdir and fills it)."""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from swe_rl.sandbox.base import Limits

_PAGE = 4096


def tar_usage(tar: tarfile.TarFile) -> tuple[int, int]:
    """What the files of ``tar`` take on a tmpfs: bytes (each file's whole pages; a symlink longer than
    fits in its inode, one page) and inodes (hard links share one)."""
    size = inodes = 0
    for member in tar:
        if member.islnk():
            continue
        inodes += 1
        if member.isfile():
            size += -(-member.size // _PAGE) * _PAGE
        elif member.issym() and len(member.linkname) >= 128:
            size += _PAGE
    return size, inodes


class _Chunks(io.RawIOBase):
    """A stream of byte chunks (the engine's archive) as a file, for tarfile's streaming mode."""

    def __init__(self, chunks: Any) -> None:
        self._chunks, self._left = iter(chunks), b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._left:
            self._left = next(self._chunks, b"")
            if not self._left:
                return 0
        n = min(len(buffer), len(self._left))
        buffer[:n], self._left = self._left[:n], self._left[n:]
        return n


def bounded_testbed(usage: tuple[int, int], limits: Limits) -> dict[str, str]:
    """The local driver's options of a testbed tmpfs: the testbed's own ``usage`` (bytes, inodes; a tmpfs
    directory takes no page) plus the limits' disk and inodes, what the commands may add, as on ns."""
    size = usage[0] + limits.disk_mb * 1024 * 1024
    inodes = usage[1] + limits.inodes
    return {"type": "tmpfs", "device": "tmpfs", "o": f"size={size},nr_inodes={inodes},nosuid,nodev"}


def image_testbed_usage(client: Any, labels: dict[str, str]) -> Callable[[str, str], tuple[int, int]]:
    """A function giving what an image's testbed (at ``workdir``) takes on a tmpfs (:func:`tar_usage`), read
    from its tar (streamed from a container created for it, never started), once per image and workdir."""
    known: dict[tuple[str, str], tuple[int, int]] = {}

    def usage(image: str, workdir: str) -> tuple[int, int]:
        key = (client.images.get(image).id, workdir)
        if key not in known:
            probe = client.containers.create(image, command=["true"], labels=labels, network_mode="none")
            try:
                chunks, _ = client.api.get_archive(probe.id, workdir)
                with tarfile.open(fileobj=io.BufferedReader(_Chunks(chunks)), mode="r|") as tar:
                    known[key] = tar_usage(tar)
            finally:
                probe.remove(force=True)
        return known[key]

    return usage


def testbed_tar(testbed: Path, workdir: str) -> bytes:
    """The testbed as root's files (the cached copy belongs to the ns backend's sandbox uid)."""

    def as_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        return info

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(os.path.realpath(testbed), arcname=workdir.lstrip("/"), filter=as_root)  # packed: a link
    return buf.getvalue()
