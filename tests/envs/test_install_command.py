"""The options a dated uv install gets: an exact pin of a build tool in the spec (astropy 1.3 pins
setuptools==38.2.4) must not take the build tools' date away from the sdists built beside it. Before the fix the
pin made uv's build envs take today's setuptools (no ``setuptools.Feature``), so MarkupSafe 1.0 never built,
even at the retry with the task date's build tools."""

from __future__ import annotations

import re

import pytest

from swe_rl.envs.build.install_tools import uv_binary
from swe_rl.envs.build.installer import InstallRun
from swe_rl.envs.build.recipe import EnvRecipe

pytestmark = pytest.mark.skipif(uv_binary() is None, reason="uv is not installed (pip install uv)")

DATE = "2017-12-01T00:00:00Z"


def _dates(command: str) -> dict[str, str]:
    return dict(re.findall(r"--exclude-newer-package ([A-Za-z0-9._-]+)=(\S+)", command))


def test_a_pinned_build_tool_keeps_the_build_tools_date(tmp_path):
    recipe = EnvRecipe(python="3", pip=["setuptools==38.2.4", "MarkupSafe==1.0"], exclude_newer=DATE)
    run = InstallRun(
        recipe, tmp_path / "venv", tmp_path, tmp_path / "log", installer="uv", cache=tmp_path / "c"
    )
    dates = _dates(run.install_command())
    assert dates["setuptools"] == run.build_tools_as_of()  # 2024's by default
    run.dated_build_tools = True  # the retry after a build failed with 2024's
    dates = _dates(run.install_command())
    assert dates["setuptools"] == run.build_tools_as_of() < "2020"
    assert dates["MarkupSafe"].startswith("2100")  # the other exact pin stays undated
