"""Prove an environment: the gold patch resolves, the unchanged base does not."""

from __future__ import annotations

from pydantic import BaseModel

from swe_rl.harness.grade import DEFAULT_TEST_TIMEOUT, grade_patch, run_tests
from swe_rl.harness.verdict import Verdict
from swe_rl.sandbox.base import EnvSpec, SandboxFactory
from swe_rl.tasks.model import Task


class TaskValidation(BaseModel):
    instance_id: str
    valid: bool
    problems: list[str]
    gold: Verdict
    empty: Verdict


async def validate_task(
    task: Task, factory: SandboxFactory, env: EnvSpec, *, timeout: float = DEFAULT_TEST_TIMEOUT
) -> TaskValidation:
    """Grade the gold patch and the untouched base commit; list what is wrong with the task."""
    gold = await grade_patch(task, task.patch, factory, env, timeout=timeout)
    empty = await run_tests(task, factory, env, timeout=timeout)
    problems = []
    if not gold.resolved:
        failing = gold.tests_status.get("FAIL_TO_PASS", {}).get("failure", []) + gold.tests_status.get(
            "PASS_TO_PASS", {}
        ).get("failure", [])
        if gold.status == "unparseable_log":
            problems.append(f"gold patch not resolved: {gold.summary()}")
        else:
            problems.append(
                f"gold patch not resolved ({gold.status}; failing: {', '.join(failing[:5]) or '-'})"
            )
    if empty.resolved:
        problems.append("the unchanged base commit already resolves the task")
    passing_at_base = empty.tests_status.get("FAIL_TO_PASS", {}).get("success", [])
    if passing_at_base:
        problems.append(f"FAIL_TO_PASS tests pass without the fix: {', '.join(passing_at_base[:5])}")
    return TaskValidation(
        instance_id=task.instance_id, valid=not problems, problems=problems, gold=gold, empty=empty
    )
