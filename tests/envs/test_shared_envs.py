"""One env per (repo, version, environment setup commit), as the harness shares them (issue #39).

The instances of a version are resolved as of their environment setup commit, so they share one venv; each
gets a clone of it (hard links) with the repo's own install run in it. The clone is checked: an install that
writes into a shared file in place would change every venv of the version, and fails the build instead.
Installs run with uv against a loopback index with upload times (conftest.py): no network.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from tests.envs.helpers import git, make_repo, make_wheel, widget_task
from tests.envs.index import Index

from swe_rl.envs.build.install_tools import uv_binary
from swe_rl.envs.build.recipe import InstallOptions
from swe_rl.envs.cache import EnvCache
from swe_rl.errors import EnvBuildError
from swe_rl.tasks.model import Task

pytestmark = [
    pytest.mark.skipif(uv_binary() is None, reason="uv is not installed (pip install uv)"),
    pytest.mark.heavy,  # real environment builds, ~10 s each
]

SETUP_DATE = "2021-06-01T00:00:00Z"  # the environment setup commit's


def _commit_at(repo: Path, when: str, message: str) -> str:
    (repo / "widget.py").write_text(f"def answer():\n    return 41  # {message}\n")
    git(repo, "add", "-A")
    stamp = {"GIT_COMMITTER_DATE": when, "GIT_AUTHOR_DATE": when}
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", message],
        cwd=repo,
        env={**os.environ, **stamp},
        check=True,
    )
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def version(tmp_path: Path, index: Index) -> tuple[Path, list[Task]]:
    """Three instances of one version (base commits of 2020 and 2021, setup commit of mid-2021) and one task
    that names no setup commit; widgetdep 1.0 (2020) and 2.0 (2022) on the index."""
    index.add("widgetdep", "1.0", "2020-01-01T00:00:00Z")
    index.add("widgetdep", "2.0", "2022-01-01T00:00:00Z")
    mirrors = tmp_path / "mirrors"
    make_repo(mirrors)
    repo = mirrors / "acme/widget"
    bases = [_commit_at(repo, f"2020-0{n}-01T00:00:00Z", f"base {n}") for n in (2, 3)]
    setup = _commit_at(repo, SETUP_DATE, "setup")
    install = "python -m pip install widgetdep"
    tasks = [
        widget_task(
            base,
            instance_id=f"acme__widget-{n}",
            install=install,
            created_at=f"2020-0{n}-15T00:00:00Z",
            environment_setup_commit=setup,
            env_seed=["pytest"],
        )
        for n, base in zip((2, 3), bases, strict=True)
    ]
    tasks.append(
        tasks[0].model_copy(update={"instance_id": "acme__widget-9", "environment_setup_commit": ""})
    )
    return mirrors, tasks


def _record(venv: Path) -> dict:
    return json.loads((venv / "swe-rl-env.json").read_text())


def _run(venv: Path, code: str) -> str:
    python = venv / "bin" / "python"
    return subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_instances_of_a_version_share_one_venv_and_each_installs_its_own_repo(tmp_path, version):
    mirrors, (first, second, undated) = version
    cache = EnvCache(tmp_path / "envs", repo_cache=mirrors, options=InstallOptions(as_of_date=True))
    a, b = cache.ensure(first), cache.ensure(second)
    assert a.venv and b.venv and a.venv != b.venv and a.testbed != b.testbed
    shared = {_record(a.venv)["shared_env"], _record(b.venv)["shared_env"]}
    assert len(shared) == 1 and _record(a.venv)["as_of_from"].startswith("environment setup commit")
    base = cache.root / "venvs" / shared.pop()
    # resolved as of the setup commit's date, not each task's: both get the release of 2020, not 2.0
    assert _run(a.venv, "import widgetdep; print(widgetdep.VERSION)") == "1.0"
    assert _run(b.venv, "import widgetdep; print(widgetdep.VERSION)") == "1.0"
    assert _record(base)["recipe"]["exclude_newer"] == SETUP_DATE
    # the seeded pytest is on disk once: its files in each clone are the shared venv's inodes
    package = Path(_run(a.venv, "import _pytest, os; print(os.path.dirname(_pytest.__file__))"))
    rel = package.relative_to(a.venv) / "python.py"
    assert (a.venv / rel).stat().st_ino == (b.venv / rel).stat().st_ino == (base / rel).stat().st_ino
    # what an install rewrites is each clone's own: its scripts point at itself, not at the shared venv
    assert str(a.venv) in (a.venv / "bin" / "activate").read_text()
    assert (a.venv / "pyvenv.cfg").stat().st_ino != (base / "pyvenv.cfg").stat().st_ino
    assert _run(b.venv, "import pytest; print('ok')") == "ok"
    # the control: a task that names no setup commit is resolved as of its own date, in a venv of its own
    c = cache.ensure(undated)
    assert c.venv and _record(c.venv)["shared_env"] not in (None, base.name)
    assert _record(c.venv)["as_of_from"] == "the task's created_at"


def test_an_install_that_writes_into_a_shared_file_in_place_fails_and_takes_the_shared_venv_with_it(
    tmp_path, version
):
    mirrors, (first, second, _) = version
    cache = EnvCache(tmp_path / "envs", repo_cache=mirrors, options=InstallOptions(as_of_date=True))
    sibling = cache.ensure(first)
    assert sibling.venv is not None
    base = cache.root / "venvs" / _record(sibling.venv)["shared_env"]
    target = "$(python -c 'import _pytest, os; print(os.path.dirname(_pytest.__file__))')/python.py"
    attack = second.model_copy(
        update={"install": f"python -m pip install widgetdep && echo '# in place' >> {target}"}
    )
    shared_file = Path(_run(sibling.venv, "import _pytest.python as m; print(m.__file__)"))
    with shared_file.open() as held:  # the sibling's file, kept open across the attack
        with pytest.raises(EnvBuildError, match="wrote in place"):
            cache.ensure(attack)
        # the attack is live: the write reached the sibling's venv through the shared inode ...
        assert "# in place" in held.read()
    # ... so every venv sharing the file is gone, to be built again
    assert not base.exists() and not sibling.venv.exists()
    again = cache.ensure(first)
    assert again.venv is not None
    package = Path(_run(again.venv, "import _pytest, os; print(os.path.dirname(_pytest.__file__))"))
    assert "# in place" not in (package / "python.py").read_text()
    # the control: the same append to a file the clone owns (its own script) builds
    own = second.model_copy(
        update={"install": "python -m pip install widgetdep && echo '# own' >> $VIRTUAL_ENV/bin/activate"}
    )
    built = cache.ensure(own)
    assert built.venv is not None and "# own" in (built.venv / "bin" / "activate").read_text()


def test_a_file_two_versions_share_by_content_changed_in_place_takes_both_versions_venvs(tmp_path, version):
    """Finished venvs share files by content across versions (one copy of a file that two envs have), so a
    write in place through one version's clone reaches the other version too: its venvs go as well."""
    mirrors, (first, second, undated) = version
    cache = EnvCache(tmp_path / "envs", repo_cache=mirrors, options=InstallOptions(as_of_date=True))
    other, sibling = cache.ensure(undated), cache.ensure(first)
    assert other.venv and sibling.venv
    other_shared = cache.root / "venvs" / _record(other.venv)["shared_env"]
    assert other_shared.name != _record(sibling.venv)["shared_env"]
    code = "import _pytest.python as m; print(m.__file__)"
    theirs, ours = Path(_run(other.venv, code)), Path(_run(sibling.venv, code))
    assert theirs.stat().st_ino == ours.stat().st_ino, "the other version's copy is the same file on disk"
    target = "$(python -c 'import _pytest, os; print(os.path.dirname(_pytest.__file__))')/python.py"
    attack = second.model_copy(
        update={"install": f"python -m pip install widgetdep && echo '# in place' >> {target}"}
    )
    with theirs.open() as held:
        with pytest.raises(EnvBuildError, match="wrote in place"):
            cache.ensure(attack)
        assert "# in place" in held.read(), "the write reached the other version's venv"
    assert not other.venv.exists() and not sibling.venv.exists() and not other_shared.exists()
    again = cache.ensure(undated)  # built again, and not from the changed copy
    assert again.venv is not None and "# in place" not in Path(_run(again.venv, code)).read_text()


def test_a_setup_commit_the_mirror_lacks_dates_the_env_by_the_base_commit(tmp_path, version):
    """A fork's snapshot may lack a version's setup commit (scikit-learn 0.20-0.22): the base commit's date is
    nearer the env than the task's created_at (scikit-learn-9288, version 0.22, was opened in 2017)."""
    mirrors, (first, _, _) = version
    lost = first.model_copy(update={"instance_id": "acme__widget-7", "environment_setup_commit": "0" * 40})
    cache = EnvCache(tmp_path / "envs", repo_cache=mirrors, options=InstallOptions(as_of_date=True))
    env = cache.ensure(lost)
    assert env.venv is not None
    record = _record(env.venv)
    assert record["as_of_from"].startswith(f"base commit {first.base_commit[:12]}")
    shared = _record(cache.root / "venvs" / record["shared_env"])
    assert shared["recipe"]["exclude_newer"] == "2020-02-01T00:00:00Z"  # the base commit's, not 2020-02-15


def test_a_setup_commit_the_mirror_lacks_is_stood_in_for_by_the_versions_newest_base_commit(
    tmp_path, version
):
    """django 3.0 and 3.2 and scikit-learn 0.20-0.22 (105 of Verified's 500): the fork snapshots here lack their
    setup commits. Loaded from one file, a version's rows share one env, dated (and its requirement files read)
    at the newest row's base commit, the nearest to the setup commit; the control, a row without the file's
    other rows, gets an env of its own, dated by its own base commit."""
    from swe_rl.tasks.loaders import load_tasks, write_jsonl

    mirrors, (first, second, _) = version
    lost = {
        "environment_setup_commit": "0" * 40,
        "version": "1.0",
        "problem_statement": "x",
        "FAIL_TO_PASS": ["t"],
    }
    rows = [t.model_copy(update=lost) for t in (first, second)]
    write_jsonl(rows, tmp_path / "tasks.jsonl")
    loaded = load_tasks(tmp_path / "tasks.jsonl")
    assert [t.setup_stand_in for t in loaded] == [second.base_commit, None]
    cache = EnvCache(tmp_path / "envs", repo_cache=mirrors, options=InstallOptions(as_of_date=True))
    a, b = cache.ensure(loaded[0]), cache.ensure(loaded[1])
    assert a.venv and b.venv and a.venv != b.venv
    shared = {_record(a.venv)["shared_env"], _record(b.venv)["shared_env"]}
    assert len(shared) == 1, "one env for the version"
    assert _record(a.venv)["as_of_from"].startswith(
        f"the version's newest base commit {second.base_commit[:12]}"
    )
    assert _record(b.venv)["as_of_from"].startswith(f"base commit {second.base_commit[:12]}")
    assert (
        _record(cache.root / "venvs" / next(iter(shared)))["recipe"]["exclude_newer"]
        == "2020-03-01T00:00:00Z"
    )
    alone = cache.ensure(rows[0])  # the control: no stand-in
    assert alone.venv and _record(alone.venv)["shared_env"] not in shared
    assert _record(cache.root / "venvs" / _record(alone.venv)["shared_env"])["recipe"]["exclude_newer"] == (
        "2020-02-01T00:00:00Z"
    )


def _spec_task(base: str, n: int, install: str) -> Task:
    """An instance whose row's spec installs widgetpkg into its version's shared venv (with uv, from its cache)."""
    config = {"python": "3", "install": install, "pip_packages": "widgetpkg==1.0"}
    record = {
        "instance_id": f"acme__widget-{n}",
        "repo": "acme/widget",
        "base_commit": base,
        "version": "1.0",
    }
    return Task.model_validate({**record, "created_at": "2021-06-01T00:00:00Z", "install_config": config})


def test_a_package_file_changed_in_place_does_not_come_back_from_uvs_cache(tmp_path, index):
    """uv links the files it installs from its cache: a write in place into the shared venv's copy changes the
    cache's, and a rebuild of the version links it again."""
    index.serve("widgetpkg", make_wheel(index.root, "widgetpkg", "1.0", package=True), "2020-01-01T00:00:00Z")
    commit = make_repo(tmp_path / "mirrors")
    cache = EnvCache(tmp_path / "envs", repo_cache=tmp_path / "mirrors")
    first = cache.ensure(_spec_task(commit, 1, "true"))
    assert first.venv is not None
    code = "import widgetpkg; print(widgetpkg.__file__)"
    module = Path(_run(first.venv, code))
    attack = _spec_task(commit, 2, f"echo '# in place' >> $(python -c '{code}')")
    with module.open() as held:  # the first instance's file, kept open across the attack
        with pytest.raises(EnvBuildError, match="wrote in place"):
            cache.ensure(attack)
        assert "# in place" in held.read(), "control: the write went through the link"
    again = cache.ensure(_spec_task(commit, 1, "true"))
    assert again.venv is not None
    assert "# in place" not in Path(_run(again.venv, code)).read_text()


def test_a_packed_version_is_copied_out_once_and_its_clones_are_checked_as_before(tmp_path, version):
    """After `env pack` the version's shared venv is in a read-only image (another filesystem: no hard link
    reaches it). The next instance copies it out once (a link swapped for a copy), clones it with hard links as
    before, and the clone check still catches an install that writes into a shared file in place. The packed
    sibling's venv is the image's copy, which the write cannot reach."""
    import shutil

    from swe_rl.envs.store.pack_images import image_of

    if shutil.which("mksquashfs") is None or os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("CI needs mksquashfs (squashfs-tools) and root")
        pytest.skip("needs mksquashfs and root")
    mirrors, (first, second, _) = version
    cache = EnvCache(tmp_path / "envs", repo_cache=mirrors, options=InstallOptions(as_of_date=True))
    a = cache.ensure(first)
    assert a.venv is not None
    base = cache.root / "venvs" / _record(a.venv)["shared_env"]
    try:
        assert cache.pack().manifest is not None and image_of(cache.root, base) is not None
        rel = Path(_run(a.venv, "import _pytest.python as m; print(m.__file__)")).relative_to(a.venv)
        target = "$(python -c 'import _pytest, os; print(os.path.dirname(_pytest.__file__))')/python.py"
        attack = second.model_copy(
            update={"install": f"python -m pip install widgetdep && echo '# in place' >> {target}"}
        )
        with pytest.raises(EnvBuildError, match="wrote in place"):
            cache.ensure(attack)
        # the control that the clone linked the copied-out shared venv: the write reached it (it is removed)
        assert not base.exists()
        assert "# in place" not in (a.venv / rel).read_text()  # the packed sibling: the image's copy
        assert image_of(cache.root, a.venv) is not None
        assert _run(a.venv, "import widgetdep; print(widgetdep.VERSION)") == "1.0"
        b = cache.ensure(second)  # built again: the shared venv too, loose, and the clone links it
        assert b.venv is not None and not base.is_symlink()
        assert (b.venv / rel).stat().st_ino == (base / rel).stat().st_ino
        assert _run(b.venv, "import widgetdep; print(widgetdep.VERSION)") == "1.0"
    finally:
        for mount_point in (cache.root / "packed").glob("*"):
            if os.path.ismount(mount_point):
                subprocess.run(["umount", "-l", str(mount_point)], check=False)
