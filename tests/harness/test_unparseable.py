"""A log that parses to no test at all is its own verdict status, never an ordinary unresolved one."""

from __future__ import annotations

from tests.conftest import available_factory

from swe_rl.harness.grade import grade_patch


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
