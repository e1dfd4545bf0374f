"""Build a builtin library's git repository deterministically and derive its task records.

Fixed author, committer and dates make every commit id stable across machines, so task records
(base_commit, patches) are the same wherever the suite is built. The result is a bare mirror in the
repo cache, ``<repo-cache>/swe-rl-builtin/<name>.git``, with the task records stored beside it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from swe_rl.errors import ConfigError
from swe_rl.fileio import atomic_write_json
from swe_rl.gitutil import git
from swe_rl.tasks.builtin.spec import LibrarySpec, TaskSpec
from swe_rl.tasks.model import Task

_RECORDS = "swe-rl-tasks.json"
_BUILD_FORMAT = "2"  # bump when the build procedure changes the produced repository
TEST_CMD = "python -m pytest -rA -p no:cacheprovider"


def spec_digest(spec: LibrarySpec) -> str:
    h = hashlib.sha256(f"{_BUILD_FORMAT}\n{spec.model_dump_json()}".encode())
    for path, text in spec.source_files().items():
        h.update(f"\0{path}\0{text}".encode())
    return h.hexdigest()[:16]


def mirror_path(spec: LibrarySpec, repo_cache: Path) -> Path:
    return repo_cache / f"{spec.repo}.git"


def ensure_library(spec: LibrarySpec, repo_cache: Path) -> list[Task]:
    """The library's tasks, building its mirror in ``repo_cache`` first when missing or stale."""
    dest = mirror_path(spec, repo_cache)
    digest = spec_digest(spec)
    cached = _read_records(dest, digest)
    if cached is not None:
        return cached
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{spec.name}.build."))
    try:
        records = _build(spec, staging, digest)
        _install(staging / "mirror.git", dest, digest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return records


def _read_records(dest: Path, digest: str) -> list[Task] | None:
    try:
        data = json.loads((dest / _RECORDS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if data.get("digest") != digest:
        return None
    return [Task.model_validate(r) for r in data["tasks"]]


def _install(built: Path, dest: Path, digest: str) -> None:
    """Move the finished mirror into place; a concurrent builder that won first is kept."""
    if _read_records(dest, digest) is not None:
        return
    if dest.exists():  # stale build of an older spec
        trash = dest.with_name(f".{dest.name}.old.{os.getpid()}")
        os.rename(dest, trash)
        shutil.rmtree(trash, ignore_errors=True)
    try:
        os.rename(built, dest)
    except OSError:
        if _read_records(dest, digest) is None:
            raise


def _tree(spec: LibrarySpec, bugs: set[str]) -> dict[str, str]:
    """The library's files with the bugs of the tasks in ``bugs`` injected into the fixed sources."""
    tree = spec.source_files()
    for task in spec.tasks:
        if task.instance_id not in bugs:
            continue
        for edit in task.fix:
            text = tree.get(edit.file)
            if text is None or text.count(edit.fixed) != 1:
                raise ConfigError(
                    f"builtin {task.instance_id}: fix text must occur exactly once in {edit.file}"
                )
            tree[edit.file] = text.replace(edit.fixed, edit.buggy)
    return tree


def _with_tests(tree: dict[str, str], task: TaskSpec) -> dict[str, str]:
    tree = dict(tree)
    for change in task.tests:
        tree[change.file] = (
            change.create if change.create is not None else tree[change.file] + (change.append or "")
        )
    return tree


def _checkout(work: Path, tree: dict[str, str]) -> None:
    for path in git(["ls-files", "-z"], work).split("\0"):
        if path and path not in tree:
            (work / path).unlink()
    for path, text in tree.items():
        target = work / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    git(["add", "-A"], work)


def _commit(work: Path, message: str, when: int) -> str:
    stamp = f"{when} +0000"
    git(
        ["commit", "-q", "--allow-empty", "-m", message],
        work,
        env={"GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp},
    )
    return git(["rev-parse", "HEAD"], work).strip()


def _build(spec: LibrarySpec, staging: Path, digest: str) -> list[Task]:
    work = staging / "work"
    work.mkdir()
    git(["init", "-q", "-b", "main"], work)
    when = 1_700_000_000 + 86_400 * sum(map(ord, spec.name))  # distinct, stable dates per library
    all_bugs = {t.instance_id for t in spec.tasks}
    base = _tree(spec, all_bugs)
    for step in spec.history:
        tree = base if step.files is None else {p: base[p] for p in step.files}
        _checkout(work, tree)
        base_commit = _commit(work, step.message, when)
        when += 3600
    git(["tag", f"v{spec.version}"], work)

    tasks: list[Task] = []
    for task in spec.tasks:
        _checkout(work, _with_tests(_tree(spec, all_bugs - {task.instance_id}), task))
        gold = git(["diff", "--cached", base_commit, "--", *sorted({e.file for e in task.fix})], work)
        test_patch = git(["diff", "--cached", base_commit, "--", *sorted({c.file for c in task.tests})], work)
        git(["reset", "-q", "--hard", base_commit], work)
        tasks.append(_task_record(spec, task, base_commit, gold, test_patch))

    # Later history: the fixes land on main, as upstream repositories do after an issue's base commit.
    remaining = set(all_bugs)
    with_tests = base
    for task in spec.tasks:
        remaining.discard(task.instance_id)
        with_tests = _with_tests(with_tests, task)
        test_files = {p: text for p, text in with_tests.items() if p.startswith("tests/")}
        _checkout(work, {**_tree(spec, remaining), **test_files})
        _commit(work, f"Fix {task.problem_statement.splitlines()[0]}", when)
        when += 3600
    git(["tag", "v-next"], work)
    git(["clone", "-q", "--bare", str(work), str(staging / "mirror.git")], staging)
    records = {"digest": digest, "tasks": [t.to_record() for t in tasks]}
    atomic_write_json(staging / "mirror.git" / _RECORDS, records)
    return tasks


def _task_record(spec: LibrarySpec, task: TaskSpec, base_commit: str, gold: str, tests: str) -> Task:
    return Task(
        instance_id=task.instance_id,
        repo=spec.repo,
        base_commit=base_commit,
        patch=gold,
        test_patch=tests,
        problem_statement=task.problem_statement,
        hints_text=task.hints_text,
        created_at=spec.created_at,
        version=spec.version,
        environment_setup_commit=base_commit,
        FAIL_TO_PASS=task.FAIL_TO_PASS,
        PASS_TO_PASS=task.PASS_TO_PASS,
        test_cmd=TEST_CMD,
        log_parser="parse_log_pytest",
        python="3",
        install="",
    )
