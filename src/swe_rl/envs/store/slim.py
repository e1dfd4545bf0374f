"""What a compiled repository's build leaves in its testbed that no test reads, taken out before the
testbed's files are shared (gitpacks.share_files).

An in-place build (``setup.py develop``, ``build_ext --inplace``: scikit-learn, astropy, matplotlib) leaves
two things behind. The compiler's object files under ``build/temp.*`` (60-86 MB in a scikit-learn testbed):
only an incremental rebuild reads them, and without them a rebuild compiles every extension again. And the
extension modules themselves, with the debug sections and build-id note that ``-g`` and the linker put in
(three quarters of a scikit-learn module's bytes): the debug sections name the directory they were built
in, so the same source built for two instances is never the same bytes. The interpreter reads neither.
Stripped of them (``strip --strip-debug``, dates kept so a build's up-to-date checks see what they saw),
a module built from the same source with the same tools is the same file in every testbed, and
share_files keeps it once.

Only files git does not track are touched: a repository's own ``build/`` or committed binaries stay as
they are.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import subprocess
from pathlib import Path

from swe_rl.gitutil import git

log = logging.getLogger(__name__)

STRIP = ["--strip-debug", "--remove-section=.note.gnu.build-id", "--preserve-dates"]
ELF = b"\x7fELF"
BATCH = 200  # files per strip call


def untracked(testbed: Path) -> list[str]:
    """The testbed's files git does not track, ignored ones included (paths relative to it)."""
    out = git(["ls-files", "-z", "--others"], testbed)
    return [p for p in out.split("\0") if p]


def slim_build_output(testbed: Path) -> int:
    """Remove the untracked object files under ``build/temp.*`` and strip the untracked ELF extension
    modules of debug sections; returns the bytes freed."""
    freed = 0
    paths = untracked(testbed)
    for rel in paths:
        parts = rel.split("/")
        if len(parts) > 2 and parts[0] == "build" and parts[1].startswith("temp."):
            freed += _file_size(testbed / rel)
            (testbed / rel).unlink(missing_ok=True)
    for temp in (testbed / "build").glob("temp.*"):
        _remove_empty_dirs(temp)
    modules = [testbed / rel for rel in paths if rel.endswith(".so") and _is_elf(testbed / rel)]
    if modules and shutil.which("strip") is None:
        log.warning(
            "no strip (binutils) on this host: %d extension modules keep their debug sections", len(modules)
        )
        modules = []
    for i in range(0, len(modules), BATCH):
        batch = modules[i : i + BATCH]
        before = sum(map(_file_size, batch))
        proc = subprocess.run(
            ["strip", *STRIP, *map(str, batch)], capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:  # a module strip cannot read is left as it was
            log.warning("strip: %s", proc.stderr.strip()[:400])
        freed += before - sum(map(_file_size, batch))
    return freed


def _is_elf(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return fh.read(4) == ELF
    except OSError:
        return False


def _remove_empty_dirs(top: Path) -> None:
    """``top`` and the directories under it that hold no file any more, deepest first."""
    if not top.is_dir() or top.is_symlink():
        return
    for sub in sorted((p for p in top.rglob("*") if p.is_dir() and not p.is_symlink()), reverse=True):
        if not any(sub.iterdir()):
            sub.rmdir()
    if not any(top.iterdir()):
        top.rmdir()


def _file_size(path: Path) -> int:
    """Bytes of a regular file (0 for anything else, or nothing)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return 0
    return st.st_size if stat.S_ISREG(st.st_mode) else 0


__all__ = ["slim_build_output", "untracked"]
