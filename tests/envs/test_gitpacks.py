"""Testbeds of one repository share their git objects (hard-linked packs) and still hold no later history.

The attack: a store shared naively (every pack made so far linked into each testbed) hands an older base the
commits after it, the fix among them. The control shows that store leaking; the real chain must not.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from tests.envs.helpers import git

from swe_rl.envs import gitpacks
from swe_rl.envs.gitpacks import PackStore, link_packs
from swe_rl.envs.testbed import make_testbed


def _commit(repo: Path, n: int) -> str:
    (repo / f"f{n}.py").write_text(f"X = {n}\n" * 50)
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", f"c{n}")
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def mirror(tmp_path: Path) -> tuple[Path, list[str], str]:
    """A bare mirror: c0..c5 on main, one commit on a side branch from c2; tags at c3 and c5."""
    work = tmp_path / "work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    line = [_commit(work, n) for n in range(6)]
    git(work, "checkout", "-q", "-b", "side", line[2])
    side = _commit(work, 99)
    git(work, "tag", "v0.3", line[3])
    git(work, "tag", "v-next", line[5])
    bare = tmp_path / "mirror.git"
    subprocess.run(["git", "clone", "-q", "--mirror", str(work), str(bare)], check=True)
    return bare, line, side


def _objects(repo: Path) -> set[str]:
    return set(git(repo, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)").split())


def _history(mirror: Path, commit: str) -> set[str]:
    return {line.split()[0] for line in git(mirror, "rev-list", "--objects", commit).splitlines()}


def test_testbeds_share_packs_and_none_holds_a_later_object(tmp_path, mirror):
    bare, line, side = mirror
    store = PackStore(tmp_path / "cache", str(bare))
    order = [line[1], line[4], line[2], side, line[5]]  # an ancestor built after its descendant, a branch
    beds = {}
    for commit in order:
        beds[commit] = tmp_path / "beds" / commit[:8]
        make_testbed(str(bare), commit, beds[commit], store)
    for commit, bed in beds.items():
        assert _objects(bed) <= _history(bare, commit), "no object the base cannot reach"
        assert set(git(bed, "rev-list", "--all").split()) == set(git(bare, "rev-list", commit).split())
        assert git(bed, "status", "--porcelain") == ""
    assert "v0.3" in git(beds[line[4]], "tag") and "v-next" not in git(beds[line[4]], "tag")
    # shared: line[4]'s testbed holds line[1]'s pack as a link, not a copy
    first = next(p for p in (beds[line[1]] / ".git/objects/pack").iterdir() if p.suffix == ".pack")
    assert (beds[line[4]] / ".git/objects/pack" / first.name).stat().st_ino == first.stat().st_ino
    # the control: line[4]'s packs linked into a repo for line[2] (built after it) would leak its future
    naive = tmp_path / "naive"
    git(tmp_path, "init", "-q", str(naive))
    link_packs(store.chain(line[4]), naive / ".git")
    assert line[4] in _objects(naive) and line[4] not in _objects(beds[line[2]])


def test_a_chain_is_cut_at_the_pack_limit(tmp_path, mirror, monkeypatch):
    bare, line, _ = mirror
    monkeypatch.setattr(gitpacks, "MAX_PACKS", 2)
    store = PackStore(tmp_path / "cache", str(bare))
    chains = [store.chain(commit) for commit in line[:4]]
    assert [len([p for p in c if p.suffix == ".pack"]) for c in chains] == [1, 2, 1, 2]
    bed = tmp_path / "bed"
    make_testbed(str(bare), line[3], bed, store)
    assert _objects(bed) == _history(bare, line[3])


def test_a_source_that_cannot_make_packs_is_fetched_from(tmp_path, mirror):
    bare, _, side = mirror  # the mirror's HEAD
    borrowing = tmp_path / "borrowing.git"
    subprocess.run(["git", "clone", "-q", "--bare", "--shared", str(bare), str(borrowing)], check=True)
    store = PackStore(tmp_path / "cache", str(borrowing))
    assert not store.usable()  # its objects are another repository's (alternates)
    bed = tmp_path / "bed"
    make_testbed(str(borrowing), side, bed, store)
    assert git(bed, "rev-parse", "HEAD") == side and not store.dir.exists()
