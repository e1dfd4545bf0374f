"""What strict grading would do with every gold patch of a SWE-bench file (issue #38).

For each row, every path the gold ``patch`` changes is put to the project's own rule,
``swe_rl.harness.steering.path_rule``, with what the grading sandbox would know: the row's test files (its
``test_patch``), whether the path is new, and the package directories of the repository at ``base_commit``
(directories holding an ``__init__.py``). The packages are read from a bare mirror (``--repo-cache DIR``:
``DIR/<owner>/<name>.git``, as ``swe-rl env build`` takes it) with ``git ls-tree -r --name-only``. Only new
files and ``*.ini``/``*.cfg``/``*.toml`` paths need them: without a mirror (or without the commit in it)
those paths are reported ``undecided``.

What the sandbox sees that this script does not: files the env build put in the tree (ignored or untracked:
a package they add counts there), and the env's own module names (site-packages), which join the
``shadow_module`` names; ``--installed NAME`` adds such names here.

For each reverted path of a configuration file, the script names the sections the patch touches (read from
the base file in the mirror) and whether a test-time tool reads any of them; whether a reverted path matters
to the tests otherwise is left to a reader (``check by hand``).

    python bench/strict_gold.py verified.parquet --repo-cache ~/mirrors --json strict_gold.json
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath

from swe_rl.envs.build.repo_sources import find_repo_source
from swe_rl.errors import ConfigError, SweRlError
from swe_rl.harness.steering import CONFIG_SUFFIXES, REFUSE, action_for, path_rule, shadow_names
from swe_rl.tasks.loaders import load_tasks
from swe_rl.tasks.model import Task

SYMLINK, GITLINK = "120000", "160000"
# Sections a test-time tool reads: pytest's ini sections, pytest-cov's coverage settings, and the entry points
# a re-install would register (pytest11 plugins).
TEST_TIME_SECTIONS = re.compile(
    r"^(tool:pytest|pytest|tool\.pytest(\..*)?|coverage:.*|tool\.coverage(\..*)?|options\.entry_points|"
    r"project\.entry-points(\..*)?|tool\.poetry\.plugins(\..*)?|testenv.*|tox)$"
)
_SECTION = re.compile(r"^\s*\[+\s*([^\]]+?)\s*\]+\s*(#.*)?$")
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@")


@dataclass
class FileChange:
    """One path of the gold patch as its git headers describe it."""

    path: str
    new: bool = False
    deleted: bool = False
    modes: tuple[str, ...] = ()
    # where its hunks change the base file: a removed line's number, an added line's number less one half
    old_lines: list[float] = field(default_factory=list, repr=False)
    added_headers: set[str] = field(default_factory=set, repr=False)  # ini/toml section headers it adds


@dataclass
class PathVerdict:
    path: str
    status: str  # kept | reverted | refused | undecided
    rule: str | None = None
    why: str = ""


@dataclass
class RowReport:
    instance_id: str
    paths: list[PathVerdict]
    matters: list[str] = field(default_factory=list)
    note: str = ""

    @property
    def status(self) -> str:
        found = {p.status for p in self.paths}
        for status in ("refused", "reverted", "undecided"):
            if status in found:
                return status
        return "kept"


def parse_patch(patch: str) -> list[FileChange]:
    """The files a git-format diff changes: a rename is its old path deleted and its new path new, as the
    inventory's ``git diff-tree --no-renames`` sees it."""
    changes: list[FileChange] = []
    current: FileChange | None = None
    old_line = 0
    added_section = ""
    for line in patch.splitlines():
        if not line.startswith("+"):
            added_section = ""
        if line.startswith("diff --git "):
            b = line[len("diff --git a/") :].partition(" b/")[2]
            current = FileChange(path=b)
            changes.append(current)
            continue
        if current is None:
            continue
        if line.startswith(("new file mode ", "deleted file mode ", "old mode ", "new mode ")):
            current.modes += (line.split()[-1],)
            current.new |= line.startswith("new file")
            current.deleted |= line.startswith("deleted file")
        elif line.startswith("rename from ") or line.startswith("copy from "):
            old = line.split(" ", 2)[2]
            if line.startswith("rename"):
                changes.insert(-1, FileChange(path=old, deleted=True))
            current.new = True
        elif line.startswith("@@") and (m := _HUNK.match(line)):
            old_line = int(m.group(1))
        elif line.startswith("-") and not line.startswith("---"):
            current.old_lines.append(old_line)
            old_line += 1
        elif line.startswith("+") and not line.startswith("+++"):
            if m := _SECTION.match(line[1:]):
                added_section = m.group(1)
                current.added_headers.add(added_section)
            elif not added_section:  # lines after a header the patch adds are in that section
                current.old_lines.append(old_line - 0.5)  # inserted before this base line
        elif line.startswith(" "):
            old_line += 1
    return changes


class Mirrors:
    """The repository at a commit, from ``--repo-cache``; every answer cached."""

    def __init__(self, repo_cache: Path | None) -> None:
        self.repo_cache = repo_cache
        self._packages: dict[tuple[str, str], set[str] | str] = {}

    def git(self, task: Task, *args: str) -> subprocess.CompletedProcess[bytes] | str:
        """git's answer in the task's mirror, or why there is none (a string)."""
        if self.repo_cache is None:
            return "no --repo-cache given"
        try:
            source = find_repo_source(task.repo, self.repo_cache)
        except ConfigError:
            return f"no mirror of {task.repo} in {self.repo_cache}"
        result = subprocess.run(["git", "--git-dir", source, *args], capture_output=True)
        if result.returncode != 0:
            return f"git {args[0]} in {source}: {result.stderr.decode(errors='replace').strip()[:200]}"
        return result

    def packages(self, task: Task) -> set[str] | str:
        """Directories with an ``__init__.py`` at ``base_commit`` ('' for the root), or why unknown."""
        key = (task.repo, task.base_commit)
        if key not in self._packages:
            found = self.git(task, "ls-tree", "-r", "-z", "--name-only", task.base_commit)
            if isinstance(found, str):
                self._packages[key] = found
            else:
                names = found.stdout.decode("utf-8", "surrogateescape").split("\0")
                self._packages[key] = {
                    n.rpartition("/")[0] for n in names if n == "__init__.py" or n.endswith("/__init__.py")
                }
        return self._packages[key]

    def text(self, task: Task, path: str) -> str | None:
        found = self.git(task, "show", f"{task.base_commit}:{path}")
        return None if isinstance(found, str) else found.stdout.decode("utf-8", "replace")


def needs_packages(change: FileChange) -> bool:
    return change.new or change.path.endswith(CONFIG_SUFFIXES)


# Rules decided by the name alone, whatever the packages are.
_PACKAGE_FREE = frozenset(
    {
        "conftest",
        "runner_config",
        "git_attributes",
        "startup_hook",
        "compiled_module",
        "package_metadata",
        "test_file",
        *REFUSE,
    }
)


def judge_row(task: Task, mirrors: Mirrors, installed: set[str]) -> RowReport:
    """Each gold path, as strict mode would treat it."""
    changes = parse_patch(task.patch)
    if not changes:
        return RowReport(task.instance_id, [], note="the gold patch names no file")
    packages: set[str] | str = set()
    if any(needs_packages(c) for c in changes):
        packages = mirrors.packages(task)
    base = packages if isinstance(packages, set) else set()
    after = set(base)
    for c in changes:
        if PurePosixPath(c.path).name == "__init__.py":
            parent = c.path.rpartition("/")[0]
            if c.new:
                after.add(parent)
            elif c.deleted:
                after.discard(parent)
    shadow = shadow_names(installed)
    verdicts = []
    for c in changes:
        if SYMLINK in c.modes or GITLINK in c.modes:
            rule: str | None = "symlink" if SYMLINK in c.modes else "nested_repo"
        else:
            rule = path_rule(
                c.path,
                test_files=set(task.test_files),
                new=c.new,
                package_dirs=after,
                base_packages=base,
                shadow=shadow,
            )
        if isinstance(packages, str) and needs_packages(c) and rule not in _PACKAGE_FREE:
            verdicts.append(PathVerdict(c.path, "undecided", None, packages))
        elif rule is None:
            verdicts.append(PathVerdict(c.path, "kept", None, "new, inside a package" if c.new else ""))
        else:
            verdicts.append(PathVerdict(c.path, action_for(rule, "strict"), rule))  # type: ignore[arg-type]
    report = RowReport(task.instance_id, verdicts)
    report.matters = [matters(task, c, mirrors) for c, v in zip(changes, verdicts, strict=True) if v.rule]
    return report


def matters(task: Task, change: FileChange, mirrors: Mirrors) -> str:
    """Whether reverting the path can change the test run: for a configuration file, the sections it touches;
    for setup.py, whether the row's eval script reinstalls the repo (the only time it runs)."""
    reinstall = re.search(r"pip install|setup\.py (develop|install)", task.eval_script or "")
    by_whom = (
        "the row's official eval script reinstalls the repo; swe-rl's composed script does not"
        if reinstall
        else "the row's eval script does not reinstall the repo"
    )
    if PurePosixPath(change.path).name == "setup.py" and not change.new:
        return f"{change.path}: runs at test time only when the repo is reinstalled ({by_whom})"
    if change.path.endswith(".py") and not change.path.endswith("__init__.py"):
        stem = PurePosixPath(change.path).stem
        if re.search(rf"^\+.*\b(import|from)\s+([\w.]+\.)?{re.escape(stem)}\b", task.test_patch, re.M):
            return f"{change.path}: the test patch imports {stem}: the tests need it"
    if not change.path.endswith((*CONFIG_SUFFIXES, ".coveragerc")) or change.new:
        return f"{change.path}: check by hand"
    base = mirrors.text(task, change.path)
    if base is None:
        return f"{change.path}: sections unknown (the base file could not be read from a mirror)"
    sections = touched_sections(base.splitlines(), change)
    read = sorted(s for s in sections if TEST_TIME_SECTIONS.match(s))
    where = f"sections {', '.join(f'[{s}]' for s in sorted(sections))}"
    if read:
        return f"{change.path}: {where}; a test-time tool reads {', '.join(read)}: it may matter"
    return f"{change.path}: {where}; none is read at test time ({by_whom})"


def touched_sections(lines: list[str], change: FileChange) -> set[str]:
    """The ini/toml sections the change touches: the section of each removed or inserted line of the base
    file (1-based; '' before the first header), and the headers it adds."""
    headers = [(i + 1, m.group(1)) for i, text in enumerate(lines) if (m := _SECTION.match(text))]
    found = set(change.added_headers)
    for line in change.old_lines:
        before = [name for at, name in headers if at <= line]
        found.add(before[-1] if before else "")
    return found


def summarize(reports: list[RowReport], source: str, seconds: float) -> dict:
    counts: dict[str, int] = {}
    rules: dict[str, int] = {}
    for r in reports:
        counts[r.status] = counts.get(r.status, 0) + 1
        for p in r.paths:
            if p.rule:
                rules[p.rule] = rules.get(p.rule, 0) + 1
    paths = sum(len(r.paths) for r in reports)
    new = sum(1 for r in reports for p in r.paths if p.why.startswith("new"))
    return {
        "source": source,
        "rows": len(reports),
        "rows_by_status": counts,
        "paths": paths,
        "new_paths_kept": new,
        "paths_by_rule": rules,
        "rows_not_all_kept": [r.instance_id for r in reports if r.status != "kept"],
        "seconds": round(seconds, 1),
    }


def print_row(r: RowReport) -> None:
    print(f"{r.instance_id}: {r.status}{' (' + r.note + ')' if r.note else ''}")
    for p in r.paths:
        if p.status != "kept" or p.why:
            rule = f" {p.rule}" if p.rule else ""
            why = f" ({p.why})" if p.why else ""
            print(f"    {p.status}{rule} {p.path}{why}")
    for m in r.matters:
        print(f"    matters? {m}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tasks", help="a SWE-bench .parquet, .jsonl or .json file")
    parser.add_argument("--repo-cache", type=Path, help="bare mirrors DIR/<owner>/<name>.git")
    parser.add_argument("-i", "--instance", action="append", help="only these instance ids (repeatable)")
    parser.add_argument(
        "--installed", action="append", default=[], help="a module name the env has (repeatable)"
    )
    parser.add_argument("--json", type=Path, help="write every row's verdicts and the summary here")
    parser.add_argument("--all", action="store_true", help="print every row, not only those not all kept")
    args = parser.parse_args(argv)
    if args.repo_cache is not None and not args.repo_cache.is_dir():
        parser.error(f"--repo-cache {args.repo_cache} is not a directory")
    try:
        tasks = load_tasks(args.tasks, instance_ids=args.instance)
    except SweRlError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    mirrors = Mirrors(args.repo_cache)
    start = time.monotonic()
    reports = []
    for n, task in enumerate(tasks, 1):
        reports.append(judge_row(task, mirrors, set(args.installed)))
        if n % 50 == 0 or n == len(tasks):
            print(f"[{n}/{len(tasks)}] rows judged", file=sys.stderr)
    for r in reports:
        if args.all or r.status != "kept" or any(p.why for p in r.paths):
            print_row(r)
    summary = summarize(reports, args.tasks, time.monotonic() - start)
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(
            json.dumps(
                {"summary": summary, "rows": [asdict(r) | {"status": r.status} for r in reports]}, indent=1
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
