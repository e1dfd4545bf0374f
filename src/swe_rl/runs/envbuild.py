"""``env build`` over a whole dataset: bounded parallel builds, optional validation, a resumable report.

The report (JSON) lists every instance with its outcome; a rerun with the same report skips what is
already built (and validated, when asked) and retries the failures. ``swe-rl data prepare
--valid-only REPORT`` keeps only the instances the report marks usable.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from swe_rl.envs.cache import EnvCache
from swe_rl.errors import ConfigError, SweRlError
from swe_rl.fileio import atomic_write_json
from swe_rl.harness.validate import validate_task
from swe_rl.runs.progress import Progress
from swe_rl.sandbox.base import SandboxFactory
from swe_rl.tasks.model import Task

BuildStatus = Literal["built", "failed", "valid", "invalid", "error"]


class BuildEntry(BaseModel):
    """One instance's outcome."""

    instance_id: str
    status: BuildStatus = Field(
        description="built; failed (env build); valid / invalid (gold and empty graded); error (grading infra)."
    )
    env: str | None = Field(default=None, description="Key of the built env.")
    python: str | None = Field(default=None, description="Interpreter the env's venv is based on.")
    seconds: float = 0.0
    reason: str | None = Field(default=None, description="Why it failed or is invalid.")
    notes: list[str] = Field(default_factory=list, description="What validation found odd, valid or not.")
    gold: str | None = Field(default=None, description="Gold patch verdict summary.")
    empty: str | None = Field(default=None, description="Empty patch (unchanged base) verdict summary.")

    @property
    def done(self) -> bool:
        return self.status in ("built", "valid", "invalid")


class BuildReport(BaseModel):
    """The whole dataset's build; what ``data prepare --valid-only`` reads."""

    validated: bool = Field(description="Whether gold/empty validation ran; then only 'valid' is usable.")
    backend: str | None = None
    entries: dict[str, BuildEntry] = Field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        out = {"total": len(self.entries)}
        for entry in self.entries.values():
            out[entry.status] = out.get(entry.status, 0) + 1
        return out

    def usable(self) -> list[str]:
        """Instances fit for training: valid when validated, else built."""
        want = "valid" if self.validated else "built"
        return [iid for iid, e in self.entries.items() if e.status == want]

    @classmethod
    def load(cls, path: Path) -> BuildReport:
        if not path.is_file():
            raise ConfigError(f"build report not found: {path}")
        try:
            return cls.model_validate_json(path.read_text())
        except ValueError as exc:
            raise ConfigError(f"{path} is not an `env build` report: {str(exc).splitlines()[0]}") from None


async def build_dataset(
    tasks: Sequence[Task],
    cache: EnvCache,
    *,
    jobs: int = 2,
    report_path: Path | None = None,
    factory: SandboxFactory | None = None,
    timeout: float = 1800.0,
    quiet: bool = False,
) -> BuildReport:
    """Build every task's env (at most ``jobs`` at once), validate when ``factory`` is given, report.

    A failure of one instance is recorded and the others go on. With ``report_path`` the report is
    rewritten after every instance and read at the start: finished instances are skipped.
    """
    previous = _previous(report_path)
    report = BuildReport(validated=factory is not None, backend=factory.backend if factory else None)
    todo: list[Task] = []
    for task in tasks:
        old = previous.entries.get(task.instance_id) if previous else None
        if old is not None and _still_done(old, task, cache, validated=report.validated):
            report.entries[task.instance_id] = old
        else:
            todo.append(task)
    # oldest first: a testbed can share the packs of the base commits built before it that are its ancestors
    todo.sort(key=lambda t: t.created_at or "")
    progress = Progress(len(todo), "build")
    limit = asyncio.Semaphore(max(1, jobs))
    save_lock = asyncio.Lock()

    async def one(task: Task) -> None:
        async with limit:
            entry = await _build_one(task, cache, factory, timeout)
        async with save_lock:
            report.entries[task.instance_id] = entry
            if report_path is not None:
                await asyncio.to_thread(atomic_write_json, report_path, report.model_dump(mode="json"))
        if not quiet:
            progress.advance(task.instance_id, entry.status + (f": {entry.reason}" if entry.reason else ""))

    await asyncio.gather(*(one(t) for t in todo))
    report.entries = {t.instance_id: report.entries[t.instance_id] for t in tasks}
    if report_path is not None:
        atomic_write_json(report_path, report.model_dump(mode="json"))
    return report


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
    except SweRlError as exc:
        return BuildEntry(
            instance_id=task.instance_id,
            status="failed",
            seconds=round(time.monotonic() - started, 2),
            reason=f"{type(exc).__name__}: {_first_lines(str(exc))}",
        )
    entry = BuildEntry(
        instance_id=task.instance_id,
        status="built",
        env=env.key,
        python=str(env.python) if env.python else None,
        seconds=round(time.monotonic() - started, 2),
    )
    if factory is None:
        return entry
    try:
        checked = await validate_task(task, factory, env, timeout=timeout)
    except SweRlError as exc:
        return entry.model_copy(update={"status": "error", "reason": f"{type(exc).__name__}: {exc}"})
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


def _first_lines(text: str) -> str:
    """The first line and the last four of a long message (an install log's tail says what broke)."""
    lines = text.strip().splitlines()
    return "\n".join(lines if len(lines) <= 6 else [lines[0], "...", *lines[-4:]])
