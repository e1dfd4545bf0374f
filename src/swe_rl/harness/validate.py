"""Prove an environment: the gold patch resolves, the unchanged base does not."""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import BaseModel, Field

from swe_rl.harness.grade_patch import DEFAULT_TEST_TIMEOUT, grade_patch, run_tests
from swe_rl.harness.verdict import Verdict
from swe_rl.sandbox.base import EnvSpec, SandboxFactory
from swe_rl.tasks.model import Task

NETWORK_ERRORS = re.compile(
    r"Network is unreachable|Temporary failure in name resolution|Name or service not known"
    r"|No address associated with hostname|nodename nor servname provided|getaddrinfo failed"
    r"|Failed to establish a new connection"
    r"|\[SSL: WRONG_VERSION_NUMBER\]"
)
"""What a test says when it reaches for a host: sandboxes have loopback alone (DNS fails, routes are absent). The
last: https to a loopback service that speaks plain http, which stands in there for a host of the network (the
local httpbin for httpbin.org: requests 1724 and 1766's `test_mixed_case_scheme_acceptable`)."""


def network_evidence(verdict: Verdict, failing: int = 1) -> str | None:
    """Where the test output shows tests reaching for the network: how many lines, and the first (so a reader
    can judge it); None where it shows fewer such lines than ``failing`` tests (two stray lines beside 68
    failures of another cause do not make an instance one that needs the network)."""
    lines = [line.strip() for line in verdict.test_output.splitlines() if NETWORK_ERRORS.search(line)]
    if not lines or len(lines) < failing:
        return None
    return f"{len(lines)} line(s) of network errors in its test output, the first: {lines[0][:200]}"


# pytest.importorskip's reason and the ImportError a test without it raises
_NOT_IMPORTED = re.compile(r"could not import '([\w.]+)'|No module named '([\w.]+)'")


def conda_only_evidence(verdict: Verdict, failing: int, conda_only: Sequence[str]) -> str | None:
    """Where the test output shows tests skipped or failing for want of a module of ``conda_only`` (packages the
    official env installs from conda that have no PyPI release), as many lines as ``failing`` tests: which."""
    names = {name.lower().replace("-", "_") for name in conda_only}
    lines = [m for line in verdict.test_output.splitlines() if (m := _NOT_IMPORTED.search(line))]
    wanted = [module for m in lines if (module := (m[1] or m[2]).split(".")[0]).lower() in names]
    if not wanted or len(wanted) < failing:
        return None
    return f"{', '.join(dict.fromkeys(wanted))}: {len(wanted)} test(s) skipped or failing without it"


class TaskValidation(BaseModel):
    instance_id: str
    valid: bool
    problems: list[str]
    notes: list[str] = Field(default_factory=list, description="What is odd but does not make it invalid.")
    gold: Verdict
    empty: Verdict


async def validate_task(
    task: Task,
    factory: SandboxFactory,
    env: EnvSpec,
    *,
    timeout: float = DEFAULT_TEST_TIMEOUT,
    conda_only: Sequence[str] = (),
) -> TaskValidation:
    """Grade the gold patch and the untouched base commit; list what is wrong with the task.

    Valid as the official grading sees it: the gold patch resolves and the unchanged base does not. A
    FAIL_TO_PASS name that the base's log reports as passing does not make it invalid while the base is
    unresolved: swebench's parsers keep the last status of a name the log reports more than once (two tests
    of one name, django-16429), so such a name can read as passing where one of its tests fails. It is
    noted (``notes``). A gold patch that fails where its tests reached for the network says so in its problem
    (:func:`network_evidence`): the official harness's containers have the network, sandboxes do not; one that
    fails for want of a package of ``conda_only`` (the env's conda packages without a PyPI release) says that."""
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
            problem = f"gold patch not resolved ({gold.status}; failing: {', '.join(failing[:5]) or '-'})"
            if (network := network_evidence(gold, len(failing))) is not None:
                problem += f"; needs the network, which sandboxes do not have: {network}"
            elif (conda := conda_only_evidence(gold, len(failing), conda_only)) is not None:
                problem += f"; needs a conda-only package the official env installs (none on PyPI): {conda}"
            problems.append(problem)
    if empty.resolved:
        problems.append("the unchanged base commit already resolves the task")
    passing_at_base = empty.tests_status.get("FAIL_TO_PASS", {}).get("success", [])
    notes = []
    if passing_at_base:
        notes.append(
            f"FAIL_TO_PASS names the base's log reports as passing: {', '.join(passing_at_base[:5])}"
            + ("" if empty.resolved else " (the base is still unresolved, as the official grading reads it)")
        )
    return TaskValidation(
        instance_id=task.instance_id,
        valid=not problems,
        problems=problems,
        notes=notes,
        gold=gold,
        empty=empty,
    )
