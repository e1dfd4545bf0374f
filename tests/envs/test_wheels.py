"""Dated builds that would compile a dependency: its release as of the date has no wheel for the env's Python.

pvlib 0.6 runs on Python 3.9, so its date is 3.9's release (2020-10-05), when numpy, pandas and scipy had no wheel
for 3.9 yet: uv compiled them from their sdists, for hours. The installer first resolves each install with wheels
only (a dry run); a dependency that would be built is resolved as of its earliest release with a wheel for this
Python instead, unless that wheel is pure Python (an sdist of pure Python builds in seconds) or none exists.
"""

from __future__ import annotations

import io
import tarfile

import pytest
from packaging.tags import sys_tags
from tests.envs.index import Index
from tests.envs.test_dating import AFTER, BEFORE, build, pins, uv_alone

from swe_rl.envs.build.dating import widened_in
from swe_rl.envs.build.install_tools import uv_binary
from swe_rl.envs.build.pins import LOCK_NAME

pytestmark = [
    pytest.mark.skipif(uv_binary() is None, reason="uv is not installed (pip install uv)"),
    pytest.mark.heavy,  # real environment builds, ~10 s each
]

HERE = next(iter(sys_tags()))  # this Python's most specific tag, e.g. cp311-cp311-manylinux_2_35_x86_64
PLATFORM_TAG = f"{HERE.interpreter}-{HERE.abi}-{HERE.platform}"
LATER, LATEST = "2021-03-01T12:00:00Z", "2022-01-01T00:00:00Z"

# an sdist's build backend: it builds (as a C extension's setup.py would, given time) and leaves a mark
BUILDING_BACKEND = """import os, zipfile

NAME, VERSION = {name!r}, {version!r}
INFO = NAME + "-" + VERSION + ".dist-info/"


def get_requires_for_build_wheel(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    wheel = NAME + "-" + VERSION + "-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel), "w") as zf:
        zf.writestr(NAME + ".py", "VERSION = " + repr(VERSION) + "\\nBUILT_FROM_SDIST = True\\n")
        zf.writestr(INFO + "METADATA", "Metadata-Version: 2.1\\nName: " + NAME + "\\nVersion: " + VERSION + "\\n")
        zf.writestr(INFO + "WHEEL", "Wheel-Version: 1.0\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n")
        zf.writestr(INFO + "RECORD", "")
    return wheel
"""


def serve_sdist(index: Index, name: str, version: str, uploaded: str) -> None:
    """An sdist of ``name`` that builds here."""
    files = {
        "pyproject.toml": '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'
        f'[project]\nname = "{name}"\nversion = "{version}"\n',
        "backend.py": BUILDING_BACKEND.format(name=name, version=version),
        "PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
    }
    sdist = index.root / f"{name}-{version}.tar.gz"
    sdist.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(sdist, "w:gz") as tar:
        for path, text in files.items():
            info = tarfile.TarInfo(f"{name}-{version}/{path}")
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    index.serve(name, sdist, uploaded)


def serve_compiled(index: Index) -> None:
    """cext: sdists as of the date and just after it, then wheels for this platform only (numpy 1.19.2, 1.19.3)."""
    serve_sdist(index, "cext", "1.0", BEFORE)
    serve_sdist(index, "cext", "1.1", AFTER)  # after the date, and still no wheel
    index.add("cext", "1.2", LATER, tag=PLATFORM_TAG)  # the earliest with a wheel for this Python
    index.add("cext", "1.3", LATEST, tag=PLATFORM_TAG)  # today's


def test_without_the_probe_a_dated_release_without_a_wheel_is_built_from_its_sdist(tmp_path, index):
    """The positive control: as of the date, uv alone builds cext 1.0 from its sdist."""
    serve_compiled(index)
    proc, freeze = uv_alone(tmp_path / "bare", "cext", check=True)
    assert "cext==1.0" in freeze.split(), proc.stderr
    (built,) = (tmp_path / "bare").glob("lib/python*/site-packages/cext.py")
    assert "BUILT_FROM_SDIST" in built.read_text()


def test_a_dependency_that_would_be_compiled_is_widened_to_its_first_release_with_a_wheel(tmp_path, index):
    serve_compiled(index)
    venv, record = build(tmp_path, "python -m pip install cext")
    assert "cext==1.2" in pins(venv)  # not 1.0 (built from source), nor today's 1.3
    tag = HERE.interpreter  # cp311
    assert record["widened"] == [
        {
            "package": "cext",
            "needed_by": "cext==1.0",
            "reason": f"no {tag} wheel as of the date; earliest with one: 1.2",
            "as_of": "2021-03-01T12:00:01Z",
            "release": "",
            "replaces": "",
        }
    ]
    assert widened_in((venv / LOCK_NAME).read_text().splitlines()) == ["cext"]
    log = (venv / "swe-rl-install.log").read_text()
    assert "Wheels are required for `cext`" in log  # the probe stopped the install before any build
    assert f"swe-rl: widened cext: (needed by cext==1.0; no {tag} wheel" in log
    (site,) = venv.glob("lib/python*/site-packages")
    assert "BUILT_FROM_SDIST" not in (site / "cext.py").read_text()


def test_a_pure_python_sdist_is_built_not_widened(tmp_path, index):
    """An sdist of pure Python builds in seconds: it keeps its dated release, even where a later release has a
    wheel (for any platform); so does a package no release of which has a wheel."""
    serve_sdist(index, "purepkg", "1.0", BEFORE)
    index.add("purepkg", "2.0", LATER)  # py3-none-any
    serve_sdist(index, "sdistonly", "1.0", BEFORE)
    serve_sdist(index, "sdistonly", "2.0", LATER)
    serve_compiled(index)
    venv, record = build(tmp_path, "python -m pip install purepkg sdistonly cext")
    assert {"purepkg==1.0", "sdistonly==1.0", "cext==1.2"} <= pins(venv)
    assert [w["package"] for w in record["widened"]] == ["cext"]
    log = (venv / "swe-rl-install.log").read_text()
    assert "purepkg builds from its sdist (pure Python: its first wheel, 2.0, is for any platform)" in log
    assert "sdistonly builds from its sdist (no later release has a wheel for this Python)" in log


def test_a_widening_the_requirements_do_not_allow_is_taken_back(tmp_path, index):
    """astroid 2.5 pins wrapt<1.13, and wrapt's first wheel for Python 3.9 is 1.13: wrapt is built as before."""
    serve_compiled(index)
    venv, record = build(tmp_path, "python -m pip install 'cext<1.2'")
    assert "cext==1.0" in pins(venv)
    assert record["widened"] == []
    assert (
        "cext builds from its sdist (the requirements do not allow its first release with a wheel)"
        in (venv / "swe-rl-install.log").read_text()
    )


def test_an_undated_build_does_not_probe(tmp_path, index):
    serve_compiled(index)
    venv, record = build(tmp_path, "python -m pip install cext", as_of_date=False)
    assert "cext==1.3" in pins(venv) and record["widened"] == []
    assert "wheels only" not in (venv / "swe-rl-install.log").read_text()


def test_a_widened_release_whose_dependency_has_no_wheel_either_widens_that_too(tmp_path, index):
    """pandas 1.1.3 has a wheel for Python 3.9, but needs numpy, none of whose releases as of the date has one:
    uv names both, and the second is widened next."""
    serve_sdist(index, "cbase", "1.0", BEFORE)
    index.add("cbase", "1.1", LATER, tag=PLATFORM_TAG)
    serve_sdist(index, "ctop", "1.0", BEFORE)
    index.add("ctop", "1.1", LATER, requires=("cbase",), tag=PLATFORM_TAG)
    venv, record = build(tmp_path, "python -m pip install ctop")
    assert {"ctop==1.1", "cbase==1.1"} <= pins(venv)
    assert [w["package"] for w in record["widened"]] == ["ctop", "cbase"]


def test_a_dependency_newer_than_the_date_that_a_widened_release_needs_is_widened_too(tmp_path, index):
    """numba 0.51.2 (as of Python 3.9's release) has no wheel for 3.9; 0.53.0, the first with one, needs
    llvmlite 0.36, uploaded after numba 0.53.0's wheel. The probe says llvmlite was filtered out by the date."""
    serve_sdist(index, "cllvm", "1.0", BEFORE)
    index.add("cllvm", "1.1", LATEST, tag=PLATFORM_TAG)
    serve_sdist(index, "cnum", "1.0", BEFORE)
    index.add("cnum", "1.1", LATER, requires=("cllvm>=1.1",), tag=PLATFORM_TAG)
    venv, record = build(tmp_path, "python -m pip install cnum")
    assert {"cnum==1.1", "cllvm==1.1"} <= pins(venv)
    assert [(w["package"], bool(w["as_of"])) for w in record["widened"]] == [("cnum", True), ("cllvm", False)]


def test_a_command_that_hides_the_probes_exit_code_is_still_retried(tmp_path, index):
    serve_compiled(index)
    venv, record = build(tmp_path, "python -m pip install cext || true")
    assert "cext==1.2" in pins(venv)
    assert [w["package"] for w in record["widened"]] == ["cext"]
