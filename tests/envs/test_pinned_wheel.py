"""An exact pin with no wheel for the env's Python is replaced by its series' first release that has one.

scikit-learn 1.3's spec pins numpy==1.19.2 and scipy==1.5.2 on Python 3.9: the official images take them from
conda, built for 3.9, while PyPI has no cp39 wheel of either and numpy 1.19.2's sdist does not build here. The
installer's wheels-only probe finds such a pin; the install commands then name the first later release of the
pin's minor series with a platform wheel in its place, and the lock records the replacement so that a rebuild
under it does the same. What other packages require of it still holds (uv's ``--override`` would drop that). Beyond the series nothing is taken: there the pin builds from its sdist, as before.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.envs.helpers import make_repo
from tests.envs.index import Index
from tests.envs.test_dating import BEFORE, TASK_DATE, pins
from tests.envs.test_wheels import LATER, LATEST, PLATFORM_TAG, serve_sdist

from swe_rl.envs.build.dating import REPLACED, Widening, widenings_in
from swe_rl.envs.build.install_tools import uv_binary
from swe_rl.envs.build.pins import LOCK_NAME
from swe_rl.envs.build.remedies import replace_pins
from swe_rl.envs.build.venvbuild import shared_env_of
from swe_rl.envs.cache import EnvCache
from swe_rl.tasks.model import Task

pytestmark = [
    pytest.mark.skipif(uv_binary() is None, reason="uv is not installed (pip install uv)"),
    pytest.mark.heavy,  # real environment builds
]


def pinned_task(commit: str, pin: str) -> Task:
    """A task whose row's spec pins ``pin`` for its version's shared venv (as SWE-bench's specs pin numpy)."""
    return Task.model_validate(
        {
            "instance_id": "acme__widget-1",
            "repo": "acme/widget",
            "base_commit": commit,
            "version": "1.0",
            "created_at": TASK_DATE,
            "install_config": {"python": "3", "install": "true", "pip_packages": pin},
        }
    )


def serve_pinned(index: Index, *, fix_has_wheel: bool) -> None:
    """cext 1.0, the pinned release: an sdist only (it builds here, and marks itself as built); 1.1, of the next
    series, has a wheel for this Python; 1.0.1, the pin's bug-fix release, has one with ``fix_has_wheel``. cuser
    2.0 requires cext 1.1 (as pandas 1.5.3 requires numpy 1.20.3), and 1.0 any cext."""
    index.add("cuser", "1.0", BEFORE, requires=("cext>=1.0",))
    index.add("cuser", "2.0", BEFORE, requires=("cext>=1.1",))
    serve_sdist(index, "cext", "1.0", BEFORE)
    if fix_has_wheel:
        index.add("cext", "1.0.1", LATER, tag=PLATFORM_TAG)
    else:
        serve_sdist(index, "cext", "1.0.1", LATER)
    index.add("cext", "1.1", LATEST, tag=PLATFORM_TAG)


def shared_venv(venv: Path) -> Path:
    """The version's shared venv that the instance's ``venv`` is a clone of."""
    shared = shared_env_of(venv)
    assert shared is not None, venv
    return venv.parent / shared


def built_from_sdist(venv: Path) -> bool:
    (module,) = venv.glob("lib/python*/site-packages/cext.py")
    return "BUILT_FROM_SDIST" in module.read_text()


def test_a_pin_without_a_wheel_in_its_series_builds_from_its_sdist(tmp_path, index):
    """The control: with no wheel in the pin's series, the pin holds and builds (the next series' wheel is not
    taken)."""
    serve_pinned(index, fix_has_wheel=False)
    commit = make_repo(tmp_path / "mirrors")
    env = EnvCache(tmp_path / "envs", repo_cache=tmp_path / "mirrors").ensure(
        pinned_task(commit, "cext==1.0")
    )
    assert env.venv is not None
    assert "cext==1.0" in pins(env.venv) and built_from_sdist(shared_venv(env.venv))
    log = (env.venv / "swe-rl-install.log").read_text()
    assert "cext builds from its sdist (pinned; no later release of 1.0 has a platform wheel" in log


def test_a_pin_without_a_wheel_takes_its_series_first_release_with_one(tmp_path, index):
    serve_pinned(index, fix_has_wheel=True)
    commit = make_repo(tmp_path / "mirrors")
    cache = EnvCache(tmp_path / "envs", repo_cache=tmp_path / "mirrors")
    task = pinned_task(commit, "cext==1.0 cuser")
    env = cache.ensure(task)
    assert env.venv is not None
    shared = shared_venv(env.venv)
    assert "cext==1.0.1" in pins(shared) and not built_from_sdist(shared)  # neither the pin's sdist nor 1.1
    assert "cuser==1.0" in pins(shared)  # its 2.0 requires cext>=1.1: still held by that
    log = (shared / "swe-rl-install.log").read_text()
    assert "$ python -m pip install cext==1.0.1 cuser\n" in log  # the command as run
    (widening,) = json.loads((shared / "swe-rl-env.json").read_text())["widened"]
    assert widening["replaces"] == "cext==1.0" and widening["release"] == "1.0.1"
    lock = (shared / LOCK_NAME).read_text().splitlines()
    assert next(line for line in lock if line.startswith(REPLACED)).startswith(
        f"{REPLACED}cext==1.0 by 1.0.1 ("
    )
    assert [(w.package, w.release, w.replaces) for w in widenings_in(lock, "x")] == [
        ("cext", "1.0.1", "cext==1.0")
    ]
    assert "cext==1.0.1" in pins(env.venv)  # the instance's clone holds it too

    # a rebuild under the lock: the lock's cext==1.0.1 and the spec's cext==1.0 agree only through the replacement
    cache.gc(keep=set())
    again = cache.ensure(task)
    assert again.venv is not None
    relock = (shared_venv(again.venv) / LOCK_NAME).read_text().splitlines()
    assert pins(shared_venv(again.venv)) == pins(shared)
    assert any(line.startswith(f"{REPLACED}cext==1.0 by 1.0.1 (needed by the lock") for line in relock)
    assert "cext==1.0.1" in pins(again.venv)


def test_widenings_in_reads_a_lock_as_it_was_written():
    lock = [
        "cext==1.0.1",
        "# swe-rl: widened atomicwrites (needed by pytest==4.3.1; no release as old as the date survives)",
        f"{REPLACED}numpy==1.19.2 by 1.19.3 (needed by numpy==1.19.2; the pinned release has no cp39 wheel)",
        f"{REPLACED}torn",  # a line cut short is not a replacement
    ]
    found = widenings_in(lock, "the lock")
    assert [(w.package, w.release, w.replaces, w.needed_by) for w in found] == [
        ("atomicwrites", "", "", "the lock"),
        ("numpy", "1.19.3", "numpy==1.19.2", "the lock"),
    ]


def test_replace_pins_rewrites_the_pin_and_nothing_like_it():
    numpy = Widening(package="numpy", needed_by="numpy==1.19.2", release="1.19.3", replaces="numpy==1.19.2")
    other = Widening(package="scipy", needed_by="x")  # widened, not a replaced pin: no text changes for it
    command = (
        "python -m pip install numpy==1.19.2 'NumPy==1.19.2' Num_Py==1.19.2 numpy==1.19.20 numpy==1.19.2.post1 "
        "xnumpy==1.19.2 numpy>=1.19.2 scipy==1.5.2 && echo numpy==1.19.2"
    )
    assert replace_pins(command, [other, numpy]) == (
        "python -m pip install numpy==1.19.3 'NumPy==1.19.3' Num_Py==1.19.2 numpy==1.19.20 numpy==1.19.2.post1 "
        "xnumpy==1.19.2 numpy>=1.19.2 scipy==1.5.2 && echo numpy==1.19.3"
    )
    assert replace_pins(command, [other]) == command
    ext = Widening(
        package="typing-extensions", needed_by="x", release="4.0.1", replaces="typing_extensions==4.0.0"
    )
    assert (
        replace_pins("pip install typing.extensions==4.0.0", [ext]) == "pip install typing.extensions==4.0.1"
    )
