"""``swe-rl grade``: grade a predictions file like ``swebench.harness.run_evaluation`` (swebench 5).

Writes the same layout as the official harness, so its tooling reads our output::

    <out>/logs/run_evaluation/<run_id>/run.json        what the run graded against (dataset, split)
    <out>/logs/run_evaluation/<run_id>/<model>/<instance_id>/
        patch.diff, run_instance.log, test_output.txt, report.json
    <out>/<model>.<run_id>.json                        the run report

As in swebench, report.json marks a graded instance (it is not graded again: resume), and an instance
without one is an evaluation error: a patch that no method applies, tests that timed out, or an
infrastructure failure (its text in run_instance.log). Each is retried by the next run. Only ``""`` and
``None`` are empty predictions: never graded, no env built. The run report is computed from the files on
disk by the rules of swebench's ``make_run_report``, with its ``classify_logs`` for ``failure_reasons``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from swe_rl.envs.cache import EnvCache
from swe_rl.errors import ConfigError, MissingExtraError, SweRlError
from swe_rl.fileio import atomic_write_json, atomic_write_text
from swe_rl.harness.grade_patch import grade_patch
from swe_rl.harness.official import APPLY_PATCH_FAIL
from swe_rl.harness.verdict import GradingMode, Verdict
from swe_rl.runs.predictions import Prediction
from swe_rl.runs.progress import Progress
from swe_rl.sandbox.base import SandboxFactory
from swe_rl.tasks.model import Task

INFRA_ERROR_MARK = ">>>>> swe-rl infrastructure error"
_EVAL_ERRORS = {"apply_failed", "test_timeout", "empty_patch"}  # empty_patch here: a blank, non-empty patch


def run_dir(out: Path, run_id: str) -> Path:
    return out / "logs" / "run_evaluation" / run_id


def instance_dir(out: Path, run_id: str, pred: Prediction) -> Path:
    return run_dir(out, run_id) / pred.model_name_or_path.replace("/", "__") / pred.instance_id


async def grade_predictions(
    preds: Sequence[Prediction],
    tasks: Sequence[Task],
    cache: EnvCache,
    factory: SandboxFactory,
    *,
    out: Path,
    run_id: str,
    source: str = "builtin",
    concurrency: int = 2,
    timeout: float = 1800.0,
    quiet: bool = False,
    mode: GradingMode = "official",
) -> tuple[Path, dict[str, Any]]:
    """Grade every prediction; return the run report's path and content. ``tasks``: the whole dataset
    (``source``, recorded in run.json); its instances without a prediction are incomplete."""
    by_id = {t.instance_id: t for t in tasks}
    unknown = [p.instance_id for p in preds if p.instance_id not in by_id]
    if unknown:  # refuse before writing anything
        raise ConfigError(
            f"{len(unknown)} prediction(s) name unknown instance ids: {', '.join(unknown[:10])}"
        )
    if not preds:
        raise ConfigError("the predictions file is empty")
    _check_resumed_mode(preds, out, run_id, mode)
    write_run_metadata(out, run_id, source)
    progress = Progress(len(preds), "grade")
    limit = asyncio.Semaphore(max(1, concurrency))

    async def one(pred: Prediction) -> None:
        folder = instance_dir(out, run_id, pred)
        if (folder / "report.json").is_file():
            outcome = "cached"
        elif is_empty(pred):
            outcome = "empty patch: not graded (swebench counts it as empty, never resolved)"
        else:
            async with limit:
                try:
                    verdict = await _grade_one(by_id[pred.instance_id], pred, cache, factory, timeout, mode)
                except SweRlError as exc:
                    message = f"{type(exc).__name__}: {exc}"
                    (folder / "test_output.txt").unlink(missing_ok=True)  # a previous attempt's
                    atomic_write_text(folder / "run_instance.log", f"{INFRA_ERROR_MARK}: {message}\n")
                    outcome = f"ERROR {message}"
                else:
                    outcome = _write_instance(folder, pred, verdict, timeout)
        if not quiet:
            progress.advance(pred.instance_id, outcome)

    await asyncio.gather(*(one(p) for p in preds))
    report = run_report(preds, tasks, out, run_id)
    path = out / f"{preds[0].model_name_or_path.replace('/', '__')}.{run_id}.json"
    atomic_write_json(path, report)
    return path, report


async def _grade_one(
    task: Task, pred: Prediction, cache: EnvCache, factory: SandboxFactory, timeout: float, mode: GradingMode
) -> Verdict:
    env = await asyncio.to_thread(cache.ensure, task)
    return await grade_patch(task, pred.model_patch, factory, env, timeout=timeout, mode=mode)


def _write_instance(folder: Path, pred: Prediction, verdict: Verdict, timeout: float) -> str:
    """The instance's files as swebench's ``run_instance`` leaves them; returns the outcome to show."""
    atomic_write_text(folder / "patch.diff", pred.model_patch or "")
    entry = {
        **verdict.report,
        "tests_status": verdict.tests_status,
        "apply_method": verdict.apply_method,
        "status": verdict.status,
        "grading": verdict.grading,
        "steering_files": [f.model_dump() for f in verdict.steering_files],
        **({"seal": verdict.seal} if verdict.seal else {}),
    }
    log = [
        f"Grading {pred.instance_id} ({verdict.grading} grading)",
        verdict.apply_log or f"{APPLY_PATCH_FAIL}: the patch is blank (no valid patches in input)",
        f"Git diff before (the candidate patch):\n{pred.model_patch or ''}",
    ]
    if verdict.status not in _EVAL_ERRORS:
        log.append(f"report: {json.dumps({pred.instance_id: entry})}")
    timings = ", ".join(f"{k} {v:.2f}s" for k, v in verdict.timings.items())
    log += [f"Result for {pred.instance_id}: {verdict.summary()}", f"Timings: {timings or 'none'}"]
    if verdict.status == "test_timeout":  # swebench: an evaluation error, the mark in test_output.txt
        atomic_write_text(
            folder / "test_output.txt",
            f"{verdict.test_output}\n\nTimeout error: {int(timeout)} seconds exceeded.",
        )
    elif verdict.status not in _EVAL_ERRORS:
        atomic_write_text(folder / "test_output.txt", verdict.test_output)
    else:  # swebench writes none: no previous attempt's may stay to be classified
        (folder / "test_output.txt").unlink(missing_ok=True)
    atomic_write_text(folder / "run_instance.log", "\n".join(log) + "\n")
    if verdict.status in _EVAL_ERRORS:  # swebench raises EvaluationError: no report.json, an error
        return f"evaluation error: {verdict.summary()}"
    atomic_write_json(folder / "report.json", {pred.instance_id: entry})  # written last: marks completion
    return verdict.summary()


def is_empty(pred: Prediction) -> bool:
    """swebench's empty prediction: no patch at all (a blank one is graded, and fails to apply)."""
    return pred.model_patch in ("", None)


def write_run_metadata(out: Path, run_id: str, source: str) -> Path:
    """swebench's ``write_run_metadata``: what the run graded against, written by every invocation."""
    path = run_dir(out, run_id) / "run.json"
    dataset, split = source, "test"
    if not source.startswith("builtin") and not Path(source).expanduser().exists():
        name, _, named_split = source.partition(":")  # a Hugging Face dataset 'owner/name[:split]'
        dataset, split = name, named_split or "test"
    task_repo = json.loads(path.read_text()).get("task_repo") if path.is_file() else None
    created = datetime.now(UTC).isoformat(timespec="seconds")
    atomic_write_json(
        path, {"dataset": dataset, "split": split, "task_repo": task_repo, "created_at": created}
    )
    return path


def infra_errors(preds: Sequence[Prediction], out: Path, run_id: str) -> dict[str, str]:
    """Instance id -> our error text, for the instances whose grading met an infrastructure failure."""
    found: dict[str, str] = {}
    for pred in preds:
        log = instance_dir(out, run_id, pred) / "run_instance.log"
        if not (log.parent / "report.json").is_file() and log.is_file():
            text = log.read_text(errors="replace")
            if text.startswith(INFRA_ERROR_MARK):
                found[pred.instance_id] = text[len(INFRA_ERROR_MARK) + 2 :].strip()
    return found


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


def _classify_logs() -> Any:
    try:
        from swebench.harness.infra_failure import TIER_ENVIRONMENT, classify_logs
    except ImportError as exc:
        raise MissingExtraError("swebench", "grading", f"the run report's failure reasons ({exc})") from None
    return classify_logs, TIER_ENVIRONMENT


def run_report(preds: Sequence[Prediction], tasks: Sequence[Task], out: Path, run_id: str) -> dict[str, Any]:
    """swebench's ``make_run_report`` (without a docker client), by its rules, from the files under ``out``."""
    predictions = {p.instance_id: p for p in preds}
    completed, resolved, unresolved, errors, incomplete, empty = (set[str]() for _ in range(6))
    for task in tasks:
        iid = task.instance_id
        pred = predictions.get(iid)
        if pred is None:
            incomplete.add(iid)
            continue
        if is_empty(pred):
            empty.add(iid)
            continue
        report_file = instance_dir(out, run_id, pred) / "report.json"
        if not report_file.exists():
            errors.add(iid)
            continue
        completed.add(iid)
        try:
            content = report_file.read_text().strip()
            if not content:
                errors.add(iid)
            elif json.loads(content)[iid]["resolved"]:
                resolved.add(iid)
            else:
                unresolved.add(iid)
        except (json.JSONDecodeError, KeyError):
            errors.add(iid)
    classify_logs, environment = _classify_logs()
    reasons: dict[str, str] = {}
    infra, ambiguous = set[str](), set[str]()
    for iid in unresolved | errors:
        folder = instance_dir(out, run_id, predictions[iid])
        found = classify_logs(folder / "test_output.txt", folder / "run_instance.log")
        if found:
            reasons[iid] = found[0]
            (infra if found[1] == environment else ambiguous).add(iid)
    return {
        "total_instances": len(tasks),
        "submitted_instances": len(predictions),
        "completed_instances": len(completed),
        "resolved_instances": len(resolved),
        "unresolved_instances": len(unresolved),
        "infra_failure_instances": len(infra),
        "ambiguous_failure_instances": len(ambiguous),
        "empty_patch_instances": len(empty),
        "error_instances": len(errors),
        "completed_ids": sorted(completed),
        "incomplete_ids": sorted(incomplete),
        "empty_patch_ids": sorted(empty),
        "submitted_ids": sorted(predictions),
        "resolved_ids": sorted(resolved),
        "unresolved_ids": sorted(unresolved),
        "infra_failure_ids": sorted(infra),
        "ambiguous_failure_ids": sorted(ambiguous),
        "failure_reasons": dict(sorted(reasons.items())),
        "error_ids": sorted(errors),
        "schema_version": 2,
    }
