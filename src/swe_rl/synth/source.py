"""The repository a synthesis run starts from: its files at one commit, and which of them are source.

``builtin:NAME`` (or ``builtin`` for every library) reads the builtin library's newest commit (all
bugs fixed, all tests present); a path reads a git repository's HEAD, or a plain directory's files.
"""

from __future__ import annotations

import ast
import io
import re
import tarfile
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from pydantic import BaseModel, ConfigDict, Field

from swe_rl.errors import InfraError, SynthError
from swe_rl.gitutil import git

SYNTH_OWNER = "swe-rl-synth"
DEFAULT_TEST_CMD = "python -m pytest -rA -p no:cacheprovider"
_FIXED_TIME = 1_700_000_000  # plain directories have no commit date
_SKIP_DIRS = {
    ".git",
    "__pycache__",
    ".venv",
    "venv",
    ".tox",
    ".nox",
    "node_modules",
    ".pytest_cache",
    ".mypy_cache",
}
_NOT_SOURCE_DIRS = {"tests", "test", "testing", "docs", "doc", "examples", "benchmarks", "bench", "scripts"}
_NOT_SOURCE_FILES = {"setup.py", "conftest.py", "noxfile.py", "tasks.py", "fabfile.py"}


class SourceTree(BaseModel):
    """A repository's files at one commit, as synthesis reads them."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="Short name, used in repo names and instance ids ('textkit').")
    origin: str = Field(description="Where the files came from ('builtin:textkit', a path and commit).")
    files: dict[str, bytes] = Field(description="Relative path -> content, every tracked file.")
    executables: frozenset[str] = Field(default=frozenset(), description="Paths with the executable bit.")
    timestamp: int = Field(description="Unix time of the source commit; synthesized commits reuse it.")
    version: str = Field(default="0", description="Release line written into the task records.")

    @property
    def repo(self) -> str:
        return f"{SYNTH_OWNER}/{self.name}"

    @property
    def created_at(self) -> str:
        return datetime.fromtimestamp(self.timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def source_files(self, only: list[str] | None = None) -> dict[str, tuple[str, ast.Module]]:
        """Python files that are code under test (not tests, docs or build scripts), parsed.

        A file that does not parse is a :class:`SynthError`: mutating a broken tree would yield nonsense.
        """
        out: dict[str, tuple[str, ast.Module]] = {}
        for path, data in sorted(self.files.items()):
            if not _is_source(path) or (only and not any(path.startswith(p.rstrip("/")) for p in only)):
                continue
            try:
                text = data.decode("utf-8")
                tree = ast.parse(text, filename=path)
            except UnicodeDecodeError as exc:
                raise SynthError(f"{self.origin}: {path} is not UTF-8 text ({exc.reason})") from None
            except SyntaxError as exc:
                raise SynthError(
                    f"{self.origin}: syntax error in {path} line {exc.lineno}: {exc.msg}; "
                    "fix the file (or leave it out with --src) before synthesizing tasks"
                ) from None
            out[path] = (text, tree)
        if not out:
            raise SynthError(f"{self.origin}: no Python source files to mutate (tests and docs excluded)")
        return out


def _is_source(path: str) -> bool:
    p = PurePosixPath(path)
    if p.suffix != ".py" or p.name in _NOT_SOURCE_FILES:
        return False
    if p.name.startswith("test_") or p.name.endswith("_test.py"):
        return False
    return not any(part in _NOT_SOURCE_DIRS or part.startswith(".") for part in p.parts[:-1])


def load_sources(spec: str) -> list[SourceTree]:
    """``builtin``, ``builtin:NAME`` or a path to a repository (git HEAD) or a plain directory."""
    if spec == "builtin" or spec.startswith("builtin:"):
        from swe_rl.tasks.builtin.spec import library_names

        names = [spec.partition(":")[2]] if ":" in spec else library_names()
        return [_builtin(name) for name in names]
    path = Path(spec).expanduser()
    if not path.is_dir():
        raise SynthError(f"repository not found: {spec} (give a directory, or builtin:NAME)")
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", path.resolve().name).strip("-.") or "repo"
    if (path / ".git").exists():
        return [_from_git(name, path.resolve(), "HEAD", f"{path.resolve()}")]
    return [_from_dir(name, path.resolve())]


def _builtin(name: str) -> SourceTree:
    from swe_rl.tasks.builtin import BUILTIN_OWNER, builtin_mirror
    from swe_rl.tasks.builtin.spec import load_library

    spec = load_library(name)
    mirror = builtin_mirror(f"{BUILTIN_OWNER}/{name}")
    assert mirror is not None
    tree = _from_git(name, mirror, "main", f"builtin:{name}")
    return tree.model_copy(update={"version": spec.version})


def _from_git(name: str, repo: Path, rev: str, origin: str) -> SourceTree:
    try:
        commit = git(["rev-parse", "--verify", f"{rev}^{{commit}}"], repo).strip()
        stamp = int(git(["log", "-1", "--format=%ct", commit], repo).strip())
    except InfraError as exc:
        raise SynthError(f"{origin}: cannot read {rev} ({exc})") from None
    import subprocess

    from swe_rl.gitutil import git_env

    proc = subprocess.run(
        ["git", "archive", "--format=tar", commit], cwd=repo, env=git_env(), capture_output=True, check=False
    )
    if proc.returncode != 0:
        raise SynthError(f"{origin}: git archive failed: {proc.stderr.decode(errors='replace').strip()}")
    files: dict[str, bytes] = {}
    executables: set[str] = set()
    with tarfile.open(fileobj=io.BytesIO(proc.stdout)) as tar:
        for member in tar.getmembers():
            if member.isfile():
                handle = tar.extractfile(member)
                assert handle is not None
                files[member.name] = handle.read()
                if member.mode & 0o111:
                    executables.add(member.name)
    where = origin if origin.startswith("builtin:") else f"{origin}@{commit[:12]}"
    return SourceTree(
        name=name, origin=where, files=files, executables=frozenset(executables), timestamp=stamp
    )


def _from_dir(name: str, root: Path) -> SourceTree:
    files: dict[str, bytes] = {}
    executables: set[str] = set()
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if any(part in _SKIP_DIRS or part.endswith(".egg-info") for part in rel.parts):
            continue
        if path.is_file() and not path.is_symlink() and path.suffix not in {".pyc", ".pyo"}:
            files[rel.as_posix()] = path.read_bytes()
            if path.stat().st_mode & 0o111:
                executables.add(rel.as_posix())
    return SourceTree(
        name=name, origin=str(root), files=files, executables=frozenset(executables), timestamp=_FIXED_TIME
    )
