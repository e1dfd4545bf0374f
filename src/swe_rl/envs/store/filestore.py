"""Files shared by content: each regular file of a finished tree becomes a hard link to one copy per content.

A store is a directory of ``<sha256>.<mode>`` files (under two-character subdirectories). The first tree
that has a content gives the store its copy (its own inode, linked in); later trees' files with the same
bytes and mode are replaced by links to it. Only for trees nothing writes into in place again: sandboxes
see them through an overlay (a write copies the file up) or copy them.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
from pathlib import Path


def file_sha256(path: Path) -> str:
    """The hex sha256 of a file's bytes, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def share_file(store: Path, path: Path, *, linked_too: bool = False) -> int:
    """Make ``path`` a link to the store's copy of its content (1), or leave it (0): not a regular file,
    empty, or already linked elsewhere unless ``linked_too`` (a venv's files are links into uv's cache)."""
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode) or st.st_size == 0 or (st.st_nlink > 1 and not linked_too):
        return 0  # an empty file: a link saves no block (and django's thousands of them would fill one inode)
    # the owner is not in the name: a testbed is given to the sandboxes' uid (identity.own_testbed), links too
    name = f"{file_sha256(path)}.{stat.S_IMODE(st.st_mode):o}"
    kept = store / name[:2] / name
    try:
        present: int | None = os.stat(kept).st_ino
    except FileNotFoundError:
        present = None
    if present == st.st_ino:
        return 0  # the store's copy already
    if present is None:
        kept.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            os.link(path, kept)  # this file is the store's copy from now on
            return 1
    temp = path.with_name(f".{path.name}.swe-rl-link")
    try:
        os.link(kept, temp)
    except OSError as exc:
        if exc.errno != errno.EMLINK:
            raise
        # the store's copy has as many links as the filesystem allows (65,000 on ext4): this file is the
        # store's copy from now on; the links made so far keep the old one
        fresh = kept.with_name(f".{kept.name}.{os.getpid()}.new")
        with contextlib.suppress(FileNotFoundError):
            fresh.unlink()  # left by a build that was killed here
        os.link(path, fresh)
        os.replace(fresh, kept)
        return 1
    os.replace(temp, path)
    return 1


__all__ = ["file_sha256", "share_file"]
