"""The images of packed envs (packing.py): where they are, their manifests, mounting them (again after a reboot,
after their sha256), comparing one with the trees it was made from, and what a pack leaves to clean up.

An image is ``packed/<id>.sqfs`` under the cache root, its manifest ``packed/<id>.json``, its mount point
``packed/<id>/``; a packed tree's path is a symbolic link to ``../packed/<id>/<name>`` (deeper for a commit's packs).
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import subprocess
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, Field

from swe_rl.envs.store.filestore import file_sha256
from swe_rl.errors import EnvBuildError
from swe_rl.locks import exclusive

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
    appended_to: str | None = Field(
        default=None,
        description="The image a merge copied and appended the other trees to (packing.py), None when it "
        "compressed every tree anew.",
    )


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
    with exclusive(packed_dir(root) / f".{image_id}.mount.lock"):
        if os.path.ismount(mount_point):
            return mount_point
        if os.geteuid() != 0:
            raise PackError(
                f"the packed image {image} is not mounted (after a reboot?) and mounting needs root: "
                f"run `swe-rl env mount --cache-dir {root}` as root"
            )
        if (got := file_sha256(image)) != manifest.sha256:
            raise PackError(
                f"the packed image {image} changed on disk (sha256 {got}, manifest {manifest.sha256})"
            )
        mount_point.mkdir(exist_ok=True)
        mount_at(image, mount_point)
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
        unmount(mount_point, lazy=True)  # a sandbox still on it keeps its view until it ends
        for path in (packed_dir(root) / f"{manifest.id}.sqfs", packed_dir(root) / f"{manifest.id}.json"):
            path.unlink(missing_ok=True)
            removed.append(path)
        shutil.rmtree(mount_point, ignore_errors=True)
    return removed


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


def compare_trees(loose: Path, packed: Path, *, content: bool = True, owner: bool = True) -> str:
    """The first difference between a tree and its copy in an image, '' when none: each entry's type, mode,
    owner, size, whole-second mtime (what squashfs keeps), link target, and bytes (not with ``content`` False:
    a tree whose data blocks an append kept as they were, packing.py; ``owner`` False: a tree whose owner
    means nothing, :func:`owner_matters`)."""
    checked: dict[tuple[int, int], int] = {}  # the loose inode -> the image inode its bytes matched

    def kind(st: os.stat_result) -> tuple[int, ...]:
        return (st.st_mode, st.st_uid, st.st_gid) if owner else (st.st_mode,)

    top, copy = os.lstat(loose), os.lstat(packed)
    if kind(top) != kind(copy):
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
            if kind(sa) != kind(sb) or int(sa.st_mtime) != int(sb.st_mtime):
                return f"{what}: mode, owner or mtime differ"
            if stat.S_ISLNK(sa.st_mode):
                if os.readlink(a) != os.readlink(b):
                    return f"{what}: link target differs"
            elif stat.S_ISREG(sa.st_mode):
                if sa.st_size != sb.st_size:
                    return f"{what}: size differs"
                if not content:
                    continue
                if checked.get((sa.st_dev, sa.st_ino)) != sb.st_ino and not _same_bytes(a, b):
                    return f"{what}: bytes differ"
                checked[(sa.st_dev, sa.st_ino)] = sb.st_ino
    return ""


def owner_matters(entry: str) -> bool:
    """Whether the owner of a cache tree's files is part of what it is. Not for a commit's packs in the store
    (``gitpacks/``): every testbed that hard-links them gives the inodes it shares to the sandbox uid
    (sandbox/identity.own_testbed), so their owner says which testbeds took them, not what they hold."""
    return not entry.startswith("gitpacks/")


# -- internals ------------------------------------------------------------------------------------------


def need_tools() -> None:
    missing = [tool for tool in ("mksquashfs", "mount", "umount") if shutil.which(tool) is None]
    if missing:
        raise PackError(f"packing needs {', '.join(missing)} (Debian: apt-get install squashfs-tools mount)")
    if os.geteuid() != 0:
        raise PackError("packing mounts images (loop devices): run `swe-rl env pack` as root")
    if "squashfs" not in Path("/proc/filesystems").read_text():
        raise PackError("this kernel has no squashfs (/proc/filesystems)")


def make_squashfs(
    sources: list[Path], out: Path, compression: list[str], processors: int | None, *, append: bool = False
) -> None:
    """``sources`` into a new image ``out``, or with ``append`` added to the image ``out`` already is (its
    compression then applies; mksquashfs stores a file whose bytes the image has as a reference to them)."""
    names = [s.name for s in sources]
    if len(set(names)) != len(names):
        raise PackError("two trees to pack have one name")  # keys are digests of different inputs
    argv = ["mksquashfs", *map(str, sources), str(out), "-quiet", "-no-progress", "-root-mode", "755"]
    # no recovery file: it goes to $HOME, and a failed append's copy is removed whole (packed._make_image)
    argv += ["-no-recovery"] if append else ["-noappend", *compression]
    if len(sources) == 1:
        argv.append("-keep-as-directory")  # else one source's contents become the image's root
    if processors:
        argv += ["-processors", str(processors)]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise PackError(f"mksquashfs failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")


def mount_at(image: Path, mount_point: Path) -> None:
    proc = subprocess.run(
        ["mount", "-t", "squashfs", "-o", _MOUNT_OPTIONS, str(image), str(mount_point)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise PackError(f"mounting {image} at {mount_point} failed: {proc.stderr.strip()}")


def unmount(mount_point: Path, *, lazy: bool = False) -> None:
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


__all__ = [
    "PACKED",
    "PACKED_PARTS",
    "TRASH",
    "Manifest",
    "PackError",
    "collect_trash",
    "compare_trees",
    "drop_unused_images",
    "ensure_mounted",
    "image_of",
    "make_squashfs",
    "manifests",
    "mount_all",
    "mount_at",
    "mount_image",
    "need_tools",
    "packed_dir",
    "tree_paths",
    "unmount",
]
