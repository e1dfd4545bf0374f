"""Tables ``swe-rl env build`` and ``env validate`` print: per instance, per repository, and the disk."""

from __future__ import annotations

from swe_rl.cli.options import console


def print_build(result: object) -> None:
    from rich.markup import escape
    from rich.table import Table

    from swe_rl.runs.envbuild import BuildReport

    assert isinstance(result, BuildReport)
    counts = result.counts()
    title = "env build: " + ", ".join(f"{v} {k}" for k, v in counts.items())
    table = Table(title=title)
    for col in ("instance_id", "status", "env", "python", "seconds", "gold / empty", "reason"):
        table.add_column(col)
    for e in result.entries.values():
        table.add_row(
            e.instance_id,
            e.status,
            e.env or "-",
            e.python or "-",
            f"{e.seconds:.1f}",
            f"{e.gold} / {e.empty}" if e.gold else "-",
            escape((e.reason or "")[-300:]),
        )
    console().print(table)
    if result.summary is not None:
        print_build_summary(result.summary)


def print_build_summary(summary: object) -> None:
    """One row per repository and one for all, then the disk the env cache takes."""
    from rich.markup import escape
    from rich.table import Table

    from swe_rl.runs.buildreport import STATUSES, BuildSummary

    assert isinstance(summary, BuildSummary)
    table = Table(title="per repository")
    for col in ("repo", "total", *STATUSES, "seconds", "causes"):
        table.add_column(col, justify="left" if col in ("repo", "causes") else "right")
    for name, repo in [*summary.repos.items(), ("all", summary.overall)]:
        causes = ", ".join(f"{cause} {n}" for cause, n in sorted(repo.causes.items(), key=lambda c: -c[1]))
        counts = [str(getattr(repo, status)) for status in STATUSES]
        table.add_row(escape(name), str(repo.total), *counts, f"{repo.seconds:.0f}", escape(causes))
    console().print(table)
    if summary.disk is not None:
        parts = ", ".join(f"{name} {_bytes(size)}" for name, size in summary.disk.parts.items())
        console().print(f"env cache disk use: {_bytes(summary.disk.total)} ({parts})")


def _bytes(size: int) -> str:
    """1.5 GiB, 320.0 MiB, 12 B."""
    value = float(size)
    for unit in ("B", "KiB", "MiB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def print_validation(result: object) -> None:
    from rich.markup import escape
    from rich.table import Table

    from swe_rl.runs.validation import ValidationReport

    assert isinstance(result, ValidationReport)
    table = Table(title=f"env validate ({result.backend} backend): {result.valid}/{result.total} valid")
    for col in ("instance_id", "gold", "base (empty)", "valid"):
        table.add_column(col)
    for r in result.results:
        table.add_row(
            r.instance_id,
            r.gold.summary(),
            r.empty.summary(),
            "yes" if r.valid else escape("NO: " + "; ".join(r.problems)),
        )
    for iid, err in result.errors.items():
        table.add_row(iid, "-", "-", escape(f"ERROR {err}"))
    console().print(table)
