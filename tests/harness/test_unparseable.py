"""A log that parses to no test at all is its own verdict status, never an ordinary unresolved one."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.conftest import available_factory

from swe_rl.harness.grade_patch import grade_patch
from swe_rl.harness.official import END_TEST_OUTPUT, START_TEST_OUTPUT
from swe_rl.tasks.model import Task

pytestmark = pytest.mark.ns

LOGS = Path(__file__).parent / "logs"


async def test_a_log_without_the_short_summary_is_unparseable(task_by_id, envs):
    task = task_by_id["swe-rl-builtin__textkit-3"]
    env = envs.ensure(task)
    factory = available_factory("ns")
    # control: the gold patch resolves with the test command that prints pytest's -rA summary
    assert (await grade_patch(task, task.patch, factory, env)).status == "resolved"
    # pytest without -rA prints no per-test lines (as pytest < 3.6 printed none at all): the tests pass,
    # the log parses to nothing
    quiet = task.model_copy(update={"test_cmd": "python -m pytest -q -p no:cacheprovider"})
    verdict = await grade_patch(quiet, quiet.patch, factory, env)
    assert "passed" in verdict.log
    assert not verdict.resolved and verdict.status == "unparseable_log"


def _replaying(task: Task, log: str) -> Task:
    """The task with an eval script (a swebench 5 row's field) that prints a recorded test log."""
    script = "\n".join(
        [
            f"echo '{START_TEST_OUTPUT}'",
            "cat <<'SWE_RL_LOG'",
            log.rstrip("\n"),
            "SWE_RL_LOG",
            f"echo '{END_TEST_OUTPUT}'",
        ]
    )
    tests = ["tests/test_words.py::test_split", "tests/test_words.py::test_join"]
    return task.model_copy(update={"eval_script": script, "FAIL_TO_PASS": tests, "PASS_TO_PASS": []})


async def test_a_real_pytest_3_5_log_is_unparseable_and_shows_its_first_lines(task_by_id, envs):
    """pytest 3.5.1 (where a 2019 date cut-off can land) ran both tests and they passed, but it prints no
    per-test line: the verdict says so instead of calling the gold patch unresolved with nothing failing."""
    task = task_by_id["swe-rl-builtin__textkit-3"]
    env = envs.ensure(task)
    factory = available_factory("ns")
    # control: pytest 4.6.11's log of the same tests parses, and resolves
    modern = _replaying(task, (LOGS / "pytest-4.6.11-rA.log").read_text())
    assert (await grade_patch(modern, modern.patch, factory, env)).status == "resolved"

    old = _replaying(task, (LOGS / "pytest-3.5.1-rA.log").read_text())
    verdict = await grade_patch(old, old.patch, factory, env)
    assert "2 passed" in verdict.log
    assert not verdict.resolved and verdict.status == "unparseable_log"
    summary = verdict.summary()
    assert "the test log begins:" in summary and "pytest-3.5.1" in summary
    assert START_TEST_OUTPUT not in summary  # the test output itself, not the eval script's markers
