"""A dated release whose metadata uv cannot read (pandas before 0.25 requires ``pytz (>=2011k)``, a version PEP 440
refuses) is unusable to uv, which falls back to older releases (pandas 0.12's sdist, which does not build): the
build takes the dependency from a later release and records why. The control: uv alone, as of the date, fails on
the same index. (Here the wheels-only probe's own remedy also lands on the later release; on the real index it
did not: scikit-learn 0.20-0.22's pandas, docs/ENVIRONMENTS.md.)"""

from __future__ import annotations

import sys
import sysconfig

import pytest
from tests.envs.test_dating import AFTER, BEFORE, build, make_c_sdist, pins, uv_alone

from swe_rl.envs.build.install_tools import uv_binary

pytestmark = [
    pytest.mark.skipif(uv_binary() is None, reason="uv is not installed (pip install uv)"),
    pytest.mark.heavy,  # real environment builds, ~10 s each
]


_USE_2TO3 = """
def get_requires_for_build_wheel(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    raise SystemExit("error in tablekit setup command: use_2to3 is invalid.")
"""


def _index(index, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """tablekit as pandas was for Python 3.6 in 2017: an old release as an sdist that does not build here
    (pandas 0.12's use_2to3), the dated one with metadata uv cannot read, today's with a wheel."""
    index.add("pytz", "2018.3", "2013-01-01T00:00:00Z")
    old = make_c_sdist(tmp_path / "wheels", "tablekit", "0.12.0", backend=_USE_2TO3)
    index.serve("tablekit", old, "2013-06-01T00:00:00Z")
    here = f"cp{sys.version_info[0]}{sys.version_info[1]}"  # compiled wheels, as pandas' are
    tag = f"{here}-{here}-{sysconfig.get_platform().replace('-', '_').replace('.', '_')}"
    index.add(
        "tablekit", "0.20.3", BEFORE, requires=("pytz (>=2011k)",), tag=tag
    )  # what pandas 0.20.3 declares
    index.add("tablekit", "0.25.0", AFTER, requires=("pytz>=2017.2",), tag=tag)


def test_a_release_whose_metadata_uv_cannot_read_is_taken_from_todays_index(tmp_path, index):
    _index(index, tmp_path)
    venv, record = build(tmp_path, "python -m pip install tablekit")
    assert "tablekit==0.25.0" in pins(venv)
    assert [(w["package"], w["needed_by"]) for w in record["widened"]] == [("tablekit", "tablekit==0.20.3")]
    assert "could not be parsed" in (venv / "swe-rl-install.log").read_text()  # what uv said first


def test_without_the_widening_uv_alone_cannot_install_it(tmp_path, index):
    _index(index, tmp_path)
    proc, freeze = uv_alone(tmp_path / "bare", "tablekit")
    # it falls back to the old sdist, which does not build
    assert proc.returncode != 0 and "0.12.0" in proc.stderr and "use_2to3" in proc.stderr
    assert "tablekit" not in freeze
