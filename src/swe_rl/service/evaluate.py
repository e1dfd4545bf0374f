"""``/container/evaluate``, seed-exact: always in a pristine sandbox of the agent's env, never in the agent's.

With an ``eval_script`` (the seed's contract): the patch is applied with ``git apply`` and the script run
by bash; ``resolved`` is "the script exited 0", ``returncode`` its exit code, ``output`` its output.
Without one (absent or ``""``): the official grading (:func:`swe_rl.harness.grade_patch.grade_patch`) of the
task the request or the image names. A patch that is empty or does not apply, a script that timed out,
or a request with nothing to grade by is answered ``resolved: false`` with an ``error``: an applied patch
is never called resolved by itself.
"""

from __future__ import annotations

import shlex

from swe_rl.harness.evalscript import CANDIDATE_PATCH, EVAL_SCRIPT
from swe_rl.harness.grade_patch import grade_patch
from swe_rl.sandbox.base import EnvSpec, Limits, SandboxFactory
from swe_rl.sandbox.exec_protocol import EvaluateResponse
from swe_rl.tasks.model import Task

APPLY_TIMEOUT = 300.0
MAX_OUTPUT = 200_000  # characters of the official grading's log kept in the reply (the tail)


def unresolved(error: str, output: str = "") -> EvaluateResponse:
    """Not resolved, and the script (if any) did not run: ``returncode`` is null, as the seed leaves it out."""
    return EvaluateResponse(resolved=False, returncode=None, output=output, error=error)


async def run_eval_script(
    factory: SandboxFactory,
    env: EnvSpec,
    limits: Limits,
    patch: str,
    script: str,
    *,
    cwd: str | None,
    timeout: float,
) -> EvaluateResponse:
    """The seed's evaluate: ``patch`` applied by ``git apply`` in a new sandbox of ``env``, then ``script``."""
    if not patch.strip():
        return unresolved("the patch is empty")
    async with await factory.create(env, limits) as box:
        await box.write_file(CANDIDATE_PATCH, (patch if patch.endswith("\n") else patch + "\n").encode())
        applied = await box.exec(f"git apply --verbose {CANDIDATE_PATCH}", timeout=APPLY_TIMEOUT)
        if applied.returncode != 0:
            return unresolved(f"git apply failed (exit {applied.returncode})", applied.output)
        # the script's absolute path as the sandbox sees it, so that it may run in any ``cwd``
        testbed = (await box.exec("pwd", timeout=30)).output.strip()
        await box.write_file(EVAL_SCRIPT, script.encode())
        result = await box.exec(f"bash {shlex.quote(f'{testbed}/{EVAL_SCRIPT}')}", cwd=cwd, timeout=timeout)
    return EvaluateResponse(
        resolved=result.returncode == 0 and not result.timed_out,
        returncode=result.returncode,
        output=result.output,
        report={"apply": applied.output, "timed_out": result.timed_out, "duration": result.duration},
        error=f"the eval script timed out after {timeout:g}s" if result.timed_out else None,
    )


async def grade_officially(
    task: Task, patch: str, factory: SandboxFactory, env: EnvSpec, limits: Limits, *, timeout: float
) -> EvaluateResponse:
    """The official grading of ``task``; ``returncode`` is 0 when resolved, 1 when not, and null where the tests
    did not run (an empty patch, one that does not apply), as for a script's evaluation."""
    verdict = await grade_patch(task, patch, factory, env, timeout=timeout, limits=limits)
    errors = {"empty_patch": "the patch is empty", "apply_failed": "the patch does not apply"}
    return EvaluateResponse(
        resolved=verdict.resolved,
        returncode=None if verdict.status in errors else int(not verdict.resolved),
        output=verdict.log[-MAX_OUTPUT:],
        report={
            **verdict.report,
            "status": verdict.status,
            "tests_status": verdict.tests_status,
            "steering_files": [f.model_dump() for f in verdict.steering_files],
        },
        error=errors.get(verdict.status),
    )
