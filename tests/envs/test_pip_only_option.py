"""An install command with an option only pip has (scikit-learn's ``pip install -v --no-use-pep517
--no-build-isolation -e .``): uv refuses the option, so pip runs the command, as in the official images, and
the fallback is recorded. Before this the build failed on uv's "unexpected argument"."""

from __future__ import annotations

import ensurepip
import json
import shutil
import sys
from pathlib import Path

import pytest
from tests.envs.helpers import git, make_repo, widget_task

from swe_rl.envs.build.install_tools import uv_binary
from swe_rl.envs.build.pins import LOCK_NAME
from swe_rl.envs.build.recipe import InstallOptions
from swe_rl.envs.cache import EnvCache

pytestmark = [
    pytest.mark.skipif(uv_binary() is None, reason="uv is not installed (pip install uv)"),
    pytest.mark.heavy,  # real environment builds, ~10 s each
]

# pip asks for setuptools and wheel to be importable before a --no-use-pep517 install (the index serves a module
# of that name, which installing a wheel does not use)
COMMAND = (
    "python -m pip install wheel && python -m pip install --no-use-pep517 --no-build-isolation widgetdep"
)


def test_an_option_only_pip_has_sends_the_command_to_pip(tmp_path, index):
    index.add("wheel", "0.40.0", "2020-01-01T00:00:00Z")
    index.add("widgetdep", "1.0", "2020-01-01T00:00:00Z")
    bundled = next((Path(ensurepip.__file__).parent / "_bundled").glob("pip-*.whl"))  # the pip tool's pip
    (index.root / bundled.name).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(bundled, index.root / bundled.name)
    index.serve("pip", index.root / bundled.name, "2023-07-15T00:00:00Z")
    mirrors = tmp_path / "mirrors"
    task = widget_task(make_repo(mirrors), install=COMMAND, env_seed=["setuptools"])
    cache = EnvCache(tmp_path / "envs", repo_cache=mirrors, options=InstallOptions(as_of_date=False))
    env = cache.ensure(task)
    assert env.venv is not None
    record = json.loads((env.venv / "swe-rl-env.json").read_text())
    assert record["installer"] == "uv" and record["pip_fallbacks"] == [COMMAND]
    log = (env.venv / "swe-rl-install.log").read_text()
    assert "unexpected argument '--no-use-pep517'" in log  # uv refused it first
    # pip ran from the pip tool beside the venvs (envs/build/pip_tool.py): the venv got no pip of its own from it
    assert [p.name for p in (cache.root / "pip-tools").iterdir() if not p.name.endswith(".lock")] == [
        "{}.{}".format(*sys.version_info[:2])
    ]
    assert "uv has no --no-use-pep517" in log
    assert "widgetdep==1.0" in (env.venv / LOCK_NAME).read_text().split()


SETUP_PY = """from setuptools import setup
setup(name="widget", version="0.1", py_modules=["widget"], extras_require={"test": ["gadget"]})
"""
# setuptools 65 (this Python's bundled one, from the index) installs it by `setup.py develop`; a newer one hands
# that to pip with build isolation, which needs an index with setuptools
OWN_COMMAND = (
    "python -m pip install setuptools==65.5.0 && python -m pip install --no-use-pep517 -e .[test] "
    "&& python -m pip install --no-use-pep517 widgetdep"
)


@pytest.mark.skipif(
    not list((Path(ensurepip.__file__).parent / "_bundled").glob("setuptools-65.5.0-*.whl")),
    reason="this Python bundles no setuptools 65.5.0",
)
@pytest.mark.parametrize("dated", [True, False])
def test_what_pip_runs_takes_its_dependencies_as_of_the_task_date(tmp_path, index, dated):
    """pip knows no date: run plainly it brings today's releases of what the command needs (astropy 3.1's
    ``.[test]`` took matplotlib 3.9 into a 2019 env). On a dated build pip installs with ``--no-deps`` and the
    requirements still missing, the repo's own with the extras the command asks (``.[test]``) and those of
    what pip installed, are taken as of the date. The control: the same build undated takes today's."""
    bundled = Path(ensurepip.__file__).parent / "_bundled"
    index.root.mkdir(parents=True, exist_ok=True)
    for name, dist in (
        ("pip", next(bundled.glob("pip-*.whl"))),
        ("setuptools", bundled / "setuptools-65.5.0-py3-none-any.whl"),
    ):
        shutil.copyfile(dist, index.root / dist.name)
        index.serve(name, index.root / dist.name, "2022-10-01T00:00:00Z")
    index.add("wheel", "0.40.0", "2020-01-01T00:00:00Z")
    index.add("widgetdep", "1.0", "2020-01-01T00:00:00Z", requires=("sprocket",))
    for name in ("gadget", "sprocket"):
        index.add(name, "1.0", "2020-06-01T00:00:00Z")
        index.add(name, "2.0", "2025-06-01T00:00:00Z")
    mirrors = tmp_path / "mirrors"
    repo = mirrors / "acme" / "widget"
    make_repo(mirrors)
    (repo / "setup.py").write_text(SETUP_PY)
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "setup.py")
    task = widget_task(git(repo, "rev-parse", "HEAD"), install=OWN_COMMAND, created_at="2023-01-01T00:00:00Z")
    cache = EnvCache(tmp_path / "envs", repo_cache=mirrors, options=InstallOptions(as_of_date=dated))
    env = cache.ensure(task)
    assert env.venv is not None
    lock = (env.venv / LOCK_NAME).read_text().split()
    log = (env.venv / "swe-rl-install.log").read_text()
    assert "uv has no --no-use-pep517" in log and "widgetdep==1.0" in lock
    if dated:
        assert "gadget==1.0" in lock and "sprocket==1.0" in lock, log
        assert "left out of" in log
    else:  # the control: pip took today's
        assert "gadget==2.0" in lock and "sprocket==2.0" in lock, log
