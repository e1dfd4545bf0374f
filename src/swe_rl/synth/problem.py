"""Issue text for a synthesized task, written from what the failing tests print.

The statement names the failing tests, quotes the failing test's own frame (its code around the
failing line and the assertion message) and the final error message, and phrases it as a report.
Frames inside the library are left out: they would point at the injected bug.
"""

from __future__ import annotations

import hashlib

from swe_rl.harness.failure_text import failure_block, failure_excerpt, summary_reason

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
    reason = summary_reason(log, first)
    title_test, _ = failure_block(log, first)
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


__all__ = ["failure_excerpt", "problem_statement"]
