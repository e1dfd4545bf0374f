"""The screen of a patch's Python source for strict grading: code that lies to the tests, found unrun.

The fix's own module runs inside the test process, so what no file rule can stop is code in it that
reaches the runner's machinery or answers every comparison True. The screen reads what the patch changed in
each touched ``.py`` file that strict grading keeps, the text before (at ``base_commit``) and after the
patch, parses both with :mod:`ast` (never runs them) and lists the findings of ``screen_rules`` in each.
It is **differential**: a file's findings are counted by key (rule and what it names) before and after, and
only the keys the patch adds are flagged, so a file that already used ``sys._getframe`` or already defined
``__eq__`` is not flagged for keeping it. Test files are never screened (strict grading reverts them).

Where one of the two texts does not parse (a file of Python 2 at its base, a hunk's lines alone), it is
parsed as far as it parses (:func:`parse_fragments`), so the screen also works from a patch's hunks
alone (:func:`screen_patch`; ``bench/screen_gold.py`` measures both ways on SWE-bench's gold patches).
A file that does not parse after the patch is not flagged: its tests fail anyway.
"""

from __future__ import annotations

import ast
import difflib
import re
import shlex
import textwrap
from collections import Counter
from collections.abc import Iterable, Mapping

from pydantic import BaseModel, Field

from swe_rl.harness.evalscript import SCRATCH
from swe_rl.harness.screen_rules import BY_PRESENCE, RULES, Finding, findings
from swe_rl.harness.steering import path_rule
from swe_rl.sandbox.base import Sandbox
from swe_rl.tasks.model import Task

MAX_SOURCE_BYTES = 8 * 1024 * 1024  # a file larger than this is flagged unscreened, never skipped
RUNNER_PACKAGES = frozenset({"_pytest", "pytest", "pluggy"})
_PARSE_BUDGET = 40  # fragment parsing reads at most this many times the text's size
_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")


class ScreenFlag(BaseModel):
    """One place the patch added code that lies to the tests or reaches the runner."""

    path: str = Field(description="The file, relative to the repository root.")
    line: int = Field(description="Its line after the patch (1-based; 0 when unknown).")
    rule: str = Field(description="The rule (screen_rules.RULES, or 'unscreened').")
    reason: str = Field(description="What was found, in words.")


def screened(path: str, test_files: Iterable[str] = ()) -> bool:
    """Whether the screen reads ``path``: a ``.py`` file that strict grading keeps when edited (never a
    test file, conftest, setup.py or a dotfile: the allow-list reverts those, steering.path_rule)."""
    if not path.endswith(".py"):
        return False
    rule = path_rule(
        path, test_files=set(test_files), new=False, package_dirs=(), base_packages=(), shadow=()
    )
    return rule is None


def parse_fragments(text: str, offset: int = 0) -> list[tuple[ast.Module, int]]:
    """``text`` parsed as far as it parses: the whole, else its parts split at its least indented lines
    (each dedented; a part that still fails loses its first line), as (tree, line offset) pairs."""
    budget = [_PARSE_BUDGET * max(len(text), 1)]
    return _fragments(text.splitlines(), offset, budget)


def _fragments(lines: list[str], offset: int, budget: list[int]) -> list[tuple[ast.Module, int]]:
    while lines and not lines[0].strip():
        lines, offset = lines[1:], offset + 1
    if not lines or budget[0] <= 0:
        return []
    text = textwrap.dedent("\n".join(lines))
    budget[0] -= len(text)
    try:
        return [(ast.parse(text), offset)]
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pass
    indent = min(len(line) - len(line.lstrip()) for line in lines if line.strip())
    starts = [
        i for i, line in enumerate(lines) if i and line.strip() and len(line) - len(line.lstrip()) == indent
    ]
    if not starts:
        return _fragments(lines[1:], offset + 1, budget)
    out = []
    for a, b in zip([0, *starts], [*starts, len(lines)], strict=True):
        out.extend(_fragments(lines[a:b], offset + a, budget))
    return out


def runner_file(path: str) -> bool:
    """A module of the runner's own packages (pytest's repository): the runner's machinery is its own."""
    parts = path.split("/")
    if parts[0] in ("src", "lib") and len(parts) > 1:
        parts = parts[1:]
    return len(parts) > 1 and parts[0] in RUNNER_PACKAGES


def file_findings(text: str, path: str = "") -> list[Finding]:
    """The findings of one file's text: of its AST, or of its fragments where it does not parse whole."""
    runner = runner_file(path)
    parts = parse_fragments(text)
    imports = _imports(parts) if len(parts) > 1 else []
    return [f for tree, at in parts for f in findings(tree, at, runner=runner, imports=imports)]


def _imports(parts: list[tuple[ast.Module, int]]) -> list[ast.stmt]:
    return [n for tree, _ in parts for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def added(before: list[Finding], after: list[Finding], changed: set[int]) -> list[Finding]:
    """The findings of ``after`` whose key occurs more often than in ``before``: for each such key, that
    many of its places, those on lines the patch changed first (for a ``BY_PRESENCE`` rule, a key that
    ``before`` had at all adds none)."""
    counts = Counter(f.key for f in before)
    out: list[Finding] = []
    by_key: dict[tuple[str, str], list[Finding]] = {}
    for f in after:
        by_key.setdefault(f.key, []).append(f)
    for key, places in by_key.items():
        extra = len(places) - counts.get(key, 0)
        if key[0] in BY_PRESENCE:
            extra = 0 if counts.get(key) else len(places)
        if extra > 0:
            places.sort(key=lambda f: (f.line not in changed, -f.line))
            out.extend(places[:extra])
    return sorted(out, key=lambda f: (f.line, f.rule))


def _changed_lines(before: str, after: str) -> set[int]:
    lines: set[int] = set()
    matcher = difflib.SequenceMatcher(None, before.splitlines(), after.splitlines(), autojunk=False)
    for tag, _, _, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            lines.update(range(j1 + 1, j2 + 1))
    return lines


def screen_file(path: str, before: str | None, after: str) -> list[ScreenFlag]:
    """The flags of one file: ``before`` is None for a file the patch creates."""
    if not _parses(after):
        return []
    before = before or ""
    found = file_findings(before, path), file_findings(after, path)
    new = added(*found, _changed_lines(before, after))
    return [ScreenFlag(path=path, line=f.line, rule=f.rule, reason=f.reason) for f in new]


def screen_sources(
    files: Mapping[str, tuple[str | None, str | None]], test_files: Iterable[str] = ()
) -> list[ScreenFlag]:
    """The screen over whole files: path -> (text before the patch or None, text after or None). A file
    the patch deletes (after None) and a file not screened (:func:`screened`) add nothing."""
    tests = set(test_files)
    out: list[ScreenFlag] = []
    for path, (before, after) in sorted(files.items()):
        if after is not None and screened(path, tests):
            out.extend(screen_file(path, before, after))
    return out


def patch_images(patch: str) -> dict[str, tuple[list[tuple[str, int]], list[tuple[str, int]]]]:
    """Each file of a git diff: the hunks' before images (context and removed lines) and after images
    (context and added lines), each with the line offset of its first line in its file."""
    files: dict[str, tuple[list[tuple[str, int]], list[tuple[str, int]]]] = {}
    path: str | None = None
    hunk: tuple[list[str], list[str], int, int] | None = None

    def flush() -> None:
        if hunk is not None and path is not None:
            files[path][0].append(("\n".join(hunk[0]), hunk[2]))
            files[path][1].append(("\n".join(hunk[1]), hunk[3]))

    for line in patch.splitlines():
        if line.startswith("diff --git "):
            flush()
            hunk, path = None, line.partition(" b/")[2]
            files.setdefault(path, ([], []))
        elif m := _HUNK.match(line):
            flush()
            hunk = ([], [], int(m.group(1)) - 1, int(m.group(2)) - 1)
        elif hunk is not None and line[:1] in ("", " ", "-", "+"):
            if line[:1] != "+":
                hunk[0].append(line[1:])
            if line[:1] != "-":
                hunk[1].append(line[1:])
    flush()
    return files


def screen_patch(patch: str, test_files: Iterable[str] = ()) -> list[ScreenFlag]:
    """The screen from a patch's hunks alone (no repository): each hunk's before and after image parsed as
    far as it parses, the differential taken per file over all its hunks."""
    tests = set(test_files)
    out: list[ScreenFlag] = []
    for path, (olds, news) in sorted(patch_images(patch).items()):
        if not screened(path, tests):
            continue
        before, after = _side_findings(olds, path), _side_findings(news, path)
        changed = _hunk_changed_lines(patch, path)
        out.extend(
            ScreenFlag(path=path, line=f.line, rule=f.rule, reason=f.reason)
            for f in added(before, after, changed)
        )
    return out


def _side_findings(images: list[tuple[str, int]], path: str) -> list[Finding]:
    """The findings of one side's hunk images, each knowing the imports any of them shows."""
    parsed = [(offset + len(text.splitlines()), parse_fragments(text, offset)) for text, offset in images]
    imports = [n for _, parts in parsed for n in _imports(parts)]
    runner = runner_file(path)
    found: list[Finding] = []
    for last, parts in parsed:
        for tree, at in parts:
            found.extend(_image_findings(tree, at, last, runner, imports))
    return found


def _image_findings(
    tree: ast.Module, at: int, last: int, runner: bool, imports: list[ast.stmt]
) -> list[Finding]:
    """A fragment's findings, less comparisons whose function reaches its image's ``last`` line: the hunk
    may cut that function short, so its other returns are unseen."""
    cut = {
        n.lineno + at
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and (n.end_lineno or 0) + at >= last
    }
    found = findings(tree, at, runner=runner, imports=imports)
    return [f for f in found if not (f.rule == "constant_comparison" and f.line in cut)]


def _hunk_changed_lines(patch: str, path: str) -> set[int]:
    lines: set[int] = set()
    inside, at = False, 0
    for line in patch.splitlines():
        if line.startswith("diff --git "):
            inside = line.partition(" b/")[2] == path
        elif inside and (m := _HUNK.match(line)):
            at = int(m.group(2))
        elif inside and line.startswith("+") and not line.startswith("+++"):
            lines.add(at)
            at += 1
        elif inside and line.startswith(" "):
            at += 1
    return lines


async def screen_sandbox(box: Sandbox, task: Task, files: list[str]) -> list[ScreenFlag]:
    """The screen in a grading sandbox, after the patch is applied (and strict mode's reverts), before
    the tests run: ``files`` are the touched paths the allow-list kept; each screened ``.py`` one is read
    as it is now and as ``git show <base_commit>:<path>`` has it. A file over :data:`MAX_SOURCE_BYTES` is
    flagged ``unscreened``. Run before the test command: the tests' own code could rewrite both."""
    paths = [p for p in dict.fromkeys(files) if screened(p, task.test_files)]
    if not paths:
        return []
    scratch = f"{SCRATCH}/screen"
    lines = [f"rm -rf {scratch} && mkdir -p {scratch} || exit 3"]
    for n, path in enumerate(paths):
        q, spec = shlex.quote(path), shlex.quote(f"{task.base_commit}:{path}")
        lines.append(
            f"git -c core.fsmonitor=false cat-file -s {spec} >{scratch}/{n}.size 2>/dev/null && "
            f"git -c core.fsmonitor=false show {spec} >{scratch}/{n}.before 2>/dev/null; "
            f"if [ -f {q} ] && [ ! -L {q} ]; then wc -c <{q} >{scratch}/{n}.after; fi"
        )
    result = await box.exec("\n".join(lines), timeout=120)
    if result.returncode != 0:
        return [ScreenFlag(path="", line=0, rule="unscreened", reason=f"screen: {result.output[-200:]}")]
    sources: dict[str, tuple[str | None, str | None]] = {}
    flags: list[ScreenFlag] = []
    for n, path in enumerate(paths):
        after_size = await _read_size(box, f"{scratch}/{n}.after")
        before_size = await _read_size(box, f"{scratch}/{n}.size")
        if after_size is None:
            continue  # deleted by the patch
        if max(after_size, before_size or 0) > MAX_SOURCE_BYTES:
            reason = f"{max(after_size, before_size or 0)} bytes: over the screen's {MAX_SOURCE_BYTES}"
            flags.append(ScreenFlag(path=path, line=0, rule="unscreened", reason=reason))
            continue
        before = await box.read_file(f"{scratch}/{n}.before") if before_size is not None else None
        after = await box.read_file(path)
        sources[path] = (_text(before), _text(after))
    return flags + screen_sources(sources, task.test_files)


async def _read_size(box: Sandbox, path: str) -> int | None:
    try:
        text = (await box.read_file(path)).decode().strip()
    except (FileNotFoundError, OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "surrogateescape")


__all__ = ["RULES", "ScreenFlag", "parse_fragments", "screen_file", "screen_patch", "screen_sandbox"]
__all__ += ["screen_sources", "screened"]
