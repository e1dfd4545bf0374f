"""Validating a candidate in sandboxes with the grading machinery every row goes through.

The touched test files run twice per round: at the base with the test patch only (the harness's
eval script on the unchanged tree, :func:`~swe_rl.harness.grade_patch.run_tests`) and with the gold patch
applied as any candidate patch is (:meth:`~swe_rl.harness.grade_many.Grader.grade`). Statuses come from
swebench's log parser. FAIL_TO_PASS = failed (or missing: collection broke) before and passed after;
PASS_TO_PASS = passed both. A second round must give the same two lists (stability).
"""

from __future__ import annotations

import time

from pydantic import BaseModel, Field

from swe_rl.harness.grade_many import Grader
from swe_rl.harness.grade_patch import run_tests
from swe_rl.harness.official import parse_test_log, parser_name
from swe_rl.harness.verdict import Verdict
from swe_rl.sandbox.base import EnvSpec, SandboxFactory
from swe_rl.tasks.model import Task

PASS = frozenset({"PASSED", "XFAIL"})


class Validation(BaseModel):
    """What the runs of one candidate showed; ``reason`` is why it is dropped ('' when kept)."""

    fail_to_pass: list[str] = Field(default_factory=list)
    pass_to_pass: list[str] = Field(default_factory=list)
    before_log: str = Field(
        default="", description="The first run's test output at the base (test patch only)."
    )
    reason: str = ""
    detail: str = Field(default="", description="The first error line of the run behind the reason.")
    seconds: float = 0.0


def split_tests(before: dict[str, str], after: dict[str, str]) -> tuple[list[str], list[str]]:
    """(FAIL_TO_PASS, PASS_TO_PASS) from the statuses before and after the gold patch."""
    passed_after = sorted(t for t, s in after.items() if s in PASS)
    f2p = [t for t in passed_after if before.get(t) not in PASS]
    p2p = [t for t in passed_after if before.get(t) in PASS]
    return f2p, p2p


async def _round(
    task: Task, env: EnvSpec, factory: SandboxFactory, grader: Grader, timeout: float
) -> tuple[Verdict, Verdict, str]:
    """(before, after, why the round cannot count: '' when it can)."""
    before = await run_tests(task, factory, env, timeout=timeout)
    after = await grader.grade(task, task.patch, env, timeout=timeout)
    if before.status == "test_timeout" or after.status == "test_timeout":
        return before, after, f"timeout (tests ran past {timeout:.0f}s)"
    if after.status == "apply_failed":
        return before, after, "the gold patch does not apply"
    if after.status == "sandbox_broken":
        return before, after, "the tests broke the sandbox"
    return before, after, ""


async def validate(
    task: Task, env: EnvSpec, factory: SandboxFactory, grader: Grader, *, timeout: float
) -> Validation:
    """Two rounds of before/after runs of ``task``'s test files; kept when FAIL_TO_PASS is non-empty and
    both rounds agree."""
    parser = parser_name(task)
    results: list[tuple[list[str], list[str]]] = []
    first_log, started = "", time.monotonic()
    for _ in range(2):
        before, after, why = await _round(task, env, factory, grader, timeout)
        seconds = round(time.monotonic() - started, 3)
        if why:
            return Validation(reason=why, seconds=seconds)
        f2p, p2p = split_tests(
            parse_test_log(before.test_output, parser), parse_test_log(after.test_output, parser)
        )
        if not results:
            first_log = before.test_output
            if not f2p and not p2p:  # nothing passes with the fix: the env or the tests' collection
                why = "no test passes with the fix"
                return Validation(reason=why, detail=_first_error(after.test_output), seconds=seconds)
            if not f2p:
                return Validation(pass_to_pass=p2p, reason="no FAIL_TO_PASS", seconds=seconds)
        results.append((f2p, p2p))
    if results[0] != results[1]:
        return Validation(reason="unstable (a second run disagrees)", seconds=seconds)
    f2p, p2p = results[0]
    return Validation(fail_to_pass=f2p, pass_to_pass=p2p, before_log=first_log, seconds=seconds)


def _first_error(log: str) -> str:
    """The first ``E`` line of a pytest log ('E   ModuleNotFoundError: No module named ...'), else its tail."""
    lines = log.splitlines()
    found = next((line.strip() for line in lines if line.startswith("E ")), "")
    return found or "\n".join(lines[-5:])
