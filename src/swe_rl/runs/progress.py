"""Progress output for long runs, kept by a rich progress task: a live bar on a terminal, one plain line per
finished item otherwise (CI logs and files stay readable: no ANSI codes)."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import TextIO


class Progress:
    """Counts finished items on a :class:`rich.progress.Progress` task, which keeps the time elapsed and
    estimates the time left: the items left at the rate items have finished since the start (the wall time
    per finished item, so items run at once are already in it; over the last 1,000 items on a longer run).
    It knows no item's own duration, so near the end, with fewer items left than run at once, it is low.

    Prints one line per finished item to ``stream`` (stderr unless given), or with ``live`` draws rich's bar
    there instead; ``quiet`` prints nothing. Never writes to stdout (which may carry --json output).
    ``get_time``: the clock, for rich (monotonic seconds unless given)."""

    def __init__(
        self,
        total: int,
        label: str,
        stream: TextIO | None = None,
        *,
        live: bool = False,
        quiet: bool = False,
        get_time: Callable[[], float] | None = None,
    ) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.progress import Progress as RichProgress

        self.total = total
        self.label = label
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.live = live and not quiet
        self._elapsed, self._left = TimeElapsedColumn(), TimeRemainingColumn()
        self._rich = RichProgress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            self._elapsed,
            self._left,
            TextColumn("{task.fields[note]}"),
            console=Console(file=self.stream),
            speed_estimate_period=math.inf,  # rich's default rates the last 30 s only; a build takes minutes
            get_time=get_time,
        )
        self._task = self._rich.add_task(label, total=total, note="")
        self._rich.advance(self._task, 0)  # a first sample at the start: the rate counts from it
        if self.live:
            self._rich.start()

    @property
    def done(self) -> int:
        return int(self._rich.tasks[0].completed)

    def advance(self, item: str, outcome: str) -> None:
        """One more item finished: its line, or the bar moved on."""
        self._rich.advance(self._task)
        if not self.live and not self.quiet:
            print(f"[{self.line()}] {item}: {outcome}", file=self.stream, flush=True)

    def line(self) -> str:
        """``build 3/500 elapsed 0:12:05 eta 3:07:00`` (``eta -:--:--`` while there is no rate yet)."""
        task = self._rich.tasks[0]
        elapsed, left = self._elapsed.render(task).plain, self._left.render(task).plain
        return f"{self.label} {self.done}/{self.total} elapsed {elapsed} eta {left}"

    def close(self) -> None:
        """Stop the live bar (it stays on the terminal as it last was)."""
        if self.live:
            self._rich.stop()


class RunProgress(Progress):
    """Progress with resolved / not resolved / error counts; a rich live bar when stderr is a terminal."""

    def __init__(self, total: int, label: str, *, quiet: bool = False) -> None:
        super().__init__(total, label, live=sys.stderr.isatty(), quiet=quiet)
        self.resolved = self.failed = self.errors = 0

    def advance(self, item: str, outcome: str, *, resolved: bool = False, error: bool = False) -> None:
        if error:
            self.errors += 1
        elif resolved:
            self.resolved += 1
        else:
            self.failed += 1
        counts = f"resolved {self.resolved}  not {self.failed}  errors {self.errors}"
        self._rich.update(self._task, note=counts)  # the bar's last column
        super().advance(item, f"{outcome}  [{counts}]")
