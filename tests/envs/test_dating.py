"""Dated builds on an index that lost releases, and editable installs uv cannot build.

A real package index on loopback (PEP 691 JSON with PEP 700 upload times) serves wheels built here, so
uv's ``--exclude-newer`` sees the dates it would see on PyPI. Every test shows the failure first: the
silent fallback, the refusal, the build error; then what the installer does about it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from tests.envs.helpers import git, make_repo, make_wheel, widget_task
from tests.envs.index import Index

from swe_rl.envs.build.dating import widened_in
from swe_rl.envs.build.install_tools import uv_binary
from swe_rl.envs.build.installer import InstallRun
from swe_rl.envs.build.pins import LOCK_NAME
from swe_rl.envs.build.recipe import EnvRecipe, InstallOptions
from swe_rl.envs.build.venv import create_venv, host_interpreter
from swe_rl.envs.cache import EnvCache
from swe_rl.errors import EnvBuildError

pytestmark = [
    pytest.mark.skipif(uv_binary() is None, reason="uv is not installed (pip install uv)"),
    pytest.mark.heavy,  # real environment builds, ~10 s each
]

TASK_DATE = "2019-01-01T00:00:00Z"
BEFORE, AFTER = "2018-06-01T00:00:00Z", "2020-01-01T00:00:00Z"


def build(tmp_path: Path, install: str, *, as_of_date: bool = True, name: str = "envs") -> tuple[Path, dict]:
    repo_cache = tmp_path / "mirrors"
    commit = (
        make_repo(repo_cache)
        if not repo_cache.exists()
        else git(repo_cache / "acme/widget", "rev-parse", "HEAD")
    )
    task = widget_task(commit, install=install, created_at=TASK_DATE)
    options = InstallOptions(as_of_date=as_of_date)
    env = EnvCache(tmp_path / name, repo_cache=repo_cache, options=options).ensure(task)
    assert env.venv is not None
    return env.venv, json.loads((env.venv / "swe-rl-env.json").read_text())


def pins(venv: Path) -> set[str]:
    return {
        line
        for line in (venv / LOCK_NAME).read_text().splitlines()
        if "==" in line and not line.startswith("#")
    }


def uv_alone(
    venv: Path, package: str, *, check: bool = False
) -> tuple[subprocess.CompletedProcess[str], str]:
    """``package`` installed by uv alone as of the task's date into a new venv (the tests' controls), and the
    venv's freeze afterwards."""
    create_venv(host_interpreter()[0], venv)
    uv = uv_binary()
    assert uv is not None
    python = str(venv / "bin" / "python")
    cmd = [uv, "pip", "install", "--python", python, "--exclude-newer", TASK_DATE, package]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ), check=check)
    freeze = subprocess.run(
        [uv, "pip", "freeze", "--python", python], capture_output=True, text=True, check=True
    )
    return proc, freeze.stdout


def test_a_dependency_no_release_of_which_is_as_old_as_the_date_is_widened(tmp_path, index):
    index.add("toolpkg", "1.0", BEFORE)
    index.add("toolpkg", "2.0", BEFORE, requires=("deppkg",))
    index.add("deppkg", "1.0", AFTER)  # the releases before the date were deleted from the index
    # the attack on the reward's meaning: the dated resolution falls back silently to the old release
    # (control: what uv alone does, seen here with the widening switched off by building undated)
    venv, record = build(tmp_path, "python -m pip install toolpkg")
    assert "toolpkg==2.0" in pins(venv) and "deppkg==1.0" in pins(venv)
    assert record["widened"] == [
        {
            "package": "deppkg",
            "needed_by": "toolpkg==2.0",
            "reason": "no release as old as the date survives",
            "as_of": "",
            "release": "",
            "replaces": "",
        }
    ]
    lock = (venv / LOCK_NAME).read_text().splitlines()
    assert widened_in(lock) == ["deppkg"]
    assert "swe-rl: widened deppkg" in (venv / "swe-rl-install.log").read_text()


def test_without_the_widening_uv_lands_silently_on_the_old_release(tmp_path, index):
    """The positive control of the test above: the same index and date, resolved by uv alone."""

    index.add("toolpkg", "1.0", BEFORE)
    index.add("toolpkg", "2.0", BEFORE, requires=("deppkg",))
    index.add("deppkg", "1.0", AFTER)
    proc, freeze = uv_alone(tmp_path / "bare", "toolpkg", check=True)
    assert "toolpkg==1.0" in freeze.split(), proc.stderr


def test_a_requirement_only_newer_releases_satisfy_is_widened(tmp_path, index):
    index.add("gadget", "1.0", BEFORE)
    index.add("gadget", "2.0", AFTER)
    venv, record = build(tmp_path, "python -m pip install 'gadget>=2'")
    assert "gadget==2.0" in pins(venv)
    assert [w["package"] for w in record["widened"]] == ["gadget"]
    assert "was filtered by `exclude-newer`" in (venv / "swe-rl-install.log").read_text()  # uv refused first


def test_pytest_is_held_to_a_release_that_lists_passed_tests(tmp_path, index):
    index.add("pytest", "3.5.1", BEFORE)  # prints no passed test under -rA
    index.add("pytest", "4.6.11", AFTER)
    venv, _ = build(tmp_path, "python -m pip install pytest")
    assert "pytest==4.6.11" in pins(venv)
    log = (venv / "swe-rl-install.log").read_text()
    assert "pytest>=4.6" in log and "widened pytest" in log
    # control: resolved from today's index (no date), the floor is not needed and not applied
    venv, _ = build(tmp_path, "python -m pip install pytest", as_of_date=False, name="undated")
    assert "pytest>=4.6" not in (venv / "swe-rl-install.log").read_text()


@pytest.mark.parametrize("name", ["pytest", "widget"])
def test_pytest_s_own_repository_is_not_held_to_the_floor(tmp_path, name):
    """The repository being pytest itself (mined from pytest's history), its editable install is the runner: a
    floor above its version (pytest 4.3.2.dev of 2019-03) made that install unsatisfiable; any other project
    (the control) is held to it."""
    testbed = tmp_path / "testbed"
    testbed.mkdir()
    (testbed / "setup.py").write_text(
        f'from setuptools import setup\nsetup(name="{name}", version="4.3.2")\n'
    )
    recipe = EnvRecipe(python="3", install="python -m pip install -e .", exclude_newer="2019-03-01T00:00:00Z")
    run = InstallRun(recipe, tmp_path / "venv", testbed, tmp_path / "log", installer="uv", cache=tmp_path)
    assert run._runner_floor() == ([] if name == "pytest" else ["pytest>=4.6"])


OLD_BACKEND = '''"""A build backend as setuptools < 64 was: no PEP 660 hook (build_editable)."""
import os


def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    info = os.path.join(metadata_directory, "oldpkg-1.0.dist-info")
    os.makedirs(info)
    with open(os.path.join(info, "METADATA"), "w") as f:
        f.write("Metadata-Version: 2.1\\nName: oldpkg\\nVersion: 1.0\\n")
    return "oldpkg-1.0.dist-info"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    raise NotImplementedError("installed editable only")
'''


def make_old_backend_repo(repo_cache: Path) -> Path:
    """acme/widget in ``repo_cache`` as the package ``oldpkg`` 1.0, built by a backend without build_editable."""
    make_repo(repo_cache)
    repo = repo_cache / "acme/widget"
    (repo / "oldpkg").mkdir()
    (repo / "oldpkg" / "__init__.py").write_text("VALUE = 1\n")
    (repo / "oldbackend.py").write_text(OLD_BACKEND)  # no build_editable: uv cannot, pip runs it
    (repo / "setup.py").write_text(
        'from setuptools import setup\nsetup(name="oldpkg", version="1.0", packages=["oldpkg"])\n'
    )
    (repo / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "oldbackend"\nbackend-path = ["."]\n'
    )
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "old build backend")
    return repo


def test_an_editable_install_uv_cannot_build_falls_back_to_pip(tmp_path, index, monkeypatch):
    import ensurepip

    bundled = Path(ensurepip.__file__).parent / "_bundled"
    setuptools = next(bundled.glob("setuptools-*.whl"), None)
    if setuptools is None:
        pytest.skip("this interpreter bundles no setuptools wheel for pip's build environment")
    links = tmp_path / "links"
    links.mkdir()
    (links / setuptools.name).write_bytes(setuptools.read_bytes())
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    monkeypatch.setenv("UV_FIND_LINKS", str(links))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    make_old_backend_repo(tmp_path / "mirrors")
    venv, record = build(tmp_path, "python -m pip install -e .", as_of_date=False)
    log = (venv / "swe-rl-install.log").read_text()
    assert "build_editable" in log  # uv tried first and could not: the failure is real
    assert record["pip_fallbacks"] == ["python -m pip install -e ."]
    assert any(
        line.startswith("# swe-rl: pip fallback: ") for line in (venv / LOCK_NAME).read_text().splitlines()
    )
    # installed editable (setup.py develop): the venv's path entry is the sandbox's testbed
    (pth,) = venv.glob("lib/python*/site-packages/easy-install.pth")
    assert "/testbed" in pth.read_text().split()


def test_a_setup_py_only_repo_is_installed_with_its_root_on_sys_path(tmp_path, monkeypatch):
    """pip gives a project without pyproject.toml `setup.py develop` (the root on sys.path); uv builds a PEP 660
    editable, whose import hook leaves the root off sys.path unless setuptools' compat mode is asked for."""
    import importlib.metadata
    import zipfile

    from packaging.version import Version

    dist = importlib.metadata.distribution("setuptools")  # offline: the installed setuptools, as a wheel
    if Version(dist.version) < Version("70.1"):
        pytest.skip("needs a setuptools that builds wheels without the wheel package (>= 70.1)")
    links = tmp_path / "links"
    with zipfile.ZipFile(links.mkdir() or links / f"setuptools-{dist.version}-py3-none-any.whl", "w") as whl:
        for file in dist.files or []:
            if not str(file).startswith("..") and "__pycache__" not in str(file):
                whl.write(file.locate(), str(file))
    make_wheel(
        links, "wheel", "0.43.0"
    )  # uv's default build requirements name it; setuptools >= 70.1 needs none
    for key, value in {"UV_FIND_LINKS": str(links), "UV_NO_INDEX": "1", "UV_OFFLINE": "1"}.items():
        monkeypatch.setenv(key, value)
    repo_cache = tmp_path / "mirrors"
    make_repo(repo_cache)
    repo = repo_cache / "acme/widget"
    for pkg in ("flatpkg", "tests"):  # a second top-level dir makes setuptools hide the root behind a finder
        (repo / pkg).mkdir()
        (repo / pkg / "__init__.py").write_text("")
    (repo / "setup.py").write_text(
        'from setuptools import setup\nsetup(name="flatpkg", version="1.0", packages=["flatpkg"])\n'
    )
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "setup.py only")
    venv, _ = build(tmp_path, "python -m pip install -e .", as_of_date=False)
    (site,) = venv.glob("lib/python*/site-packages")
    entries = [line for pth in site.glob("*.pth") for line in pth.read_text().split()]
    assert "/testbed" in entries  # the root itself, not an import hook
    assert not list(site.glob("__editable___*finder.py"))


def test_dated_build_tools_are_held_to_pep_517s_default_build_requirement(tmp_path, index):
    """After a build fails with 2024's setuptools, build tools follow the task's date, but never below the
    setuptools>=40.8.0 that uv and pip ask for a project without pyproject.toml (django 2.2's pylibmc, 2018)."""
    for version, uploaded in (("39.2.0", "2018-05-19T00:00:00Z"), ("40.8.0", "2019-02-05T12:00:00Z")):
        index.add("setuptools", version, uploaded)
    index.add("setuptools", "70.0.0", "2024-05-20T00:00:00Z")
    venvs = {dated: tmp_path / f"venv-{dated}" for dated in (False, True)}
    for venv in venvs.values():
        create_venv(host_interpreter()[0], venv)
    uv = uv_binary()
    assert uv is not None
    # control: the task's date alone lands below the default build requirement
    alone = subprocess.run(
        [
            uv,
            "pip",
            "compile",
            "-",
            "--exclude-newer",
            BEFORE,
            "--python",
            str(venvs[True] / "bin" / "python"),
        ],
        input="setuptools\n",
        capture_output=True,
        text=True,
        check=True,
    )
    assert "setuptools==39.2.0" in alone.stdout
    recipe = EnvRecipe(exclude_newer=BEFORE)
    found = {}
    for dated in (False, True):
        run = InstallRun(
            recipe, venvs[dated], tmp_path, tmp_path / "install.log", installer="uv", cache=tmp_path / "uv"
        )
        run.dated_build_tools = dated
        run.run("pip install setuptools")
        found[dated] = {p for p in run.freeze() if p.startswith("setuptools==")}
    assert found == {False: {"setuptools==70.0.0"}, True: {"setuptools==40.8.0"}}


C_BACKEND = '''"""A build backend that compiles a C extension against a library's header, as pylibmc's setup.py does."""
import os
import subprocess
import sys
import sysconfig


def get_requires_for_build_wheel(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    include = sysconfig.get_paths()["include"]
    proc = subprocess.run(["gcc", "-c", "-I" + include, "ext.c", "-o", os.devnull], capture_output=True, text=True)
    sys.stderr.write(proc.stderr)
    if proc.returncode:
        raise SystemExit("error: command 'gcc' failed with exit code 1")
    raise SystemExit("this test's sdist is never meant to build")
'''


def make_c_sdist(
    root: Path, name: str, version: str, backend: str = C_BACKEND, requires: tuple[str, ...] = ()
) -> Path:
    """An sdist whose build needs ``swe_rl_absent/lib.h``, a header no host has (or fails as ``backend`` does),
    depending on ``requires``."""
    import io
    import tarfile

    base = f"{name}-{version}"
    files = {
        "pyproject.toml": '[build-system]\nrequires = []\nbuild-backend = "cbackend"\nbackend-path = ["."]\n'
        f'[project]\nname = "{name}"\nversion = "{version}"\ndependencies = {json.dumps(list(requires))}\n',
        "cbackend.py": backend,
        "ext.c": "#include <Python.h>\n#include <swe_rl_absent/lib.h>\n",
        "PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        + "".join(f"Requires-Dist: {r}\n" for r in requires),
    }
    root.mkdir(parents=True, exist_ok=True)
    sdist = root / f"{base}.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        for path, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{base}/{path}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return sdist


@pytest.mark.skipif(shutil.which("gcc") is None, reason="the sdist's build needs gcc")
def test_a_dependency_whose_dated_sdist_cannot_compile_here_is_widened(tmp_path, index):
    """django 4.x's py3.txt as of 2021 resolves pylibmc 1.6.1, an sdist that needs libmemcached's headers;
    the official images, resolved in 2024, got 1.6.3's wheel. The dated sdist is taken from today's index."""
    index.serve("cpkg", make_c_sdist(tmp_path / "wheels", "cpkg", "1.0"), BEFORE)
    index.add("cpkg", "1.1", AFTER)  # today's release ships a wheel
    # control: resolved as of the date by uv alone, the install fails on the missing header
    alone, _ = uv_alone(tmp_path / "control", "cpkg")
    assert alone.returncode != 0
    assert "swe_rl_absent/lib.h" in alone.stderr and "cpkg@1.0" in alone.stderr
    venv, record = build(tmp_path, "python -m pip install cpkg")
    assert "cpkg==1.1" in pins(venv)
    assert record["widened"] == [
        {
            "package": "cpkg",
            "needed_by": "cpkg==1.0",
            "reason": "the dated sdist does not build here (no swe_rl_absent/lib.h)",
            "as_of": "",
            "release": "",
            "replaces": "",
        }
    ]
    assert widened_in((venv / LOCK_NAME).read_text().splitlines()) == ["cpkg"]
    assert "swe-rl: widened cpkg: (needed by cpkg==1.0" in (venv / "swe-rl-install.log").read_text()


def test_a_missing_library_that_today_cannot_build_either_is_named(tmp_path, index):
    """When no release of the dependency builds here, the error says which header and which package."""
    from swe_rl.errors import EnvBuildError

    index.serve("cpkg", make_c_sdist(tmp_path / "wheels", "cpkg", "1.0"), BEFORE)
    with pytest.raises(
        EnvBuildError, match=r"cpkg 1\.0 compiles against swe_rl_absent/lib\.h: install"
    ) as failed:
        build(tmp_path, "python -m pip install cpkg")
    # a dependency is not handed to pip, which knows no date and would mix today's releases with dated ones
    assert "pip runs it" not in str(failed.value)


def test_setuptools_plugins_follow_the_build_tools_date_not_the_tasks(tmp_path, index):
    """matplotlib 3.4 (2021) builds with setuptools-scm: as of its date that is 6.x, which reads
    pkg_resources.packaging, gone from the 2024 setuptools the build runs with; the official images had a
    2024 setuptools-scm beside their 2024 setuptools."""
    for version, uploaded in (("6.0.1", "2021-03-17"), ("8.1.0", "2024-05-01"), ("10.3.4", "2026-01-01")):
        wheel = make_wheel(index.root, "setuptools_scm", version)  # a wheel's file name has no dash
        index.serve("setuptools-scm", wheel, f"{uploaded}T00:00:00Z")
    venv = tmp_path / "venv"
    create_venv(host_interpreter()[0], venv)
    found = {}
    for dated in (False, True):
        run = InstallRun(
            EnvRecipe(exclude_newer="2021-06-23T00:00:00Z"),
            venv,
            tmp_path,
            tmp_path / "install.log",
            installer="uv",
            cache=tmp_path / "uv",
        )
        run.dated_build_tools = dated  # control: after a build failed with 2024's, the task's own date
        run.run("pip install --reinstall setuptools-scm")
        found[dated] = {p for p in run.freeze() if p.startswith("setuptools-scm==")}
    assert found == {False: {"setuptools-scm==8.1.0"}, True: {"setuptools-scm==6.0.1"}}


def test_a_traceback_through_prepare_metadata_for_build_editable_is_not_a_missing_pep_660_hook():
    """matplotlib 3.4's metadata step failed inside prepare_metadata_for_build_editable (a setuptools-scm
    error): that is not a backend without build_editable, and pip's legacy path must not be taken for it."""
    from swe_rl.envs.build.uv_output import NO_PEP660

    astroid = "AttributeError: module 'setuptools.build_meta' has no attribute 'build_editable'"
    matplotlib = "Call to `setuptools.build_meta:__legacy__.prepare_metadata_for_build_editable` failed"
    assert NO_PEP660.search(astroid) and not NO_PEP660.search(matplotlib)


def test_the_pytest_floor_is_resolved_as_of_its_own_date_not_from_today(tmp_path, index):
    """matplotlib 3.0 (2019-04): its 2019 pytest-rerunfailures imports _pytest.resultlog, which pytest 6.1
    removed. Widened from today, pytest>=4.6 became 6.1.2 and every test run crashed at collection; held to
    the floor's own date it is 4.6.2, as old as the floor allows."""
    index.add("pytest", "3.5.1", BEFORE)
    index.add("pytest", "4.6.2", "2019-06-03T18:42:02Z")
    index.add("pytest", "6.1.2", "2020-10-28T17:20:51Z")
    venv, record = build(tmp_path, "python -m pip install pytest")
    assert "pytest==4.6.2" in pins(venv)
    assert "pytest" not in [w["package"] for w in record["widened"]]
    # control: today's index, which a widening would take pytest from, offers the release that breaks them
    venv, _ = build(tmp_path, "python -m pip install pytest", as_of_date=False, name="undated")
    assert "pytest==6.1.2" in pins(venv)


# the backends' one way to write the wheel of a one-module distribution at version 1.0
WHEEL_WRITER = """
import os
import zipfile


def write_wheel(directory, dist):
    name = dist + "-1.0-py3-none-any.whl"
    info = dist + "-1.0.dist-info/"
    with zipfile.ZipFile(os.path.join(directory, name), "w") as zf:
        zf.writestr(dist + ".py", "VERSION = '1.0'\\n")
        zf.writestr(info + "METADATA", "Metadata-Version: 2.1\\nName: " + dist + "\\nVersion: 1.0\\n")
        zf.writestr(info + "WHEEL", "Wheel-Version: 1.0\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n")
        zf.writestr(info + "RECORD", "")
    return name
"""

FEATURE_BACKEND = (
    '''"""A build backend that, like a 2018 sdist using setuptools.Feature, builds only with an old setuptools."""
import setuptools
'''
    + WHEEL_WRITER
    + """

def get_requires_for_build_wheel(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    if int(setuptools.VERSION.split(".")[0]) >= 46:
        raise SystemExit("AttributeError: module 'setuptools' has no attribute 'Feature'")
    return write_wheel(wheel_directory, "featpkg")
"""
)


def serve_feature_sdist(tmp_path: Path, index: Index) -> None:
    """featpkg 1.0, an sdist that builds only with the setuptools of its time, and setuptools 40.8 and 70."""
    import io
    import tarfile

    files = {
        "pyproject.toml": '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "featbackend"\n'
        'backend-path = ["."]\n[project]\nname = "featpkg"\nversion = "1.0"\n',
        "featbackend.py": FEATURE_BACKEND,
        "PKG-INFO": "Metadata-Version: 2.1\nName: featpkg\nVersion: 1.0\n",
    }
    sdist = tmp_path / "wheels" / "featpkg-1.0.tar.gz"
    sdist.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(sdist, "w:gz") as tar:
        for path, text in files.items():
            info = tarfile.TarInfo(f"featpkg-1.0/{path}")
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    index.serve("featpkg", sdist, BEFORE)
    index.add("setuptools", "40.8.0", BEFORE)
    index.add("setuptools", "70.0.0", "2024-05-20T00:00:00Z")


# the repo's own build backend: like setuptools, it makes an editable install only from version 64
EDITABLE_BACKEND = (
    """import setuptools
"""
    + WHEEL_WRITER
    + """

def get_requires_for_build_editable(config_settings=None):
    return []


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    if int(setuptools.VERSION.split(".")[0]) < 64:
        raise AttributeError("module 'setuptools.build_meta' has no attribute 'build_editable'")
    return write_wheel(wheel_directory, "ownpkg")


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return write_wheel(wheel_directory, "ownpkg")
"""
)


def test_the_task_dates_build_tools_are_for_the_command_that_needed_them(tmp_path, index):
    """pvlib 0.6 (2019): a requirement built only with the task date's setuptools; the repo's own editable
    install that followed still got 2019's, which has no build_editable, and went to pip, whose build of the
    dated numpy failed. The dated build tools are for the one command whose build failed with 2024's."""
    serve_feature_sdist(tmp_path, index)
    testbed = tmp_path / "testbed"
    testbed.mkdir()
    (testbed / "ownbackend.py").write_text(EDITABLE_BACKEND)
    (testbed / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "ownbackend"\nbackend-path = ["."]\n'
    )
    recipe = EnvRecipe(pip=["featpkg"], install="python -m pip install -e .", exclude_newer=TASK_DATE)

    def install_run(name: str) -> InstallRun:
        venv = tmp_path / name
        create_venv(host_interpreter()[0], venv)
        return InstallRun(
            recipe, venv, testbed, tmp_path / f"{name}.log", installer="uv", cache=tmp_path / "uv"
        )

    control = install_run("control")  # the editable install under the task date's build tools
    control.dated_build_tools = True
    with pytest.raises(EnvBuildError):  # this venv has no pip to fall back to
        control.run("python -m pip install -e .")
    assert control.fallbacks == ["python -m pip install -e ."]
    assert "has no attribute 'build_editable'" in (tmp_path / "control.log").read_text()

    run = install_run("venv")
    lock = run.build(None)
    assert "featpkg==1.0" in lock and f"-e file://{testbed}" in lock
    assert run.fallbacks == [], "uv built the repo itself with 2024's build tools"
    assert [line for line in lock if line.startswith("# swe-rl: build tools as of")] == [
        "# swe-rl: build tools as of the task's date (a build failed with 2024's): python -m pip install featpkg"
    ]


@pytest.mark.skipif(shutil.which("gcc") is None, reason="the sdist's build needs gcc")
def test_remedies_apply_in_any_order_until_none_is_left(tmp_path, index):
    """django 2.2's py3.txt: maxminddb's sdist needs the task date's setuptools, then pylibmc's its headers.
    Whichever failure uv reports first, both remedies are applied before the build gives up."""
    serve_feature_sdist(tmp_path, index)
    index.serve("cpkg", make_c_sdist(tmp_path / "wheels", "cpkg", "1.0"), BEFORE)
    index.add("cpkg", "1.1", AFTER)
    venv, record = build(tmp_path, "python -m pip install featpkg cpkg")
    assert {"featpkg==1.0", "cpkg==1.1"} <= pins(venv)
    assert [w["package"] for w in record["widened"]] == ["cpkg"]
    assert any(
        line.startswith("# swe-rl: build tools as of") for line in (venv / LOCK_NAME).read_text().splitlines()
    )


HELPER_BACKEND = (
    '''"""A build backend whose build-time helper must be of one time with today's build tools (setuptools-scm 6
reads pkg_resources, which today's setuptools no longer has)."""
import buildhelper
'''
    + WHEEL_WRITER
    + """

def get_requires_for_build_editable(config_settings=None):
    return []


def _wheel(directory):
    if buildhelper.VERSION == "1.0":
        raise SystemExit("ModuleNotFoundError: No module named 'pkg_resources'")
    return write_wheel(directory, "helped")


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory)
"""
)


def test_a_project_uv_cannot_build_as_of_the_date_is_built_by_pip(tmp_path, index):
    """pytest 4.5 (2019): uv's build env took setuptools-scm as of the date (6.x, which imports pkg_resources)
    beside a setuptools without it; the official harness's pip took today's build tools, all of one time."""
    index.add("buildhelper", "1.0", BEFORE)
    index.add("buildhelper", "2.0", AFTER)
    repo_cache = tmp_path / "mirrors"
    make_repo(repo_cache)
    repo = repo_cache / "acme/widget"
    (repo / "helpedbackend.py").write_text(HELPER_BACKEND)
    (repo / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["buildhelper"]\nbuild-backend = "helpedbackend"\nbackend-path = ["."]\n'
    )
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "a build-time helper")
    venv, record = build(tmp_path, "python -m pip install -e .")
    log = (venv / "swe-rl-install.log").read_text()
    assert "No module named 'pkg_resources'" in log  # control: uv, as of the date, could not build it
    assert record["pip_fallbacks"] == ["python -m pip install -e ."]
    assert any(line.startswith("-e file://") for line in (venv / LOCK_NAME).read_text().splitlines())
    # the task date's build tools were tried and did not help: not recorded as taken
    assert not any(
        line.startswith("# swe-rl: build tools as of") for line in (venv / LOCK_NAME).read_text().splitlines()
    )


NO_BLAS_BACKEND = (
    "def get_requires_for_build_wheel(config_settings=None):\n    return []\n\n\n"
    "def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):\n"
    "    raise SystemExit('numpy.distutils.system_info.NotFoundError: No lapack/blas resources found.')\n"
)


def test_a_dependency_whose_dated_release_does_not_build_here_is_widened_after_the_dated_tools(
    tmp_path, index
):
    """pvlib 0.6 on Python 3.9: scipy 1.5.2 (as of its date) has no wheel for 3.9 and its sdist needs BLAS;
    the official images got a release with a wheel. The task date's build tools are tried first; then the
    dependency alone is taken from today's index."""
    index.serve("sdonly", make_c_sdist(tmp_path / "wheels", "sdonly", "1.0", NO_BLAS_BACKEND), BEFORE)
    index.add("sdonly", "2.0", AFTER)  # today's release ships a wheel
    alone, _ = uv_alone(tmp_path / "control", "sdonly")  # control: uv as of the date cannot install it
    assert alone.returncode != 0 and "No lapack/blas resources found" in alone.stderr
    venv, record = build(tmp_path, "python -m pip install sdonly")
    assert "sdonly==2.0" in pins(venv)
    assert record["widened"] == [
        {
            "package": "sdonly",
            "needed_by": "sdonly==1.0",
            "reason": "the dated release does not build here",
            "as_of": "",
            "release": "",
            "replaces": "",
        }
    ]
    log = (venv / "swe-rl-install.log").read_text()
    assert log.index("again with the task date's") < log.index("swe-rl: widened sdonly")


def test_parallel_builds_wait_for_each_others_sdist_builds(tmp_path, monkeypatch):
    """pvlib 0.5 and 0.6 built at -j 2 both needed pandas 1.1.2 from source (no wheel for Python 3.9): the
    second waited on uv's cache lock past its default 300 s and failed while the first was still compiling."""
    monkeypatch.delenv("UV_LOCK_TIMEOUT", raising=False)
    run = InstallRun(
        EnvRecipe(), tmp_path / "venv", tmp_path, tmp_path / "log", installer="uv", cache=tmp_path / "uv"
    )
    assert float(run.environ()["UV_LOCK_TIMEOUT"]) >= 3600
    monkeypatch.setenv("UV_LOCK_TIMEOUT", "42")  # the host's own setting wins
    assert run.environ()["UV_LOCK_TIMEOUT"] == "42"


# a repo whose own build backend, like setuptools, makes editables only from 64, and which depends on sdonly
DEPENDENT_BACKEND = """import base64, hashlib, os, zipfile
import setuptools

METADATA = "Metadata-Version: 2.1\\nName: ownpkg\\nVersion: 1.0\\nRequires-Dist: sdonly\\n"


def _modern():
    if int(setuptools.VERSION.split(".")[0]) < 64:
        raise AttributeError("module 'setuptools.build_meta' has no attribute 'build_editable'")


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    _modern()
    info = os.path.join(metadata_directory, "ownpkg-1.0.dist-info")
    os.makedirs(info)
    with open(os.path.join(info, "METADATA"), "w") as out:
        out.write(METADATA)
    return "ownpkg-1.0.dist-info"


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    _modern()
    name = "ownpkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as zf:
        zf.writestr("ownpkg.py", "VERSION = '1.0'\\n")
        zf.writestr("ownpkg-1.0.dist-info/METADATA", METADATA)
        zf.writestr("ownpkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n")
        zf.writestr("ownpkg-1.0.dist-info/RECORD", "")
    return name
"""


def test_when_the_dated_tools_cannot_build_the_repo_editable_the_failed_dependency_is_widened(
    tmp_path, index
):
    """pvlib 0.6's `-e .[all]`: netcdf4 1.5.4 (no wheel for Python 3.9, an sdist that needs HDF5's headers)
    failed with 2024's build tools; the task date's then could not build pvlib itself editable (setuptools
    < 64), and the install went to pip, which brought today's pytest-cov beside pytest 6.1 (no test ran).
    Instead 2024's come back and the dependency that failed under them is taken from today's index."""
    index.serve("sdonly", make_c_sdist(tmp_path / "wheels", "sdonly", "1.0", NO_BLAS_BACKEND), BEFORE)
    index.add("sdonly", "2.0", AFTER)
    index.add("setuptools", "40.8.0", BEFORE)
    index.add("setuptools", "70.0.0", "2024-05-20T00:00:00Z")
    testbed = tmp_path / "testbed"
    testbed.mkdir()
    (testbed / "ownbackend.py").write_text(DEPENDENT_BACKEND)
    (testbed / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "ownbackend"\nbackend-path = ["."]\n'
    )
    venv = tmp_path / "venv"
    create_venv(host_interpreter()[0], venv)  # no pip in it: a fallback to pip would fail the build
    recipe = EnvRecipe(install="python -m pip install -e .", exclude_newer=TASK_DATE)
    run = InstallRun(recipe, venv, testbed, tmp_path / "install.log", installer="uv", cache=tmp_path / "uv")
    lock = run.build(None)
    log = (tmp_path / "install.log").read_text()
    assert "No lapack/blas resources found" in log  # sdonly 1.0 failed with 2024's build tools
    assert "has no attribute 'build_editable'" in log  # the task date's could not build the repo editable
    assert run.fallbacks == [] and "sdonly==2.0" in lock and f"-e file://{testbed}" in lock
    assert [w.package for w in run.widened] == ["sdonly"]
    assert not any(line.startswith("# swe-rl: build tools as of") for line in lock)
