"""The bare repository holding synthesized tasks' base commits.

Every task's base commit is an orphan commit (no parent) of the buggy tree, with a fixed author,
committer and date, so its id depends on the tree alone and no commit holding the fix is reachable
from it. Refs ``refs/swe-rl/<instance_id>`` keep the commits alive; the clean trees used for
validation live under ``refs/swe-rl-clean/`` until :meth:`TaskRepo.finish` drops and prunes them.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from swe_rl.gitutil import git
from swe_rl.synth.source import SourceTree

TASK_REFS = "refs/swe-rl"
_CLEAN_REFS = "refs/swe-rl-clean"


class TaskRepo:
    """A bare git repository written with plumbing commands (no work tree)."""

    def __init__(self, path: Path) -> None:
        self.path = path = path.absolute()  # git runs with cwd=path: a relative index path would not resolve
        if not (path / "HEAD").is_file():
            path.mkdir(parents=True, exist_ok=True)
            git(["init", "-q", "--bare", "-b", "main"], path)

    def _git(
        self, args: list[str], *, index: Path | None = None, when: int | None = None, stdin: str | None = None
    ) -> str:
        env: dict[str, str] = {}
        if index is not None:
            env["GIT_INDEX_FILE"] = str(index)
        if when is not None:
            env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = f"{when} +0000"
        return git(args, self.path, env=env, input=stdin)

    def _blob(self, data: bytes) -> str:
        fd, tmp = tempfile.mkstemp(dir=self.path, prefix=".blob.")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            return self._git(["hash-object", "-w", "--", tmp]).strip()
        finally:
            os.unlink(tmp)

    def write_source(self, source: SourceTree) -> str:
        """The source's clean tree as an orphan commit (kept under a ref until :meth:`finish`)."""
        lines = []
        for path, data in sorted(source.files.items()):
            mode = "100755" if path in source.executables else "100644"
            lines.append(f"{mode} {self._blob(data)}\t{path}")
        with tempfile.TemporaryDirectory(dir=self.path, prefix=".index.") as tmp:
            index = Path(tmp) / "index"
            self._git(["update-index", "--add", "--index-info"], index=index, stdin="\n".join(lines) + "\n")
            tree = self._git(["write-tree"], index=index).strip()
        commit = self.commit(tree, f"{source.name} snapshot", source.timestamp)
        self._git(["update-ref", f"{_CLEAN_REFS}/{source.name}", commit])
        return commit

    def mutated_tree(self, clean_commit: str, changes: dict[str, str]) -> str:
        """The clean commit's tree with ``changes`` (path -> new text) written over it."""
        with tempfile.TemporaryDirectory(dir=self.path, prefix=".index.") as tmp:
            index = Path(tmp) / "index"
            self._git(["read-tree", clean_commit], index=index)
            for path, text in sorted(changes.items()):
                mode = self._git(["ls-files", "-s", "--", path], index=index).split(" ", 1)[0] or "100644"
                blob = self._blob(text.encode("utf-8"))
                self._git(["update-index", "--cacheinfo", f"{mode},{blob},{path}"], index=index)
            return self._git(["write-tree"], index=index).strip()

    def commit(self, tree: str, message: str, when: int) -> str:
        """An orphan commit of ``tree``: its id depends only on the tree, message and date."""
        return self._git(["commit-tree", tree, "-m", message], when=when).strip()

    def diff(self, old: str, new: str) -> str:
        """``git diff`` from one tree-ish to another (the gold patch: buggy -> clean)."""
        return self._git(["diff", "--no-color", "--no-ext-diff", "--full-index", old, new])

    def add_task(self, instance_id: str, commit: str) -> None:
        self._git(["update-ref", f"{TASK_REFS}/{instance_id}", commit])

    def finish(self) -> None:
        """Drop the clean snapshots and everything unreachable, so only the buggy commits remain."""
        refs = self._git(["for-each-ref", "--format=%(refname)", _CLEAN_REFS]).split()
        for ref in refs:
            self._git(["update-ref", "-d", ref])
        self._git(["reflog", "expire", "--expire=now", "--all"])
        self._git(["gc", "-q", "--prune=now"])
