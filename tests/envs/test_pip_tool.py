"""The pip that runs what uv cannot (envs/pip_tool.py): one per Python version beside the venvs, run on a venv's
interpreter, installing into that venv and adding no pip to it (an upgrade in each instance's clone put 11 MB of
pip into every one). Installs come from the loopback index (conftest.py), which serves the pip wheel the running
interpreter bundles."""

from __future__ import annotations

import ensurepip
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from swe_rl.envs.install_tools import uv_binary
from swe_rl.envs.pip_tool import pip_tool

pytestmark = pytest.mark.skipif(uv_binary() is None, reason="uv is not installed (pip install uv)")


def test_pip_runs_from_its_tool_dir_into_the_venv_and_the_venv_gets_no_pip(tmp_path, index):
    bundled = next((Path(ensurepip.__file__).parent / "_bundled").glob("pip-*.whl"))
    wheel = index.root / bundled.name
    wheel.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(bundled, wheel)
    index.serve("pip", wheel, "2023-07-15T00:00:00Z")
    index.add("widgetdep", "1.0", "2020-01-01T00:00:00Z")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    # the control: the venv has no pip of its own to run
    assert subprocess.run([str(python), "-m", "pip", "--version"], capture_output=True).returncode != 0

    root = tmp_path / "envs"
    tool = pip_tool(root, python, uv_binary(), dict(os.environ))
    assert tool == root / "pip-tools" / "{}.{}".format(*sys.version_info[:2]) and (tool / "pip").is_dir()
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "--disable-pip-version-check", "widgetdep"],
        env={**os.environ, "PYTHONPATH": str(tool)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert list(site.glob("widgetdep-1.0.dist-info")) and not (site / "pip").exists()

    made = (tool / "pip").stat().st_mtime_ns
    assert (
        pip_tool(root, python, uv_binary(), {}) == tool and (tool / "pip").stat().st_mtime_ns == made
    )  # once
    assert pip_tool(root, python, None, {}) is None  # without uv the venv's own pip serves (brought up first)
