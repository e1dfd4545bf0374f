"""The validator follows the official grading: a task is valid when its gold patch resolves and its unchanged
base does not. A FAIL_TO_PASS name that the base's log reports as passing (swebench keeps the last status of a
name reported twice: django-16429 has two tests of one name) is noted, not refused, while the base is
unresolved. Real ns sandboxes, the builtin textkit-3 with its lists changed."""

from __future__ import annotations

import pytest
from tests.conftest import available_factory

from swe_rl.harness.validate import validate_task

pytestmark = pytest.mark.ns


async def test_a_fail_to_pass_name_passing_at_base_is_noted_while_the_base_is_unresolved(task_by_id, envs):
    task = task_by_id["swe-rl-builtin__textkit-3"]
    env = envs.ensure(task)
    factory = available_factory("ns")
    passing = task.PASS_TO_PASS[0]  # passes before and after the fix
    mixed = task.model_copy(
        update={
            "FAIL_TO_PASS": [*task.FAIL_TO_PASS, passing],
            "PASS_TO_PASS": [n for n in task.PASS_TO_PASS if n != passing],
        }
    )
    checked = await validate_task(mixed, factory, env, timeout=120)
    assert checked.gold.resolved and not checked.empty.resolved
    assert checked.valid and checked.problems == []
    assert len(checked.notes) == 1 and passing in checked.notes[0] and "still unresolved" in checked.notes[0]
    # the control: where every FAIL_TO_PASS name passes at base, the base resolves, and that is refused
    only = task.model_copy(update={"FAIL_TO_PASS": [passing], "PASS_TO_PASS": []})
    refused = await validate_task(only, factory, env, timeout=120)
    assert refused.empty.resolved and not refused.valid
    assert refused.problems == ["the unchanged base commit already resolves the task"]
