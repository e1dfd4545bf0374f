"""The line a long run prints per finished item: done/total, time elapsed, and the time left."""

from __future__ import annotations

import io
import re

from swe_rl.runs.progress import Progress, clock


def test_clock_reads_as_a_person_reads_a_duration() -> None:
    assert [clock(s) for s in (0, 42.4, 59.6, 60, 725, 3599, 3600, 11_220, 90_000)] == [
        "0s",
        "42s",
        "1m00s",
        "1m00s",
        "12m05s",
        "59m59s",
        "1h00m",
        "3h07m",
        "25h00m",
    ]


def test_each_line_says_done_of_total_elapsed_and_an_eta_from_the_mean_item_time_over_jobs() -> None:
    out = io.StringIO()
    progress = Progress(5, "build", stream=out, jobs=2)
    assert progress.eta() is None  # nothing finished: nothing to estimate from
    progress.advance("a__a-1", "valid", seconds=60)
    progress.advance("b__b-1", "failed [build failed]: EnvBuildError: x", seconds=120)
    progress.advance("c__c-1", "valid", seconds=90)
    progress.advance("d__d-1", "valid", seconds=90)
    progress.advance("e__e-1", "valid", seconds=90)
    lines = out.getvalue().splitlines()
    # mean 60 s x 4 left / 2 at once; 90 s x 3 / 2; 90 s x 2 / 2; 90 s x 1 left / 1 (one runs alone); done
    etas = ["2m00s", "2m15s", "1m30s", "1m30s", "0s"]
    for n, (line, eta) in enumerate(zip(lines, etas, strict=True), 1):
        assert re.fullmatch(rf"\[build {n}/5 elapsed \d+s eta {re.escape(eta)}\] \S+: .+", line), line
    assert lines[1].endswith("b__b-1: failed [build failed]: EnvBuildError: x")


def test_without_item_times_the_eta_is_the_wall_time_per_finished_item() -> None:
    progress = Progress(4, "grade", stream=io.StringIO(), jobs=8)
    progress.started -= 30  # as if it had run 30 s
    progress.advance("a", "resolved")
    eta = progress.eta()
    assert eta is not None and 89 < eta < 95  # 30 s per item (the parallelism is in it already), 3 left
