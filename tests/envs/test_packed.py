"""Envs packed into a read-only image (envs/store/packing.py) grade as the loose ones did, and the image is a lower
layer nothing can change: not a sandbox, not root on the host, not a reboot that finds it altered.

Each attack carries its control: the same write into the loose tree succeeds (the target exists and is
writable before the pack), a tree whose image differs in one byte is caught where an unchanged one passes, and
the sandbox that holds a replaced tree is seen holding it (else its files would be deleted under it)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import available_factory

from swe_rl.envs.cache import EnvCache
from swe_rl.envs.store.pack_images import (
    TRASH,
    PackError,
    collect_trash,
    compare_trees,
    image_of,
    manifests,
    mount_image,
)
from swe_rl.envs.store.packing import packable
from swe_rl.harness.grade_patch import grade_in, grade_patch
from swe_rl.sandbox.base import EnvSpec
from swe_rl.sandbox.identity import SANDBOX_UID, own_testbed
from swe_rl.tasks.model import Task

pytestmark = pytest.mark.ns


@pytest.fixture(autouse=True)
def _squashfs() -> None:
    if shutil.which("mksquashfs") is None or os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("CI needs mksquashfs (squashfs-tools) and root for the packed-env tests")
        pytest.skip("needs mksquashfs (squashfs-tools) and root")


@pytest.fixture
def cache(tmp_path: Path) -> EnvCache:  # type: ignore[misc]
    envs = EnvCache(tmp_path / "envs")
    yield envs
    for mount_point in (envs.root / "packed").glob("*"):
        if os.path.ismount(mount_point):
            subprocess.run(["umount", "-l", str(mount_point)], check=False)


def _unmount(mount_point: Path) -> None:
    subprocess.run(["umount", str(mount_point)], check=True)


def _site_file(venv: Path) -> Path:
    """A package file of the venv that tests import (pytest's own)."""
    return next(venv.glob("lib/python3*/site-packages/_pytest/python.py"))


def _statuses(verdict) -> tuple:  # type: ignore[no-untyped-def]
    return verdict.resolved, verdict.status, verdict.tests_status


async def _grades(task: Task, env: EnvSpec) -> list[tuple]:  # type: ignore[type-arg]
    factory = available_factory("ns")
    gold = await grade_patch(task, task.patch, factory, env, timeout=300)
    async with await factory.create(env) as box:  # a patch that fixes nothing: the tests run and fail
        await box.exec("echo 'Looked at it.' >> README.md", timeout=10)
        other = await box.diff()
    miss = await grade_patch(task, other, factory, env, timeout=300)
    assert gold.resolved and not miss.resolved and miss.tests_status  # both ran the tests
    return [_statuses(gold), _statuses(miss)]


async def _git_status_hashes_nothing(env: EnvSpec, options: str = "") -> bool:
    """Whether a sandbox's first ``git status`` finds every index entry fresh: git then leaves the index as it
    is (had one entry looked changed, git would hash the file and write the index into the upper layer: a new
    inode). The control is the same command after an edit, which must report it."""
    async with await available_factory("ns").create(env) as box:
        ran = await box.exec(
            f"stat -c %i .git/index; git {options} status --porcelain; stat -c %i .git/index; "
            "echo edit >> README.md; git status --porcelain",
            timeout=30,
        )
    first, second, *rest = ran.output.split("\n")
    assert rest[0] == " M README.md", ran.output  # the control: an edit is still seen
    return first == second


async def test_a_packed_env_grades_as_loose_and_nothing_writes_into_its_image(cache, task_by_id):
    task = task_by_id["swe-rl-builtin__textkit-3"]
    env = cache.ensure(task)
    loose = await _grades(task, env)
    assert await _git_status_hashes_nothing(env)  # loose: git trusts size and mtime (gitpacks.stat_minimal)
    target = _site_file(env.venv)
    original = target.read_bytes()
    # the control: root on the host (the local backend, a careless script) can change a loose venv in place
    with target.open("ab") as fh:
        fh.write(b"\n# planted\n")
    assert target.read_bytes() != original
    target.write_bytes(original)
    before = cache.disk_usage().total

    result = cache.pack()
    assert result.manifest is not None and result.trash_left == []
    assert {image_of(cache.root, env.testbed), image_of(cache.root, env.venv)} == {result.manifest.id}
    assert env.testbed.is_symlink() and env.venv.is_symlink()
    assert cache.disk_usage().total < before
    assert not list((cache.root / TRASH).glob("*/*"))  # no sandbox held a tree: the loose ones are gone
    assert not list((cache.root / "venvfiles").glob("*"))  # the shared-file store is emptied, folders too

    # the same write into the packed venv: refused, for root too
    with pytest.raises(OSError) as refused:
        target.open("ab")
    assert refused.value.errno == errno.EROFS
    assert await _grades(task, env) == loose

    assert await _git_status_hashes_nothing(env)  # the image's own inode numbers change nothing for git
    # the control: git's default comparison (inode too) finds the image's files changed, hashes and rewrites
    assert not await _git_status_hashes_nothing(env, "-c core.checkStat=default")
    factory = available_factory("ns")
    async with await factory.create(env) as box:
        # a sandbox's attack on its lower layers: the venv (read-only bind), a remount, the testbed (copy-up)
        attack = await box.exec(
            f"echo x >> {target} ; mount -o remount,rw / 2>&1 ; echo planted >> /testbed/README.md ; "
            "git status --porcelain",
            timeout=30,
        )
        assert "planted" not in target.read_text() and target.read_bytes() == original
        assert " M README.md" in attack.output  # the testbed's write landed in the sandbox's own layer
    async with await factory.create(env) as box:
        clean = await box.exec("git status --porcelain; tail -1 README.md", timeout=30)
        assert "planted" not in clean.output and "M README.md" not in clean.output


async def test_a_reboot_mounts_again_and_an_image_changed_on_disk_is_refused(cache, task_by_id):
    task = task_by_id["swe-rl-builtin__textkit-3"]
    env = cache.ensure(task)
    manifest = cache.pack().manifest
    assert manifest is not None
    mount_point = cache.root / "packed" / manifest.id
    _unmount(mount_point)  # what a reboot leaves
    assert not env.venv.is_dir() or not any(env.venv.iterdir())
    again = EnvCache(cache.root).get(env.key)  # first use mounts it again, after its sha256
    assert again is not None and os.path.ismount(mount_point) and _site_file(again.venv).is_file()
    assert (await _grades(task, again))[0][0]  # gold resolves on the remounted image

    _unmount(mount_point)
    image = cache.root / "packed" / f"{manifest.id}.sqfs"
    with image.open("r+b") as fh:  # one byte of the image changed while it was not mounted
        fh.seek(image.stat().st_size // 2)
        byte = fh.read(1)
        fh.seek(-1, os.SEEK_CUR)
        fh.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(PackError, match="changed on disk"):
        EnvCache(cache.root).get(env.key)
    with pytest.raises(PackError, match="changed on disk"):  # not built again behind the user's back either
        EnvCache(cache.root).ensure(task)
    assert not os.path.ismount(mount_point)


def _image_of(tree: Path, out: Path) -> Path:
    subprocess.run(["mksquashfs", str(tree), str(out / "img"), "-noappend", "-quiet"], check=True)
    mount_point = out / "mnt"
    mount_point.mkdir()
    subprocess.run(["mount", "-o", "loop,ro", str(out / "img"), str(mount_point)], check=True)
    return mount_point


@pytest.mark.parametrize("change", ["byte", "mode", "extra", "none"])
def test_the_check_finds_an_image_that_differs_from_its_tree(tmp_path, change):
    tree = tmp_path / "tree"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg" / "mod.py").write_text("VALUE = 1\n")
    os.symlink("pkg/mod.py", tree / "link")
    mount_point = _image_of(tree, tmp_path)
    try:
        mod = tree / "pkg" / "mod.py"
        st = mod.stat()
        if change == "byte":  # same size, same mtime: only the bytes tell
            mod.write_text("VALUE = 2\n")
            os.utime(mod, ns=(st.st_atime_ns, st.st_mtime_ns))
        elif change == "mode":
            mod.chmod(0o755)
        elif change == "extra":
            (tree / "pkg" / "new.py").write_text("")
        found = compare_trees(tree, mount_point)
        if change == "none":
            assert found == ""  # the control: an unchanged tree passes
        else:
            assert found.startswith("pkg") and "differ" in found
    finally:
        subprocess.run(["umount", str(mount_point)], check=False)


async def test_a_tree_a_running_sandbox_holds_is_kept_until_it_ends(cache, task_by_id):
    task = task_by_id["swe-rl-builtin__textkit-3"]
    env = cache.ensure(task)
    factory = available_factory("ns")
    async with await factory.create(env) as box:
        result = cache.pack()
        # the sandbox bound the loose trees before the pack: they are held, so kept (its files still there)
        assert {p.name.split("-", 1)[0] for p in result.trash_left} == {"testbeds", "venvs"}
        ran = await box.exec(
            "python -m pytest -q -x tests 2>&1 | tail -1; cat README.md | head -1", timeout=120
        )
        assert ran.returncode == 0 and "error" not in ran.output.lower()
    assert collect_trash(cache.root) == []
    assert not (cache.root / TRASH).exists() or not any((cache.root / TRASH).iterdir())


def test_gc_drops_an_image_with_its_last_env(cache, task_by_id):
    env = cache.ensure(task_by_id["swe-rl-builtin__textkit-3"])
    manifest = cache.pack().manifest
    assert manifest is not None and manifests(cache.root)
    assert cache.pack().manifest is None  # nothing loose is left to pack
    cache.gc(keep={env.key})
    assert os.path.ismount(cache.root / "packed" / manifest.id)  # still used
    cache.gc(keep=set())
    assert not env.testbed.is_symlink() and not env.venv.is_symlink()
    # the repository's packs are in the image too, and gc keeps packs (later testbeds chain onto them)
    assert [m.id for m in manifests(cache.root)] == [manifest.id]
    shutil.rmtree(cache.root / "gitpacks")
    cache.gc(keep=set())
    assert manifests(cache.root) == [] and not (cache.root / "packed" / f"{manifest.id}.sqfs").exists()
    with pytest.raises(PackError, match="is gone"):
        mount_image(cache.root, manifest.id)


@pytest.mark.docker
async def test_docker_grades_a_packed_env_as_ns_does(cache, task_by_id):
    """Docker copies the testbed in and binds the venv: through the links into the image, not the links."""
    task = task_by_id["swe-rl-builtin__textkit-3"]
    env = cache.ensure(task)
    assert cache.pack().manifest is not None and env.venv is not None and env.venv.is_symlink()
    ns = await grade_patch(task, task.patch, available_factory("ns"), env, timeout=300)
    docker = await grade_patch(task, task.patch, available_factory("docker"), env, timeout=300)
    assert ns.resolved and _statuses(docker) == _statuses(ns)


def _fsck(testbed: Path) -> int:
    return subprocess.run(
        ["git", "-c", "safe.directory=*", "fsck", "--connectivity-only"], cwd=testbed
    ).returncode


def _at_a_later_commit(cache: EnvCache, task: Task) -> Task:
    """The task at another commit of its mirror: a testbed of its own, the same venv."""
    later = subprocess.run(
        ["git", "-c", "safe.directory=*", "rev-list", "--all", f"^{task.base_commit}"],
        cwd=cache._source(task),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()[-1]
    return task.model_copy(update={"instance_id": f"{task.instance_id}-later", "base_commit": later})


async def test_a_merge_puts_two_images_in_one_while_a_sandbox_runs_on_the_old_one(cache, task_by_id):
    first = task_by_id["swe-rl-builtin__textkit-3"]
    second = _at_a_later_commit(cache, first)
    a = cache.ensure(first)
    old = cache.pack().manifest
    # the commits' pack directories (not files/, not the locks)
    packs = [p for p in (cache.root / "gitpacks").glob("*/*") if (p / "parent").is_file()]
    assert packs and all(image_of(cache.root, p) == old.id for p in packs)  # the packs went in too
    b = cache.ensure(second)  # a new testbed, loose, its history partly in the image's packs
    assert old is not None and image_of(cache.root, b.testbed) is None
    assert _fsck(b.testbed) == 0
    # those packs were copied out of the image once and hard-linked, not copied into each new testbed
    assert not any(p.is_symlink() for p in packs)
    assert all(f.stat().st_nlink > 1 for f in (b.testbed / ".git" / "objects" / "pack").iterdir())
    # The store's packs have the owner of whichever testbed took them last (a sandbox gives a testbed's files
    # to the sandbox uid, and the copied-out packs are those files). Here the image's copies are the sandbox
    # uid's (a's testbed was given before the pack) and the copies out are given back to root: the owners
    # differ as in a cache whose image was made before any testbed took its packs.
    own_testbed(b.testbed)  # as its validation's sandbox does (then the pack does not walk it again)
    copied = [f for p in packs for f in p.glob("pack-*")]
    assert copied and all(f.stat().st_uid == SANDBOX_UID for f in copied)
    for f in copied:
        os.chown(f, 0, 0)
    newer = cache.pack().manifest
    assert newer is not None and len(manifests(cache.root)) == 2
    async with await available_factory("ns").create(a) as box:
        merged = cache.pack(merge=True).manifest
        assert merged is not None and merged.entries == sorted({*old.entries, *newer.entries})
        # the larger image copied, the other's trees appended: its packs, copied out of the first and packed
        # again, are the same bytes (another owner: packimage.owner_matters)
        assert merged.appended_to == old.id and old.bytes > newer.bytes
        assert [m.id for m in manifests(cache.root)] == [merged.id]
        assert not (cache.root / "packed" / f"{old.id}.sqfs").exists()
        # the sandbox bound the old image's trees: unmounted lazily, they stay whole for it
        ran = await box.exec("python -m pytest -q -x tests 2>&1 | tail -1", timeout=120)
        assert ran.returncode == 0 and "passed" in ran.output
    assert image_of(cache.root, a.testbed) == image_of(cache.root, b.testbed) == merged.id
    assert (await grade_patch(first, first.patch, available_factory("ns"), a, timeout=300)).resolved


@pytest.mark.parametrize("dead", [False, True])
async def test_a_merge_appends_to_an_image_only_when_every_tree_in_it_is_still_used(cache, task_by_id, dead):
    """Appending keeps all the image had: with a tree no env uses any more in it (gc removed its link), the
    merge compresses anew and leaves that tree out. The control appends."""
    first = task_by_id["swe-rl-builtin__textkit-3"]
    a, b = cache.ensure(first), cache.ensure(_at_a_later_commit(cache, first))
    old = cache.pack().manifest
    assert old is not None and f"testbeds/{b.testbed.name}" in old.entries
    if dead:
        cache.gc(keep={a.key})
        assert not b.testbed.exists()
    other = task_by_id["swe-rl-builtin__statkit-1"]
    c = cache.ensure(other)  # loose, another repository
    merged = cache.pack(merge=True).manifest
    assert merged is not None and merged.appended_to == (None if dead else old.id)
    assert (f"testbeds/{b.testbed.name}" in merged.entries) is not dead
    assert (cache.root / "packed" / merged.id / b.testbed.name).exists() is not dead  # in the image itself
    assert [m.id for m in manifests(cache.root)] == [merged.id]
    assert image_of(cache.root, a.testbed) == image_of(cache.root, c.testbed) == merged.id
    assert _fsck(a.testbed) == _fsck(c.testbed) == 0
    assert (await grade_patch(other, other.patch, available_factory("ns"), c, timeout=300)).resolved


async def test_a_reset_in_place_onto_another_packed_testbed_leaves_nothing_of_the_last_use(cache, task_by_id):
    """A reuse path over images: use N plants files in its testbed, /tmp and $HOME of one packed env, the
    sandbox is reset in place onto another packed env's testbed, and use N+1 is graded there."""
    first = task_by_id["swe-rl-builtin__textkit-3"]
    second = _at_a_later_commit(cache, first)
    a, b = cache.ensure(first), cache.ensure(second)
    assert cache.pack().manifest is not None and image_of(cache.root, b.testbed) is not None
    async with await available_factory("ns").create(b) as fresh:
        pristine = (
            await fresh.exec("git rev-parse HEAD; git status --porcelain; ls -A /tmp ~", timeout=30)
        ).output
    async with await available_factory("ns").create(a) as box:
        bwrap = box.bwrap_pid
        plant = "echo 'VALUE = 1' > textkit/planted.py; touch /tmp/left ~/.left; git status --porcelain"
        assert "planted.py" in (await box.exec(plant, timeout=30)).output  # the control: the plant is there
        await box.reset(env=b)
        assert (box.restart_reason, box.bwrap_pid) == (None, bwrap)  # in place, not a restart
        state = await box.exec("git rev-parse HEAD; git status --porcelain; ls -A /tmp ~", timeout=30)
        assert state.output == pristine
        verdict = await grade_in(box, second, second.patch, timeout=300)
        assert verdict.resolved and verdict.tests_status


async def test_a_dataset_build_with_pack_measures_its_disk_after_the_pack(cache, task_by_id, tmp_path):
    from swe_rl.runs.envbuild import build_dataset

    tasks = [task_by_id["swe-rl-builtin__textkit-3"], task_by_id["swe-rl-builtin__statkit-1"]]
    report = await build_dataset(tasks, cache, report_path=tmp_path / "report.json", quiet=True, pack=True)
    assert [e.status for e in report.entries.values()] == ["built", "built"]
    disk = report.summary.disk
    assert disk is not None and disk.parts["packed"] > 0 and disk.parts["testbeds"] < 64 * 1024
    assert len(manifests(cache.root)) == 1 and not packable(cache.root)


def test_a_pack_is_not_starved_by_builds_that_keep_coming(tmp_path):
    """Two builds hand the shared lock to each other: each lets go only once the other holds it too, so the lock
    is never free. A pack must still get its turn (the builds that come after it wait for it). The control: the
    bare shared lock alone, the same hand-over, never lets the pack in. (The hand-over counts holders under one
    condition, so the two never let go at once: with an event each, both could see the other's and leave
    together, a moment the lock was free, and the control let the pack in on a loaded machine.)"""
    import threading

    from swe_rl.envs.store.packing import pack_lock

    def run(gated: bool) -> bool:
        root = tmp_path / ("gated" if gated else "bare")
        (root / "locks").mkdir(parents=True)
        stop, packed, turn = threading.Event(), threading.Event(), threading.Condition()
        holders: list[int] = []  # the builds holding the lock, in the order they took it

        def shared() -> contextlib.AbstractContextManager[object]:
            if gated:
                return pack_lock(root, exclusive=False)
            return _bare_shared(root / "locks" / ".pack.lock")

        def build(me: int) -> None:
            while not stop.is_set():
                with shared(), turn:
                    holders.append(me)
                    turn.notify_all()
                    # the earlier holder leaves once the other holds it too; or, after 2 s, the other is
                    # kept out by the pack's gate
                    turn.wait_for(
                        lambda: (holders[0] == me and len(holders) >= 2) or stop.is_set(), timeout=2
                    )
                    holders.remove(me)
                    turn.notify_all()

        def packer() -> None:
            with pack_lock(root, exclusive=True):
                packed.set()

        builds = [threading.Thread(target=build, args=(me,), daemon=True) for me in (0, 1)]
        for thread in builds:
            thread.start()
        with turn:
            assert turn.wait_for(lambda: len(holders) >= 1, timeout=2)
        threading.Thread(target=packer, daemon=True).start()
        got = packed.wait(8 if gated else 4)
        stop.set()
        for thread in builds:  # none outlives its folder
            thread.join(5)
        return got

    assert run(gated=True)
    assert not run(gated=False)


@contextlib.contextmanager
def _bare_shared(path: Path) -> Iterator[None]:
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
