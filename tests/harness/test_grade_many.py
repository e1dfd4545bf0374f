"""Grading in reused sandboxes (harness/grade_many.py): verdicts as in a fresh sandbox, and nothing one grading
leaves (files, processes, lowered limits, a tampered runner) reaches the next. Real ns sandboxes."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from tests.conftest import available_factory, readme_patch

from swe_rl.harness.grade_many import Grader
from swe_rl.harness.grade_patch import grade_in, grade_patch
from swe_rl.sandbox.pool import SandboxPool

pytestmark = pytest.mark.ns

# A conftest.py at the repo's root runs in every test run of its grading: it plants the task's fix for a
# later grading (a daemon that waits out the reset), lowers the limits and priority of the sandbox's shell
# (pid 1) and of every other process it can reach (the warm runner among them), and stops the runner.
ATTACK = r"""import os, resource, signal, subprocess, sys

FIX = {fix!r}
subprocess.Popen([sys.executable, "-c", "import time, pathlib; time.sleep(1); "
                  "pathlib.Path('{path}').write_text(" + repr(FIX) + ")"], start_new_session=True)
for pid in [int(p) for p in os.listdir("/proc") if p.isdigit()]:
    if pid == os.getpid():
        continue
    for call in (lambda: resource.prlimit(pid, resource.RLIMIT_NOFILE, (64, 64)),
                 lambda: os.setpriority(os.PRIO_PROCESS, pid, 19)):
        try:
            call()
        except OSError:
            pass
"""

PROBE = """import os, resource

def pytest_sessionstart(session):
    print("PROBE", resource.getrlimit(resource.RLIMIT_NOFILE), os.getpriority(os.PRIO_PROCESS, 1),
          os.getpriority(os.PRIO_PROCESS, 0))
"""


def _new_file(path: str, text: str) -> str:
    lines = text.splitlines()
    body = "".join(f"+{line}\n" for line in lines)
    return f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1,{len(lines)} @@\n{body}"


async def test_reused_sandboxes_grade_every_builtin_task_as_fresh_ones(tasks, envs):
    factory = available_factory("ns")
    grader = Grader(SandboxPool(factory))
    runners: list[str] = []
    env_keys: list[str] = []
    try:
        for task in tasks + tasks:  # each env graded in more than once
            env = envs.ensure(task)
            env_keys.append(env.key)
            reused = await grader.grade(task, task.patch, env, timeout=120)
            fresh = await grade_patch(task, task.patch, factory, env, timeout=120)
            assert (reused.status, reused.tests_status) == (fresh.status, fresh.tests_status), (
                task.instance_id
            )
            assert reused.resolved and reused.test_runner in ("", "forked"), (
                task.instance_id,
                reused.test_runner,
            )
            runners.append(reused.test_runner)
    finally:
        await grader.close()
    # the builtin envs (3 testbeds) share one runtime, so one sandbox grades them all, reset to each env in
    # turn; every grading, the first one in the new sandbox too, has a runner of its own, forked
    assert len({envs.ensure(t).runtime() for t in tasks}) == 1 and len(set(env_keys)) == 3
    assert runners == ["forked"] * (2 * len(tasks))
    assert grader.stats["created"] == 1 and grader.stats["reused"] == 2 * len(tasks) - 1
    switches = sum(a != b for a, b in itertools.pairwise(env_keys))
    assert grader.stats["switched"] == switches > 0
    assert grader.stats["runners"] == 2 * len(tasks) and grader.stats["cold"] == 0


async def test_one_grading_cannot_reach_the_next(task_by_id, envs):
    task = task_by_id["swe-rl-builtin__textkit-3"]
    env = envs.ensure(task)
    factory = available_factory("ns")
    (path,) = {line[6:] for line in task.patch.splitlines() if line.startswith("+++ b/")}
    async with await factory.create(env) as box:
        fixed = await box.exec(f"git apply - <<'EOF'\n{task.patch}EOF\ncat {path}", timeout=30)
    fix = fixed.output
    readme = await readme_patch(factory, env)
    attack = _new_file("conftest.py", ATTACK.format(fix=fix, path=path))
    probe = _new_file("conftest.py", PROBE)

    # the positive control: graded in the same sandbox without a reset, the attack's fix lands and a
    # README-only patch "resolves" the task
    async with await factory.create(env) as box:
        await grade_in(box, task, attack, timeout=120)
        await box.exec("sleep 2", timeout=10)
        contaminated = await grade_in(box, task, readme, timeout=120)
    assert contaminated.resolved, contaminated.test_output[-2000:]

    grader = Grader(SandboxPool(factory, idle=1))
    try:
        first = await grader.grade(task, task.patch, env, timeout=120)
        assert first.resolved and first.test_runner == "forked"
        attacked = await grader.grade(task, attack, env, timeout=120)
        assert attacked.test_runner == "forked"
        await asyncio.sleep(2)
        after = await grader.grade(task, readme, env, timeout=120)
        assert not after.resolved and after.status == "unresolved", after.test_output[-2000:]
        assert after.test_runner == "forked", "a new runner, with the sandbox's scheduling and limits"
        probed = await grader.grade(task, probe, env, timeout=120)
        fresh = await grade_patch(task, probe, factory, env, timeout=120)
        (seen,) = [line for line in probed.test_output.splitlines() if line.startswith("PROBE")]
        (expected,) = [line for line in fresh.test_output.splitlines() if line.startswith("PROBE")]
        assert seen == expected, "the shell's and the runner's limits and priority are the sandbox's again"
        assert grader.stats["created"] == 1 and grader.stats["reused"] == 3
        # each grading had a runner of its own (the one the attack lowered ended with its grading)
        assert grader.stats["runners"] == 4
    finally:
        await grader.close()


# A conftest.py that plants another env's fix in the tree at the sandbox's testbed a few seconds later
# (a daemon of its own session), for the grading after a reset to that env.
LATE_FIX = r"""import subprocess, sys

subprocess.Popen([sys.executable, "-c", "import time, pathlib; time.sleep(3); "
                  "pathlib.Path('{path}').write_text(" + repr({fix!r}) + ")"], start_new_session=True)
"""


async def test_one_grading_cannot_reach_the_next_in_another_env(task_by_id, envs):
    first, second = task_by_id["swe-rl-builtin__textkit-3"], task_by_id["swe-rl-builtin__statkit-2"]
    env1, env2 = envs.ensure(first), envs.ensure(second)
    factory = available_factory("ns")
    (path,) = {line[6:] for line in second.patch.splitlines() if line.startswith("+++ b/")}
    async with await factory.create(env2) as box:
        fix = (await box.exec(f"git apply - <<'EOF'\n{second.patch}EOF\ncat {path}", timeout=30)).output
    readme = await readme_patch(factory, env2)
    attack = _new_file("conftest.py", LATE_FIX.format(fix=fix, path=f"{env2.workdir}/{path}"))

    # the positive control: the daemon, kept through the reset to statkit's env, lands the fix there
    async with await factory.create(env1) as box:
        await grade_in(box, first, attack, timeout=120)
        daemon = (await box.exec("pgrep -f 'time.sleep.3.'", timeout=10)).output.split()
        assert daemon, "the attack's daemon runs"
        await box.reset(keep=[int(pid) for pid in daemon], env=env2)  # type: ignore[call-arg]
        await asyncio.sleep(4)
        contaminated = await grade_in(box, second, readme, timeout=120)
    assert contaminated.resolved, contaminated.test_output[-2000:]

    grader = Grader(SandboxPool(factory, idle=1))
    try:
        assert (await grader.grade(first, first.patch, env1, timeout=120)).resolved
        assert (await grader.grade(first, attack, env1, timeout=120)).test_runner == "forked"
        await asyncio.sleep(4)
        after = await grader.grade(second, readme, env2, timeout=120)
        assert not after.resolved and after.status == "unresolved", after.test_output[-2000:]
        assert after.test_runner == "forked", "the same sandbox and runner, reset to statkit's env"
        assert grader.stats["created"] == 1 and grader.stats["switched"] == 1
    finally:
        await grader.close()
