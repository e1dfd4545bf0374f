"""bench/mine_recall.py's history half: the reference instances of a repository, and the commit of the
first-parent line of HEAD that brought each one's fix (by subject, by gold patch, or carried by a merge
of a branch the pull request was merged into)."""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from swe_rl.errors import InfraError
from swe_rl.gitutil import git_env

DAY = 86400
MERGE_SUBJECT = re.compile(r"^Merge pull request #(\d+)\b")
SQUASH_SUBJECT = re.compile(r"\(#(\d+)\)\s*$")
PATCH_FILE = re.compile(r"^diff --git a/(\S+) b/", re.MULTILINE)
PATCH_TRIES = 200  # first-parent commits touching the gold files that the patch rule compares, at most


def run_git(args: list[str], repo: Path) -> str:
    """``git <args>``'s output, bytes that are not UTF-8 replaced (old histories hold Latin-1 subjects)."""
    proc = subprocess.run(["git", *args], cwd=repo, env=git_env(), capture_output=True, check=False)
    if proc.returncode:
        raise InfraError(f"git {' '.join(args[:3])} failed in {repo}: {proc.stderr.decode(errors='replace')}")
    return proc.stdout.decode(errors="replace")


@dataclass(frozen=True)
class Reference:
    """One SWE-bench instance of the repository."""

    instance_id: str
    number: int
    files: tuple[str, ...]
    patch: str
    fail_to_pass: tuple[str, ...]
    created_at: str


@dataclass(frozen=True)
class Step:
    """One commit of the first-parent line."""

    commit: str
    parents: tuple[str, ...]
    timestamp: int
    subject: str


@dataclass(frozen=True)
class Located:
    """Where an instance's fix landed, and by which rule that was found."""

    instance_id: str
    commit: str
    timestamp: int
    rule: str

    @property
    def date(self) -> str:
        return datetime.fromtimestamp(self.timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_stamp(text: str) -> int:
    """Unix time of an ISO date or git's ``YYYY-MM-DD HH:MM:SS +ZZZZ`` (UTC when no zone)."""
    try:
        when = datetime.strptime(text, "%Y-%m-%d %H:%M:%S %z")
    except ValueError:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return int((when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp())


def day_of(stamp: int) -> str:
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%d")


def load_references(paths: list[Path], repo: str) -> list[Reference]:
    """The instances of ``repo`` (``owner/name``) in the union of ``paths`` (parquet), by instance id."""
    import pandas as pd

    rows: dict[str, Reference] = {}
    for path in paths:
        for row in pd.read_parquet(path).itertuples():
            if row.repo != repo or row.instance_id in rows:
                continue
            f2p = row.FAIL_TO_PASS
            rows[row.instance_id] = Reference(
                instance_id=row.instance_id,
                number=int(row.instance_id.rsplit("-", 1)[1]),
                files=tuple(PATCH_FILE.findall(row.patch)),
                patch=row.patch,
                fail_to_pass=tuple(json.loads(f2p) if isinstance(f2p, str) else f2p),
                created_at=str(row.created_at),
            )
    return [rows[key] for key in sorted(rows, key=lambda k: rows[k].number)]


def first_parent(repo: Path, *range_args: str) -> list[Step]:
    """The first-parent line of HEAD, oldest first (``range_args``: git's --since/--until)."""
    out = run_git(
        ["log", "--first-parent", "--reverse", "--format=%H%x1f%P%x1f%ct%x1f%s", *range_args, "HEAD"], repo
    )
    steps = []
    for line in out.splitlines():
        commit, parents, stamp, subject = line.split("\x1f", 3)
        steps.append(Step(commit, tuple(parents.split()), int(stamp), subject))
    return steps


def changed_lines(patch: str) -> dict[str, list[str]]:
    """Per file, the added and removed lines of a patch (no headers, context or hunk offsets)."""
    out: dict[str, list[str]] = {}
    current: list[str] = []
    for line in patch.splitlines():
        if match := PATCH_FILE.match(line):
            current = out.setdefault(match.group(1), [])
        elif line[:1] in "+-" and not line.startswith(("+++ ", "--- ")):
            current.append(line.rstrip())
    return out


def _equal_change(repo: Path, ref: Reference, tries: list[tuple[str, str]]) -> str | None:
    """The first of ``tries`` (commit, parent) whose change to the gold patch's files is the gold patch's."""
    want = changed_lines(ref.patch)
    for commit, parent in tries[:PATCH_TRIES]:
        diff = run_git(["diff", "--no-color", "--no-renames", parent, commit, "--", *ref.files], repo)
        if changed_lines(diff) == want:
            return commit
    return None


def _by_patch(repo: Path, ref: Reference, steps: dict[str, Step]) -> Step | None:
    """The first first-parent commit after the instance's creation whose change to its files is the gold patch's."""
    if not ref.files:
        return None
    since = parse_stamp(ref.created_at)
    out = run_git(
        ["log", "--first-parent", "--reverse", "--format=%H", "HEAD", "--", *ref.files], repo
    ).split()
    tries = [
        (c, steps[c].parents[0])
        for c in out
        if c in steps and steps[c].timestamp >= since and steps[c].parents
    ]
    found = _equal_change(repo, ref, tries)
    return steps[found] if found else None


def _off_line(repo: Path, refs: list[Reference], steps: dict[str, Step]) -> dict[str, tuple[str, str]]:
    """Instance id -> (the commit off the first-parent line that holds its fix, the rule that found it): a
    merge or squash subject naming the PR, else a commit (up to 60 days before the PR opened: a branch's
    commits predate their PR) whose change to the gold files is the gold patch's."""
    subjects: dict[int, str] = {}
    for line in run_git(["log", "--format=%H %s", "HEAD"], repo).splitlines():
        commit, _, subject = line.partition(" ")
        if commit not in steps and (match := MERGE_SUBJECT.match(subject) or SQUASH_SUBJECT.search(subject)):
            subjects.setdefault(int(match.group(1)), commit)
    out = {}
    for ref in refs:
        if ref.number in subjects:
            out[ref.instance_id] = (subjects[ref.number], "subject off the line")
            continue
        since = parse_stamp(ref.created_at) - 60 * DAY
        log = (
            run_git(["log", "--reverse", "--format=%H %ct %P", "HEAD", "--", *ref.files], repo)
            if ref.files
            else ""
        )
        tries = [
            (c, p) for c, t, p, *_ in ([*x.split(), ""] for x in log.splitlines()) if p and int(t) >= since
        ]
        if found := _equal_change(repo, ref, tries):
            out[ref.instance_id] = (found, "gold patch off the line")
    return out


def _landing(repo: Path, commit: str, line: list[Step]) -> Step | None:
    """The first first-parent commit that holds ``commit`` (ancestry only grows along the line)."""
    low, high = 0, len(line)
    while low < high:
        mid = (low + high) // 2
        try:
            run_git(["merge-base", "--is-ancestor", commit, line[mid].commit], repo)
            high = mid
        except InfraError:
            low = mid + 1
    return line[low] if low < len(line) else None


def locate(repo: Path, refs: list[Reference], line: list[Step]) -> tuple[list[Located], dict[str, str]]:
    """Where each instance's fix landed on the first-parent line; and why, for those not found."""
    by_number: dict[int, tuple[Step, str]] = {}
    for step in line:
        if match := MERGE_SUBJECT.match(step.subject):
            by_number.setdefault(int(match.group(1)), (step, "merge subject"))
        elif match := SQUASH_SUBJECT.search(step.subject):
            by_number.setdefault(int(match.group(1)), (step, "squash subject"))
    steps = {s.commit: s for s in line}
    located, missing = [], []
    for ref in refs:
        step, rule = by_number.get(ref.number, (None, ""))
        if step is None and (step := _by_patch(repo, ref, steps)):
            rule = "gold patch"
        if step is None:
            missing.append(ref)
            continue
        located.append(Located(ref.instance_id, step.commit, step.timestamp, rule))
    off = _off_line(repo, missing, steps) if missing else {}
    why = {}
    for ref in missing:
        if ref.instance_id not in off:
            why[ref.instance_id] = (
                "no commit subject names the PR, and no commit's change equals the gold patch"
            )
            continue
        commit, rule = off[ref.instance_id]
        if (land := _landing(repo, commit, line)) is None:
            why[ref.instance_id] = f"{commit[:12]} ({rule}) is not on the first-parent line's history"
            continue
        located.append(
            Located(ref.instance_id, land.commit, land.timestamp, f"carried: {rule} {commit[:12]}")
        )
    return located, why
