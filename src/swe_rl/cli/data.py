"""``swe-rl data``: trainer JSONL and cluster assets from task sources."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from swe_rl.cli.common import InstancesOpt, SourceOpt, note

app = typer.Typer(help="Prepare training data and export assets for a cluster.", no_args_is_help=True)
OutOpt = Annotated[Path, typer.Option("--output-dir", "-o", help="Directory to write into.")]


@app.command("prepare")
def prepare(
    source: SourceOpt = "builtin",
    output_dir: OutOpt = Path("data"),
    instance: InstancesOpt = None,
    split: Annotated[str, typer.Option(help="Name of the output file (<split>.jsonl).")] = "train",
    data_source: Annotated[
        str | None, typer.Option(help="metadata.data_source [default: the source].")
    ] = None,
    valid_only: Annotated[
        Path | None,
        typer.Option(
            "--valid-only",
            help="An `env build` report: keep only the instances it marks usable (valid when it was "
            "built with --validate, else built).",
        ),
    ] = None,
) -> None:
    """Tasks -> trainer JSONL: {"text": problem, "metadata": {"instance": record, "data_source": ...}}."""
    from swe_rl.tasks.export import keep_usable, write_prepared
    from swe_rl.tasks.loaders import load_tasks

    tasks = load_tasks(source, instance_ids=instance)
    if valid_only is not None:
        before = len(tasks)
        tasks = keep_usable(tasks, valid_only)
        note(f"--valid-only {valid_only}: kept {len(tasks)} of {before} instances")
    path = write_prepared(tasks, data_source or source, output_dir, split)
    note(f"{len(tasks)} rows -> {path}")


@app.command("export")
def export(
    source: SourceOpt = "builtin",
    output_dir: OutOpt = Path("data"),
    instance: InstancesOpt = None,
    flavor: Annotated[
        str | None, typer.Option(help="Image naming: swebench or swegym [default: guessed from the source].")
    ] = None,
) -> None:
    """instance_ids.txt, docker_images.txt (SWE-bench or SWE-Gym naming) and eval.jsonl for `swe-rl eval`."""
    from swe_rl.errors import ConfigError
    from swe_rl.tasks.export import guess_flavor, write_exports
    from swe_rl.tasks.loaders import load_tasks

    if flavor not in (None, "swebench", "swegym"):
        raise ConfigError(f"unknown image flavor {flavor!r}: use swebench or swegym")
    tasks = load_tasks(source, instance_ids=instance)
    files = write_exports(tasks, output_dir, flavor or guess_flavor(source))  # type: ignore[arg-type]
    for name, path in files.items():
        note(f"{name}: {path}")
