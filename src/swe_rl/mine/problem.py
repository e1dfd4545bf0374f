"""Issue text for a mined task, without a language model.

Chosen: the commit message (a merge: its message, and the subjects of the commits it merged that the
message does not already hold, when its subject is git's or GitHub's "Merge ..." line), then the failing tests' names and, for the first one,
its failure output at the base (the test's own frame and final error, trimmed by
:func:`~swe_rl.harness.failure_text.failure_excerpt`). The message is the author's own account of
the problem, the nearest thing to an issue a history holds; the failure output is what the agent
would see on running the tests, so it adds the symptom without adding the fix.

What would give the fix away is removed: message lines that are lines of the gold patch (a quoted
code change), ``Signed-off-by``-style trailers, and names of the patch's source files (path, file
name, dotted module) that the failing output does not already show, each replaced by "the code".
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from unidiff import PatchSet

from swe_rl.harness.failure_text import failure_excerpt, summary_reason

_MAX_LISTED = 8
_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{6,}\b")
_TRAILER = re.compile(r"^[A-Z][A-Za-z-]+-by: |^Change-Id: ", re.IGNORECASE)
_MERGE_SUBJECT = re.compile(r"^Merge (branch|pull request|remote-tracking branch|commit) ")


def patch_lines(patch: str) -> set[str]:
    """The stripped text of the patch's added and removed lines (four characters or more)."""
    changed = (
        line.value.strip()
        for file in PatchSet(patch)
        for hunk in file
        for line in hunk
        if line.is_added or line.is_removed
    )
    return {text for text in changed if len(text) >= 4}


def source_names(paths: list[str]) -> list[str]:
    """Names a source file goes by: its path, its file name, its dotted module; longest first."""
    names: set[str] = set()
    for path in paths:
        p = PurePosixPath(path)
        names |= {path, p.name, ".".join(p.with_suffix("").parts)}
        if p.stem != "__init__":
            names.add(p.stem)
    return sorted((n for n in names if len(n) >= 3), key=lambda n: (-len(n), n))


def clean_message(message: str, patch: str, sources: list[str], shown: str) -> str:
    """``message`` less the patch's own lines, trailers, and source names that ``shown`` does not hold."""
    code = patch_lines(patch)
    kept = []
    for line in message.splitlines():
        stripped = line.strip().lstrip("+-").strip()
        if _TRAILER.match(line.strip()) or (len(stripped) >= 4 and stripped in code):
            continue
        kept.append(line.rstrip())
    text = "\n".join(kept).strip()
    for name in source_names(sources):
        if name not in shown:
            text = re.sub(rf"(?<![\w./]){re.escape(name)}(?![\w/])", "the code", text)
    return re.sub(r"\n{3,}", "\n\n", text)


def problem_statement(
    message: str,
    merged_subjects: list[str],
    fail_to_pass: list[str],
    before_log: str,
    patch: str,
    sources: list[str],
) -> str:
    """The issue text of a mined task (see the module's docstring); the same inputs, the same text."""
    first = fail_to_pass[0]
    # object addresses differ from run to run: the same history must give the same text
    excerpt = _ADDRESS.sub("0x...", failure_excerpt(before_log, first))
    reason = summary_reason(before_log, first)
    shown = "\n".join([*fail_to_pass, excerpt, reason])
    subject = message.splitlines()[0] if message else ""
    new = [s for s in dict.fromkeys(merged_subjects) if s and s not in message]
    if _MERGE_SUBJECT.match(subject) and new:
        message = "\n".join([message, "", *(f"- {s}" for s in new)])
    parts = [clean_message(message, patch, sources, shown), ""]
    n = len(fail_to_pass)
    parts.append(f"{'This test fails' if n == 1 else f'These {n} tests fail'} and should pass:")
    parts += [f"- `{t}`" for t in fail_to_pass[:_MAX_LISTED]]
    if n > _MAX_LISTED:
        parts.append(f"- ... and {n - _MAX_LISTED} more")
    if reason:
        parts += ["", f"`{first}` fails with: {reason}"]
    if excerpt:
        parts += ["", f"Output of `{first}`:", "", "```", excerpt, "```"]
    return "\n".join(parts).strip() + "\n"
