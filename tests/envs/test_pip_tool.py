"""The pip that runs what uv cannot (envs/build/pip_tool.py): one per Python version beside the venvs, run on a venv's
interpreter, installing into that venv and adding no pip to it (an upgrade in each instance's clone put 11 MB of
pip into every one). Installs come from the loopback index (conftest.py), which serves the pip wheel the running
interpreter's ensurepip installs."""

from __future__ import annotations

import ensurepip
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from packaging.version import Version

from swe_rl.envs.build.install_tools import uv_binary
from swe_rl.envs.build.pip_tool import pip_tool

pytestmark = pytest.mark.skipif(uv_binary() is None, reason="uv is not installed (pip install uv)")


def _ensurepip_wheel(name: str) -> Path | None:
    """The ``name`` wheel this Python's ensurepip installs: its own ``_bundled`` copy, or, where a distribution
    unbundles them (Debian: /usr/share/python-wheels), the one in ``WHEEL_PKG_DIR``, as ensurepip looks."""
    folders = [Path(ensurepip.__file__).parent / "_bundled"]
    if unbundled := sysconfig.get_config_var("WHEEL_PKG_DIR"):
        folders.append(Path(unbundled))
    return next((wheel for folder in folders for wheel in sorted(folder.glob(f"{name}-*.whl"))), None)


def test_pip_runs_from_its_tool_dir_into_the_venv_and_the_venv_gets_no_pip(tmp_path, index):
    _serve_the_tool(index)
    index.add("widgetdep", "1.0", "2020-01-01T00:00:00Z")
    python, site = _venv(tmp_path / "venv")
    # the control: the venv has no pip of its own to run
    assert subprocess.run([str(python), "-m", "pip", "--version"], capture_output=True).returncode != 0

    root = tmp_path / "envs"
    tool = pip_tool(root, python, uv_binary(), dict(os.environ))
    assert tool == root / "pip-tools" / "{}.{}".format(*sys.version_info[:2])
    assert (tool / "pip").is_dir() and (tool / "wheel.py").is_file()
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


def _serve_the_tool(index) -> None:
    """The pip this Python's ensurepip installs and a ``wheel`` module, on the loopback index: what the pip tool
    installs."""
    bundled = _ensurepip_wheel("pip")
    assert bundled is not None, "this Python's ensurepip has no pip wheel"
    wheel = index.root / bundled.name
    wheel.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(bundled, wheel)
    index.serve("pip", wheel, "2023-07-15T00:00:00Z")
    index.add("wheel", "0.43.0", "2024-03-01T00:00:00Z")


def _venv(venv: Path) -> tuple[Path, Path]:
    """A venv without pip: its interpreter and its site-packages."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return python, Path(site)


def _pip(python: Path, tool: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), "-m", "pip", "install", "--disable-pip-version-check", *args],
        env={**os.environ, "PYTHONPATH": str(tool)},
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
    )


def _has_the_fallback_tools() -> bool:
    """ensurepip's setuptools, and a pip of 23.1 or later: an older one runs ``setup.py develop`` without
    ``wheel`` too (Debian's 23.0.1), so the control below could not tell the two apart."""
    pip, setuptools = _ensurepip_wheel("pip"), _ensurepip_wheel("setuptools")
    return setuptools is not None and pip is not None and Version(pip.name.split("-")[1]) >= Version("23.1")


@pytest.mark.skipif(
    not _has_the_fallback_tools(), reason="needs ensurepip's setuptools wheel and a pip of 23.1 or later"
)
def test_a_project_without_pyproject_is_installed_editable_in_its_venv_as_the_images_pip_did(tmp_path, index):
    """astropy 3.1: setup.py imports ``astropy_helpers``, installed in the venv beforehand; the project has no
    pyproject.toml. The images' conda pip had ``wheel`` beside it and ran ``setup.py develop`` in the env. A pip
    without ``wheel`` builds in an isolated env instead (today's setuptools, from the index: there, none), where
    the helpers are not: the control, with the same pip minus ``wheel``."""
    setuptools = _ensurepip_wheel("setuptools")
    _serve_the_tool(index)
    index.add("helpers", "3.1.1", "2019-01-01T00:00:00Z")  # the analogue of astropy-helpers
    python, site = _venv(tmp_path / "venv")
    tool = pip_tool(tmp_path / "envs", python, uv_binary(), dict(os.environ))
    assert tool is not None
    # the venv as the version's packages left it: setuptools and the helpers, not from any build env
    assert _pip(python, tool, "--no-index", str(setuptools)).returncode == 0
    assert _pip(python, tool, "helpers==3.1.1").returncode == 0
    project = tmp_path / "proj"
    (project / "proj").mkdir(parents=True)
    (project / "proj" / "__init__.py").write_text("")
    (project / "setup.py").write_text(
        "import helpers\nfrom setuptools import setup\n"
        "setup(name='proj', version=helpers.VERSION, packages=['proj'])\n"
    )

    without = tmp_path / "pip-without-wheel"
    top = str(tool)
    shutil.copytree(
        tool, without, ignore=lambda d, names: [n for n in names if d == top and n.startswith("wheel")]
    )
    control = _pip(python, without, "-e", ".", cwd=project)
    assert control.returncode != 0 and "build dependencies" in control.stdout + control.stderr

    done = _pip(python, tool, "-e", ".", cwd=project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "setup.py develop" in done.stdout + done.stderr
    imported = subprocess.run(
        [str(python), "-c", "import proj; print(proj.__file__)"], capture_output=True, text=True, check=True
    )
    # editable: the project's own file
    assert imported.stdout.strip() == str(project / "proj" / "__init__.py")
    assert not (site / "pip").exists()


def test_a_tool_dir_an_earlier_swe_rl_made_without_wheel_is_made_again(tmp_path, index):
    _serve_the_tool(index)
    python, _ = _venv(tmp_path / "venv")
    old = tmp_path / "envs" / "pip-tools" / "{}.{}".format(*sys.version_info[:2])
    (old / "pip").mkdir(parents=True)  # pip alone, as before
    tool = pip_tool(tmp_path / "envs", python, uv_binary(), dict(os.environ))
    assert tool == old and (tool / "wheel.py").is_file() and (tool / "pip" / "__init__.py").is_file()
