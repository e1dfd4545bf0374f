"""What pip's fallback leaves out with ``--no-deps`` (envs/build/pip_fallback.py): read in the venv from the installed
distributions' metadata, the repo's own with the extras its install command asks. Python 3.8 on reads it with
importlib.metadata, older ones with pip's pkg_resources; both are run here on a real venv with the repo
installed by ``setup.py develop`` (astropy 3.1's way)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from swe_rl.envs.build.interpreters import find_python
from swe_rl.envs.build.pip_fallback import missing_requirements, requested_extras
from swe_rl.errors import ConfigError

SETUP_PY = """from setuptools import setup
setup(name="proj", version="0.1", py_modules=["m"], install_requires=["sixx>=1", "old; python_version < '3'"],
      extras_require={"test": ["gadgetx<2"], "doc": ["docx"]})
"""


def _python36() -> Path | None:
    """A Python 3.6 wherever the env builds would find one (pyenv under $PYENV_ROOT or ~, uv, PATH); not a
    fixed /root path, which another user cannot even stat (/root is 0700)."""
    try:
        return find_python("3.6")[0]
    except ConfigError:
        return None


PY36 = _python36()


def test_the_extras_a_command_asks_of_the_repo():
    assert requested_extras("python -m pip install -e .[test] --verbose") == ["test"]
    assert requested_extras('python -m pip install -e ".[dev, docs]" && pip install ".[dev]"') == [
        "dev",
        "docs",
    ]
    assert requested_extras("python -m pip install -e . widget[extra]") == []  # another project's extras


@pytest.mark.parametrize(
    "python",
    [
        pytest.param(Path(sys.executable), id="importlib.metadata"),
        pytest.param(
            PY36,
            id="pkg_resources",
            marks=pytest.mark.skipif(PY36 is None, reason="no Python 3.6 here (pyenv install 3.6.15)"),
        ),
    ],
)
def test_the_missing_requirements_of_a_repo_installed_without_dependencies(tmp_path, python):
    subprocess.run([str(python), "-m", "venv", str(tmp_path / "v")], check=True, capture_output=True)
    repo = tmp_path / "proj"
    repo.mkdir()
    (repo / "setup.py").write_text(SETUP_PY)
    (repo / "m.py").write_text("")
    venv_python = tmp_path / "v" / "bin" / "python"
    subprocess.run(
        [str(venv_python), "setup.py", "-q", "develop", "--no-deps"],
        cwd=repo,
        check=True,
        capture_output=True,
    )
    environ = dict(os.environ)
    # the base requirement whose marker holds, and the asked extra's; not the other extra's, not the marked-out one
    assert missing_requirements(venv_python, None, repo, ["test"], environ) == ["gadgetx<2", "sixx>=1"]
    assert missing_requirements(venv_python, None, repo, [], environ) == ["sixx>=1"]
    # the control for "own": the same project seen from elsewhere gets no extras
    assert missing_requirements(venv_python, None, tmp_path / "other", ["test"], environ) == ["sixx>=1"]
