"""``env validate`` over many tasks: build envs, validate each task concurrently, report."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from pydantic import BaseModel

from swe_rl.envs.build.venvbuild import skipped_conda_packages
from swe_rl.envs.cache import EnvCache
from swe_rl.errors import SweRlError
from swe_rl.harness.validate import TaskValidation, validate_task
from swe_rl.runs.progress import Progress
from swe_rl.sandbox.base import SandboxFactory
from swe_rl.tasks.model import Task


class ValidationReport(BaseModel):
    backend: str
    total: int
    valid: int
    invalid: list[str]
    errors: dict[str, str]
    results: list[TaskValidation]

    @property
    def ok(self) -> bool:
        return not self.invalid and not self.errors


async def validate_tasks(
    tasks: Sequence[Task],
    cache: EnvCache,
    factory: SandboxFactory,
    *,
    concurrency: int = 2,
    timeout: float = 1800.0,
    quiet: bool = False,
) -> ValidationReport:
    """Validate every task; an infrastructure error on one task is reported, not fatal to the rest."""
    progress = Progress(len(tasks), "validate")
    limit = asyncio.Semaphore(max(1, concurrency))
    results: dict[str, TaskValidation] = {}
    errors: dict[str, str] = {}

    async def one(task: Task) -> None:
        async with limit:
            try:
                env = await asyncio.to_thread(cache.ensure, task)
                conda_only = skipped_conda_packages(env.venv)
                result = await validate_task(task, factory, env, timeout=timeout, conda_only=conda_only)
            except SweRlError as exc:
                errors[task.instance_id] = f"{type(exc).__name__}: {exc}"
                outcome = f"ERROR {type(exc).__name__}"
            else:
                results[task.instance_id] = result
                outcome = "valid" if result.valid else "INVALID: " + "; ".join(result.problems)
            if not quiet:
                progress.advance(task.instance_id, outcome)

    await asyncio.gather(*(one(t) for t in tasks))
    ordered = [results[t.instance_id] for t in tasks if t.instance_id in results]
    return ValidationReport(
        backend=factory.backend,
        total=len(tasks),
        valid=sum(r.valid for r in ordered),
        invalid=[r.instance_id for r in ordered if not r.valid],
        errors=errors,
        results=ordered,
    )
