"""Finished envs packed into compressed read-only images, mounted where their trees were (``swe-rl env pack``).

Loose testbeds and venvs already share files by hard links (layers.py, gitpacks.py), but every small file
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
   bytes) before any tree is touched; one difference and the image is removed, the trees stay.
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
import errno
import fcntl
import hashlib
import os
import secrets
import shutil
import stat
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field

from swe_rl.envs.gitpacks import is_shared, stat_minimal
from swe_rl.envs.layers import VENV_FILES
from swe_rl.errors import EnvBuildError
from swe_rl.fileio import atomic_write_json, exchange
from swe_rl.sandbox.identity import own_testbed

PACKED = "packed"
TRASH = ".trash"
PACKED_PARTS = ("testbeds", "venvs", "gitpacks")
"""The cache's directories whose trees a pack moves into its image: testbeds, venvs, and each base commit's packs
(``gitpacks/<source>/<commit>``, gitpacks.py), which the testbeds' own links into them duplicate byte for byte."""
_MOUNT_OPTIONS = "loop,ro,nodev,nosuid"


class PackError(EnvBuildError):
    """A pack could not be made or used: a tool missing, not root, an image that differs from its trees or
    from its manifest. Nothing is replaced by an image that failed its check."""


class Manifest(BaseModel):
    """``packed/<id>.json``: what an image holds and how to know it is unchanged."""

    id: str
    sha256: str = Field(description="Of the image file; checked before each mount.")
    bytes: int = Field(description="The image file's size.")
    loose_bytes: int = Field(
        description="What its trees took on disk before: loose ones by du -s (links once), packed ones as the "
        "images they were in (`env pack --merge`)."
    )
    entries: list[str] = Field(
        description="The trees it holds: `testbeds/<key>`, `venvs/<key>`, `gitpacks/<source>/<commit>`."
    )
    created: str
    seconds: float = Field(description="Wall time of the pack, both images and the check included.")


@dataclass
class PackResult:
    manifest: Manifest | None
    trash_left: list[Path]


def packed_dir(root: Path) -> Path:
    return root / PACKED


def manifests(root: Path) -> list[Manifest]:
    return [Manifest.model_validate_json(p.read_text()) for p in sorted(packed_dir(root).glob("*.json"))]


def image_of(root: Path, path: Path) -> str | None:
    """The id of the image a tree's path links into (a packed tree), None for a loose one."""
    if not path.is_symlink():
        return None
    target = Path(os.path.normpath(path.parent / os.readlink(path)))
    if target.parent.parent != packed_dir(root):
        return None
    return target.parent.name


def tree_paths(root: Path) -> list[Path]:
    """Every tree a pack can hold, loose or a link: ``testbeds/<key>``, ``venvs/<key>`` and
    ``gitpacks/<source>/<commit>`` (not the stores of shared files, not hidden work directories)."""
    paths = []
    for part in PACKED_PARTS:
        tops = [root / part] if part != "gitpacks" else sorted((root / part).glob("*"))
        for top in tops:
            for path in sorted(top.iterdir()) if top.is_dir() else []:
                if not path.name.startswith(".") and path.name != "files":
                    paths.append(path)
    return paths


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
    with open(root / "locks" / ".pack.gate", "a") as gate, open(root / "locks" / ".pack.lock", "a") as lock:
        fcntl.flock(gate, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        if not exclusive:
            fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            fcntl.flock(gate, fcntl.LOCK_UN)


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
        if not loose and len({image_of(root, root / e) for e in packed}) < 2:
            return PackResult(None, collect_trash(root))
        started = time.monotonic()
        image_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(3)
        before = (du([root / e for e in loose]) if du else 0) + sum(
            m.bytes for m in manifests(root) if any(image_of(root, root / e) == m.id for e in packed)
        )
        for entry in loose:
            if entry.startswith("testbeds/"):
                _prepare_testbed(root / entry)
        entries = _one_per_name(sorted(packed) + sorted(loose))
        progress(
            f"pack {image_id}: {len(loose)} loose and {len(packed)} packed trees; mksquashfs, zstd {level} "
            "(about a minute per GiB on two cores)"
        )
        manifest = _make_image(root, image_id, entries, level, processors, progress)
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
    if (testbed / ".git").is_dir() and "checkstat = minimal" not in _git_config(testbed):
        stat_minimal(testbed)  # a testbed built before it was the rule: the image numbers inodes its own way
    own_testbed(testbed)


def _make_image(
    root: Path,
    image_id: str,
    entries: list[str],
    level: int,
    processors: int | None,
    progress: Callable[[str], None],
) -> Manifest:
    """The image of ``entries`` made, mounted and compared with their trees; removed again on any failure."""
    sources = [Path(os.path.realpath(root / e)) for e in entries]  # a packed tree: where its link leads
    final = packed_dir(root) / f"{image_id}.sqfs"
    final.parent.mkdir(parents=True, exist_ok=True)
    part = final.with_suffix(".part")
    mount_point = packed_dir(root) / image_id
    try:
        _mksquashfs(sources, part, ["-comp", "zstd", "-Xcompression-level", str(level)], processors)
        os.rename(part, final)
        mount_point.mkdir()
        _mount(final, mount_point)
        progress(
            f"pack {image_id}: image {final.stat().st_size / 2**30:.2f} GiB; comparing it with the trees"
        )
        for source in sources:
            if problem := compare_trees(source, mount_point / source.name):
                raise PackError(f"the image {final.name} differs from {source}: {problem}")
        return Manifest(
            id=image_id,
            sha256=_sha256(final),
            bytes=final.stat().st_size,
            loose_bytes=0,
            entries=entries,
            created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            seconds=0.0,
        )
    except BaseException:
        _umount(mount_point)
        for path in (part, final):
            path.unlink(missing_ok=True)
        shutil.rmtree(mount_point, ignore_errors=True)
        raise


def mount_image(root: Path, image_id: str) -> Path:
    """The mount point of an image, mounted now if it is not (after a reboot): its sha256 checked first."""
    mount_point = packed_dir(root) / image_id
    if os.path.ismount(mount_point):
        return mount_point
    manifest_file = packed_dir(root) / f"{image_id}.json"
    image = packed_dir(root) / f"{image_id}.sqfs"
    if not manifest_file.is_file() or not image.is_file():
        raise PackError(
            f"the packed image {image_id} of {root} is gone; build its envs again (`swe-rl env gc`)"
        )
    manifest = Manifest.model_validate_json(manifest_file.read_text())
    with open(packed_dir(root) / f".{image_id}.mount.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        if os.path.ismount(mount_point):
            return mount_point
        if os.geteuid() != 0:
            raise PackError(
                f"the packed image {image} is not mounted (after a reboot?) and mounting needs root: "
                f"run `swe-rl env mount --cache-dir {root}` as root"
            )
        if (got := _sha256(image)) != manifest.sha256:
            raise PackError(
                f"the packed image {image} changed on disk (sha256 {got}, manifest {manifest.sha256})"
            )
        mount_point.mkdir(exist_ok=True)
        _mount(image, mount_point)
    return mount_point


def mount_all(root: Path) -> list[str]:
    """Mount every image of the cache that is not mounted; returns the ids mounted now."""
    done = []
    for manifest in manifests(root):
        if not os.path.ismount(packed_dir(root) / manifest.id):
            mount_image(root, manifest.id)
            done.append(manifest.id)
    return done


def ensure_mounted(root: Path, paths: Iterable[Path | None]) -> None:
    """Mount the images these env paths link into, where they are not mounted."""
    for path in paths:
        if path is not None and (image_id := image_of(root, path)) is not None:
            mount_image(root, image_id)


def drop_unused_images(root: Path) -> list[Path]:
    """Unmount and remove the images no tree links into any more (after ``env gc`` removed their envs)."""
    used = {image_of(root, p) for p in tree_paths(root)}
    removed = []
    for manifest in manifests(root):
        if manifest.id in used:
            continue
        mount_point = packed_dir(root) / manifest.id
        _umount(mount_point, lazy=True)  # a sandbox still on it keeps its view until it ends
        for path in (packed_dir(root) / f"{manifest.id}.sqfs", packed_dir(root) / f"{manifest.id}.json"):
            path.unlink(missing_ok=True)
            removed.append(path)
        shutil.rmtree(mount_point, ignore_errors=True)
    return removed


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
    for folder in set(_store_folders(root)) - {copy.parent for copy in store_files(root)}:
        with contextlib.suppress(OSError):
            folder.rmdir()  # emptied (a folder per leading two hex digits: thousands of blocks)
    return dropped


def _store_folders(root: Path) -> list[Path]:
    return [*(root / "gitpacks").glob("*/files/*"), *(root / VENV_FILES).glob("*")]


def collect_trash(root: Path) -> list[Path]:
    """Remove the replaced trees that no process's mounts hold; returns those still held."""
    trash = root / TRASH
    if not trash.is_dir():
        return []
    held = _held_roots()
    left = []
    for batch in sorted(trash.iterdir()):
        for tree in sorted(batch.iterdir()):
            if any(f"/{TRASH}/{batch.name}/{tree.name}" in mount_root for mount_root in held):
                left.append(tree)
            else:
                shutil.rmtree(tree, ignore_errors=True)
        if not any(batch.iterdir()):
            batch.rmdir()
    return left


def compare_trees(loose: Path, packed: Path) -> str:
    """The first difference between a tree and its copy in an image, '' when none: each entry's type, mode,
    owner, size, whole-second mtime (what squashfs keeps), link target, and bytes."""
    checked: dict[tuple[int, int], int] = {}  # the loose inode -> the image inode its bytes matched
    top, copy = os.lstat(loose), os.lstat(packed)
    if (top.st_mode, top.st_uid, top.st_gid) != (copy.st_mode, copy.st_uid, copy.st_gid):
        return ".: mode or owner differ"
    for here, dirs, files in os.walk(loose):
        rel = os.path.relpath(here, loose)
        other = packed / rel if rel != "." else packed
        try:
            theirs = set(os.listdir(other))
        except OSError as exc:
            return f"{rel}: {exc}"
        mine = set(dirs) | set(files)
        if mine != theirs:
            return f"{rel}: entries differ ({sorted(mine ^ theirs)[:5]})"
        for name in (*dirs, *files):
            a, b = os.path.join(here, name), os.path.join(other, name)
            sa, sb = os.lstat(a), os.lstat(b)
            what = os.path.join(rel, name)
            same = (sa.st_mode, sa.st_uid, sa.st_gid) == (sb.st_mode, sb.st_uid, sb.st_gid)
            if not same or int(sa.st_mtime) != int(sb.st_mtime):
                return f"{what}: mode, owner or mtime differ"
            if stat.S_ISLNK(sa.st_mode):
                if os.readlink(a) != os.readlink(b):
                    return f"{what}: link target differs"
            elif stat.S_ISREG(sa.st_mode):
                if sa.st_size != sb.st_size:
                    return f"{what}: size differs"
                if checked.get((sa.st_dev, sa.st_ino)) != sb.st_ino and not _same_bytes(a, b):
                    return f"{what}: bytes differ"
                checked[(sa.st_dev, sa.st_ino)] = sb.st_ino
    return ""


# -- internals ------------------------------------------------------------------------------------------
def need_tools() -> None:
    missing = [tool for tool in ("mksquashfs", "mount", "umount") if shutil.which(tool) is None]
    if missing:
        raise PackError(f"packing needs {', '.join(missing)} (Debian: apt-get install squashfs-tools mount)")
    if os.geteuid() != 0:
        raise PackError("packing mounts images (loop devices): run `swe-rl env pack` as root")
    if "squashfs" not in Path("/proc/filesystems").read_text():
        raise PackError("this kernel has no squashfs (/proc/filesystems)")


def _mksquashfs(sources: list[Path], out: Path, compression: list[str], processors: int | None) -> None:
    names = [s.name for s in sources]
    if len(set(names)) != len(names):
        raise PackError("two trees to pack have one name")  # keys are digests of different inputs
    argv = [
        "mksquashfs",
        *map(str, sources),
        str(out),
        "-noappend",
        "-quiet",
        "-no-progress",
        "-root-mode",
        "755",
    ]
    argv += compression
    if len(sources) == 1:
        argv.append("-keep-as-directory")  # else one source's contents become the image's root
    if processors:
        argv += ["-processors", str(processors)]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise PackError(f"mksquashfs failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")


def _git_config(testbed: Path) -> str:
    try:
        return (testbed / ".git" / "config").read_text().lower()
    except OSError:
        return ""


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


def _mount(image: Path, mount_point: Path) -> None:
    proc = subprocess.run(
        ["mount", "-t", "squashfs", "-o", _MOUNT_OPTIONS, str(image), str(mount_point)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise PackError(f"mounting {image} at {mount_point} failed: {proc.stderr.strip()}")


def _umount(mount_point: Path, *, lazy: bool = False) -> None:
    if os.path.ismount(mount_point):
        subprocess.run(
            ["umount", *(["-l"] if lazy else []), str(mount_point)], capture_output=True, check=False
        )


def _held_roots() -> set[str]:
    """The root of every mount in every process's mount namespace (mountinfo's fourth field): a bind of a
    tree names the tree's path there, in whatever namespace a sandbox made it."""
    roots: set[str] = set()
    seen: set[int] = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            ns = os.stat(f"/proc/{pid}/ns/mnt").st_ino
            if ns in seen:
                continue
            with open(f"/proc/{pid}/mountinfo") as fh:
                for line in fh:
                    fields = line.split(" ", 5)
                    if len(fields) > 4:
                        roots.add(fields[3].replace("\\040", " "))
            seen.add(ns)
        except OSError as exc:  # gone since listed
            if exc.errno not in (errno.ENOENT, errno.ESRCH, errno.EACCES):
                raise
    return roots


def _same_bytes(a: str, b: str) -> bool:
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            ca, cb = fa.read(1 << 20), fb.read(1 << 20)
            if ca != cb:
                return False
            if not ca:
                return True


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


__all__ = [
    "PACKED",
    "PACKED_PARTS",
    "Manifest",
    "PackError",
    "PackResult",
    "collect_trash",
    "compare_trees",
    "drop_store_copies",
    "drop_unused_images",
    "ensure_mounted",
    "image_of",
    "manifests",
    "mount_all",
    "mount_image",
    "need_tools",
    "pack",
    "pack_lock",
    "packable",
    "packed_entries",
    "store_files",
    "tree_paths",
]
