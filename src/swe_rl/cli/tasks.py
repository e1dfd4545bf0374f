"""``swe-rl tasks``: list and show task records, synthesize tasks, count them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from swe_rl.cli.mine import mine_command
from swe_rl.cli.options import (
    BackendOpt,
    CacheOpt,
    InstancesOpt,
    JsonOpt,
    SourceOpt,
    console,
    env_cache,
    note,
    print_json,
    resolve_backend,
    run,
    sigterm_interrupts,
)
from swe_rl.cli.split import split_command

app = typer.Typer(help="Inspect task records (SWE-bench schema).", no_args_is_help=True)


@app.command("list")
def list_tasks(
    source: SourceOpt = "builtin", instance: InstancesOpt = None, json_out: JsonOpt = False
) -> None:
    """List the tasks of a source: id, repo, test counts, first line of the issue."""
    from rich.table import Table

    from swe_rl.tasks.loaders import load_tasks

    tasks = load_tasks(source, instance_ids=instance)
    if json_out:
        print_json(
            [
                {
                    "instance_id": t.instance_id,
                    "repo": t.repo,
                    "base_commit": t.base_commit,
                    "FAIL_TO_PASS": len(t.FAIL_TO_PASS),
                    "PASS_TO_PASS": len(t.PASS_TO_PASS),
                }
                for t in tasks
            ]
        )
        return
    table = Table(title=f"{len(tasks)} tasks from {source}")
    for col in ("instance_id", "repo", "F2P", "P2P", "issue"):
        table.add_column(col)
    for t in tasks:
        table.add_row(
            t.instance_id,
            t.repo,
            str(len(t.FAIL_TO_PASS)),
            str(len(t.PASS_TO_PASS)),
            (t.problem_statement.strip().splitlines() or [""])[0][:60],
        )
    console().print(table)


@app.command("show")
def show_task(
    instance_id: Annotated[str, typer.Argument(help="The instance id to show.")],
    source: SourceOpt = "builtin",
    json_out: JsonOpt = False,
) -> None:
    """Show one task record in full (problem statement, patches, tests)."""
    from swe_rl.tasks.loaders import load_tasks

    task = load_tasks(source, instance_ids=[instance_id])[0]
    if json_out:
        print_json(task.to_record())
        return
    record = task.to_record()
    for key in ("instance_id", "repo", "base_commit", "version", "created_at"):
        print(f"{key}: {record.get(key, '')}")
    print(f"\n--- problem_statement ---\n{task.problem_statement.rstrip()}")
    print(f"\n--- FAIL_TO_PASS ({len(task.FAIL_TO_PASS)}) ---\n" + "\n".join(task.FAIL_TO_PASS))
    print(f"\n--- PASS_TO_PASS ({len(task.PASS_TO_PASS)}) ---\n" + "\n".join(task.PASS_TO_PASS))
    print(f"\n--- patch ---\n{task.patch.rstrip()}\n\n--- test_patch ---\n{task.test_patch.rstrip()}")


@app.command("synth")
def synth(
    repo: Annotated[
        list[str],
        typer.Option(
            "--repo",
            "-r",
            help="Repository to inject bugs into: a path (git HEAD, or a plain folder), 'builtin' (every "
            "builtin library) or 'builtin:NAME'. Repeatable.",
        ),
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            help="Task file to write (.jsonl). The base commits go to a bare repo beside it (NAME.git).",
        ),
    ],
    n: Annotated[int, typer.Option("--n", "-n", min=1, help="Number of tasks to synthesize.")] = 50,
    seed: Annotated[
        int, typer.Option("--seed", help="Seed of the candidate order: same seed, same tasks.")
    ] = 0,
    multi: Annotated[
        float,
        typer.Option(
            "--multi", min=0.0, max=1.0, help="Share of multi-location tasks (2-3 bugs in one function)."
        ),
    ] = 0.25,
    difficulty: Annotated[
        list[str] | None,
        typer.Option(
            "--difficulty",
            help="Keep only these difficulties (repeatable): one-line, multi-line, multi-location.",
        ),
    ] = None,
    kind: Annotated[
        list[str] | None,
        typer.Option("--kind", help="Only these mutation kinds (repeatable); see `swe-rl tasks kinds`."),
    ] = None,
    split: Annotated[
        str | None,
        typer.Option(
            "--split",
            help="Split by source function, e.g. train:0.8,test:0.2: each record gets a 'split' field and "
            "each split is also written to NAME.<split>.jsonl.",
        ),
    ] = None,
    src: Annotated[
        list[str] | None,
        typer.Option("--src", help="Only mutate files under this path prefix (repeatable), e.g. 'mylib/'."),
    ] = None,
    test_cmd: Annotated[
        str, typer.Option("--test-cmd", help="pytest command run in the repo root (needs -rA output).")
    ] = "python -m pytest -rA -p no:cacheprovider",
    install: Annotated[
        str, typer.Option("--install", help="Shell command that installs the repo's test dependencies.")
    ] = "",
    env_seed: Annotated[
        list[str] | None,
        typer.Option("--env-seed", help="Host packages copied into the env offline [default: pytest]."),
    ] = None,
    allow_failing: Annotated[
        bool, typer.Option("--allow-failing", help="Leave tests that fail before any mutation out.")
    ] = False,
    backend: BackendOpt = "auto",
    cache_dir: CacheOpt = None,
    concurrency: Annotated[
        int | None,
        typer.Option("--jobs", "-j", min=1, help="Candidates tested at once [default: CPUs]."),
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout", min=1, help="Seconds per candidate run [default: --timeout-factor x the baseline]."
        ),
    ] = None,
    timeout_factor: Annotated[
        float | None,
        typer.Option("--timeout-factor", min=0.1, help="Candidate timeout in baselines [default: 10]."),
    ] = None,
    timeout_floor: Annotated[
        float | None,
        typer.Option("--timeout-floor", min=0.1, help="Least seconds per candidate run [default: 10]."),
    ] = None,
    report: Annotated[
        Path | None, typer.Option("--report", help="Also write the run's statistics (JSON) to this file.")
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Synthesize validated tasks by injecting bugs into functions the test suite covers.

    Each candidate bug runs the suite once in a sandbox; it is kept when some passing tests fail
    (FAIL_TO_PASS), and its gold patch is the reverse change. Deterministic for a seed.
    """
    import os

    from swe_rl.cli.options import pool_token
    from swe_rl.fileio import atomic_write_json
    from swe_rl.sandbox import get_factory
    from swe_rl.synth import DIFFICULTIES, SynthOptions, parse_split, synthesize

    bad = sorted(set(difficulty or []) - set(DIFFICULTIES))
    if bad:
        raise typer.BadParameter(f"unknown difficulty {bad}; choose from {', '.join(DIFFICULTIES)}")
    options = SynthOptions(
        n=n,
        seed=seed,
        multi=multi,
        difficulties=tuple(difficulty or DIFFICULTIES),
        **({"kinds": tuple(kind)} if kind else {}),
        src=tuple(src or ()),
        test_cmd=test_cmd,
        install=install,
        env_seed=tuple(env_seed) if env_seed is not None else ("pytest",),
        concurrency=concurrency or (os.cpu_count() or 2),
        timeout=timeout,
        **({"timeout_factor": timeout_factor} if timeout_factor else {}),
        **({"timeout_floor": timeout_floor} if timeout_floor else {}),
        allow_failing=allow_failing,
    )
    shares = parse_split(split) if split else None
    factory = get_factory(resolve_backend(backend), token=pool_token())
    sigterm_interrupts()  # the staging folder is removed
    result = run(
        synthesize(
            repo,
            out,
            options=options,
            cache=env_cache(cache_dir, None),
            factory=factory,
            split=shares,
            note=note,
        )
    )
    summary = result.model_dump(mode="json", exclude={"tasks"})
    summary["out"] = str(out)
    if report:
        atomic_write_json(report, summary)
    if json_out:
        print_json(summary)
        return
    _print_kind_table(result)
    note(f"wrote {len(result.tasks)} tasks to {out} ({result.seconds:.1f}s)")
    if len(result.tasks) < n:
        note(f"warning: only {len(result.tasks)} of {n} tasks: the repository ran out of valid mutations")


def _print_kind_table(result: object) -> None:
    from rich.table import Table

    from swe_rl.synth import SynthReport

    assert isinstance(result, SynthReport)
    table = Table(title=f"tasks synth: {len(result.tasks)} tasks from {result.candidates} single mutations")
    for col in ("kind", "tried", "valid", "pass rate", "equivalent", "broken", "timeout", "kept", "s/run"):
        table.add_column(col)
    for name, s in result.per_kind.items():
        table.add_row(
            name,
            str(s.tried),
            str(s.valid),
            f"{s.pass_rate:.0%}",
            str(s.equivalent),
            str(s.broken),
            str(s.timeout),
            str(s.kept),
            f"{s.seconds / s.tried:.2f}" if s.tried else "-",
        )
    console().print(table)


@app.command("stats")
def stats_command(source: SourceOpt = "builtin", json_out: JsonOpt = False) -> None:
    """Counts of a task file: per mutation kind, difficulty, split and file (synthesized tasks)."""
    from rich.table import Table

    from swe_rl.synth import stats
    from swe_rl.tasks.loaders import load_tasks

    counts = stats(load_tasks(source))
    if json_out:
        print_json(counts)
        return
    print(
        f"{counts['tasks']} tasks in {counts['functions']} functions; mean FAIL_TO_PASS {counts['fail_to_pass_mean']}"
    )
    for key in ("per_kind", "per_difficulty", "per_split", "per_file"):
        table = Table(title=key.replace("_", " "))
        table.add_column(key.removeprefix("per_"))
        table.add_column("tasks", justify="right")
        for name, count in counts[key].items():
            table.add_row(name, str(count))
        console().print(table)


@app.command("kinds")
def kinds() -> None:
    """The mutation kinds `tasks synth` can inject."""
    from swe_rl.synth import MUTATION_KINDS

    for name in MUTATION_KINDS:
        print(name)


app.command("mine")(mine_command)
app.command("split")(split_command)
