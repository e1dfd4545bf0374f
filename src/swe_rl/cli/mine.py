"""``swe-rl tasks mine``: validated tasks from a repository's own fix commits (docs/MINING.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from swe_rl.cli.options import (
    BackendOpt,
    CacheOpt,
    JsonOpt,
    RepoCacheOpt,
    TimeoutOpt,
    console,
    env_cache,
    note,
    print_json,
    resolve_backend,
    run,
    sigterm_interrupts,
)


def mine_command(
    repo: Annotated[
        list[str],
        typer.Option(
            "--repo",
            "-r",
            help="A local git repository, or OWNER/NAME of a mirror in --repo-cache; its HEAD's first-parent "
            "line is mined. Repeatable: each repository is mined in turn into OUT_STEM.NAME.jsonl (its own "
            "state, resumed on its own), and --out holds all their rows in the order given.",
        ),
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out", "-o", help="Task file to write (.jsonl); its state (for resuming) goes beside it."
        ),
    ],
    since: Annotated[
        str | None, typer.Option("--since", help="Only commits from this date on (any date git reads).")
    ] = None,
    until: Annotated[str | None, typer.Option("--until", help="Only commits up to this date.")] = None,
    max_candidates: Annotated[
        int | None,
        typer.Option(
            "--max-candidates",
            min=1,
            help="Validate at most this many candidates of each repository (oldest first).",
        ),
    ] = None,
    path: Annotated[
        list[str] | None,
        typer.Option(
            "--path",
            help="Only changes to a source file at or under this path (a file, or a directory), relative to "
            "the repository's root. Repeatable.",
        ),
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option("--jobs", "-j", min=1, help="Candidates validated at once [default: CPUs].")
    ] = None,
    pytest: Annotated[
        str,
        typer.Option(
            "--pytest",
            help="dated: pytest installed as of the commit's date; host: the host's pytest copied in (offline).",
        ),
    ] = "dated",
    timeout: TimeoutOpt = 300.0,
    exclude: Annotated[
        list[str] | None,
        typer.Option(
            "--exclude",
            help="A task file (or dataset) whose fixes are never mined: same base commit or patch.",
        ),
    ] = None,
    backend: BackendOpt = "auto",
    cache_dir: CacheOpt = None,
    repo_cache: RepoCacheOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Mine validated tasks from a repository's history: fix commits touching code and tests.

    Each first-parent change (a merge's whole change) touching source and test files is a candidate;
    its env is inferred at the base commit, its touched tests run before and after the fix twice, and
    it is kept when some tests fail before and pass after, stably. Resumable and deterministic.
    """
    import os

    from swe_rl.cli.options import pool_token
    from swe_rl.mine import MineOptions, mine_all
    from swe_rl.sandbox import get_factory

    if pytest not in ("dated", "host"):
        raise typer.BadParameter(f"--pytest is dated or host, not {pytest!r}")
    options = MineOptions(
        since=since,
        until=until,
        max_candidates=max_candidates,
        paths=tuple(p.strip("/") for p in path or ()),
        concurrency=concurrency or (os.cpu_count() or 2),
        pytest="host" if pytest == "host" else "dated",
        timeout=timeout,
        exclude=tuple(exclude or ()),
    )
    factory = get_factory(resolve_backend(backend), token=pool_token())

    sigterm_interrupts()  # decisions so far stay in the state file
    reports = run(
        mine_all(
            list(repo),
            out,
            options=options,
            cache=env_cache(cache_dir, repo_cache),
            factory=factory,
            note=note,
            repo_cache=repo_cache,
        )
    )
    summaries = [_summary(r, name) for r, name in zip(reports, repo, strict=True)]
    summary = summaries[0] | {"out": str(out)} if len(summaries) == 1 else _total(summaries, out)
    if json_out:
        print_json(summary)
        return
    _print_drops(summary)
    note(
        f"wrote {summary['tasks']} tasks to {out} from {summary['candidates']} candidates in "
        f"{summary['commits']} commits ({summary['seconds']:.1f}s)"
    )


def _summary(report: Any, repo: str) -> dict[str, Any]:
    return report.model_dump(mode="json", exclude={"tasks"}) | {"repo": repo, "tasks": len(report.tasks)}


def _total(summaries: list[dict[str, Any]], out: Path) -> dict[str, Any]:
    """Several repositories' summaries: their sums, and each one under ``repos``."""
    dropped: dict[str, dict[str, int]] = {}
    for s in summaries:
        for stage, reasons in s["dropped"].items():
            for reason, count in reasons.items():
                dropped.setdefault(stage, {})[reason] = dropped.get(stage, {}).get(reason, 0) + count
    keys = ("tasks", "commits", "candidates", "resumed", "seconds", "decide_seconds")
    sums = {k: sum(s[k] for s in summaries) for k in keys}
    return sums | {"dropped": dropped, "out": str(out), "repos": summaries}


def _print_drops(summary: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table(title=f"tasks mine: {summary['tasks']} tasks; dropped by stage")
    for col in ("stage", "reason", "count"):
        table.add_column(col)
    for stage, reasons in summary["dropped"].items():
        for reason, count in reasons.items():
            table.add_row(stage, reason, str(count))
    console().print(table)
