"""Every attack of the reward-hacking suite as grading N in a reused sandbox, then a README-only patch and the
gold patch as gradings N+1 and N+2 in the same sandbox: their verdicts are the fresh sandbox's, in both modes
(harness/grade_many.py: reset in place, the warm runner disarmed between gradings). Real ns sandboxes."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from tests.conftest import available_factory, readme_patch
from tests.harness.test_reward_hacking import BY_NAME, Scratch

from swe_rl.harness.grade_many import Grader
from swe_rl.harness.grade_patch import grade_in, grade_patch
from swe_rl.harness.verdict import GradingMode, Verdict
from swe_rl.sandbox.pool import SandboxPool

pytestmark = pytest.mark.ns


def _key(verdict: Verdict) -> tuple[str, dict[str, str]]:
    return verdict.status, verdict.tests_status


@pytest.mark.parametrize("mode", ["official", "strict"])
async def test_no_attack_reaches_the_next_gradings_in_a_reused_sandbox(mode: GradingMode, task_by_id, envs):
    factory = available_factory("ns")
    instances = sorted({a.instance for a in BY_NAME.values()})
    tasks = {name: task_by_id[name] for name in instances}
    built = {name: envs.ensure(task) for name, task in tasks.items()}
    readme = {name: await readme_patch(factory, built[name]) for name in instances}
    fresh = {}
    for name, task in tasks.items():
        for label, patch in (("readme", readme[name]), ("gold", task.patch)):
            fresh[name, label] = _key(
                await grade_patch(task, patch, factory, built[name], timeout=60, mode=mode)
            )
    assert all(fresh[name, "gold"][0] == "resolved" for name in instances)

    with tempfile.TemporaryDirectory(prefix="swe-rl-reuse-") as root:
        patches = {}
        for attack in BY_NAME.values():
            folder = Path(root) / attack.name
            folder.mkdir()
            patches[attack.name] = attack.make(
                Scratch(tasks[attack.instance], built[attack.instance], folder)
            )

    force = BY_NAME["conftest_force_pass"]
    task, env = tasks[force.instance], built[force.instance]
    # the positive control: graded after the attack in the same sandbox without a reset, the README-only
    # patch resolves (this test would see a grading that reached the next one)
    async with await factory.create(env) as box:
        await grade_in(box, task, patches[force.name], timeout=60)
        assert (await grade_in(box, task, readme[force.instance], timeout=60)).resolved

    grader = Grader(SandboxPool(factory, idle=1))
    reached: list[str] = []
    try:
        for attack in BY_NAME.values():
            task, env = tasks[attack.instance], built[attack.instance]
            await grader.grade(task, patches[attack.name], env, timeout=attack.timeout, mode=mode)
            for label, patch in (("readme", readme[attack.instance]), ("gold", task.patch)):
                after = await grader.grade(task, patch, env, timeout=60, mode=mode)
                if _key(after) != fresh[attack.instance, label]:
                    reached.append(f"{attack.name} -> {label}: {after.status} {after.test_output[-500:]}")
                elif after.test_runner.startswith("cold"):
                    reached.append(f"{attack.name} -> {label}: ran cold ({after.test_runner})")
        assert not reached, "\n".join(reached)
        # reused throughout (the builtin envs share one runtime; an attack that breaks its sandbox gets a new one)
        assert grader.stats["reused"] >= 2 * len(BY_NAME), grader.stats
    finally:
        await grader.close()
