"""Git objects shared between the testbeds of one repository, with no object of a later commit in any.

A testbed holds the history of its base commit and nothing after it (testbed.py). Sharing one object store
per repository would hand every testbed the history of all the others, later fixes included. Instead each
base commit ``b`` that is built gets one pack of the objects reachable from ``b`` but not from ``p``, the
latest base commit built before it that is an ancestor of ``b`` (all of them when there is none). The
testbed of ``b`` hard-links the packs of ``b``, ``p``, ``p``'s own parent and so on: every object in them is
reachable from ``b`` (each of those commits is an ancestor of ``b``), and together they hold its whole
history. A repository's history is then on disk about once, however many instances are built from it.

Anchors keep it so when builds come out of date order or a chain is long. A base with no built ancestor used to
get its whole history in one pack, and so did the base after a cut chain: a second copy of the history each time
(django's is ~160 MB; the 2.22 GiB of packs of a seeded random sample of 100 Verified instances, built in two
runs, held 16 whole histories for 11 repositories: 0.87 GiB of repeats). Now such a base chains onto its
*anchor*: the commit at the last multiple of :data:`ANCHOR_EVERY` below it on its first-parent line, counted from
the root. An anchor is packed like a base onto the anchor below its own (no testbed uses it alone), so what a
base's pack repeats of another's is at most the history of :data:`ANCHOR_EVERY` first-parent commits, and an
anchor's chain has one pack per such step (django: up to 15). Every anchor of a base is its ancestor: no object
of a later commit reaches a testbed through one.

Layout under ``<cache>/gitpacks/<digest of the source>/``: one directory per base commit, holding its pack
(``pack-*.pack`` and ``.idx``) and ``parent`` (the commit whose packs come next, or empty). Directories are
written whole and renamed into place, so a crash leaves none half made. A chain is cut at :data:`MAX_PACKS`
packs (git reads every pack's index on a lookup): the next base chains onto its anchor (below) instead.

The files of the testbeds are shared too, by content: :func:`share_files` links each file of a finished
testbed to the repository's copy of the same bytes (``files/`` beside the packs).

Builds in date order share the most: a base commit built before its ancestors cannot use their packs, as
theirs would then contain its future (``env build`` builds each repository's instances oldest first).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from swe_rl.envs.store.filestore import share_file
from swe_rl.errors import InfraError
from swe_rl.fileio import remove_leftover, thaw_leftovers, thaw_link
from swe_rl.gitutil import git, git_into
from swe_rl.locks import Flock, exclusive

MAX_PACKS = 32
ANCHOR_EVERY = 2048  # first-parent commits from one anchor to the next (module docstring)
PACK_FILES = (".pack", ".idx", ".rev", ".promisor")  # .promisor: blobs the source lacked are promised
_THAW_LOCK = ".thaw.lock"  # held by a store's thaws (PackStore._thaw)
_MAKE_LOCK = ".make.lock"  # held while a make's work directory is made and locked (PackStore._work_dir)
_WORK = ".tmp-"  # the prefix of a make's work directory


class PackStore:
    """The shared packs of one repository source."""

    def __init__(self, root: Path, source: str, *, anchor_every: int = ANCHOR_EVERY) -> None:
        self.source = source
        self.dir = root / "gitpacks" / hashlib.sha256(source.encode()).hexdigest()[:16]
        self.anchor_every = anchor_every

    def usable(self) -> bool:
        """Whether packs can be made from the source: a local repository, not shallow, all objects there."""
        path = Path(self.source)
        if not path.is_dir():
            return False  # a URL: the testbed fetches what it needs instead
        try:
            shallow = git(["rev-parse", "--is-shallow-repository"], path).strip() == "true"
        except InfraError:
            return False
        borrowed = [path / d / "objects" / "info" / "alternates" for d in (".", ".git")]
        return not shallow and not any(p.exists() for p in borrowed)  # packs must hold what it borrows

    def chain(self, commit: str) -> list[Path]:
        """The pack files (:data:`PACK_FILES`) that hold the history of ``commit``, made now if need be.
        InfraError when the source cannot make them (it lacks a commit or a tree)."""
        if not self._built(commit):
            anchor = self._anchor(commit)
            parent = self._nearest_built_ancestor(commit)  # the anchor, or a base built since nearer to it
            if parent is None or len(self._walk(parent)) >= MAX_PACKS:
                parent = anchor
            self._make(commit, parent)
        files: list[Path] = []
        for link in self._walk(commit):
            self._thaw(self.dir / link)
            files += sorted(p for p in (self.dir / link).iterdir() if p.suffix in PACK_FILES)
        return files

    def _thaw(self, packs: Path) -> None:
        """A commit's packs that `env pack` put into an image (their path a link into it) copied back out once, so
        this and later testbeds hard-link them again instead of copying them each (the image holds the same bytes:
        the next `env pack --merge` stores them once)."""
        if not packs.is_symlink():
            return
        with exclusive(self.dir / _THAW_LOCK):
            thaw_link(packs)  # False: another build did it while this one waited

    def _built(self, commit: str) -> bool:
        return (self.dir / commit / "parent").is_file()

    def _anchor(self, commit: str) -> str | None:
        """The anchor below ``commit`` (module docstring), its packs made now if need be; None when ``commit`` is
        within the first :attr:`anchor_every` commits of its first-parent line."""
        source = Path(self.source)
        depth = int(git(["rev-list", "--first-parent", "--count", commit], source))
        at = (depth - 1) // self.anchor_every * self.anchor_every
        if at == 0:
            return None
        anchor = git(
            ["rev-list", "--first-parent", f"--skip={depth - at}", "-n", "1", commit], source
        ).strip()
        if not self._built(anchor):
            self._make(anchor, self._anchor(anchor))
        return anchor

    def _walk(self, commit: str) -> list[str]:
        """``commit`` and the commits whose packs follow it."""
        out = [commit]
        while parent := (self.dir / out[-1] / "parent").read_text().strip():
            if parent in out or not self._built(parent):
                raise InfraError(f"the pack chain of {commit[:12]} in {self.dir} is broken at {parent[:12]}")
            out.append(parent)
        return out

    def _nearest_built_ancestor(self, commit: str) -> str | None:
        if not self.dir.is_dir():
            return None
        built = {d.name for d in self.dir.iterdir() if self._built(d.name)}
        if not built:
            return None
        # newest first (committer date): the first built one is the nearest
        for ancestor in git(["rev-list", commit], Path(self.source)).split():
            if ancestor in built and ancestor != commit:
                return ancestor
        return None

    def _make(self, commit: str, parent: str | None) -> None:
        with self._work_dir() as work:
            wanted = f"{commit}\n" + (f"^{parent}\n" if parent else "")
            try:
                self._pack(wanted, work)
            except InfraError:
                if not self._lacks_only_blobs(wanted):
                    raise
                # a partial snapshot: what it has, and git told that the blobs it lacks are promised
                name = self._pack(wanted, work, "--missing=allow-any")
                (work / f"{name}.promisor").write_text("")
            (work / "parent").write_text(parent or "")
            for path in work.iterdir():
                os.chmod(path, 0o444)
            try:
                os.rename(work, self.dir / commit)
            except OSError:
                if not self._built(commit):
                    raise  # not another build's finished copy of the same packs

    @contextmanager
    def _work_dir(self) -> Iterator[Path]:
        """A new hidden directory in the store to make packs in, locked (flock) while in use, so that one a
        killed make left is known by its free lock (:func:`drop_leftovers`). It is made and locked under the
        store's lock, which that cleanup takes too: it never sees one between the two."""
        self.dir.mkdir(parents=True, exist_ok=True)
        with exclusive(self.dir / _MAKE_LOCK):
            work = Path(tempfile.mkdtemp(dir=self.dir, prefix=_WORK))
            held = Flock(work, directory=True)
            held.acquire()
        try:
            yield work
        finally:
            shutil.rmtree(work, ignore_errors=True)  # gone when renamed into place
            held.release()

    def _pack(self, wanted: str, work: Path, *extra: str) -> str:
        """Pack ``wanted`` into ``work`` and index it there; returns the files' name (``pack-<hash>``).
        The pack comes out on stdout: written in place, pack-objects keeps its temporary file in the
        source's own object store and leaves it there when it fails (380 MB per build of a partial
        matplotlib snapshot)."""
        raw = work / "incoming.pack"
        git_into(
            ["pack-objects", "--revs", "--stdout", "-q", "--delta-base-offset", *extra],
            Path(self.source),
            raw,
            input=wanted,
        )
        name = "pack-" + git(["index-pack", str(raw)], work).strip()
        raw.rename(work / f"{name}.pack")
        (work / "incoming.idx").rename(work / f"{name}.idx")
        return name

    def _lacks_only_blobs(self, wanted: str) -> bool:
        """Whether the source has every commit and tree of ``wanted``, so a pack without the blobs it lacks
        still holds the whole history (a snapshot that leaves out large files)."""
        try:
            listing = git(
                ["rev-list", "--objects", "--filter=blob:none", "--missing=print", "--stdin"],
                Path(self.source),
                input=wanted,
            )
        except InfraError:
            return False  # a commit is missing
        return not any(line.startswith("?") for line in listing.splitlines())


SHARED_FILES = "swe-rl-shared-files"  # in a testbed's .git: its files were linked (share_files)


def is_shared(testbed: Path) -> bool:
    """Whether :func:`share_files` has run on this testbed (it is finished: nothing changes it again)."""
    return (testbed / ".git" / SHARED_FILES).exists()


def share_files(store: Path, testbed: Path) -> int:
    """Replace each regular file of a finished testbed (outside ``.git``) by a hard link to the store's copy
    of the same content and mode (the first testbed that has it gives it). Returns how many files
    are links now.

    Only for a testbed nothing writes into again: each has one install run, before this, and sandboxes see it
    through an overlay (a write copies the file up) or copy it. Git is told to compare only a file's size and
    whole-second mtime (``core.checkStat minimal``; see :func:`stat_minimal`), so ``git status`` stays clean and
    cheap wherever the testbed is seen."""
    if is_shared(testbed):
        return 0
    linked = 0
    for root, dirs, files in os.walk(testbed):
        if Path(root) == testbed:
            dirs[:] = [d for d in dirs if d != ".git"]
        for name in files:
            linked += share_file(store, Path(root) / name)
    stat_minimal(testbed)
    (testbed / ".git" / SHARED_FILES).write_text(f"{linked}\n")
    return linked


def stat_minimal(testbed: Path) -> None:
    """Tell git to trust a file whose size and whole-second mtime match its index entry, then refresh the index.

    Git's default also compares the inode, the ctime, the owner and the sub-second mtime. A sandbox sees the
    testbed's files owned by its uid 0 (the host's sandbox uid, which the index records), an overlay or a
    packed image (envs/store/packing.py, whole seconds, its own inode numbers) gives them new ctimes and inodes, so
    every sandbox's first git command hashed every file again and wrote the index into its upper layer (django:
    ~6,000 files). Size and mtime still change with any edit; racily clean entries are still hashed. The one
    edit this misses is one that keeps a file's size and sets its mtime back, which only hides it from the
    editor's own diff.

    The index is left newer, by whole seconds, than every file it lists (:func:`settle_index`)."""
    git(["config", "core.trustctime", "false"], testbed)
    git(["config", "core.checkStat", "minimal"], testbed)
    git(["update-index", "-q", "--refresh"], testbed, check=False)
    settle_index(testbed)


def settle_index(testbed: Path) -> None:
    """Write a finished testbed's index again, once the clock has passed the newest mtime it lists, if any
    entry is racily clean.

    Git cannot trust an entry whose file's mtime is not older than the index (an edit in the second the index
    was written keeps its size and mtime), so it hashes that file in every command, and ``git add`` writes the
    index each time. A testbed checked out and indexed within one second (a small repository, or any
    repository once squashfs rounds the times to seconds) was racy forever: every sandbox's diff wrote the
    index, and an agent that filled the sandbox's disk before its diff broke the diff of a testbed it had
    not changed."""
    index = testbed / ".git" / "index"
    if not index.exists():
        return
    # -z: each entry is its name, NUL, then its stat lines (ctime, mtime, ...), so no name reads as a time
    records = git(["ls-files", "--debug", "-z"], testbed).split("\0")[1:]
    newest = max((int(r.split("\n")[1].split()[1].split(":")[0]) for r in records), default=0)
    for _ in range(3):
        if newest < int(index.stat().st_mtime):
            return
        wait = newest + 1 - time.time()
        if wait > 2:
            return  # a file dated in the future: no wait settles it
        # files are dated by the kernel's coarse clock, a few milliseconds behind time.time()
        time.sleep(max(0.0, wait) + 0.05)
        git(["update-index", "-q", "--refresh", "--force-write-index"], testbed, check=False)


def link_packs(files: list[Path], git_dir: Path) -> None:
    """Hard-link the packs into a repository's object store (same filesystem as the cache: PackStore.chain
    copies a packed commit's packs out of its image first)."""
    target = git_dir / "objects" / "pack"
    target.mkdir(parents=True, exist_ok=True)
    for path in files:
        os.link(path, target / path.name)


def drop_leftovers(root: Path) -> list[Path]:
    """What killed builds left in the pack stores of the cache at ``root``, removed: the work directories of
    makes (their lock free) and the half copies of thaws (unless a thaw of that store is running). Returns what
    was removed."""
    removed: list[Path] = []
    for store in sorted((root / "gitpacks").glob("*")):
        if not store.is_dir():
            continue
        # one listed before the store's lock is taken is locked by its make once the lock is ours
        if works := sorted(store.glob(f"{_WORK}*")):
            with exclusive(store / _MAKE_LOCK):
                for work in works:
                    if _unlocked(work):
                        shutil.rmtree(work, ignore_errors=True)
                        removed.append(work)
        if leftovers := thaw_leftovers(store):
            with exclusive(store / _THAW_LOCK, blocking=False) as free:
                if not free:
                    continue
                for _, leftover in leftovers:
                    remove_leftover(leftover)
                    removed.append(leftover)
    return removed


def _unlocked(path: Path) -> bool:
    """Whether no process holds ``path``'s flock (taking it for a moment to see)."""
    probe = Flock(path, directory=True)
    try:
        if not probe.acquire(blocking=False):
            return False
    except OSError:
        return False
    probe.release()
    return True


__all__ = [
    "MAX_PACKS",
    "SHARED_FILES",
    "PackStore",
    "drop_leftovers",
    "is_shared",
    "link_packs",
    "settle_index",
    "share_files",
    "stat_minimal",
]
