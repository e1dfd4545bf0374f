"""Issue text for a synthesized task, written from what the failing tests print.

The statement names the failing tests, quotes the failing test's own frame (its code around the
failing line and the assertion message) and the final error message, and phrases it as a report.
Frames inside the library are left out: they would point at the injected bug.
"""

from __future__ import annotations

import hashlib
import re

_HEADER = re.compile(r"^_{2,} (.+?) _{2,}$")
_FRAME_SEP = re.compile(r"^(_ )+_?\s*$")
_LOCATION = re.compile(r"^\S+:\d+: ")
_SECTION_END = re.compile(r"^={3,}")
_MAX_LISTED = 8

_OPENINGS = [
    "After the latest changes, {tests} of the test suite no longer pass{es}:",
    "Running the test suite now gives {count} failure{s}:",
    "{Tests} started failing, which looks like a regression:",
    "On the current code the test suite reports {count} failure{s}:",
]
_CLOSINGS = [
    "The tests describe the intended behaviour. Please fix the code so that they pass again "
    "(without changing the tests).",
    "Expected: the whole suite passes. The tests themselves look right; the behaviour under test is broken.",
    "These tests passed before; the library code needs fixing, not the tests.",
]


def problem_statement(instance_id: str, fail_to_pass: list[str], log: str) -> str:
    """The issue text; ``instance_id`` picks the wording, so the same task always reads the same."""
    pick = int(hashlib.sha256(instance_id.encode()).hexdigest(), 16)
    # quote a test from a test file where there is one (a doctest's name is the library's own path)
    first = next((t for t in fail_to_pass if _is_test_file(t.split("::")[0])), fail_to_pass[0])
    reason = _summary_reason(log, first)
    title_test, _ = _block(log, first)
    excerpt = failure_excerpt(log, first)
    n = len(fail_to_pass)
    noun = f"{n} test{'s' if n != 1 else ''}" if n != 1 else "one test"
    opening = _OPENINGS[pick % len(_OPENINGS)].format(
        tests=noun,
        Tests=noun[0].upper() + noun[1:],
        count=n,
        es="" if n != 1 else "es",
        s="s" if n != 1 else "",
    )
    listed = [f"- `{t}`" for t in fail_to_pass[:_MAX_LISTED]]
    if n > _MAX_LISTED:
        listed.append(f"- ... and {n - _MAX_LISTED} more")
    head, bracket, params = (title_test or first.split("::")[-1]).partition("[")
    title_test = head.split(".")[-1] + bracket + params
    title = f"`{title_test}` fails: {reason}" if reason else f"`{title_test}` fails"
    parts = [_shorten(title, 120), "", opening, "", *listed]
    if excerpt:
        parts += ["", f"Output of `{title_test}`:", "", "```", excerpt, "```"]
    parts += ["", _CLOSINGS[(pick >> 8) % len(_CLOSINGS)]]
    return "\n".join(parts) + "\n"


def _is_test_file(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name.startswith("test_") or name.endswith("_test.py") or "/tests/" in f"/{path}"


def _shorten(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    cut = text[: width - 3]
    return (cut.rsplit(" ", 1)[0] if " " in cut[width // 2 :] else cut).rstrip() + "..."


def _summary_reason(log: str, test: str) -> str:
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
    _, block = _block(log, test)
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


def _block(log: str, test: str) -> tuple[str, list[str]]:
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
