"""Disk use of directory trees as ``du -s`` counts it: allocated blocks, each hard-linked file once."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path

from pydantic import BaseModel, Field


class DiskUsage(BaseModel):
    """Bytes allocated on disk, in all and per part (the parts add up to the total)."""

    total: int = Field(description="Bytes of every part together; a file hard-linked into two counts once.")
    parts: dict[str, int] = Field(
        default_factory=dict,
        description="Bytes per part, in the order measured; a file linked from two parts counts in the first.",
    )


def disk_usage(parts: Mapping[str, Path]) -> DiskUsage:
    """The blocks (``st_blocks * 512``) under each path, counting each (device, inode) once over all of them.

    What ``du -s -x -B1 A B ...`` prints in one invocation: symbolic links are not followed (the link itself is
    counted), a missing path counts 0, an unreadable directory counts itself but not what it holds, and a
    filesystem mounted below a path (a packed image's mount, packing.py) is not entered: its image file is
    what it takes.
    """
    seen: set[tuple[int, int]] = set()
    sizes: dict[str, int] = {}
    for name, root in parts.items():
        total = 0
        for st in _entries(root):
            if st.st_nlink > 1 and not stat.S_ISDIR(st.st_mode):
                if (st.st_dev, st.st_ino) in seen:
                    continue
                seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512
        sizes[name] = total
    return DiskUsage(total=sum(sizes.values()), parts=sizes)


def _entries(root: Path) -> Iterator[os.stat_result]:
    """``lstat`` of ``root`` and of everything under it, without following symbolic links."""
    try:
        top = root.lstat()
    except FileNotFoundError:
        return
    yield top
    if not stat.S_ISDIR(top.st_mode):
        return
    device = top.st_dev
    pending = [str(root)]
    while pending:
        try:
            with os.scandir(pending.pop()) as it:
                for entry in it:
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:  # removed while we walk
                        continue
                    if st.st_dev != device:
                        continue  # a mount point: another filesystem
                    yield st
                    if stat.S_ISDIR(st.st_mode):
                        pending.append(entry.path)
        except (PermissionError, FileNotFoundError):
            continue
