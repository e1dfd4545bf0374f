"""``swe-rl report``: render a run directory as a static HTML page."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def report(
    run_dir: Annotated[Path, typer.Argument(help="An eval (or rollout) run directory with results.jsonl.")],
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Where to write the page [default: RUN_DIR/report.html]."),
    ] = None,
) -> None:
    """Summary, plots (outcomes, steps, time, time split) and a trajectory viewer in one HTML file."""
    from swe_rl.cli.options import writable_file
    from swe_rl.report.html import render_report

    if out is not None:
        writable_file(out, "--out")
    path = render_report(run_dir, out)
    print(path)
