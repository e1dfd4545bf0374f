"""``swe-rl tasks split``: one held-back split of synthesized tasks for every stage of an experiment."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from swe_rl.cli.options import JsonOpt, console, note, print_json

if TYPE_CHECKING:
    from swe_rl.tasks.model import Task


def split_command(
    tasks: Annotated[
        list[Path],
        typer.Option("--tasks", "-s", help="Synthesized task file(s) to split together (repeatable)."),
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            help="Task file to write (.jsonl): every task with its side in 'split', and each side to "
            "NAME.heldback.jsonl, NAME.train.jsonl, NAME.dropped.jsonl.",
        ),
    ],
    heldback: Annotated[
        float,
        typer.Option("--heldback", min=0.0, max=0.99, help="Share of the tasks held back, by function."),
    ] = 0.3,
    seed: Annotated[
        int, typer.Option("--seed", help="Seed of the function order: same seed, same split.")
    ] = 0,
    heldback_repo: Annotated[
        list[str] | None,
        typer.Option("--heldback-repo", help="Hold back this library whole (its short name; repeatable)."),
    ] = None,
    count_kind: Annotated[
        list[str] | None,
        typer.Option(
            "--count-kind",
            help="Measure the held-back share on tasks of this kind (repeatable) [default: all].",
        ),
    ] = None,
    heldback_kind: Annotated[
        list[str] | None,
        typer.Option(
            "--heldback-kind",
            help="Keep only tasks of this kind held back (repeatable); the other tasks of held-back functions "
            "are dropped, and only the kept tasks' bug strings are kept out of training [default: all kinds].",
        ),
    ] = None,
    report: Annotated[
        Path | None, typer.Option("--report", help="Also write the split's summary (JSON) to this file.")
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """One held-back split of synthesized tasks, for every stage of an experiment (docs/SYNTH.md, "Splits").

    Whole functions (and --heldback-repo libraries) are held back, of every kind; training tasks that
    repeat a held-back bug string (kind and description, e.g. `name_typo: data -> daa`) are dropped.
    Deterministic for a seed."""
    from swe_rl.errors import ConfigError
    from swe_rl.fileio import atomic_write_json
    from swe_rl.synth.heldback import DROPPED, HELDBACK, TRAIN, split_heldback
    from swe_rl.synth.output import publish_split
    from swe_rl.tasks.loaders import load_tasks

    if out.suffix != ".jsonl":
        raise ConfigError(f"--out must be a .jsonl file, got {out}")
    every: dict[str, Task] = {}
    for path in tasks:
        for task in load_tasks(str(path)):
            every.setdefault(task.instance_id, task)  # the same task in two files is one task
    result = split_heldback(
        list(every.values()),
        share=heldback,
        seed=seed,
        heldback_repos=heldback_repo or (),
        count_kinds=count_kind or (),
        heldback_kinds=heldback_kind or (),
    )
    paths = publish_split({HELDBACK: result.heldback, TRAIN: result.train, DROPPED: result.dropped}, out)
    summary = {**result.summary(), "seed": seed, "share": heldback, "out": str(out)}
    summary["files"] = {name: str(path) for name, path in paths.items()}
    if report:
        atomic_write_json(report, summary)
    if json_out:
        print_json(summary)
        return
    _print_split_table(summary)


def _print_split_table(summary: dict[str, Any]) -> None:
    from rich.table import Table

    per_kind = summary["per_kind"]
    sides = list(per_kind)
    table = Table(title="tasks split: " + ", ".join(f"{n} {side}" for side, n in summary["tasks"].items()))
    table.add_column("kind")
    for side in sides:
        table.add_column(side, justify="right")
    for kind in sorted({k for counts in per_kind.values() for k in counts}):
        table.add_row(kind, *(str(per_kind[side].get(kind, 0)) for side in sides))
    console().print(table)
    note(
        f"held back {len(summary['heldback_functions'])} functions, {len(summary['heldback_bug_strings'])} "
        f"bug strings, repositories: {', '.join(summary['heldback_repos']) or 'none whole'}; wrote {summary['out']}"
    )
