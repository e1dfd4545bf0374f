"""Tasks mined from a repository's history: real fix commits and their tests as SWE-bench rows.

Walk the first-parent line of a local git repository (``history``); each change that touches both
source and test files is a candidate, split into its gold ``patch`` and its ``test_patch``, its base
the first parent. Datasets named by ``exclude`` remove their own fixes (``state``). The env is inferred
from the repository at the base commit, without a language model (``envinfer``), and built by the env
cache like any row's. The touched tests run in sandboxes before and after the fix, twice
(``validate``); FAIL_TO_PASS must be non-empty and stable. The issue text comes from the commit
message and the failing output (``problem``). ``pipeline`` runs it all, resumably and
deterministically. See :func:`mine` and docs/MINING.md.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from swe_rl.envs.build.repo_sources import find_repo_source
from swe_rl.envs.cache import EnvCache
from swe_rl.errors import ConfigError, MineError
from swe_rl.fileio import atomic_write_text
from swe_rl.mine.history import History, is_source_file, is_test_file
from swe_rl.mine.pipeline import MINE_OWNER, MineOptions, Miner, MineReport, Note, safe_name
from swe_rl.mine.state import state_path
from swe_rl.sandbox.base import SandboxFactory

_OWNER_NAME = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")


def resolve_repo(repo: Path | str, repo_cache: Path | None = None) -> tuple[Path, str | None]:
    """The repository to mine: a local path as it is, or ``OWNER/NAME`` found among the repo cache's mirrors
    (``find_repo_source``'s layouts; no network); with the name its tasks take (``owner__name``, or None
    for a path: the folder's name)."""
    path = Path(repo).expanduser()
    if path.exists() or not _OWNER_NAME.fullmatch(str(repo)):
        return path, None
    if repo_cache is None:
        raise MineError(f"{repo} is not a directory here; give --repo-cache DIR to mine its mirror there")
    return Path(find_repo_source(str(repo), repo_cache)), str(repo).replace("/", "__")


async def mine(
    repo: Path | str,
    out: Path,
    *,
    options: MineOptions,
    cache: EnvCache,
    factory: SandboxFactory,
    note: Note = lambda _: None,
    repo_cache: Path | None = None,
) -> MineReport:
    """Mine validated tasks from the git repository ``repo`` (a path, or ``OWNER/NAME`` in ``repo_cache``)
    into ``out`` (JSONL), resumably.

    Raises :class:`~swe_rl.errors.MineError` for a path that is not a repository, an empty range or a
    repository without tests, and :class:`~swe_rl.errors.RepoNotFoundError` for an ``OWNER/NAME`` the repo
    cache has no mirror of; candidates that fail a stage are dropped and counted, never raised.
    """
    if out.suffix != ".jsonl":
        raise ConfigError(f"--out must be a .jsonl file, got {out}")
    path, name = resolve_repo(repo, repo_cache)
    history = History(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    return await Miner(history, cache, factory, options, note, name=name).run(out)


def part_path(out: Path, repo: Path | str) -> Path:
    """Where one of several repositories is mined to: ``<out stem>.<its name>.jsonl`` beside ``out``."""
    return out.with_name(f"{out.stem}.{safe_name(str(repo).replace('/', '__'))}.jsonl")


async def mine_all(
    repos: list[Path | str], out: Path, *, note: Note = lambda _: None, **kwargs: Any
) -> list[MineReport]:
    """:func:`mine` for each of ``repos`` in turn: one repository into ``out`` itself; several, each into its
    own :func:`part_path` (with its own state, so each resumes on its own) and then ``out`` holds their rows
    in the order given. Every repository is checked (:func:`resolve_repo`, :class:`History`) before the first
    is mined, so a misspelt one fails the run at once rather than hours in."""
    if len(repos) == 1:
        return [await mine(repos[0], out, note=note, **kwargs)]
    if out.suffix != ".jsonl":
        raise ConfigError(f"--out must be a .jsonl file, got {out}")
    parts = [part_path(out, repo) for repo in repos]
    if len(set(parts)) != len(parts):
        raise ConfigError(f"--repo names one repository twice: {[str(r) for r in repos]}")
    for repo in repos:
        History(resolve_repo(repo, kwargs.get("repo_cache"))[0])
    reports = []
    for repo, part in zip(repos, parts, strict=True):
        note(f"== {repo} -> {part}")
        reports.append(await mine(repo, part, note=note, **kwargs))
    atomic_write_text(out, "".join(part.read_text() for part in parts))  # the parts' rows, byte for byte
    return reports


__all__ = [
    "MINE_OWNER",
    "History",
    "MineOptions",
    "MineReport",
    "is_source_file",
    "is_test_file",
    "mine",
    "mine_all",
    "part_path",
    "resolve_repo",
    "state_path",
]
