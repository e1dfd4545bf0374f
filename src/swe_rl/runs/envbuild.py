"""``env build`` over a whole dataset: bounded parallel builds, optional validation, a resumable report.

The report (JSON, :mod:`swe_rl.runs.buildreport`) lists every instance with its outcome and sums them up per
repository; a rerun with the same report skips what is already built (and validated, when asked) and retries
the failures and the instances whose repository had no mirror. ``swe-rl data prepare --valid-only REPORT``
keeps only the instances the report marks usable.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from swe_rl.envs.build.venvbuild import skipped_conda_packages
from swe_rl.envs.cache import EnvCache
from swe_rl.envs.store.disk_usage import DiskUsage
from swe_rl.errors import RepoNotFoundError, SweRlError
from swe_rl.fileio import atomic_write_json
from swe_rl.harness.validate import validate_task
from swe_rl.runs.buildreport import (
    BuildEntry,
    BuildReport,
    BuildStatus,
    BuildSummary,
    cause_of,
    failure_reason,
)
from swe_rl.runs.progress import Progress
from swe_rl.sandbox.base import SandboxFactory
from swe_rl.tasks.model import Task

__all__ = ["BuildEntry", "BuildReport", "BuildStatus", "BuildSummary", "build_dataset"]


async def build_dataset(
    tasks: Sequence[Task],
    cache: EnvCache,
    *,
    jobs: int = 2,
    report_path: Path | None = None,
    factory: SandboxFactory | None = None,
    timeout: float = 1800.0,
    quiet: bool = False,
    revalidate: bool = False,
    pack: bool = False,
) -> BuildReport:
    """Build every task's env (at most ``jobs`` at once), validate when ``factory`` is given, report.

    A failure of one instance is recorded and the others go on. With ``report_path`` the report (entries and
    the per-repository summary) is rewritten after every instance and read at the start: finished instances
    are skipped. With ``revalidate`` those it found invalid are graded again (their envs are kept: after a
    change to validation or grading), and an entry's seconds add the earlier run's. The entries of instances
    not in ``tasks`` (a run over others with the same report) are kept as they were, after this run's. At the
    end the summary gets the disk the env cache takes; with ``pack`` after the cache's envs are packed into one
    read-only image (``EnvCache.pack(merge=True)``). Unfinished builds a stopped run left in the cache are
    removed first (those another process is building are left alone).
    """
    await asyncio.to_thread(_clear_leftovers, cache, quiet)
    report = BuildReport(validated=factory is not None, backend=factory.backend if factory else None)
    previous = _previous(report_path)
    ids = {t.instance_id for t in tasks}
    others = {k: e for k, e in previous.entries.items() if k not in ids} if previous else {}
    report.entries.update(others)  # in every save of this run too
    again: tuple[BuildStatus, ...] = ("invalid",) if revalidate else ()
    todo = _carry_over(tasks, previous, cache, report, again=again)
    # the time an entry graded again took before, added to its new one
    earlier = {k: e.seconds for k, e in (previous.entries.items() if previous else []) if e.status in again}
    # oldest first: a testbed can share the packs of the base commits built before it that are its ancestors
    todo.sort(key=lambda t: t.created_at or "")
    progress = Progress(len(todo), "build")
    limit = asyncio.Semaphore(max(1, jobs))
    save_lock = asyncio.Lock()

    async def one(task: Task) -> None:
        async with limit:
            entry = await _build_one(task, cache, factory, timeout)
        if task.instance_id in earlier:
            entry.seconds = round(entry.seconds + earlier[task.instance_id], 2)
        async with save_lock:
            report.entries[task.instance_id] = entry
            report.summary = BuildSummary.of(report.entries.values())
            if report_path is not None:
                await asyncio.to_thread(atomic_write_json, report_path, report.model_dump(mode="json"))
        if not quiet:
            progress.advance(task.instance_id, _outcome(entry))

    await asyncio.gather(*(one(t) for t in todo))
    report.entries = {**{t.instance_id: report.entries[t.instance_id] for t in tasks}, **others}
    disk = await asyncio.to_thread(_pack_and_measure, cache, pack, quiet)
    report.summary = BuildSummary.of(report.entries.values(), disk=disk)
    if report_path is not None:
        atomic_write_json(report_path, report.model_dump(mode="json"))
    return report


def _pack_and_measure(cache: EnvCache, pack: bool, quiet: bool) -> DiskUsage:
    """The disk the env cache takes, after packing its envs into one image when ``pack`` (EnvCache.pack)."""
    if pack:
        cache.pack(
            merge=True, progress=(lambda _: None) if quiet else lambda line: print(line, file=sys.stderr)
        )
    return cache.disk_usage()


def _clear_leftovers(cache: EnvCache, quiet: bool) -> None:
    """Remove the unfinished builds a stopped run left (EnvCache.gc: not those another process is making)."""
    removed = cache.gc()
    if removed and not quiet:
        print(
            f"removed {len(removed)} unfinished build(s) a stopped run left in {cache.root}", file=sys.stderr
        )


def _carry_over(
    tasks: Sequence[Task],
    previous: BuildReport | None,
    cache: EnvCache,
    report: BuildReport,
    *,
    again: Sequence[BuildStatus] = (),
) -> list[Task]:
    """Put the entries a previous run finished into ``report``, except those of a status in ``again``; return
    the tasks still to build."""
    todo: list[Task] = []
    for task in tasks:
        old = previous.entries.get(task.instance_id) if previous else None
        if (
            old is not None
            and old.status not in again
            and _still_done(old, task, cache, validated=report.validated)
        ):
            report.entries[task.instance_id] = old if old.repo else old.model_copy(update={"repo": task.repo})
        else:
            todo.append(task)
    return todo


def _outcome(entry: BuildEntry) -> str:
    """``failed [build failed]: EnvBuildError: ...``: the status, the class of its cause, the reason."""
    cause = cause_of(entry)
    return entry.status + (f" [{cause}]" if cause else "") + (f": {entry.reason}" if entry.reason else "")


def _still_done(entry: BuildEntry, task: Task, cache: EnvCache, *, validated: bool) -> bool:
    """Finished before, and its env is still the one this build would use (same recipe and options)."""
    if not entry.done or entry.env is None or cache.get(entry.env) is None:
        return False
    try:
        if cache.key_for(task) != entry.env:
            return False
    except SweRlError:
        return False
    return not validated or entry.status in ("valid", "invalid")


async def _build_one(
    task: Task, cache: EnvCache, factory: SandboxFactory | None, timeout: float
) -> BuildEntry:
    started = time.monotonic()
    try:
        env = await asyncio.to_thread(cache.ensure, task)
    except (
        SweRlError,
        OSError,
    ) as exc:  # an OS error (a full disk, a link limit) fails this one, not the run
        return BuildEntry(
            instance_id=task.instance_id,
            repo=task.repo,
            status="unfetchable" if isinstance(exc, RepoNotFoundError) else "failed",
            seconds=round(time.monotonic() - started, 2),
            reason=failure_reason(exc),
        )
    entry = BuildEntry(
        instance_id=task.instance_id,
        repo=task.repo,
        status="built",
        env=env.key,
        python=str(env.python) if env.python else None,
        seconds=round(time.monotonic() - started, 2),
    )
    if factory is None:
        return entry
    try:
        conda_only = skipped_conda_packages(env.venv)
        checked = await validate_task(task, factory, env, timeout=timeout, conda_only=conda_only)
    except (SweRlError, OSError) as exc:
        seconds = round(time.monotonic() - started, 2)
        return entry.model_copy(update={"status": "error", "reason": failure_reason(exc), "seconds": seconds})
    return entry.model_copy(
        update={
            "status": "valid" if checked.valid else "invalid",
            "reason": "; ".join(checked.problems) or None,
            "notes": checked.notes,
            "gold": checked.gold.summary(),
            "empty": checked.empty.summary(),
            "seconds": round(time.monotonic() - started, 2),
        }
    )


def _previous(report_path: Path | None) -> BuildReport | None:
    return BuildReport.load(report_path) if report_path and report_path.is_file() else None
