"""Bring an env cache built before 7be88b4 and e454eab to their layout, in place, and print its disk before and after.

    python bench/cache_relayout.py ENV_CACHE [--mirror SOURCE ...]

1. Venv files shared by content (envs/store/venv_clones.py ``share_venv_files``): every venv's ``lib/`` files linked to
   ``venvfiles/``, a shared venv's links into uv's cache included (as a new build does), and a clone's too (a new
   build links a clone's files to its shared venv's, which this brings to the same inodes).
2. For each ``--mirror`` (the source string the cache was built with, e.g. ``repos/matplotlib/matplotlib.git``):
   the testbeds that fetched a pack of their own from that partial snapshot (one unshared pack, a promisor that
   leads nowhere) get the repository's shared pack chain of the same base commit instead, oldest base first. The
   chain holds every object of their pack and the rest of the base's history that the snapshot has; ``git status``
   is checked clean after the swap.

Disk is ``du -s -B1`` of testbeds, venvs, gitpacks and venvfiles in one call (each hard-linked file once), as
``EnvCache.disk_usage`` counts. Only for a cache no build is using.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from swe_rl.envs.build.testbed import PROMISOR_NOWHERE, as_sealed_partial_clone
from swe_rl.envs.store.gitpacks import PackStore, link_packs
from swe_rl.envs.store.venv_clones import VENV_FILES, share_venv_files
from swe_rl.gitutil import git

PARTS = ("testbeds", "venvs", "gitpacks", VENV_FILES)


def disk(root: Path) -> dict[str, int]:
    paths = [str(root / p) for p in PARTS if (root / p).exists()]
    out = subprocess.run(["du", "-s", "-B1", *paths], capture_output=True, text=True, check=True).stdout
    sizes = {Path(path).name: int(size) for size, path in (line.split("\t") for line in out.splitlines())}
    return {**sizes, "total": sum(sizes.values())}


def share_venvs(root: Path) -> int:
    venvs = sorted(p for p in (root / "venvs").iterdir() if p.is_dir())
    linked, started = 0, time.monotonic()
    for n, venv in enumerate(venvs, 1):
        linked += share_venv_files(root / VENV_FILES, venv, linked_too=True)
        if n % 20 == 0 or n == len(venvs):
            print(
                f"venvs {n}/{len(venvs)}: {linked} files linked, {time.monotonic() - started:.0f} s",
                file=sys.stderr,
            )
    return linked


def swap_packs(root: Path, source: str) -> int:
    store = PackStore(root, source)
    beds = []
    for bed in sorted((root / "testbeds").iterdir()):
        if not (bed / ".git").is_dir():
            continue
        if git(["config", "--get", "remote.promisor.url"], bed, check=False).strip() != PROMISOR_NOWHERE:
            continue
        own = list((bed / ".git/objects/pack").glob("*.pack"))
        if len(own) != 1 or own[0].stat().st_nlink != 1:
            continue  # shared already
        base = git(["rev-parse", "HEAD"], bed).strip()
        if git(["cat-file", "-t", base], Path(source), check=False).strip() != "commit":
            continue  # another repository's testbed
        beds.append((int(git(["log", "-1", "--format=%ct", base], Path(source))), base, bed))
    for _, base, bed in sorted(beds):
        files = store.chain(base)
        pack_dir = bed / ".git" / "objects" / "pack"
        names = {f.name for f in files}
        old = [p for p in pack_dir.iterdir() if p.name not in names]
        link_packs([f for f in files if not (pack_dir / f.name).exists()], bed / ".git")
        for path in old:
            path.unlink()
        as_sealed_partial_clone(bed)
        if git(["status", "--porcelain", "--untracked-files=no"], bed).strip():
            raise SystemExit(f"{bed}: not clean after the swap")
        print(f"{bed.name} {base[:12]}: {len(files)} pack files linked", file=sys.stderr)
    return len(beds)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("cache", type=Path, help="the env cache root (its testbeds/, venvs/, ...)")
    parser.add_argument("--mirror", action="append", default=[], help="a partial snapshot's source string")
    args = parser.parse_args()
    before = disk(args.cache)
    linked = share_venvs(args.cache)
    after_venvs = disk(args.cache)
    swapped = sum(swap_packs(args.cache, source) for source in args.mirror)
    after = disk(args.cache)
    gib = 1 << 30
    for name, sizes in (("before", before), ("venv files shared", after_venvs), ("packs shared", after)):
        shown = ", ".join(f"{k} {v / gib:.2f}" for k, v in sizes.items())
        print(f"{name}: {shown} GiB")
    print(f"{linked} venv files linked, {swapped} testbeds given the shared packs")


if __name__ == "__main__":
    main()
