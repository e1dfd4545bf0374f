"""What pytest printed about one failing test: the reason its short summary gives, and an excerpt of its
failure section (the test's own frame and the final error), for issue texts written from a test log."""

from __future__ import annotations

import re

_HEADER = re.compile(r"^_{2,} (.+?) _{2,}$")
_FRAME_SEP = re.compile(r"^(_ )+_?\s*$")
_LOCATION = re.compile(r"^\S+:\d+: ")
_SECTION_END = re.compile(r"^={3,}")


def summary_reason(log: str, test: str) -> str:
    """The reason pytest's short summary gives for ``test`` ('IndexError: list index out of range')."""
    for line in log.splitlines():
        if line.startswith(("FAILED ", "ERROR ")) and line.split(" ", 2)[1:2] == [test.split(" ")[0]]:
            _, _, reason = line.partition(" - ")
            return reason.strip()
        if line.startswith(("FAILED ", "ERROR ")) and line.split()[1:2] == [test] and " - " in line:
            return line.partition(" - ")[2].strip()
    return ""


def failure_excerpt(log: str, test: str, *, context: int = 6) -> str:
    """The failing test's own frame (code up to the failing line, its ``E`` lines) and the final error."""
    _, block = failure_block(log, test)
    if not block:
        return ""
    frames: list[list[str]] = [[]]
    for line in block:
        if _FRAME_SEP.match(line):
            frames.append([])
        else:
            frames[-1].append(line)
    own = frames[0]
    code = [i for i, line in enumerate(own) if line.startswith(("    ", ">   ", ">\t"))]
    marker = next((i for i, line in enumerate(own) if line.startswith(">")), None)
    lines: list[str] = []
    if code:
        start = max(code[0], (marker or code[0]) - context)
        lines = [line for line in own[start:] if line.strip()]
    own_errors = [line for line in own if line.startswith("E ")]
    if len(frames) > 1 and not own_errors:
        lines = [line for line in lines if not _LOCATION.match(line)]
        errors = [line for line in frames[-1] if line.startswith("E ")]
        if errors:
            lines += ["(raised from the code under test:)", *errors[-6:]]
    return "\n".join(lines[-30:])


def failure_block(log: str, test: str) -> tuple[str, list[str]]:
    """The title and lines of ``test``'s section under FAILURES / ERRORS."""
    parts = test.split("::")
    name = ".".join(parts[1:]) if len(parts) > 1 else parts[0]
    lines = log.splitlines()
    for i, line in enumerate(lines):
        m = _HEADER.match(line)
        if not m:
            continue
        title = m.group(1)
        if title == name or ("[" in name and title.startswith(name)):
            out = []
            for following in lines[i + 1 :]:
                if _HEADER.match(following) or _SECTION_END.match(following):
                    break
                out.append(following)
            return title, out
    return "", []
