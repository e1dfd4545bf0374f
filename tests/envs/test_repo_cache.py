"""Testbeds from a repo cache: a relative --repo-cache works (#22); a mirror that lacks objects (a partial
snapshot) gives what history it can, and a base it cannot check out is named as unfetchable."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from swe_rl.envs.build.repo_sources import find_repo_source
from swe_rl.envs.build.testbed import make_testbed
from swe_rl.envs.store.gitpacks import PackStore
from swe_rl.errors import RepoNotFoundError, SourceIncompleteError


def _git(cwd, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def test_a_relative_repo_cache_builds_a_testbed(tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    _git(work, "init", "-q")
    (work / "a.py").write_text("x = 1\n")
    _git(work, "add", "a.py")
    _git(work, "commit", "-qm", "one")
    commit = _git(work, "rev-parse", "HEAD")
    subprocess.run(
        ["git", "clone", "-q", "--mirror", str(work), str(tmp_path / "mirrors/acme/widget.git")], check=True
    )
    monkeypatch.chdir(tmp_path)
    source = find_repo_source("acme/widget", Path("mirrors"))
    assert source.startswith("/"), source
    make_testbed(source, commit, tmp_path / "elsewhere" / "testbed")  # git runs in another directory
    assert (tmp_path / "elsewhere" / "testbed" / "a.py").read_text() == "x = 1\n"


def _partial_mirror(tmp_path: Path) -> tuple[Path, str, str]:
    """A mirror whose oldest blob is gone (as in a partial snapshot); returns it, base, and that blob."""
    work = tmp_path / "work"
    work.mkdir()
    _git(work, "init", "-q")
    (work / "data.bin").write_text("old table\n")
    (work / "a.py").write_text("x = 1\n")
    _git(work, "add", ".")
    _git(work, "commit", "-qm", "one")
    _git(work, "tag", "v1.0")
    lost = _git(work, "rev-parse", "HEAD:data.bin")
    (work / "data.bin").write_text("new table\n")
    _git(work, "commit", "-qam", "two")
    (work / "a.py").write_text("x = 2\n")
    _git(work, "commit", "-qam", "base")
    base = _git(work, "rev-parse", "HEAD")
    (work / "a.py").write_text("x = 'the fix'\n")
    _git(work, "commit", "-qam", "future")
    _git(work, "tag", "v-next")
    mirror = tmp_path / "mirror.git"
    subprocess.run(["git", "clone", "-q", "--mirror", "--no-local", str(work), str(mirror)], check=True)
    (pack,) = (mirror / "objects" / "pack").glob("*.pack")
    aside = tmp_path / "aside.pack"
    pack.rename(aside)
    pack.with_suffix(".idx").unlink()
    with aside.open("rb") as stream:  # loose objects, so one can be deleted
        subprocess.run(["git", "unpack-objects", "-q"], cwd=mirror, stdin=stream, check=True)
    (mirror / "objects" / lost[:2] / lost[2:]).unlink()
    return mirror, base, lost


def _store(tmp_path: Path, mirror: Path, shared: bool) -> PackStore | None:
    return PackStore(tmp_path / "cache", str(mirror)) if shared else None


@pytest.mark.parametrize("shared", [False, True], ids=["fetched", "shared-packs"])
def test_a_mirror_missing_old_blobs_still_gives_history_and_tags(tmp_path, shared):
    mirror, base, lost = _partial_mirror(tmp_path)
    control = tmp_path / "control"
    control.mkdir()
    _git(control, "init", "-q")
    failed = subprocess.run(
        ["git", "fetch", "-q", "--no-tags", str(mirror), base], cwd=control, capture_output=True
    )
    assert failed.returncode != 0, "control: the whole history cannot be fetched from this mirror"

    testbed = tmp_path / "testbed"
    make_testbed(str(mirror), base, testbed, _store(tmp_path, mirror, shared))
    assert (testbed / "a.py").read_text() == "x = 2\n"
    assert (testbed / "data.bin").read_text() == "new table\n"
    # the commits and tags up to the base, as versioning tools read them (not a depth-1 checkout)
    assert _git(testbed, "rev-list", "--count", "HEAD") == "3"
    assert _git(testbed, "describe", "--tags", "--long") == f"v1.0-2-g{base[:7]}"
    assert _git(testbed, "tag").split() == ["v1.0"]
    assert _git(testbed, "status", "--porcelain") == ""
    # nothing after the base, and the promisor git keeps for the missing blobs leads nowhere
    stored = _git(testbed, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)").split()
    assert _git(mirror, "rev-parse", "v-next^{commit}") not in stored and lost not in stored
    assert str(mirror) not in _git(testbed, "config", "--list")
    refetch = subprocess.run(["git", "fetch", "-q", "promisor", "v-next"], cwd=testbed, capture_output=True)
    assert refetch.returncode != 0


@pytest.mark.parametrize("shared", [False, True], ids=["fetched", "shared-packs"])
def test_a_mirror_missing_a_blob_of_the_base_itself_is_unfetchable_and_says_which(tmp_path, shared):
    """astropy-14365: the public snapshot leaves out its largest files, one of them in the base commit's own
    tree (astropy/utils/iers/data/eopc04.1962-now). The base cannot be checked out from it: not a failed build,
    which a rerun would try again in vain, but an unfetchable source (RepoNotFoundError), naming the file."""
    mirror, base, _ = _partial_mirror(tmp_path)
    ours = _git(mirror, "rev-parse", f"{base}:data.bin")
    make_testbed(str(mirror), base, tmp_path / "control")  # the control: with the base's own blobs, it works
    (mirror / "objects" / ours[:2] / ours[2:]).unlink()
    store = _store(tmp_path / "second", mirror, shared)
    with pytest.raises(SourceIncompleteError) as err:
        make_testbed(str(mirror), base, tmp_path / "testbed", store)
    assert isinstance(err.value, RepoNotFoundError)
    assert f"data.bin ({ours[:12]})" in str(err.value) and base[:12] in str(err.value)
    # known before the history is packed (or copied out of an image): the store holds nothing for it
    assert store is None or not store.dir.exists() or not any(store.dir.iterdir())


def _listing(tree: Path) -> list[tuple[str, int]]:
    return sorted((str(p.relative_to(tree)), p.stat().st_size) for p in tree.rglob("*") if p.is_file())


def test_a_partial_mirror_shares_packs_and_is_never_written(tmp_path):
    """matplotlib's and astropy's public snapshots lack old blobs. Their testbeds got a copy of the whole
    history's commits and trees each (75 MB per matplotlib testbed), and every build left a temporary pack of
    380 MB in the mirror itself: pack-objects writes its output through the source's object store and leaves
    the file there when a missing blob stops it. The control is that write, on this git."""
    mirror, base, lost = _partial_mirror(tmp_path)
    pack_dir = mirror / "objects" / "pack"
    pack_dir.mkdir(exist_ok=True)
    before = _listing(mirror)
    failed = subprocess.run(
        ["git", "pack-objects", "--revs", "-q", str(tmp_path / "out")],
        cwd=mirror,
        input=f"{base}\n",
        capture_output=True,
        text=True,
    )
    left = [p for p in pack_dir.iterdir() if p.name.startswith("tmp_pack_")]
    assert failed.returncode != 0 and left, "control: a pack written in place leaves its temporary file"
    for path in left:
        path.unlink()
    assert _listing(mirror) == before

    store = PackStore(tmp_path / "cache", str(mirror))
    older = _git(mirror, "rev-parse", f"{base}~1")
    beds = {commit: tmp_path / commit[:8] for commit in (older, base)}
    for commit, bed in beds.items():
        make_testbed(str(mirror), commit, bed, store)
        assert _git(bed, "status", "--porcelain") == "" and _git(bed, "rev-parse", "HEAD") == commit
        stored = _git(bed, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)").split()
        assert lost not in stored and _git(mirror, "rev-parse", "v-next^{commit}") not in stored
        assert _git(bed, "config", "remote.promisor.url") == "/nonexistent/history-blobs-not-fetched"
    assert _git(beds[base], "describe", "--tags", "--long") == f"v1.0-2-g{base[:7]}"
    first = next((beds[older] / ".git/objects/pack").glob("*.pack"))
    assert (beds[base] / ".git/objects/pack" / first.name).stat().st_ino == first.stat().st_ino
    assert _listing(mirror) == before, "the mirror is read, never written"
