"""Small file helpers shared by every layer: atomic writes so a crash never leaves half a file."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temp file in the same directory and ``os.replace``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o644)  # mkstemp makes 0600; results and reports are meant to be shared
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def exchange(a: Path, b: Path) -> None:
    """Swap two paths in one step (``renameat2(RENAME_EXCHANGE)``): neither is ever missing. OSError if not."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"renameat2({a}, {b}, RENAME_EXCHANGE): {os.strerror(err)}")


def thaw_link(link: Path) -> bool:
    """Replace ``link``, a symbolic link to a directory (a packed tree: envs/store/packing.py), by a copy of that
    directory: names, bytes, modes, owners, mtimes and symbolic links as they are. The copy is made beside it
    and exchanged with the link in one step, so the path always leads to the same files. False when ``link`` is
    not a link (any more)."""
    import shutil

    if not link.is_symlink():
        return False
    copy = Path(tempfile.mkdtemp(dir=link.parent, prefix=f".{link.name}{_THAW}"))
    try:
        copy.rmdir()
        shutil.copytree(link, copy, symlinks=True, copy_function=_copy_owned)
        for here, dirs, _ in os.walk(copy):
            for name in dirs:  # files were given their owners as they were copied
                rel = Path(here).relative_to(copy) / name
                _own(copy / rel, os.lstat(link / rel))
        _own(copy, os.stat(link))
        exchange(copy, link)
        os.unlink(copy)  # the link, now at the copy's name
        return True
    finally:
        if copy.is_dir() and not copy.is_symlink():
            shutil.rmtree(copy, ignore_errors=True)


_THAW = ".thaw-"


def thaw_leftovers(directory: Path) -> list[tuple[str, Path]]:
    """What :func:`thaw_link` calls killed mid-way (SIGKILL, a crash) left in ``directory``: a half copy, or the
    link itself when the kill came between the exchange and its removal; each with the name of the link it was
    for. Whoever removes one (:func:`remove_leftover`) must first hold what that link's thaws hold."""
    found = sorted(directory.glob(f".*{_THAW}*")) if directory.is_dir() else []
    return [(p.name[1:].rsplit(_THAW, 1)[0], p) for p in found]


def remove_leftover(path: Path) -> None:
    """Remove a directory tree, or a link (never what it leads to)."""
    import shutil

    if path.is_symlink() or not path.is_dir():
        path.unlink()
    else:
        shutil.rmtree(path)


def _copy_owned(src: str, dst: str) -> None:
    import shutil

    shutil.copy2(src, dst, follow_symlinks=False)
    _own(Path(dst), os.lstat(src))


def _own(path: Path, st: os.stat_result) -> None:
    os.lchown(path, st.st_uid, st.st_gid)
