"""Rows that carry their own spec (SWE-rebench's install_config) build and grade by it, unchanged."""

from __future__ import annotations

import json

import pytest
from tests.conftest import available_factory
from tests.envs.helpers import make_repo, make_wheel

from swe_rl.envs.build.install_tools import uv_binary
from swe_rl.envs.build.pins import LOCK_NAME
from swe_rl.envs.build.recipe import InstallOptions, recipe_for
from swe_rl.envs.cache import EnvCache
from swe_rl.errors import TaskFormatError
from swe_rl.harness.evalscript import eval_script
from swe_rl.harness.grade_patch import run_tests
from swe_rl.harness.official import parser_name
from swe_rl.tasks.model import Task
from swe_rl.tasks.rowspec import row_spec

# A test "runner" that prints what swebench's pytest parser reads: it passes only when the row's env var,
# its eval command and its pinned requirement all reached the test run.
RUNNER = (
    "python -c \"import os, widgetdep; ok = os.environ.get('WIDGET_MODE') == 'strict' and "
    "os.path.exists('.eval-ran') and widgetdep.VERSION == '1.0'; "
    "print(('PASSED' if ok else 'FAILED') + ' test_widget.py::test_row_spec')\""
)


def rebench_row(commit: str, **config: object) -> dict[str, object]:
    """A row shaped as nebius/SWE-rebench publishes them."""
    install_config: dict[str, object] = {
        "env_vars": {"WIDGET_MODE": "strict"},
        "env_yml_path": None,
        "eval_commands": ["touch .eval-ran"],
        "install": "python -m pip install -e .",
        "log_parser": "parse_log_pytest",
        "no_use_env": None,
        "packages": "requirements.txt",
        "pip_packages": ["widgetdep"],
        "pre_install": ["apt-get update", "apt-get install -y swe-rl-no-such-debian-package"],
        "python": "3.11",
        "reqs_path": ["requirements.txt"],
        "test_cmd": RUNNER,
    }
    install_config.update(config)
    return {
        "instance_id": "acme__widget-7",
        "repo": "acme/widget",
        "base_commit": commit,
        "version": "0.1",
        "FAIL_TO_PASS": ["test_widget.py::test_row_spec"],
        "PASS_TO_PASS": [],
        "install_config": install_config,
        "requirements": "widgetdep==1.0\n",
        "environment": None,
    }


def test_install_config_is_read_as_a_spec():
    task = Task.model_validate(rebench_row("c0ffee"))
    spec = row_spec(task)
    assert spec is not None and spec.python == "3.11"
    assert spec.packages == ("widgetdep==1.0", "widgetdep")  # the row's frozen set, then pip_packages
    assert spec.test_cmd == RUNNER and parser_name(task) == "parse_log_pytest"
    # apt-get never runs on the host: it becomes a check that warns
    assert all("dpkg -s" in line or line.startswith("echo") for line in spec.pre_install)
    assert not any(line.startswith("apt-get") for line in spec.pre_install)
    script = eval_script(task)
    assert "export WIDGET_MODE=strict" in script and "touch .eval-ran" in script
    assert script.index("touch .eval-ran") < script.index(RUNNER)
    # the record round-trips unchanged: nothing was added to it
    record = task.to_record()
    assert record["install_config"] == rebench_row("c0ffee")["install_config"]
    assert not {"log_parser", "test_cmd", "python", "install"} & set(record)


def test_conda_packages_and_lists(tmp_path):
    env_yml = "name: testbed\ndependencies:\n  - python=3.9\n  - numpy=1.21\n  - pip\n  - pip:\n    - attrs==23.1.0\n"
    row = rebench_row("c0ffee", packages="environment.yml", test_cmd=["source x", "pytest -rA"])
    row["environment"] = env_yml
    spec = row_spec(Task.model_validate(row))
    assert spec is not None
    assert spec.packages == ("numpy==1.21", "attrs==23.1.0", "widgetdep")
    assert spec.test_cmd == "source x && pytest -rA"
    spec = row_spec(Task.model_validate(rebench_row("c0ffee", packages="scipy=1.5 six", pip_packages=None)))
    assert spec is not None and spec.packages == ("scipy==1.5", "six")


@pytest.mark.parametrize(
    "config",
    [{"python": None}, "not an object"],
)
def test_malformed_install_config_is_a_task_format_error(config):
    row = rebench_row("c0ffee")
    row["install_config"] = config if isinstance(config, str) else {**row["install_config"], **config}  # type: ignore[dict-item]
    with pytest.raises(TaskFormatError, match="install_config"):
        row_spec(Task.model_validate(row))


@pytest.mark.ns
@pytest.mark.skipif(uv_binary() is None, reason="uv is not installed (pip install uv)")
async def test_a_rebench_row_builds_and_grades_by_its_own_spec(tmp_path, monkeypatch):
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "widgetdep", "1.0")
    make_wheel(wheels, "widgetdep", "1.1")  # newer: the row's frozen requirements must win
    for name, value in {"UV_FIND_LINKS": str(wheels), "UV_NO_INDEX": "1", "UV_OFFLINE": "1"}.items():
        monkeypatch.setenv(name, value)
    repo_cache = tmp_path / "mirrors"
    commit = make_repo(repo_cache)
    task = Task.model_validate(rebench_row(commit, install="true"))
    assert recipe_for(task).source.startswith("row:")
    cache = EnvCache(tmp_path / "envs", repo_cache=repo_cache, options=InstallOptions(as_of_date=False))
    env = cache.ensure(task)
    assert "widgetdep==1.0" in (env.venv / LOCK_NAME).read_text().split()
    log = (env.venv / "swe-rl-install.log").read_text()
    assert "the host lacks the Debian package swe-rl-no-such-debian-package" in log
    verdict = await run_tests(task, available_factory("ns"), env)
    assert verdict.resolved, verdict.log
    # control: the same row without its env_vars fails the test: they are what made it pass
    bare = Task.model_validate(rebench_row(commit, install="true", env_vars=None))
    assert not (await run_tests(bare, available_factory("ns"), env)).resolved
    assert json.loads((env.venv / "swe-rl-env.json").read_text())["installer"] == "uv"
