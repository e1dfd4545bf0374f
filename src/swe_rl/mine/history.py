"""Candidates from a repository's first-parent history: each change split into source and tests.

A commit on the first-parent line is one candidate, its base its first parent; a merge's whole change
against its first parent is one candidate, as a pull request is. Changed files are classified as
SWE-bench's harvesting does:

- **test files**: a path with a directory ``tests``, ``test`` or ``testing``, or a file named
  ``test_*.py``, ``*_test.py`` or ``conftest.py`` (data files under a test directory included: the
  tests read them);
- **source files**: every other ``.py`` file;
- **neither**: every other file (docs, changelogs, CI and packaging data). They are left out of both
  patches and listed in the candidate's provenance; a fix that needs one of them does not validate
  and is dropped there, never kept half-applied.

A change is kept when it touches both source and test files: ``patch`` is the diff of its source
files, ``test_patch`` the diff of its test files, both against the base.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from pydantic import BaseModel, ConfigDict, Field

from swe_rl.errors import InfraError, MineError
from swe_rl.gitutil import git

TEST_DIRS = frozenset({"tests", "test", "testing"})
KEEP_RULE = "first-parent change touching source (.py, not tests) and test files"


def is_test_file(path: str) -> bool:
    """Whether ``path`` is a test file by SWE-bench's rules (a test directory, test_*.py, *_test.py, conftest.py)."""
    p = PurePosixPath(path)
    if any(part in TEST_DIRS for part in p.parts[:-1]):
        return True
    return p.suffix == ".py" and (
        p.name.startswith("test_") or p.name.endswith("_test.py") or p.name == "conftest.py"
    )


def is_source_file(path: str) -> bool:
    """A Python file that is not a test file."""
    return path.endswith(".py") and not is_test_file(path)


class Commit(BaseModel):
    """One commit of the first-parent line."""

    model_config = ConfigDict(frozen=True)

    commit: str
    parents: tuple[str, ...]
    timestamp: int = Field(description="Committer date, Unix time.")
    via: str = Field(default="", description="The first-parent branch merge that brought it (branch_line).")

    @property
    def created_at(self) -> str:
        return datetime.fromtimestamp(self.timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Candidate(BaseModel):
    """A change that touches source and tests, split into its gold patch and its test patch."""

    model_config = ConfigDict(frozen=True)

    commit: str = Field(description="The commit (a merge: the merge commit) whose change this is.")
    base: str = Field(description="Its first parent: the task's base commit.")
    created_at: str
    merge: bool = False
    merged: list[str] = Field(default_factory=list, description="A merge's branch commits, oldest first.")
    via: str = Field(default="", description="The branch merge that brought it to the main line, if any.")
    message: str = Field(description="The commit message (subject and body).")
    source_files: list[str]
    test_files: list[str]
    left_out: list[str] = Field(default_factory=list, description="Changed files that are neither.")
    patch: str
    test_patch: str


def split_kind(
    paths: list[str], deleted: frozenset[str] = frozenset()
) -> tuple[list[str], list[str], list[str]]:
    """(source, test, neither) of ``paths``, each sorted. A test file in ``deleted`` (removed by the change) is
    neither: the harness runs every file the test patch names, and a removed one is pytest's "file not found"."""
    tests = sorted(p for p in paths if is_test_file(p) and p not in deleted)
    sources = sorted(p for p in paths if is_source_file(p))
    neither = sorted(set(paths) - set(tests) - set(sources))
    return sources, tests, neither


class History:
    """A local git repository's first-parent history."""

    def __init__(self, path: Path) -> None:
        self.path = path.expanduser().resolve()
        if not self.path.is_dir():
            raise MineError(f"not a directory: {path}")
        try:
            bare = git(["rev-parse", "--is-bare-repository"], self.path).strip() == "true"
            # a bare repository (a mirror) is its git folder; a work tree, its top folder
            top = git(["rev-parse", "--absolute-git-dir" if bare else "--show-toplevel"], self.path).strip()
            self.head = git(["rev-parse", "--verify", "HEAD^{commit}"], self.path).strip()
        except InfraError:
            raise MineError(f"not a git repository (or one without commits): {path}") from None
        if Path(top).resolve() != self.path:
            raise MineError(f"{path} is inside the repository {top}; give the repository's top folder")

    def _git(self, *args: str) -> str:
        return git(list(args), self.path)

    def commits(self, since: str | None = None, until: str | None = None) -> list[Commit]:
        """The first-parent line of HEAD, oldest first, within ``since``/``until`` (dates git reads)."""
        args = ["log", "--first-parent", "--reverse", "--format=%H %ct %P"]
        args += [f"--since={since}"] if since else []
        args += [f"--until={until}"] if until else []
        out = _log_commits(self._git(*args, "HEAD", "--"))
        if not out:
            window = f" between {since or 'the start'} and {until or 'now'}" if since or until else ""
            raise MineError(f"{self.path}: no commit on the first-parent line of HEAD{window}")
        return out

    def branch_line(self, merge: Commit, *, depth: int = 3) -> tuple[list[Commit], int] | None:
        """A merge of a long-lived branch (a release branch, pytest's ``features``) that merged pull requests of
        its own: the branch's first-parent commits it brings, oldest first, each its own candidate as on the
        main line, and how many were left out (below); None for any other merge (a pull request's branch:
        one candidate, the merge).

        A merge on that line whose second parent the main line already had (the main line merged into the
        branch) is left out: its change is the main line's, mined there. A pull request merged into the
        branch is told from it by a second parent the main line did not have. A branch merged into that branch
        (Sphinx's ``3.4.x`` into ``3.x``, then ``3.x`` into its main line) is unfolded the same way, up to
        ``depth`` levels; every commit found names the first-parent merge that brought it (``via``)."""
        return self._unfold(merge, merge.commit, (), depth)

    def _unfold(
        self, merge: Commit, via: str, seen: tuple[str, ...], depth: int
    ) -> tuple[list[Commit], int] | None:
        if len(merge.parents) < 2 or depth < 1:
            return None
        mainline, branch = merge.parents[:2]
        excluded = (mainline, *seen)  # what the lines above already hold
        out = self._git(
            "log",
            "--first-parent",
            "--reverse",
            "--format=%H %ct %P",
            branch,
            *(f"^{c}" for c in excluded),
            "--",
        )
        line = _log_commits(out, via=via)
        pulls = {
            c.commit
            for c in line
            if len(c.parents) > 1 and not any(self._is_ancestor(c.parents[1], x) for x in excluded)
        }
        if not pulls:
            return None
        kept: list[Commit] = []
        left_out = 0
        for c in line:
            if len(c.parents) > 1 and c.commit not in pulls:
                left_out += 1
                continue
            inner = self._unfold(c, via, excluded, depth - 1) if len(c.parents) > 1 else None
            if inner is None:
                kept.append(c)
            else:
                kept += inner[0]
                left_out += inner[1] + 1  # the inner branch merge too: its commits are the candidates
        return kept, left_out

    def _is_ancestor(self, commit: str, of: str) -> bool:
        try:
            self._git("merge-base", "--is-ancestor", commit, of)
        except InfraError:
            return False
        return True

    def has_tests(self) -> bool:
        """Whether HEAD holds any test file."""
        return any(is_test_file(p) for p in self._git("ls-tree", "-r", "--name-only", "HEAD").splitlines())

    def changed(self, commit: Commit, *, only_deleted: bool = False) -> list[str]:
        """Paths the commit changes against its first parent (renames as delete + add); ``only_deleted``:
        the paths it removes."""
        args = ["diff", "--name-only", "-z", "--no-renames", *(["--diff-filter=D"] if only_deleted else [])]
        out = self._git(*args, commit.parents[0], commit.commit)
        return sorted(p for p in out.split("\0") if p)

    def split(self, commit: Commit) -> tuple[list[str], list[str], list[str]]:
        """(source, test, neither) files of the commit's change (:func:`split_kind`)."""
        return split_kind(self.changed(commit), frozenset(self.changed(commit, only_deleted=True)))

    def diff(self, base: str, commit: str, paths: list[str]) -> str:
        """The diff of ``paths`` from ``base`` to ``commit``, as SWE-bench's patches are written."""
        if not paths:
            return ""
        args = ["diff", "--no-color", "--no-ext-diff", "--no-renames", "--full-index", "--binary"]
        return self._git(*args, base, commit, "--", *paths)

    def candidate(self, commit: Commit) -> Candidate:
        """``commit`` as a candidate (its change touches source and tests)."""
        sources, tests, neither = self.split(commit)
        base = commit.parents[0]
        merged = []
        if len(commit.parents) > 1:
            merged = self._git("rev-list", "--reverse", f"{base}..{commit.commit}").split()
            merged = [c for c in merged if c != commit.commit]
        return Candidate(
            commit=commit.commit,
            base=base,
            created_at=commit.created_at,
            merge=len(commit.parents) > 1,
            merged=merged,
            via=commit.via,
            message=self.message(commit.commit),
            source_files=sources,
            test_files=tests,
            left_out=neither,
            patch=self.diff(base, commit.commit, sources),
            test_patch=self.diff(base, commit.commit, tests),
        )

    def message(self, commit: str) -> str:
        """The commit's full message."""
        return self._git("log", "-1", "--format=%B", commit).strip()

    def subjects(self, commits: list[str]) -> list[str]:
        """The subject lines of ``commits``, in that order."""
        return [self._git("log", "-1", "--format=%s", c).strip() for c in commits]

    def show(self, commit: str, path: str) -> str | None:
        """A file's text at ``commit``; None when it is not there (or not text)."""
        try:
            data = git(["show", f"{commit}:{path}"], self.path)
        except (InfraError, UnicodeDecodeError):
            return None
        return data

    def files(self, commit: str) -> list[str]:
        """Every file path at ``commit``."""
        return self._git("ls-tree", "-r", "--name-only", commit).splitlines()

    def env_anchor(self, base: str, dependency_files: tuple[str, ...]) -> EnvAnchor:
        """The commit whose date a candidate with base ``base`` resolves its env as of (:class:`EnvAnchor`);
        ``dependency_files``: git pathspecs of the files its env is read from."""
        line = self._git("log", "--first-parent", "-1", "--format=%H %ct", base, "--", *dependency_files)
        changed = _commit_of(line)
        quarter = _quarter_start(int(self._git("log", "-1", "--format=%ct", base).strip()))
        line = self._git("log", "--first-parent", "--reverse", f"--since={quarter}", "--format=%H %ct", base)
        first = _commit_of(line.partition("\n")[0]) or Commit(commit=base, parents=(), timestamp=0)
        if changed is not None and changed.timestamp >= first.timestamp:
            return EnvAnchor(
                commit=changed.commit, created_at=changed.created_at, rule="dependency files changed"
            )
        return EnvAnchor(commit=first.commit, created_at=first.created_at, rule="first commit of the quarter")


class EnvAnchor(BaseModel):
    """The commit an env is dated by, shared by neighbouring candidates.

    The later of two first-parent commits at or before the base: the last that changed the dependency files,
    and the first of the base's calendar quarter (UTC). Neighbours whose dependency files did not change
    get one date, so one resolution (the same packages, from uv's cache), without a date years older than
    the code where those files rarely change; it depends on the history alone, not on ``--since``."""

    model_config = ConfigDict(frozen=True)

    commit: str
    created_at: str
    rule: str


def _log_commits(out: str, *, via: str = "") -> list[Commit]:
    """The commits of ``git log --format='%H %ct %P'`` output, in its order."""
    commits = []
    for row in out.splitlines():
        commit, stamp, *parents = row.split()
        commits.append(Commit(commit=commit, parents=tuple(parents), timestamp=int(stamp), via=via))
    return commits


def _commit_of(line: str) -> Commit | None:
    if not line.strip():
        return None
    commit, stamp = line.split()
    return Commit(commit=commit, parents=(), timestamp=int(stamp))


def _quarter_start(timestamp: int) -> str:
    when = datetime.fromtimestamp(timestamp, UTC)
    return f"{when.year}-{(when.month - 1) // 3 * 3 + 1:02d}-01T00:00:00Z"


def drop_reason(sources: list[str], tests: list[str]) -> str | None:
    """Why a change is not a candidate ('no test change', ...), None when it touches both."""
    if sources and tests:
        return None
    if sources:
        return "no test change"
    if tests:
        return "no source change"
    return "no source or test change"
