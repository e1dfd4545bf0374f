"""An instance's venv made from its version's shared venv: hard links, not copies, checked after the install.

The official harness builds one environment per (repo, version, setup commit) and installs each instance's
repo on top. Here the shared venv is built once; an instance's venv is a clone of it in which the package
files are hard links to the shared venv's (the bulk of the bytes, on disk once) and every file an install
or swe-rl itself rewrites in place is a copy of its own: ``bin/`` (shebangs are relocated), ``pyvenv.cfg``,
the files at the top of site-packages (``.pth``, egg-links, editable finders; not the extension modules there)
and the metadata directories (``.dist-info``/``.egg-info``, whose RECORD and direct_url.json change). An installer replaces a package's
files by writing new ones (a new inode); an install step that writes into a linked file in place would
change every venv sharing it, so :meth:`Clone.changed` compares each linked file with what it was when cloned
and fails the build loudly: the shared venv and the venvs cloned from it are then built again.

Finished venvs also share files by content across versions (:func:`share_venv_files`): a file changed in
place then reached every venv holding it, and those are built again too (:func:`holds_inode`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from swe_rl.envs.store.filestore import share_file
from swe_rl.errors import EnvBuildError

VENV_FILES = "venvfiles"  # under the cache root: the store of share_venv_files
_METADATA = (".dist-info", ".egg-info")
_REWRITTEN = (".pth", ".egg-link")


def _copied(rel: tuple[str, ...]) -> bool:
    """Whether the file at ``rel`` (parts relative to the venv) gets a copy of its own rather than a link."""
    if rel[0] == "bin" or len(rel) == 1 or rel[-1].endswith(_REWRITTEN):
        return True
    if "site-packages" not in rel:
        return False
    inside = rel[rel.index("site-packages") + 1 :]
    # at its top: .pth files, egg-links and editable finders, rewritten in place; not an extension module
    # (mypy's 74 MB `<hash>__mypyc.cpython-39-...so`), which an install replaces and never rewrites
    if len(inside) == 1:
        return not inside[0].endswith(".so")
    return inside[0].endswith(_METADATA)


@dataclass
class Clone:
    """A venv cloned from ``base``: what was linked, as it was, for :meth:`changed`."""

    base: Path
    dest: Path
    linked: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # rel -> (inode, size, mtime_ns)

    def changed(self) -> dict[str, int]:
        """The linked files changed in place since the clone (so in the shared venv): path -> inode."""
        changed = {}
        for rel, (ino, size, mtime) in self.linked.items():
            try:
                st = os.lstat(self.base / rel)
            except FileNotFoundError:
                continue  # the shared venv's file is gone: nothing of it was changed through this clone
            if st.st_ino == ino and (st.st_size, st.st_mtime_ns) != (size, mtime):
                changed[rel] = ino
        return changed

    def error(self, changed: dict[str, int]) -> EnvBuildError:
        """The build's failure for the ``changed`` files."""
        return EnvBuildError(
            f"the install wrote in place into {len(changed)} file(s) it shares with the env "
            f"{self.base.name} ({', '.join(sorted(changed)[:5])}); the envs holding them are built again"
        )


def clone_venv(base: Path, dest: Path) -> Clone:
    """``dest`` as a clone of the built venv ``base`` (same filesystem), its scripts pointed at ``dest``."""
    clone = Clone(base, dest)
    dest.mkdir(parents=True)
    for root, dirs, files in os.walk(base):
        here = Path(root)
        target = dest / here.relative_to(base)
        for name in dirs:
            src = here / name
            if src.is_symlink():
                os.symlink(os.readlink(src), target / name)
            else:
                (target / name).mkdir()
                shutil.copystat(src, target / name)
        for name in files:
            src, out = here / name, target / name
            rel = out.relative_to(dest)
            if src.is_symlink():
                os.symlink(os.readlink(src), out)
            elif _copied(rel.parts):
                shutil.copy2(src, out)
            else:
                os.link(src, out)
                st = os.lstat(src)
                clone.linked[str(rel)] = (st.st_ino, st.st_size, st.st_mtime_ns)
    rewrite_scripts(dest, base, dest)
    return clone


def share_venv_files(store: Path, venv: Path, *, linked_too: bool) -> int:
    """Link the files under a finished venv's ``lib/`` to the store's copy of each content (filestore.py):
    one copy of a file that several envs have (a package of two versions, two builds of one wheel).
    ``linked_too`` for a shared venv, whose package files are links into uv's cache; a clone's linked
    files are its shared venv's, shared already, so only its own copies are. Returns how many are links."""
    linked = 0
    for root, _, files in os.walk(venv / "lib"):
        for name in files:
            linked += share_file(store, Path(root) / name, linked_too=linked_too)
    return linked


def holds_inode(venv: Path, inodes: set[int]) -> bool:
    """Whether a file under ``venv/lib`` is one of ``inodes`` (a link to a file changed in place)."""
    for root, _, files in os.walk(venv / "lib"):
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                if os.lstat(os.path.join(root, name)).st_ino in inodes:
                    return True
    return False


def owners(venv: Path, rels: set[str]) -> set[str]:
    """The distributions whose RECORD lists one of ``rels`` (paths relative to ``venv``)."""
    names = set()
    for record in venv.glob("lib/python*/site-packages/*.dist-info/RECORD"):
        site = record.parent.parent
        for line in record.read_text(errors="replace").splitlines():
            listed = os.path.normpath(site / line.split(",", 1)[0])
            if os.path.relpath(listed, venv) in rels:
                names.add(record.parent.name.split("-", 1)[0])
                break
    return names


def rewrite_scripts(venv: Path, old: Path, new: Path) -> None:
    """Point the scripts in ``venv/bin`` that name ``old`` (their shebangs, activate) at ``new``."""
    before, after = str(old).encode(), str(new).encode()
    for script in (venv / "bin").iterdir():
        if script.is_symlink() or not script.is_file():
            continue
        data = script.read_bytes()
        if before in data[:4096]:
            script.write_bytes(data.replace(before, after))
    cfg = venv / "pyvenv.cfg"
    if cfg.is_file() and before in (text := cfg.read_bytes()):
        cfg.write_bytes(text.replace(before, after))


__all__ = [
    "VENV_FILES",
    "Clone",
    "clone_venv",
    "holds_inode",
    "owners",
    "rewrite_scripts",
    "share_venv_files",
]
