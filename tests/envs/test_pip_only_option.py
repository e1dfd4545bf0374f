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
from tests.envs.helpers import make_repo, widget_task

from swe_rl.envs.cache import EnvCache
from swe_rl.envs.install_tools import uv_binary
from swe_rl.envs.lock import LOCK_NAME
from swe_rl.envs.recipe import InstallOptions

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
    # pip ran from the pip tool beside the venvs (envs/pip_tool.py): the venv got no pip of its own from it
    assert [p.name for p in (cache.root / "pip-tools").iterdir() if not p.name.endswith(".lock")] == [
        "{}.{}".format(*sys.version_info[:2])
    ]
    assert "uv has no --no-use-pep517" in log
    assert "widgetdep==1.0" in (env.venv / LOCK_NAME).read_text().split()
