"""A patch whose code breaks the grading sandbox when the tests import it is scored as unresolved, never
an infrastructure error (that would turn a -1 into "unscored", which a policy would learn to reach)."""

from __future__ import annotations

import asyncio

import pytest
from tests.conftest import available_factory

from swe_rl.errors import SandboxError
from swe_rl.harness.grade_patch import grade_in

KILL_INIT = "\nimport os as _os, signal as _signal\n_os.kill(1, _signal.SIGTERM)\n"


async def _attack_patch(factory, env) -> str:
    """The module under test, unfixed, stopping its sandbox's init when it is imported."""
    async with await factory.create(env) as box:
        await box.exec(f"cat >> textkit/wrap.py <<'EOF'{KILL_INIT}EOF", timeout=30)
        return await box.diff()


@pytest.mark.parametrize("backend", ["docker", "ns"])
async def test_tests_that_stop_the_grading_sandbox_are_the_patchs_outcome(backend, task_by_id, envs):
    task = task_by_id["swe-rl-builtin__textkit-3"]
    env = envs.ensure(task)
    factory = available_factory(backend)
    patch = await _attack_patch(factory, env)
    assert "_os.kill(1" in patch
    async with await factory.create(env) as box:
        verdict = await grade_in(box, task, patch, timeout=300, mode="strict")
        if backend == "docker":
            # control: the attack is live there: the container's init stops and takes the sandbox with it
            # (docker may take a moment to notice the container is gone)
            with pytest.raises(SandboxError):
                for _ in range(40):
                    await box.exec("true", timeout=30)
                    await asyncio.sleep(0.5)
            # the test run ends with the container (a cut log) or the next call finds it gone: either way
            # a verdict, never an InfraError
            assert verdict.status in ("unparseable_log", "sandbox_broken")
        else:
            # ns: the shell is init of its pid namespace, which ignores a signal it has no handler for
            assert (await box.exec("echo alive", timeout=30)).output == "alive\n"
            assert verdict.status == "unresolved"
    assert not verdict.resolved
