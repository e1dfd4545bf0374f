"""One recipe, one env: what a failed sdist build leads to does not depend on which build fails first.

uv builds sdists in parallel (and even one at a time, in no fixed order) and stops at the first failure it
sees, so with two failing builds the one it names follows timing. The installer widens the package named.
Widened to today's index, the order decided the env: xarray-6599 on Python 3.10 met numba 0.53.1 and
llvmlite 0.36.0, which both refuse 3.10; llvmlite named first took both to today's (numba 0.68.1, which breaks
``import sparse`` beside the dated coverage), numba named first left sparse out. Held to each package's first
release with a wheel for this Python, every order ends in the same env.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from tests.envs.index import Index
from tests.envs.test_dating import AFTER, BEFORE, TASK_DATE, build, make_c_sdist, pins
from tests.envs.test_wheels import LATEST, PLATFORM_TAG

from swe_rl.envs.build.install_tools import uv_binary
from swe_rl.envs.build.uv_output import DEPENDENCY_FAILED
from swe_rl.envs.build.venv import create_venv, host_interpreter

pytestmark = [
    pytest.mark.skipif(uv_binary() is None, reason="uv is not installed (pip install uv)"),
    pytest.mark.heavy,  # real environment builds, ~10 s each
]

NAMES = ("aa", "bb")


def refusing_backend(delay: float) -> str:
    """A build backend that refuses this Python after ``delay`` seconds, as numba 0.53.1's setup.py does."""
    return (
        "import time\n\n\ndef get_requires_for_build_wheel(config_settings=None):\n"
        f"    time.sleep({delay})\n"
        "    raise SystemExit('RuntimeError: Cannot install on Python version 3.x; only versions <3.10')\n\n\n"
        "def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):\n"
        "    raise SystemExit('never reached')\n"
    )


def refusing_sdist(index: Index, root: Path, name: str, slow: str, requires: tuple[str, ...] = ()) -> None:
    delay = 3 if name == slow else 0
    index.serve(name, make_c_sdist(root, name, "1.0", refusing_backend(delay), requires), BEFORE)


@pytest.mark.parametrize("slow", NAMES)
def test_uv_names_whichever_build_fails_first(tmp_path, index, slow):
    """The control: uv alone names the build that fails first, so a remedy chosen by it follows timing."""
    for name in NAMES:
        refusing_sdist(index, tmp_path / "wheels", name, slow)
    index.add("top", "1.0", BEFORE, requires=NAMES)
    venv = tmp_path / "control"
    create_venv(host_interpreter()[0], venv)
    uv = uv_binary()
    assert uv is not None
    python = str(venv / "bin" / "python")
    command = [uv, "pip", "install", "--python", python, "--exclude-newer", TASK_DATE, "top"]
    proc = subprocess.run(
        command, capture_output=True, text=True, env={**os.environ, "UV_CONCURRENT_BUILDS": "2"}
    )
    assert proc.returncode != 0
    fast = next(name for name in NAMES if name != slow)
    assert [name for name, _ in DEPENDENCY_FAILED.findall(proc.stderr)] == [fast]


def test_failed_builds_are_widened_to_their_first_wheel_whichever_fails_first(tmp_path, index):
    """Both dated sdists refuse to build; each has a wheel for this Python from after the date on, and a
    newer one today. Whichever failure uv names first, the env is the same: each at its first wheel."""
    for name in NAMES:
        index.add(name, "1.5", AFTER, tag=PLATFORM_TAG)
        index.add(name, "2.0", LATEST, tag=PLATFORM_TAG)
    index.add("top", "1.0", BEFORE, requires=NAMES)
    found = {}
    for slow in NAMES:
        for name in NAMES:
            refusing_sdist(index, tmp_path / "wheels" / slow, name, slow)
        venv, record = build(tmp_path, "python -m pip install top", name=f"envs-{slow}")
        found[slow] = sorted(pins(venv)), sorted((w["package"], w["as_of"]) for w in record["widened"])
        for name in NAMES:  # the next round serves its own sdists
            index.files[name] = [f for f in index.files[name] if not str(f["filename"]).endswith(".tar.gz")]
    assert found["aa"] == found["bb"]
    assert {"aa==1.5", "bb==1.5"} <= set(found["aa"][0])
    assert [as_of for _, as_of in found["aa"][1]] == ["2020-01-01T00:00:01Z"] * 2
