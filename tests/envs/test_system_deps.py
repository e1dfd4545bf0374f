"""``--install-system-deps``: the Debian packages a build needs, installed with apt-get when swe-rl runs as root.

The test installs a real, small Debian package the host lacks (and removes it after); without root or apt-get,
the error names the package to install.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from swe_rl.envs.build.recipe import InstallOptions
from swe_rl.envs.build.system_deps import install_system_deps, system_needs
from swe_rl.errors import EnvBuildError
from swe_rl.tasks.model import Task
from swe_rl.tasks.specs import check_system

# small packages whose command has the package's name
CANDIDATES = ("tree", "units", "jdupes")


def _absent() -> str | None:
    for name in CANDIDATES:
        listed = subprocess.run(["dpkg", "-s", name], capture_output=True, check=False)
        if listed.returncode != 0 and shutil.which(name) is None:
            return name
    return None


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("apt-get") is None or shutil.which("dpkg") is None,
    reason="needs root and apt-get",
)
def test_a_missing_debian_package_is_installed_with_apt_get():
    package = _absent()
    if package is None:
        pytest.skip(f"the host has all of {CANDIDATES} already")
    with pytest.raises(EnvBuildError, match=f"apt-get install {package}"):  # control: the build's own check
        check_system([package], "a build")
    try:
        assert install_system_deps([package, "bash"]) == [package]
        assert shutil.which(package) is not None
        check_system([package], "a build")
        assert install_system_deps([package]) == []  # present now: nothing to do
    finally:
        subprocess.run(
            ["apt-get", "remove", "-y", "-q", package],
            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
            capture_output=True,
            check=False,
        )


def test_without_apt_get_the_error_names_the_package(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # a host with no apt-get (nor anything else)
    with pytest.raises(
        EnvBuildError, match=r"apt-get install swe-rl-no-such-cmd\).*cannot install them: (no apt|not root)"
    ):
        install_system_deps(["swe-rl-no-such-cmd"])


def test_the_needs_are_those_of_the_tasks_recipes():
    def task(repo: str, version: str) -> Task:
        return Task.model_validate(
            {
                "instance_id": f"{repo.replace('/', '__')}-1",
                "repo": repo,
                "base_commit": "abc123",
                "version": version,
            }
        )

    tasks = [task("matplotlib/matplotlib", "3.6"), task("pydata/xarray", "0.12"), task("acme/unknown", "1")]
    needs = system_needs(tasks, InstallOptions())
    assert {"pc:freetype2", "pc:qhull_r", "lib:eccodes", "gcc"} <= set(needs)
    assert len(needs) == len(set(needs))


def test_sphinx_7_2_on_needs_graphviz_dot_and_names_its_package(tmp_path, monkeypatch):
    """The official sphinx 7.2+ images apt-get graphviz: inheritance_diagram's tests run `dot` (sphinx-10614's
    gold fails on a host without it). Older versions' images have no graphviz, and their recipes ask for none."""

    def task(version: str) -> Task:
        return Task.model_validate(
            {
                "instance_id": "sphinx-doc__sphinx-1",
                "repo": "sphinx-doc/sphinx",
                "base_commit": "abc123",
                "version": version,
            }
        )

    assert "dot" in system_needs([task("7.2"), task("8.1")], InstallOptions())
    assert "dot" not in system_needs([task("5.0")], InstallOptions())
    monkeypatch.setenv("PATH", str(tmp_path))  # a host without dot
    with pytest.raises(EnvBuildError, match=r"needs dot .*apt-get install graphviz"):
        check_system(["dot"], "sphinx")
