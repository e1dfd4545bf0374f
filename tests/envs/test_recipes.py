"""Env builds from records: the Python the spec names, a clear error for an absent one, locks, dataset builds.

Installs run with uv against a local directory of wheels (UV_FIND_LINKS, UV_NO_INDEX): no network.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from tests.envs.helpers import make_repo, make_wheel, widget_task

from swe_rl.envs.build.install_tools import uv_binary
from swe_rl.envs.build.pins import LOCK_NAME
from swe_rl.envs.build.recipe import InstallOptions
from swe_rl.envs.cache import EnvCache
from swe_rl.errors import ConfigError

PYENV = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
OFFLINE = InstallOptions(as_of_date=False)

pytestmark = [
    pytest.mark.skipif(uv_binary() is None, reason="uv is not installed (pip install uv)"),
    pytest.mark.heavy,  # real environment builds, ~10 s each
]


@pytest.fixture
def index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "widgetdep", "1.0")
    monkeypatch.setenv("UV_FIND_LINKS", str(wheels))
    monkeypatch.setenv("UV_NO_INDEX", "1")
    monkeypatch.setenv("UV_OFFLINE", "1")
    return wheels


@pytest.fixture
def mirrors(tmp_path: Path) -> tuple[Path, str]:
    return tmp_path / "mirrors", make_repo(tmp_path / "mirrors")


def _python_version(venv: Path) -> str:
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sys; print(sys.version.split()[0])"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def test_env_uses_the_python_only_pyenv_provides(tmp_path, index, mirrors):
    if not list(PYENV.glob("3.9*")):
        pytest.skip("pyenv has no Python 3.9 here")
    repo_cache, commit = mirrors
    cache = EnvCache(tmp_path / "envs", repo_cache=repo_cache, options=OFFLINE)
    env = cache.ensure(widget_task(commit, python="3.9"))
    assert env.python is not None and env.python.is_relative_to(PYENV)
    assert _python_version(env.venv).startswith("3.9.")
    record = json.loads((env.venv / "swe-rl-env.json").read_text())
    assert record["python_provider"] == "pyenv" and record["installer"] == "uv"
    assert "widgetdep==1.0" in (env.venv / LOCK_NAME).read_text().split()


def test_absent_python_is_a_clear_error(tmp_path, index, mirrors):
    repo_cache, commit = mirrors
    cache = EnvCache(tmp_path / "envs", repo_cache=repo_cache, options=OFFLINE)
    with pytest.raises(ConfigError) as err:
        cache.ensure(widget_task(commit, python="3.4"))
    assert "Python 3.4 is needed" in str(err.value) and "pyenv install 3.4" in str(err.value)
    assert cache.records() == []


def test_lock_makes_a_rebuild_identical(tmp_path, index, mirrors):
    repo_cache, commit = mirrors
    task = widget_task(commit)
    cache = EnvCache(tmp_path / "envs", repo_cache=repo_cache, options=OFFLINE)
    first = cache.ensure(task)
    lock = (first.venv / LOCK_NAME).read_text()
    assert "widgetdep==1.0" in lock.split()
    make_wheel(index, "widgetdep", "1.1")  # the index moved on since the first build
    cache.gc(keep=set())
    assert not first.venv.exists()
    again = cache.ensure(task)
    assert (again.venv / LOCK_NAME).read_text() == lock
    assert json.loads((again.venv / "swe-rl-env.json").read_text())["locked_from"]
    # without the lock (a fresh cache) the same recipe resolves to the newer release: the lock did the work
    fresh = EnvCache(tmp_path / "fresh", repo_cache=repo_cache, options=OFFLINE).ensure(task)
    assert "widgetdep==1.1" in (fresh.venv / LOCK_NAME).read_text().split()


def test_constraints_apply_to_every_install(tmp_path, index, mirrors):
    repo_cache, commit = mirrors
    make_wheel(index, "widgetdep", "1.1")
    options = InstallOptions(as_of_date=False, constraints=("widgetdep<1.1",))
    env = EnvCache(tmp_path / "envs", repo_cache=repo_cache, options=options).ensure(widget_task(commit))
    assert "widgetdep==1.0" in (env.venv / LOCK_NAME).read_text().split()


def test_failed_install_keeps_its_log(tmp_path, index, mirrors):
    from swe_rl.errors import EnvBuildError

    repo_cache, commit = mirrors
    cache = EnvCache(tmp_path / "envs", repo_cache=repo_cache, options=OFFLINE)
    with pytest.raises(EnvBuildError) as err:
        cache.ensure(widget_task(commit, install="python -m pip install no-such-package-here"))
    log = next((tmp_path / "envs" / "logs").glob("*.install.log"))
    assert str(log) in str(err.value) and "no-such-package-here" in log.read_text()
