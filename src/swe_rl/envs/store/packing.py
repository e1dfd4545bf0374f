"""Finished envs packed into compressed read-only images, mounted where their trees were (``swe-rl env pack``).

Loose testbeds and venvs already share files by hard links (venv_clones.py, gitpacks.py), but every small file
still takes its own blocks and nothing is compressed: 245 SWE-bench Verified instances took 13 GiB. A pack
moves every finished testbed, venv and base commit's packs of a cache into one squashfs image (zstd;
identical files stored once whatever tree holds them, hard links kept), mounted read-only at ``packed/<id>/``. Each tree's path becomes a
symbolic link into the mount, so records, venv shebangs and sandboxes' binds name the same paths as before.
Sandboxes already see a testbed through an overlay and a venv read-only: the image is their lower layer, and
nothing, root on the host included, can write into it.

Layout under the cache root::

    packed/<id>.sqfs   the image
    packed/<id>.json   its manifest: the image's sha256 and size, the trees it holds (``testbeds/<key>``, ...)
    packed/<id>/       its mount point (mounted again after a reboot by :func:`mount_image`, as root)
    .trash/<id>/       the loose trees it replaced, removed once no mount namespace binds one of them

What a pack guarantees, in order:

1. Git compares a testbed's files by size and whole-second mtime (gitpacks.stat_minimal; squashfs keeps
   whole seconds and numbers inodes its own way), so ``git status`` in a sandbox of the image hashes nothing.
2. The mounted image is compared with the trees, file by file (type, mode, owner, size, mtime, link target,
   bytes) before any tree is touched; one difference and the image is removed, the trees stay. A merge that
   appends to a copy of an older image (:func:`_append_base`) compares the trees that image held by all but
   their bytes, which are its data blocks unchanged, and the appended ones byte by byte.
3. A tree and its symbolic link are swapped by one ``renameat2(RENAME_EXCHANGE)``: there is no moment when
   its path is missing. A sandbox that bound the tree before keeps it; the tree is deleted only when no
   process's mounts still hold it (:func:`collect_trash`).
4. The image's sha256 is checked before every mount: an image changed on disk is refused, never read into a
   verdict.

Builds of the same cache wait while a pack runs (:func:`pack_lock`): a clone of a shared venv must not see
it change mid-walk. A later build that needs a packed commit's packs or a packed version's shared venv copies
them out of the image once (``fileio.thaw_link``) and hard-links them from then on. Imported images' root
filesystems (``rootfs/``) stay loose.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from swe_rl.envs.store.filestore import file_sha256
from swe_rl.envs.store.gitpacks import is_shared, stat_minimal
from swe_rl.envs.store.pack_images import (
    PACKED,
    TRASH,
    Manifest,
    PackError,
    collect_trash,
    compare_trees,
    drop_unused_images,
    ensure_mounted,
    image_of,
    make_squashfs,
    manifests,
    mount_at,
    need_tools,
    owner_matters,
    packed_dir,
    tree_paths,
    unmount,
)
from swe_rl.envs.store.venv_clones import VENV_FILES
from swe_rl.fileio import atomic_write_json, exchange
from swe_rl.gitutil import git
from swe_rl.locks import Flock
from swe_rl.sandbox.identity import own_testbed


@dataclass
class PackResult:
    manifest: Manifest | None
    trash_left: list[Path]


def packable(root: Path) -> list[str]:
    """The loose finished trees: venvs (renamed into place only when built), testbeds whose files were shared
    (gitpacks.is_shared: their install has run, nothing writes into them again) and complete pack directories
    (renamed into place with their ``parent`` file)."""
    entries = []
    for path in tree_paths(root):
        if path.is_symlink() or not path.is_dir():
            continue
        rel = path.relative_to(root)
        if rel.parts[0] == "testbeds" and (path / ".git").exists() and not is_shared(path):
            continue
        if rel.parts[0] == "gitpacks" and not (path / "parent").is_file():
            continue
        entries.append(rel.as_posix())
    return entries


@contextmanager
def pack_lock(root: Path, *, exclusive: bool) -> Iterator[None]:
    """Shared by builds, exclusive for a pack and gc. A turnstile in front (``.pack.gate``) keeps a stream of
    builds from starving a pack: flock grants a shared lock while an exclusive one waits, so a pack first
    closes the gate (builds pass it in an instant), then waits for the builds already inside."""
    (root / "locks").mkdir(parents=True, exist_ok=True)
    gate = Flock(root / "locks" / ".pack.gate", shared=not exclusive)
    lock = Flock(root / "locks" / ".pack.lock", shared=not exclusive)
    with gate:
        lock.acquire()
        if not exclusive:
            gate.release()
        try:
            yield
        finally:
            lock.release()


def pack(
    root: Path,
    *,
    merge: bool = False,
    level: int = 15,
    processors: int | None = None,
    du: Callable[[list[Path]], int] | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> PackResult:
    """Pack every loose finished tree of the cache at ``root`` into one new image (see the module's text);
    ``merge``: the trees of the cache's images too, into the one new image (files the images share are then
    stored once), and the old images dropped. Returns the new image's manifest (None when there was nothing
    to pack) and the replaced trees still bound by a sandbox (removed by a later :func:`collect_trash`)."""
    need_tools()
    with pack_lock(root, exclusive=True):
        for stale in packed_dir(root).glob("*.part"):  # an image a killed pack was writing
            stale.unlink()
        loose = packable(root)
        packed = packed_entries(root) if merge else []
        ensure_mounted(root, (root / e for e in packed))
        merged = {image_of(root, root / e) for e in packed}
        if not loose and len(merged) < 2:
            return PackResult(None, collect_trash(root))
        started = time.monotonic()
        image_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(3)
        before = (du([root / e for e in loose]) if du else 0) + sum(
            m.bytes for m in manifests(root) if m.id in merged
        )
        for entry in loose:
            if entry.startswith("testbeds/"):
                _prepare_testbed(root / entry)
        entries = _one_per_name(sorted(packed) + sorted(loose))
        base = _append_base(root, entries, merged) if merge else None
        progress(
            f"pack {image_id}: {len(loose)} loose and {len(packed)} packed trees; mksquashfs, zstd {level} "
            "(about a minute per GiB on two cores)"
            + (f", appended to a copy of {base.id} ({len(base.entries)} trees)" if base else "")
        )
        manifest = _make_image(root, image_id, entries, level, processors, progress, base)
        manifest.loose_bytes = before
        manifest.seconds = round(time.monotonic() - started, 1)
        atomic_write_json(packed_dir(root) / f"{image_id}.json", manifest.model_dump(mode="json"))
        trash = root / TRASH / image_id
        trash.mkdir(parents=True)
        for entry in entries:
            _swap_in(root, entry, image_id, trash)
        dropped = drop_store_copies(root)
        gone = drop_unused_images(root)
        progress(
            f"pack {image_id}: {len(entries)} trees now in the image ({manifest.bytes} bytes); "
            f"{dropped} shared-file copies no loose tree links removed; {len(gone) // 2} older image(s) dropped"
        )
        return PackResult(manifest, collect_trash(root))


def _append_base(root: Path, entries: list[str], merged: set[str | None]) -> Manifest | None:
    """The largest of the merged images that a merge can copy and append the other trees to (mksquashfs
    stores the bytes it already holds once), instead of compressing every tree anew (30 minutes for 250
    Verified instances' 21 GB): one whose every tree is still in use (else a new image leaves the dead ones
    out), and whose trees that are now elsewhere (copied out of it, then packed again) still hold its bytes."""
    live = set(entries)
    candidates = [m for m in manifests(root) if m.id in merged and set(m.entries) <= live]
    for manifest in sorted(candidates, key=lambda m: m.bytes, reverse=True):
        mount_point = packed_dir(root) / manifest.id
        moved = [e for e in manifest.entries if image_of(root, root / e) != manifest.id]
        if not any(_differs(root, e, mount_point, content=True) for e in moved):
            return manifest
    return None


def _differs(root: Path, entry: str, mount_point: Path, *, content: bool) -> str:
    """How the tree of ``entry`` (where its link leads, if packed) differs from its copy in the image mounted at
    ``mount_point``, '' when it does not (packimage.compare_trees)."""
    tree = Path(os.path.realpath(root / entry))
    return compare_trees(tree, mount_point / tree.name, content=content, owner=owner_matters(entry))


def _one_per_name(entries: list[str]) -> list[str]:
    """The entries whose last component no earlier one has: an image holds each tree under its name (a commit's
    packs in two sources of one repository stay loose the second time)."""
    seen: set[str] = set()
    kept = []
    for entry in entries:
        name = entry.rsplit("/", 1)[-1]
        if name not in seen:
            seen.add(name)
            kept.append(entry)
    return sorted(kept)


def packed_entries(root: Path) -> list[str]:
    """The trees that are links into an image."""
    return [p.relative_to(root).as_posix() for p in tree_paths(root) if image_of(root, p) is not None]


def _prepare_testbed(testbed: Path) -> None:
    """What sandboxes need of a testbed, written now: the image cannot be changed later."""
    if (testbed / ".git").is_dir() and _checkstat(testbed) != "minimal":
        stat_minimal(testbed)  # a testbed built before it was the rule: the image numbers inodes its own way
    own_testbed(testbed)


def _checkstat(testbed: Path) -> str:
    return git(["config", "--get", "core.checkStat"], testbed, check=False).strip().lower()


def _make_image(
    root: Path,
    image_id: str,
    entries: list[str],
    level: int,
    processors: int | None,
    progress: Callable[[str], None],
    base: Manifest | None = None,
) -> Manifest:
    """The image of ``entries`` made, mounted and compared with their trees; removed again on any failure.
    With ``base`` (:func:`_append_base`), a copy of that image with the other entries appended: the trees it
    held are compared by their metadata (their data blocks are the base's, byte for byte), the others whole."""
    sources = [Path(os.path.realpath(root / e)) for e in entries]  # a packed tree: where its link leads
    kept = set(base.entries) if base else set()
    final = packed_dir(root) / f"{image_id}.sqfs"
    final.parent.mkdir(parents=True, exist_ok=True)
    part = final.with_suffix(".part")
    mount_point = packed_dir(root) / image_id
    try:
        if base is None:
            make_squashfs(sources, part, ["-comp", "zstd", "-Xcompression-level", str(level)], processors)
        else:
            shutil.copyfile(packed_dir(root) / f"{base.id}.sqfs", part)
            if new := [s for e, s in zip(entries, sources, strict=True) if e not in kept]:
                make_squashfs(new, part, [], processors, append=True)
        os.rename(part, final)
        mount_point.mkdir()
        mount_at(final, mount_point)
        progress(
            f"pack {image_id}: image {final.stat().st_size / 2**30:.2f} GiB; comparing it with the trees"
        )
        for entry in entries:
            if problem := _differs(root, entry, mount_point, content=entry not in kept):
                raise PackError(f"the image {final.name} differs from {root / entry}: {problem}")
        return Manifest(
            id=image_id,
            sha256=file_sha256(final),
            bytes=final.stat().st_size,
            loose_bytes=0,
            entries=entries,
            created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            seconds=0.0,
            appended_to=base.id if base else None,
        )
    except BaseException:
        unmount(mount_point)
        for path in (part, final):
            path.unlink(missing_ok=True)
        shutil.rmtree(mount_point, ignore_errors=True)
        raise


def store_files(root: Path) -> list[Path]:
    """The copies the stores of files shared by content hold (gitpacks' ``files/``, layers' venv files)."""
    return sorted([*(root / "gitpacks").glob("*/files/*/*"), *(root / VENV_FILES).glob("*/*")])


def drop_store_copies(root: Path) -> int:
    """Remove the stores' copies that no loose tree links (after a pack, all of them: the image holds the
    bytes). A copy that uv's cache links too stays on disk as uv's, a download cache. Returns how many."""
    loose = set()
    for tree in tree_paths(root):
        if not tree.is_symlink():
            for here, _, files in os.walk(tree):
                for name in files:
                    st = os.lstat(os.path.join(here, name))
                    if st.st_nlink > 1:
                        loose.add((st.st_dev, st.st_ino))
    dropped = 0
    for copy in store_files(root):
        st = copy.stat()
        if (st.st_dev, st.st_ino) not in loose:
            copy.unlink()
            dropped += 1
    for folder in _store_folders(root):  # emptied ones (thousands of blocks); rmdir leaves the others
        with contextlib.suppress(OSError):
            folder.rmdir()
    return dropped


def _store_folders(root: Path) -> list[Path]:
    return [*(root / "gitpacks").glob("*/files/*"), *(root / VENV_FILES).glob("*")]


def _swap_in(root: Path, entry: str, image_id: str, trash: Path) -> None:
    """Point ``entry`` into the image: a loose tree is exchanged with the link and moved to ``trash``; a link
    into an older image is replaced (rename(2) over it)."""
    path = root / entry
    link = path.with_name(f".{path.name}.packed")
    link.unlink(missing_ok=True)
    os.symlink(os.path.relpath(packed_dir(root) / image_id / path.name, path.parent), link)
    if path.is_symlink():
        os.replace(link, path)
        return
    exchange(link, path)
    os.rename(link, trash / entry.replace("/", "-"))  # ``link`` is the loose tree now


__all__ = [
    "PACKED",
    "PackResult",
    "drop_store_copies",
    "pack",
    "pack_lock",
    "packable",
    "packed_entries",
    "store_files",
]
