"""Install specs of the SWE-bench repositories, for classic rows that carry no setup of their own.

swebench 5 ships no per-repo install specs (its rows carry an ``eval_script``); classic SWE-bench,
Lite and Verified rows name only ``repo`` and ``version``. The table (:mod:`swe_rl.tasks.spec_table`)
is swe-rl's own data; its facts are those of ``MAP_REPO_VERSION_TO_SPECS_PY`` in swebench 4.1.0
(``swebench/harness/constants/python.py``), with which the official evaluation images were built.
A record's own ``python`` / ``install`` / ``test_cmd`` fields, and a row's own ``install_config``, win.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import Any

import yaml

from swe_rl.errors import EnvBuildError
from swe_rl.tasks.model import Task
from swe_rl.tasks.repospec import RepoSpec
from swe_rl.tasks.spec_table import SPECS

# Debian packages that provide the commands a spec's build can need.
DEBIAN_PACKAGE = {
    "gcc": "gcc",
    "g++": "g++",
    "make": "make",
    "pkg-config": "pkg-config",
    "gfortran": "gfortran",
    "gs": "ghostscript",
    "libtoolize": "libtool",
    "dot": "graphviz",
}


def spec_for(task: Task) -> RepoSpec | None:
    """The table's spec for the task's repo and version, or None when the table does not know it."""
    for versions, spec in SPECS.get(task.repo, []):
        if task.version in versions.split():
            return spec
    return None


def known_repos() -> list[str]:
    return sorted(SPECS)


def test_directives(spec: RepoSpec | None, files: list[str]) -> list[str]:
    """The test files as the test command takes them (swebench's ``get_test_directives``)."""
    if spec is None or spec.directives == "paths":
        return files
    out = []
    for name in files:
        name = name.removesuffix(".py")
        name = name.removeprefix("tests/")
        out.append(name.replace("/", "."))
    return out


def conda_env_packages(text: str) -> list[str]:
    """The dependencies of a conda environment file as pip requirements (ValueError when not YAML)."""
    try:
        doc: Any = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"not a conda environment file: {exc}") from None
    out: list[str] = []
    for dep in doc.get("dependencies", []) if isinstance(doc, dict) else []:
        if isinstance(dep, dict):
            out += [str(p) for p in dep.get("pip", [])]
        elif isinstance(dep, str) and re.split(r"[=<> ]", dep, maxsplit=1)[0] not in ("python", "pip"):
            out.append(conda_to_pip(dep))
    return out


# conda-forge names whose PyPI distribution has another name. PyPI's ``iris`` is a placeholder whose import
# raises "Ambiguous 'iris' package": installed for xarray's environment.yml, it broke xarray's conftest
# (which imports iris to decide what to skip), so no test ran at all.
CONDA_PYPI_NAMES = {
    "iris": "scitools-iris",
    "matplotlib-base": "matplotlib",
    "dask-core": "dask",
    "pytables": "tables",
    "python-graphviz": "graphviz",
    "pyqt": "PyQt5",
}


def conda_to_pip(spec: str) -> str:
    """``numpy=1.21`` (conda's one '=') as pip's ``numpy==1.21``, conda-forge names as PyPI's
    (:data:`CONDA_PYPI_NAMES`); other specs as written."""
    match = re.fullmatch(r"([A-Za-z0-9_.\-]+)(.*)", spec.strip())
    if match is None:
        return spec
    name, rest = CONDA_PYPI_NAMES.get(match[1].lower(), match[1]), match[2].strip()
    if re.fullmatch(r"=[^=<>!~].*", rest):
        return f"{name}=={rest[1:].split('=')[0]}"
    return f"{name}{rest}"


# Shared libraries an env loads at test time that pip cannot provide ("lib:<name>" in a spec's ``system``),
# and their Debian packages; the official images had them from conda.
DEBIAN_LIBRARY = {"eccodes": "libeccodes0"}
# C libraries a build compiles against, found with pkg-config ("pc:<module>"), and their Debian packages:
# matplotlib's FreeType and qhull, which its build would otherwise download (the official images' builds did)
DEBIAN_PKG_CONFIG = {"freetype2": "libfreetype-dev", "qhull_r": "libqhull-dev"}


def present(need: str) -> bool:
    """Whether the host has ``need``: a command, a shared library (``lib:<name>``), or a library to compile
    against that pkg-config knows (``pc:<module>``)."""
    if need.startswith("lib:"):
        import ctypes.util

        return ctypes.util.find_library(need[4:]) is not None
    if need.startswith("pc:"):
        pkg_config = shutil.which("pkg-config")
        if pkg_config is None:
            return False
        found = subprocess.run([pkg_config, "--exists", need[3:]], capture_output=True, check=False)
        return found.returncode == 0
    return shutil.which(need) is not None


def debian_package(need: str) -> str:
    """The Debian package that provides ``need`` (see :func:`present`)."""
    kind, _, name = need.partition(":")
    if kind == "lib" and name:
        return DEBIAN_LIBRARY.get(name, f"lib{name}")
    if kind == "pc" and name:
        return DEBIAN_PKG_CONFIG.get(name, f"lib{name}-dev")
    return DEBIAN_PACKAGE.get(need, need)


def missing_system(needs: list[str] | tuple[str, ...]) -> list[str]:
    """The needs the host lacks; a pkg-config module also needs pkg-config itself."""
    missing = [need for need in needs if not present(need)]
    if any(need.startswith("pc:") for need in missing) and not present("pkg-config"):
        missing.insert(0, "pkg-config")
    return list(dict.fromkeys(missing))


def check_system(needs: list[str] | tuple[str, ...], what: str, *, hint: str = "") -> None:
    """EnvBuildError naming the Debian packages to install when the host lacks a command the build needs, a
    library it compiles against (``pc:<module>``), or a shared library (``lib:<name>``) its tests load."""
    missing = missing_system(needs)
    if missing:
        packages = " ".join(dict.fromkeys(debian_package(need) for need in missing))
        raise EnvBuildError(
            f"{what} needs {', '.join(missing)} on this host (apt-get install {packages}){hint}"
        )
