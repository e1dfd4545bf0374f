"""What a long run prints per finished item: done/total, time elapsed and the time left (rich's), one plain line
each on a log, a live bar on a terminal."""

from __future__ import annotations

import io
import os
import pty
import re
import select

from swe_rl.runs.progress import Progress, RunProgress


def test_each_line_says_done_of_total_elapsed_and_the_time_left_at_the_rate_since_the_start() -> None:
    now = [1000.0]
    out = io.StringIO()
    progress = Progress(5, "build", stream=out, get_time=lambda: now[0])
    for at, item in ((60, "a__a-1"), (120, "b__b-1"), (180, "c__c-1"), (300, "d__d-1"), (330, "e__e-1")):
        now[0] = 1000 + at
        progress.advance(item, "failed [build failed]: EnvBuildError: x" if item == "b__b-1" else "valid")
    # 1 item in 60 s, 4 left; 2 in 120 s, 3 left; 3 in 180 s; 4 in 300 s, 1 left: 75 s; done. Rated from the
    # start (a first line knows its rate) and over the whole run, not rich's default last 30 s (no rate here)
    assert out.getvalue().splitlines() == [
        "[build 1/5 elapsed 0:01:00 eta 0:04:00] a__a-1: valid",
        "[build 2/5 elapsed 0:02:00 eta 0:03:00] b__b-1: failed [build failed]: EnvBuildError: x",
        "[build 3/5 elapsed 0:03:00 eta 0:02:00] c__c-1: valid",
        "[build 4/5 elapsed 0:05:00 eta 0:01:15] d__d-1: valid",
        "[build 5/5 elapsed 0:05:30 eta 0:00:00] e__e-1: valid",
    ]


def test_a_run_prints_its_counts_on_stderr_without_escape_codes_and_nothing_on_stdout(capsys) -> None:
    progress = RunProgress(3, "eval")  # pytest's stderr is no terminal: lines
    progress.advance("a__a-1", "resolved", resolved=True)
    progress.advance("b__b-1", "error: SandboxError", error=True)
    progress.close()
    RunProgress(1, "eval", quiet=True).advance("c__c-1", "not resolved")
    out, err = capsys.readouterr()
    assert out == "" and "\x1b" not in err
    first, second = err.splitlines()
    assert re.fullmatch(
        r"\[eval 1/3 elapsed 0:00:0\d eta \S+\] a__a-1: resolved  \[resolved 1  not 0  errors 0\]", first
    ), first
    assert second.endswith("] b__b-1: error: SandboxError  [resolved 1  not 0  errors 1]"), second


def test_live_draws_rich_bar_on_its_terminal_stream_instead_of_lines(capsys) -> None:
    main, side = pty.openpty()
    with os.fdopen(side, "w") as terminal:
        progress = Progress(2, "eval", stream=terminal, live=True)
        progress.advance("a__a-1", "resolved")
        progress.advance("b__b-1", "resolved")
        progress.close()
    drawn = b""
    while select.select([main], [], [], 1)[0]:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the terminal's other side is closed: all is read
            break
        if not chunk:
            break
        drawn += chunk
    os.close(main)
    text = drawn.decode(errors="replace")
    assert "eval" in text and "2/2" in text and "\x1b" in text  # drawn, with a terminal's codes
    assert "a__a-1" not in text and capsys.readouterr() == ("", "")
