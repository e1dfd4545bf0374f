"""Scripted models written from one task: an oracle that knows the gold patch (as a full diff, a terse
``sed``/zero-context change, or after a debugging look), and agents that misbehave on purpose (never
submit, only format errors). :func:`scripted_for` picks one by its ``--llm scripted:<kind>`` name;
:func:`oracle_policy` serves the oracle from a fake server. The only model code that reads a task.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterator, Sequence
from itertools import groupby

from unidiff import Hunk, PatchSet

from swe_rl.llm.scripted import SUBMIT, ScriptedLLM, bash_reply
from swe_rl.tasks.model import Task


def oracle_replies(task: Task) -> list[str]:
    """An agent that knows the gold patch: looks around, applies it, runs the tests, submits.

    The patch goes to ``git apply`` on its standard input, never through a file: a fixed path (it was the
    host's /tmp/fix.diff) is shared by every attempt on the local backend, and one applied another's fix.
    After a here-document the next command goes on its first line (after the delimiter it would not run)."""
    delimiter = "SWE_RL_GOLD_PATCH"
    patch = (
        task.patch if task.patch.endswith("\n") else task.patch + "\n"
    )  # never strip: blank context lines matter
    return [
        bash_reply("Let me look at the repository first.", "git status && ls"),
        bash_reply(
            "I know the fix; let me apply it as a patch.",
            f"git apply - <<'{delimiter}' && git diff --stat\n{patch}{delimiter}",
        ),
        bash_reply("The change is in place. Submitting.", SUBMIT),
    ]


def zero_context(patch: str) -> str:
    """The same change as a unified diff without context lines (apply with ``git apply --unidiff-zero``).

    Each file keeps its header but the ``index`` line; each run of changed lines becomes its own hunk,
    a "no newline" marker with the changed line it follows."""
    out: list[str] = []
    for file in PatchSet(patch):
        out.extend(line for line in file.patch_info or () if not line.startswith("index "))
        if file:
            out.append(f"--- {file.source_file}\n+++ {file.target_file}\n")
        for hunk in file:
            out.extend(_zero_context_hunks(hunk))
    return "".join(out)


def _zero_context_hunks(hunk: Hunk) -> Iterator[str]:
    """One hunk's runs of changed lines, each under its own header; a side a run leaves empty is
    numbered by its line before the run, as git numbers an empty side."""
    # each side's last line before the current run (an empty side's start already names the line before)
    old = hunk.source_start - (1 if hunk.source_length else 0)
    new = hunk.target_start - (1 if hunk.target_length else 0)
    for changed, group in groupby(hunk, key=lambda line: line.line_type in ("-", "+", "\\")):
        lines = list(group)
        minus = [line.source_line_no for line in lines if line.is_removed]
        plus = [line.target_line_no for line in lines if line.is_added]
        if changed and (minus or plus):  # a lone "no newline" marker belonged to a context line
            a = f"{minus[0]},{len(minus)}" if minus else f"{old},0"
            b = f"{plus[0]},{len(plus)}" if plus else f"{new},0"
            yield f"@@ -{a} +{b} @@\n"
            yield from map(str, lines)
        old = max([old, *(line.source_line_no or 0 for line in lines)])
        new = max([new, *(line.target_line_no or 0 for line in lines)])


def compact_oracle_replies(task: Task) -> list[str]:
    """A terse agent that knows the fix: the change (one ``sed`` line when it is one line, else a
    zero-context diff), applied and tested, then submit."""
    return [
        bash_reply(
            "The failing test points at the bug; apply the fix and run the test.", _fix_and_test(task)
        ),
        bash_reply("The test passes now. Submitting.", SUBMIT),
    ]


def _fix_and_test(task: Task) -> str:
    """The gold change (``sed`` when one line, else ``git apply`` of a zero-context diff from a
    here-document), then the failing tests' files. After a here-document the test command goes on its
    first line: after the closing delimiter it would be part of that line and never run."""
    tests = sorted({t.split("::")[0] for t in task.FAIL_TO_PASS})
    check = f" && python -m pytest -q -p no:cacheprovider {' '.join(tests)} 2>&1 | tail -n 2" if tests else ""
    fixed = sed_fix(task.patch)
    if fixed:
        return fixed + check
    delimiter = "SWE_RL_FIX"
    return f"git apply --unidiff-zero - <<'{delimiter}'{check}\n{zero_context(task.patch)}{delimiter}"


def debug_oracle_replies(task: Task) -> list[str]:
    """A terse agent that works as a person would: run the first failing test, fix the line its
    traceback points at (``sed`` on that line when the fix is one line, else a zero-context diff),
    run the tests again, submit. Every action can be read off the observations before it, which is
    what a small model imitating it has to learn."""
    first = task.FAIL_TO_PASS[0] if task.FAIL_TO_PASS else ""
    look = f"python -m pytest -q -p no:cacheprovider {shlex.quote(first)} 2>&1 | tail -n 25"
    return [
        bash_reply("Let me run the failing test to see where it breaks.", look),
        bash_reply("The traceback shows the broken line; fix it and run the tests.", _fix_and_test(task)),
        bash_reply("The tests pass now. Submitting.", SUBMIT),
    ]


_WORD = re.compile(r"\w")


def sed_fix(patch: str) -> str | None:
    """A one-line fix as ``sed -i 'Ns/OLD/NEW/' FILE`` (the smallest whole-word change), else None.

    None when the patch touches more than one line, the change is not unique on its line, or the
    text needs quoting a single-quoted shell word cannot hold.
    """
    path, line_no, old, new = _one_line_change(patch)
    if path is None or old is None or new is None or (span := _changed_span(old, new)) is None:
        return None
    a, b = span
    before, after = old[a:b], new[a : len(new) - (len(old) - b)]
    if any(c in before + after + path for c in "'\n\t") or not before.isascii() or not after.isascii():
        return None
    pattern = re.sub(r"([\\/.*\[\]^$])", r"\\\1", before)
    replacement = re.sub(r"([\\/&])", r"\\\1", after)
    return f"sed -i '{line_no}s/{pattern}/{replacement}/' {shlex.quote(path)}"


def _changed_span(old: str, new: str) -> tuple[int, int] | None:
    """``(a, b)``: ``old[a:b]``, whole words that occur once in ``old``, is all that ``new`` changes (the
    rest of the line is the same on both sides); None when no such span says the change."""
    start = 0
    while start < min(len(old), len(new)) and old[start] == new[start]:
        start += 1
    end = 0
    while end < min(len(old), len(new)) - start and old[-1 - end] == new[-1 - end]:
        end += 1
    a, b = start, len(old) - end  # old[a:b] becomes new[a : len(new) - end]
    changed = old[a:b] + new[a : len(new) - end]
    if changed and _WORD.match(changed[0]):  # never cut a word in two
        while a > 0 and _WORD.match(old[a - 1]):
            a -= 1
    if changed and _WORD.match(changed[-1]):
        while b < len(old) and _WORD.match(old[b]):
            b += 1
    while not old[a:b].strip() or old.count(old[a:b]) != 1:  # grow by a token until it is unique
        if a > 0:
            while a > 0 and not _WORD.match(old[a - 1]):
                a -= 1
            while a > 0 and _WORD.match(old[a - 1]):
                a -= 1
        elif b < len(old):
            while b < len(old) and not _WORD.match(old[b]):
                b += 1
            while b < len(old) and _WORD.match(old[b]):
                b += 1
        else:
            return None
    after = new[a : len(new) - (len(old) - b)]
    return (a, b) if old.replace(old[a:b], after, 1) == new else None


def _one_line_change(patch: str) -> tuple[str | None, int, str | None, str | None]:
    """(file, line, old text, new text) when the patch replaces exactly one line of one file (a rename
    or a "no newline" marker is more than ``sed`` can say)."""
    files = PatchSet(patch)
    if len(files) != 1 or files[0].is_rename:
        return None, 0, None, None
    lines = [line for hunk in files[0] for line in hunk]
    removed = [line for line in lines if line.is_removed]
    added = [line for line in lines if line.is_added]
    if len(removed) != 1 or len(added) != 1 or any(line.line_type == "\\" for line in lines):
        return None, 0, None, None
    path = files[0].target_file.removeprefix("b/")
    return (
        path,
        removed[0].source_line_no or 0,
        removed[0].value.removesuffix("\n"),
        added[0].value.removesuffix("\n"),
    )


def never_submit_replies(task: Task, steps: int = 3) -> list[str]:
    """An agent that edits a file and never submits: the runner must fall back to the diff."""
    return [bash_reply("Let me add a note.", f"echo 'note {i}' >> NOTES.txt") for i in range(steps)] * 100


def scripted_for(kind: str, task: Task) -> ScriptedLLM:
    """``oracle``, ``oracle-compact``, ``oracle-debug``, ``never-submit`` or ``format-errors`` for one task."""
    if kind == "oracle":
        return ScriptedLLM(oracle_replies(task), name="scripted:oracle")
    if kind == "oracle-compact":
        return ScriptedLLM(compact_oracle_replies(task), name="scripted:oracle-compact")
    if kind == "oracle-debug":
        return ScriptedLLM(debug_oracle_replies(task), name="scripted:oracle-debug")
    if kind == "never-submit":
        return ScriptedLLM(never_submit_replies(task), name="scripted:never-submit")
    if kind == "format-errors":
        return ScriptedLLM(
            lambda _: "I will think about it, without any command.", name="scripted:format-errors"
        )
    from swe_rl.errors import ConfigError

    raise ConfigError(
        f"unknown scripted model {kind!r}; use oracle, oracle-compact, oracle-debug, never-submit or format-errors"
    )


def oracle_policy(tasks: Sequence[Task]) -> Callable[[Sequence[dict[str, str]]], str]:
    """For a server: recognise the task by its problem statement, reply as :func:`oracle_replies` would."""
    replies = {t.problem_statement.strip(): oracle_replies(t) for t in tasks}

    def policy(messages: Sequence[dict[str, str]]) -> str:
        problem = messages[1]["content"] if len(messages) > 1 else ""
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        for statement, script in replies.items():
            if statement in problem:
                return script[min(turn, len(script) - 1)]
        return "THOUGHT: I do not know this task."

    return policy
