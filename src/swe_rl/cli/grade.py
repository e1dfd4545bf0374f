"""``swe-rl grade``: grade a SWE-bench predictions file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from swe_rl.cli.options import (
    BackendOpt,
    CacheOpt,
    ConcurrencyOpt,
    GradingOpt,
    JsonOpt,
    RepoCacheOpt,
    SourceOpt,
    TimeoutOpt,
    env_cache,
    note,
    print_json,
    resolve_backend,
    run,
    writable_dir,
)


def grade(
    predictions: Annotated[
        Path,
        typer.Option(
            "--predictions",
            "-p",
            help="preds.json (list or dict) or .jsonl with instance_id, model_name_or_path, model_patch.",
        ),
    ],
    source: SourceOpt = "builtin",
    run_id: Annotated[
        str, typer.Option("--run-id", help="Names the run's log folder and report.")
    ] = "swe-rl",
    out: Annotated[
        Path, typer.Option("--output-dir", "-o", help="Where logs/ and the run report go.")
    ] = Path("."),
    backend: BackendOpt = "auto",
    cache_dir: CacheOpt = None,
    repo_cache: RepoCacheOpt = None,
    concurrency: ConcurrencyOpt = 2,
    timeout: TimeoutOpt = 1800.0,
    grading: GradingOpt = "official",
    json_out: JsonOpt = False,
) -> None:
    """Grade predictions like swebench.harness.run_evaluation; resumable (graded instances are skipped).

    Exits 1 when an infrastructure error kept an instance from being graded (rerun to retry it); a patch
    that does not apply is an error in the report, as in swebench, but not a failure of the command."""
    from swe_rl.cli.options import pool_token
    from swe_rl.runs.grade_predictions import grade_predictions, infra_errors
    from swe_rl.runs.predictions import load_predictions
    from swe_rl.sandbox import get_factory
    from swe_rl.tasks.loaders import load_tasks

    writable_dir(out)
    preds = load_predictions(predictions)
    tasks = load_tasks(source)
    factory = get_factory(resolve_backend(backend), token=pool_token())
    path, report = run(
        grade_predictions(
            preds,
            tasks,
            env_cache(cache_dir, repo_cache),
            factory,
            out=out,
            run_id=run_id,
            source=source,
            concurrency=concurrency,
            timeout=timeout,
            mode=grading,
        )
    )
    infra = infra_errors(preds, out, run_id)
    for instance_id, message in sorted(infra.items()):
        note(f"infrastructure error: {instance_id}: {message}")
    if json_out:
        print_json(report)
    else:
        print(
            f"resolved {report['resolved_instances']}/{report['submitted_instances']} "
            f"(empty patches {report['empty_patch_instances']}, errors {report['error_instances']}: "
            f"{report['error_instances'] - len(infra)} evaluation errors (no method applied the patch, "
            f"or its tests timed out), {len(infra)} infrastructure errors)"
        )
    note(f"report written to {path}")
    raise typer.Exit(1 if infra else 0)
