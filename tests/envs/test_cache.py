"""The environment cache: no future history, concurrent builders, crash leftovers."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from swe_rl.envs.cache import EnvCache


def _git(cwd, *args) -> str:
    # safe.directory: a testbed belongs to the ns sandboxes' uid once one has run on it
    return subprocess.run(
        ["git", "-c", "safe.directory=*", *args], cwd=cwd, capture_output=True, text=True, check=True
    ).stdout


def test_testbed_has_no_history_after_base(tasks, envs, cache_root):
    task = tasks[0]
    env = envs.ensure(task)
    mirror = cache_root / "repos" / f"{task.repo}.git"
    future = set(_git(mirror, "rev-list", "--all").split()) - set(
        _git(mirror, "rev-list", task.base_commit).split()
    )
    assert future, "the mirror does have later commits"
    reachable = set(_git(env.testbed, "rev-list", "--all", "--reflog").split())
    assert reachable == set(_git(mirror, "rev-list", task.base_commit).split())
    objects = _git(env.testbed, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)")
    assert not future & set(objects.split()), "no object of a later commit is stored"
    assert _git(env.testbed, "remote").strip() == ""
    # tags on the base or its ancestors are kept (versioning tools read them); later ones are not
    assert _git(env.testbed, "tag").split() == _git(mirror, "tag", "--merged", task.base_commit).split()
    assert "v-next" not in _git(env.testbed, "tag")
    assert not (env.testbed / ".git" / "FETCH_HEAD").exists()


def test_an_env_whose_venv_was_deleted_by_hand_is_built_again(tmp_path, tasks):
    import shutil

    cache = EnvCache(tmp_path / "envs")
    spec = cache.ensure(tasks[0])
    assert spec.venv is not None
    shutil.rmtree(spec.venv)  # a user freeing disk space; its record stays
    assert cache.get(spec.key) == spec, "control: the record still names the deleted venv"
    again = cache.ensure(tasks[0])
    assert again == spec and again.venv is not None and (again.venv / "bin" / "python").exists()


def test_envs_are_shared_per_commit_and_recipe(tasks, envs):
    specs = {t.instance_id: envs.ensure(t) for t in tasks}
    by_repo = {}
    for t in tasks:
        by_repo.setdefault(t.repo, set()).add(specs[t.instance_id].key)
    assert all(len(keys) == 1 for keys in by_repo.values()), "one env per repo+base commit"
    assert len({s.venv for s in specs.values()}) == 1, "one venv for one recipe"
    assert envs.ensure(tasks[0]) == specs[tasks[0].instance_id]


_BUILD = """
import sys
import time
from pathlib import Path
from swe_rl.envs.cache import EnvCache
from swe_rl.tasks.builtin import builtin_tasks
task = builtin_tasks("statkit")[0]
print(EnvCache(Path(sys.argv[1])).ensure(task).model_dump_json())
"""


def test_concurrent_builders_produce_one_env(tmp_path):
    root = tmp_path / "envs"
    procs = [
        subprocess.Popen([sys.executable, "-c", _BUILD, str(root)], stdout=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert len(set(outputs)) == 1
    assert len(list((root / "testbeds").iterdir())) == 1 and len(list((root / "venvs").iterdir())) == 1
    assert list((root / ".tmp").iterdir()) == []


def test_gc_removes_crash_leftovers_and_unused_envs(tmp_path, tasks):
    cache = EnvCache(tmp_path / "envs")
    spec = cache.ensure(tasks[0])
    crashed = tmp_path / "envs" / ".tmp" / "deadbeef.x1" / "out"
    crashed.mkdir(parents=True)
    assert cache.gc() == [crashed.parent]
    assert spec.testbed.is_dir()
    store = list((tmp_path / "envs" / "gitpacks").glob("*/files/*/*"))
    assert store and all(p.stat().st_nlink == 2 for p in store)  # each linked by the testbed
    venv_store = list((tmp_path / "envs" / "venvfiles").glob("*/*"))
    assert venv_store and all(p.stat().st_nlink >= 2 for p in venv_store)  # and by the venv (some twice)
    cache.gc(keep=set())
    assert not spec.testbed.exists() and cache.records() == []
    assert not any(p.exists() for p in store + venv_store)  # no testbed or venv links them any more


def test_venv_runs_the_tests_offline(textkit_env):
    out = subprocess.run(
        [str(textkit_env.venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=textkit_env.testbed,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stdout
    assert "passed" in out.stdout


def test_venv_is_byte_compiled_at_build_so_sandboxed_runs_do_not_recompile(textkit_env):
    """Sandboxes never write bytecode (read-only venv): the build leaves .pyc for pytest and its deps."""
    site = next(textkit_env.venv.glob("lib/python*/site-packages"))
    sources = [p for p in (site / "_pytest").rglob("*.py")]
    compiled = list((site / "_pytest").rglob("__pycache__/*.pyc"))
    assert sources and len(compiled) >= len(sources)


def test_a_relative_cache_dir_is_made_absolute(tmp_path, monkeypatch):
    """`--cache-dir envs` once failed every uv install: uv ran in the testbed and looked for
    `envs/.tmp/<key>/out/bin/python` there ("No virtual environment ... found")."""
    monkeypatch.chdir(tmp_path)
    assert EnvCache(Path("envs")).root == tmp_path / "envs"


def _kill_mid_thaw(link: Path) -> Path:
    """A real ``thaw_link`` in a child process, SIGKILLed once its copy has files: what it leaves."""
    code = "import sys; from pathlib import Path; from swe_rl.fileio import thaw_link; thaw_link(Path(sys.argv[1]))"
    child = subprocess.Popen([sys.executable, "-c", code, str(link)])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(link.parent.glob(f".{link.name}.thaw-*/d0/*")):
        time.sleep(0.001)
    child.kill()
    child.wait()
    assert link.is_symlink(), "the copy finished before the kill: the tree is too small to test this"
    [copy] = link.parent.glob(f".{link.name}.thaw-*")
    return copy


def _tree(path: Path) -> Path:
    for d in range(20):
        (path / f"d{d}").mkdir(parents=True)
        for f in range(150):
            (path / f"d{d}" / f"f{f}").write_text(f"{d}/{f}\n" * 64)
    return path


def test_gc_removes_what_a_killed_thaw_left_but_not_a_running_thaw(tmp_path):
    """A packed venv's or commit's copy-out killed mid-way (here a real SIGKILL) left a hidden half copy that no
    gc removed. Now gc removes it, unless that link's thaw is running (its lock held), and never follows a
    leftover link into what it leads to."""
    import fcntl

    from swe_rl.fileio import thaw_link

    # image: stands for the trees' place in a mounted image
    root, image = tmp_path / "envs", tmp_path / "image"
    (root / "venvs").mkdir(parents=True)
    store = root / "gitpacks" / "0123456789abcdef"
    store.mkdir(parents=True)
    venv, packs = root / "venvs" / "k1", store / "c0ffee"
    venv.symlink_to(_tree(image / "venv"))
    packs.symlink_to(_tree(image / "packs"))
    left = [_kill_mid_thaw(venv), _kill_mid_thaw(packs)]
    # killed between the exchange and the link's removal: the link at the copy's name
    (stale := root / "venvs" / ".k2.thaw-x1y2z3").symlink_to(image / "venv")
    assert all(p.is_dir() for p in left)  # the control: the kills did leave half copies
    cache = EnvCache(root)
    (root / "locks").mkdir(exist_ok=True)
    with open(root / "locks" / "k1.lock", "w") as a, open(store / ".thaw.lock", "a") as b:
        for held in (a, b):  # the two thaws are running
            fcntl.flock(held, fcntl.LOCK_EX)
        assert cache.gc() == [stale]
        assert all(p.is_dir() for p in left)
    removed = cache.gc()
    assert sorted(removed) == sorted(left) and not any(p.exists() for p in left)
    assert not stale.is_symlink() and (image / "venv" / "d0" / "f0").is_file()  # the link went, not its tree
    assert venv.is_symlink() and packs.is_symlink()
    assert (
        thaw_link(venv) and not venv.is_symlink() and (venv / "d19" / "f149").read_text() == "19/149\n" * 64
    )
