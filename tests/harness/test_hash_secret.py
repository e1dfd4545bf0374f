"""A reused grading sandbox grades as a fresh one would, even for a patch that depends on the string-hash secret
(issue #58, item 6). Real ns sandboxes, real pytest, the project's own Grader.

The attack: textkit-3's fix, applied only when ``hash(PROBE)`` is odd. A cold test run draws its own secret (no
``PYTHONHASHSEED`` in the env), so fresh gradings split between resolved and unresolved; the patch also prints the
value it saw (an atexit callback, after pytest has let go of the output), so each grading shows which secret its
test process had. Before the fix, a forked run inherited its warm runner's secret, and every grading a runner
served saw one value: a GRPO group's samples all got one reward where cold grading splits them.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest
from tests.conftest import available_factory
from tests.harness.test_reward_hacking import WRAP, Scratch

from swe_rl.gitutil import git
from swe_rl.harness.grade_many import Grader
from swe_rl.harness.grade_patch import grade_patch
from swe_rl.harness.verdict import Verdict
from swe_rl.sandbox.base import EnvSpec
from swe_rl.sandbox.pool import SandboxPool
from swe_rl.tasks.model import Task

pytestmark = pytest.mark.ns

PROBE = "swe-rl-hash-secret-probe"
MARK = "SWE-RL-HASH"
GRADINGS = 6  # six distinct 64-bit values from one secret: impossible; from six secrets: all but certain
_SEEN = re.compile(rf"^{MARK} (\d) (-?\d+)$", re.MULTILINE)

# The patched module: the gold version or the base one, chosen by the test process's secret, and the value
# it chose by (sys.flags.hash_randomization too: 1 where the secret was drawn at random).
HEADER = f"""import atexit as _atexit, os as _os, sys as _sys

_PROBE = hash({PROBE!r})
_atexit.register(
    lambda: _os.write(1, ("\\n{MARK} %d %d\\n" % (_sys.flags.hash_randomization, _PROBE)).encode())
)
"""


def secret_dependent_patch(task: Task, env: EnvSpec, root: Path) -> str:
    """``task``'s one-file gold fix where ``hash(PROBE)`` is odd, its base file where it is even."""
    (path,) = {line[6:] for line in task.patch.splitlines() if line.startswith("+++ b/")}
    scratch = Scratch(task, env, root)
    base = scratch.read(path)
    git(["apply", "-"], scratch.repo, input=task.patch)
    gold = scratch.read(path)
    assert gold != base
    choose = f"_SOURCE = {gold!r} if _PROBE % 2 else {base!r}\nexec(compile(_SOURCE, __file__, 'exec'))\n"
    scratch.write(path, HEADER + choose)
    return scratch.patch()


def seen(verdict: Verdict) -> int:
    """The hash value the grading's test process saw (it ran with a randomized secret)."""
    (found,) = _SEEN.findall(verdict.test_output)
    assert found[0] == "1", "the secret was drawn at random (no PYTHONHASHSEED)"
    return int(found[1])


def follows_its_secret(verdict: Verdict) -> bool:
    """Resolved exactly where the grading's own secret made the fix apply."""
    return verdict.resolved == (seen(verdict) % 2 == 1) and verdict.status in ("resolved", "unresolved")


async def test_each_grading_of_a_reused_sandbox_draws_its_own_hash_secret(task_by_id, envs):
    task = task_by_id[WRAP]
    env = envs.ensure(task)
    factory = available_factory("ns")
    with tempfile.TemporaryDirectory(prefix="swe-rl-hash-") as root:
        patch = secret_dependent_patch(task, env, Path(root))

    # the positive control: graded fresh (cold), each grading's test process draws its own secret, and the
    # verdict follows it (the patch's fix is live where the value is odd)
    fresh = [await grade_patch(task, patch, factory, env, timeout=60) for _ in range(GRADINGS)]
    assert all(follows_its_secret(v) for v in fresh), [(v.status, seen(v)) for v in fresh]
    assert len({seen(v) for v in fresh}) == GRADINGS, "cold runs draw their own secrets"

    grader = Grader(SandboxPool(factory, idle=1))
    try:
        reused = [await grader.grade(task, patch, env, timeout=60) for _ in range(GRADINGS)]
        stats = dict(grader.stats)
    finally:
        await grader.close()
    assert stats["created"] == 1 and stats["reused"] == GRADINGS - 1, stats
    # every grading after the first went through the sandbox's warm path (a forked run), not a cold one
    assert [v.test_runner for v in reused[1:]] == ["forked"] * (GRADINGS - 1), [v.test_runner for v in reused]
    assert all(follows_its_secret(v) for v in reused), [(v.status, seen(v)) for v in reused]
    # the fix: one secret per grading, as fresh gradings draw them (before, one per runner: the forked
    # gradings all saw one value, and all got one verdict)
    values = [seen(v) for v in reused]
    assert len(set(values)) == GRADINGS, values
