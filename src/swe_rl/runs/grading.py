"""``swe-rl grade``: grade a predictions file like ``swebench.harness.run_evaluation``.

Writes the same layout as the official harness, so its tooling reads our output::

    <out>/logs/run_evaluation/<run_id>/<model>/<instance_id>/{patch.diff, test_output.txt, report.json}
    <out>/<model>.<run_id>.json          the run report (schema_version 2 fields)

An instance with a report.json is not graded again (resume). An infrastructure error writes no
report.json for that instance, so the next run retries it; it is counted in ``error_ids``. An empty
prediction is not graded at all (no env is built for it): it counts in ``empty_patch_ids``, as in
swebench's run report.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from swe_rl.envs.cache import EnvCache
from swe_rl.errors import ConfigError, SweRlError
from swe_rl.harness.grade import grade_patch
from swe_rl.harness.verdict import GradingMode
from swe_rl.runs.predictions import Prediction
from swe_rl.runs.progress import Progress
from swe_rl.sandbox.base import SandboxFactory
from swe_rl.tasks.io import atomic_write_json, atomic_write_text
from swe_rl.tasks.model import Task


def instance_dir(out: Path, run_id: str, pred: Prediction) -> Path:
    model = pred.model_name_or_path.replace("/", "__")
    return out / "logs" / "run_evaluation" / run_id / model / pred.instance_id


async def grade_predictions(
    preds: Sequence[Prediction],
    tasks: Sequence[Task],
    cache: EnvCache,
    factory: SandboxFactory,
    *,
    out: Path,
    run_id: str,
    concurrency: int = 2,
    timeout: float = 1800.0,
    quiet: bool = False,
    mode: GradingMode = "official",
) -> tuple[Path, dict[str, Any]]:
    """Grade every prediction; return the run report's path and content."""
    by_id = {t.instance_id: t for t in tasks}
    unknown = [p.instance_id for p in preds if p.instance_id not in by_id]
    if unknown:  # refuse before writing anything
        raise ConfigError(
            f"{len(unknown)} prediction(s) name unknown instance ids: {', '.join(unknown[:10])}"
        )
    if not preds:
        raise ConfigError("the predictions file is empty")
    _check_resumed_mode(preds, out, run_id, mode)
    progress = Progress(len(preds), "grade")
    limit = asyncio.Semaphore(max(1, concurrency))
    reports: dict[str, dict[str, Any]] = {}
    errors: dict[str, str] = {}

    async def one(pred: Prediction) -> None:
        task = by_id[pred.instance_id]
        folder = instance_dir(out, run_id, pred)
        done = folder / "report.json"
        if done.is_file():
            reports[pred.instance_id] = json.loads(done.read_text())[pred.instance_id]
            outcome = "cached"
        elif is_empty(pred):
            outcome = "empty patch: not graded (swebench counts it as empty, never resolved)"
        else:
            async with limit:
                try:
                    outcome = await _grade_one(
                        task, pred, cache, factory, folder, timeout, reports, mode=mode
                    )
                except SweRlError as exc:
                    errors[pred.instance_id] = f"{type(exc).__name__}: {exc}"
                    outcome = f"ERROR {type(exc).__name__}: {exc}"
        if not quiet:
            progress.advance(pred.instance_id, outcome)

    await asyncio.gather(*(one(p) for p in preds))
    report = run_report(preds, tasks, reports, errors)
    model = preds[0].model_name_or_path.replace("/", "__")
    path = out / f"{model}.{run_id}.json"
    atomic_write_json(path, report)
    return path, report


async def _grade_one(
    task: Task,
    pred: Prediction,
    cache: EnvCache,
    factory: SandboxFactory,
    folder: Path,
    timeout: float,
    reports: dict[str, dict[str, Any]],
    *,
    mode: GradingMode,
) -> str:
    env = await asyncio.to_thread(cache.ensure, task)
    verdict = await grade_patch(task, pred.model_patch, factory, env, timeout=timeout, mode=mode)
    entry = {
        **verdict.report,
        "tests_status": verdict.tests_status,
        "apply_method": verdict.apply_method,
        "status": verdict.status,
        "grading": verdict.grading,
        "steering_files": [f.model_dump() for f in verdict.steering_files],
    }
    atomic_write_text(folder / "patch.diff", pred.model_patch or "")
    atomic_write_text(folder / "test_output.txt", verdict.log)
    atomic_write_json(folder / "report.json", {pred.instance_id: entry})  # written last: marks completion
    reports[pred.instance_id] = entry
    return verdict.summary()


def is_empty(pred: Prediction) -> bool:
    """A prediction with no patch: swebench skips it (no env, no test run) and counts it as empty."""
    return not (pred.model_patch or "").strip()


def _check_resumed_mode(preds: Sequence[Prediction], out: Path, run_id: str, mode: GradingMode) -> None:
    """A run is graded in one mode: resuming it in the other would mix verdicts of both."""
    for pred in preds:
        done = instance_dir(out, run_id, pred) / "report.json"
        if done.is_file():
            graded = json.loads(done.read_text())[pred.instance_id].get("grading", "official")
            if graded != mode:
                raise ConfigError(
                    f"run {run_id!r} in {out} was graded with --grading {graded}; "
                    f"resume it with that mode or grade --grading {mode} under another --run-id"
                )


def run_report(
    preds: Sequence[Prediction],
    tasks: Sequence[Task],
    reports: dict[str, dict[str, Any]],
    errors: dict[str, str],
) -> dict[str, Any]:
    """The run-level report, with the fields of swebench's ``make_run_report``."""
    submitted = sorted(p.instance_id for p in preds)
    empty = sorted(p.instance_id for p in preds if is_empty(p))
    completed = sorted(i for i in reports if i not in empty)
    resolved = sorted(i for i in completed if reports[i].get("resolved"))
    unresolved = sorted(i for i in completed if not reports[i].get("resolved"))
    error_ids = sorted(errors)
    incomplete = sorted(
        t.instance_id for t in tasks if t.instance_id not in reports and t.instance_id not in empty
    )
    return {
        "total_instances": len(tasks),
        "submitted_instances": len(submitted),
        "completed_instances": len(completed),
        "resolved_instances": len(resolved),
        "unresolved_instances": len(unresolved),
        "infra_failure_instances": len(error_ids),
        "ambiguous_failure_instances": 0,
        "empty_patch_instances": len(empty),
        "error_instances": len(error_ids),
        "completed_ids": completed,
        "incomplete_ids": incomplete,
        "empty_patch_ids": empty,
        "submitted_ids": submitted,
        "resolved_ids": resolved,
        "unresolved_ids": unresolved,
        "infra_failure_ids": error_ids,
        "ambiguous_failure_ids": [],
        "failure_reasons": errors,
        "error_ids": error_ids,
        "schema_version": 2,
    }
