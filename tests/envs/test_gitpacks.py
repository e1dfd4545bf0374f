"""Testbeds of one repository share their git objects (hard-linked packs) and still hold no later history.

The attack: a store shared naively (every pack made so far linked into each testbed) hands an older base the
commits after it, the fix among them. The control shows that store leaking; the real chain must not.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from tests.envs.helpers import git

from swe_rl.envs.build.testbed import make_testbed
from swe_rl.envs.store import gitpacks
from swe_rl.envs.store.gitpacks import PackStore, link_packs
from swe_rl.sandbox.shell import diff_command


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


def test_a_cut_chain_goes_on_from_the_anchor_not_from_the_root(tmp_path, mirror, monkeypatch):
    """The same cut as above with anchors every 2 commits: after the cut a base chains onto its anchor, and only
    the first base's pack holds the history from the root (the test above, without anchors, is the control: a
    second root at the cut)."""
    bare, line, _ = mirror
    monkeypatch.setattr(gitpacks, "MAX_PACKS", 2)
    store = PackStore(tmp_path / "cache", str(bare), anchor_every=2)
    for commit in line:
        bed = tmp_path / "beds" / commit[:8]
        make_testbed(str(bare), commit, bed, store)
        assert _objects(bed) == _history(bare, commit)
    roots = [
        d.name for d in store.dir.iterdir() if (d / "parent").is_file() and not (d / "parent").read_text()
    ]
    assert roots == [line[0]]


def test_a_source_that_cannot_make_packs_is_fetched_from(tmp_path, mirror):
    bare, _, side = mirror  # the mirror's HEAD
    borrowing = tmp_path / "borrowing.git"
    subprocess.run(["git", "clone", "-q", "--bare", "--shared", str(bare), str(borrowing)], check=True)
    store = PackStore(tmp_path / "cache", str(borrowing))
    assert not store.usable()  # its objects are another repository's (alternates)
    bed = tmp_path / "bed"
    make_testbed(str(borrowing), side, bed, store)
    assert git(bed, "rev-parse", "HEAD") == side and not store.dir.exists()


def _stored(store: PackStore) -> int:
    """Objects in all of the store's packs, counted once per pack that holds them."""
    count = 0
    for idx in store.dir.glob("*/pack-*.idx"):
        with open(idx, "rb") as fh:
            out = subprocess.run(["git", "show-index"], stdin=fh, capture_output=True, check=True).stdout
        count += len(out.splitlines())
    return count


def test_bases_built_out_of_date_order_store_the_history_about_once(tmp_path):
    """The newest base first, then each older one: none has a built ancestor. Without anchors (the control:
    anchors further apart than the history) each older base packed its whole history again; with anchors every
    4 first-parent commits each repeats at most the 4 commits above its anchor. No testbed holds a later object
    either way."""
    work = tmp_path / "work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    line = [_commit(work, n) for n in range(16)]  # each commit adds 3 objects: commit, tree, blob
    bare = tmp_path / "mirror.git"
    subprocess.run(["git", "clone", "-q", "--mirror", str(work), str(bare)], check=True)
    order = line[::-1]
    stored = {}
    for every in (10**6, 4):
        store = PackStore(tmp_path / f"cache-{every}", str(bare), anchor_every=every)
        for commit in order:
            bed = tmp_path / f"beds-{every}" / commit[:8]
            make_testbed(str(bare), commit, bed, store)
            assert _objects(bed) == _history(bare, commit), "its whole history and nothing later"
        stored[every] = _stored(store)
    assert stored[10**6] == sum(len(_history(bare, c)) for c in order)  # the control: 408 objects
    assert stored[4] <= len(_history(bare, line[-1])) + len(order) * 4 * 3  # anchored: 120 (the history: 48)


def _heavy_mirror(tmp_path: Path) -> tuple[Path, str]:
    """A bare repository whose history takes pack-objects a moment: 400 commits of 64 KiB of random bytes."""
    import os

    bare = tmp_path / "heavy.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    stream = bytearray()
    for n in range(400):
        blob = os.urandom(65536)
        stream += b"commit refs/heads/main\ncommitter t <t@t> %d +0000\ndata 2\nc\n" % (1_600_000_000 + n)
        stream += b"M 644 inline f%d.bin\ndata %d\n%s\n" % (n % 50, len(blob), blob)
    subprocess.run(["git", "fast-import", "--quiet"], cwd=bare, input=bytes(stream), check=True)
    return bare, git(bare, "rev-parse", "main")


def test_gc_removes_a_killed_makes_work_dir_but_not_a_running_ones(tmp_path):
    """A build killed while it packs a history (here a real SIGKILL of its process group) left the pack it was
    writing in a hidden work directory of the store, which nothing removed. gc removes it now; a make that is
    still running holds its work directory's lock, and gc keeps that one."""
    import fcntl
    import os
    import signal
    import sys
    import time

    from swe_rl.envs.cache import EnvCache

    bare, head = _heavy_mirror(tmp_path)
    root = tmp_path / "cache"
    code = (
        "import sys; from pathlib import Path; from swe_rl.envs.store.gitpacks import PackStore; "
        "PackStore(Path(sys.argv[1]), sys.argv[2]).chain(sys.argv[3])"
    )
    child = subprocess.Popen([sys.executable, "-c", code, str(root), str(bare), head], start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(root.glob("gitpacks/*/.tmp-*/incoming.pack")):
        time.sleep(0.001)
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    [store] = root.glob("gitpacks/*")
    [killed] = store.glob(".tmp-*")  # the control: what the kill left
    assert not (store / head).exists(), "the make finished before the kill: the history is too small to test"
    running = store / ".tmp-running"
    running.mkdir()
    held = os.open(running, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert EnvCache(root).gc() == [killed]
        assert running.is_dir() and not killed.exists()
    finally:
        os.close(held)
    assert EnvCache(root).gc() == [running]  # its make ended without removing it: now it goes
    assert PackStore(root, str(bare)).chain(head)  # and the next make goes through


@pytest.mark.ns
@pytest.mark.parametrize("settled", [False, True])
def test_a_testbed_indexed_in_the_second_it_was_written_diffs_without_writing_on_a_full_disk(
    tmp_path: Path, settled: bool
) -> None:
    """The attack: the agent fills the sandbox's disk, then the diff of a testbed it never changed runs. An index
    no older than its files (checked out and indexed in one second) holds racily clean entries, and ``git add``
    writes the index again in every command: on the full disk the diff fails. The control (settled=False)
    shows that failure; settle_index leaves an index git trusts, and the diff writes nothing."""
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)], check=True)
    try:
        repo = disk / "testbed"
        repo.mkdir()
        git(repo, "init", "-q", "-b", "main")
        _commit(repo, 1)
        base = _commit(repo, 2)
        second = int(time.time())
        for path in [*repo.glob("f*.py"), repo / ".git" / "index"]:
            os.utime(path, (second, second))
        git(repo, "config", "core.checkStat", "minimal")
        if settled:
            gitpacks.settle_index(repo)
        index = repo / ".git" / "index"
        assert (int(index.stat().st_mtime) > second) is settled
        subprocess.run(["dd", "if=/dev/zero", f"of={disk / 'fill'}", "bs=1M"], capture_output=True)
        diff = subprocess.run(["bash", "-c", diff_command(base)], cwd=repo, capture_output=True, text=True)
        if settled:
            assert (diff.returncode, diff.stdout) == (0, ""), diff.stderr
        else:
            assert diff.returncode != 0 and "Out of diskspace" in diff.stderr, diff.stderr
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=True)
