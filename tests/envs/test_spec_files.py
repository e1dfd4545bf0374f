"""A spec's files in the repo: the first requirement file and conda environment file that exist are installed,
and a build that needs a compiler the host lacks stops before installing anything. Offline: local wheels."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.envs.helpers import make_wheel

from swe_rl.envs.build.install_tools import uv_binary
from swe_rl.envs.build.installer import InstallRun
from swe_rl.envs.build.recipe import EnvRecipe
from swe_rl.envs.build.venv import create_venv, ensure_pip, host_interpreter
from swe_rl.errors import EnvBuildError

pytestmark = [
    pytest.mark.skipif(uv_binary() is None, reason="uv is not installed (pip install uv)"),
    pytest.mark.heavy,  # real environment builds, ~10 s each
]


@pytest.fixture
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    wheels = tmp_path / "wheels"
    for name in ("widgetdep", "gadget", "yamlonly"):
        make_wheel(wheels, name, "1.0")
    make_wheel(wheels, "widgetdep", "2.0")
    for key, value in {"UV_FIND_LINKS": str(wheels), "UV_NO_INDEX": "1", "UV_OFFLINE": "1"}.items():
        monkeypatch.setenv(key, value)
    return wheels


def _run(tmp_path: Path, recipe: EnvRecipe) -> InstallRun:
    venv = tmp_path / "venv"
    create_venv(host_interpreter()[0], venv)
    ensure_pip(venv)
    return InstallRun(
        recipe, venv, tmp_path / "repo", tmp_path / "install.log", installer="uv", cache=tmp_path / "uv"
    )


def test_first_existing_files_are_installed(tmp_path, offline):
    repo = tmp_path / "repo"
    (repo / "ci").mkdir(parents=True)
    (repo / "requirements-test.txt").write_text("gadget\n")  # the second name: the first is absent
    (repo / "ci" / "environment.yml").write_text(
        "name: testbed\ndependencies:\n  - python=3.11\n  - widgetdep=1.0\n  - pip\n  - pip:\n    - yamlonly\n"
    )
    recipe = EnvRecipe(
        requirements=["requirements-dev.txt", "requirements-test.txt"],
        env_yml=["ci/environment.yml", "environment.yml"],
    )
    lock = _run(tmp_path, recipe).build(None)
    assert {"gadget==1.0", "widgetdep==1.0", "yamlonly==1.0"} <= set(lock)  # conda's widgetdep=1.0 pinned


def test_no_listed_file_is_an_error_naming_them(tmp_path, offline):
    (tmp_path / "repo").mkdir()
    with pytest.raises(
        EnvBuildError, match=r"no conda environment file \(ci/environment.yml, environment.yml\)"
    ):
        _run(tmp_path, EnvRecipe(env_yml=["ci/environment.yml", "environment.yml"])).build(None)


def test_a_missing_compiler_stops_the_build_first(tmp_path, offline):
    (tmp_path / "repo").mkdir()
    run = _run(tmp_path, EnvRecipe(pip=["widgetdep"], system=["swe-rl-no-such-cc"], source="spec:x@1"))
    with pytest.raises(EnvBuildError, match="apt-get install swe-rl-no-such-cc"):
        run.build(None)
    assert not (tmp_path / "install.log").exists()  # nothing was installed
    control = _run(tmp_path / "c", EnvRecipe(pip=["widgetdep"], system=["bash"]))
    (tmp_path / "c" / "repo").mkdir(parents=True)
    assert "widgetdep==2.0" in control.build(None)
