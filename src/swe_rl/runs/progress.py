"""Progress output for long runs: a live line with counts on a terminal, one line per item otherwise."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """Counts finished items and prints them with the time elapsed and an estimate of the time left.

    Never writes to stdout (which may carry --json output)."""

    def __init__(self, total: int, label: str, stream: TextIO | None = None, *, jobs: int = 1) -> None:
        self.total = total
        self.label = label
        self.done = 0
        self.stream = stream or sys.stderr
        self.started = time.monotonic()
        self.jobs = max(1, jobs)
        self.item_seconds = 0.0
        self.timed = 0

    def advance(self, item: str, outcome: str, *, seconds: float | None = None) -> None:
        """One more item finished; ``seconds``: how long it took alone (what the estimate averages)."""
        self.done += 1
        if seconds is not None:
            self.item_seconds += seconds
            self.timed += 1
        print(f"[{self.line()}] {item}: {outcome}", file=self.stream, flush=True)

    def eta(self) -> float | None:
        """Seconds left, None before the first item: the mean time of a finished item, times the items left,
        over the items run at once (``jobs``, fewer near the end). Where no item said how long it took, the
        wall time per finished item, which already counts the parallelism."""
        left = self.total - self.done
        if self.done == 0:
            return None
        if left <= 0:
            return 0.0
        if self.timed:
            return self.item_seconds / self.timed * left / min(self.jobs, left)
        return (time.monotonic() - self.started) / self.done * left

    def line(self) -> str:
        """``build 3/500 elapsed 12m05s eta 3h07m``."""
        eta = self.eta()
        return (
            f"{self.label} {self.done}/{self.total} elapsed {clock(time.monotonic() - self.started)} "
            f"eta {'?' if eta is None else clock(eta)}"
        )


def clock(seconds: float) -> str:
    """A duration as a person reads it: 42s, 12m05s, 3h07m."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


class RunProgress(Progress):
    """Progress with resolved / not resolved / error counts; a rich live bar when stderr is a terminal."""

    def __init__(self, total: int, label: str, *, quiet: bool = False) -> None:
        super().__init__(total, label)
        self.quiet = quiet
        self.resolved = self.failed = self.errors = 0
        self._live = None
        if not quiet and self.stream.isatty():
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeElapsedColumn,
            )
            from rich.progress import (
                Progress as RichProgress,
            )

            self._live = RichProgress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.fields[counts]}"),
                transient=False,
            )
            self._task = self._live.add_task(label, total=total, counts="")
            self._live.start()

    def advance(
        self,
        item: str,
        outcome: str,
        *,
        seconds: float | None = None,
        resolved: bool = False,
        error: bool = False,
    ) -> None:
        if error:
            self.errors += 1
        elif resolved:
            self.resolved += 1
        else:
            self.failed += 1
        counts = f"resolved {self.resolved}  not {self.failed}  errors {self.errors}"
        if self._live is not None:
            self.done += 1
            self._live.update(self._task, advance=1, counts=counts)
        elif not self.quiet:
            super().advance(item, f"{outcome}  [{counts}]", seconds=seconds)
        else:
            self.done += 1

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
