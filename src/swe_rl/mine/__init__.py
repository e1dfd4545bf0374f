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

from pathlib import Path

from swe_rl.envs.cache import EnvCache
from swe_rl.errors import ConfigError
from swe_rl.mine.history import History, is_source_file, is_test_file
from swe_rl.mine.pipeline import MINE_OWNER, MineOptions, Miner, MineReport, Note
from swe_rl.mine.state import state_path
from swe_rl.sandbox.base import SandboxFactory


async def mine(
    repo: Path,
    out: Path,
    *,
    options: MineOptions,
    cache: EnvCache,
    factory: SandboxFactory,
    note: Note = lambda _: None,
) -> MineReport:
    """Mine validated tasks from the git repository ``repo`` into ``out`` (JSONL), resumably.

    Raises :class:`~swe_rl.errors.MineError` for a path that is not a repository, an empty range or a
    repository without tests; candidates that fail a stage are dropped and counted, never raised.
    """
    if out.suffix != ".jsonl":
        raise ConfigError(f"--out must be a .jsonl file, got {out}")
    history = History(repo)
    out.parent.mkdir(parents=True, exist_ok=True)
    return await Miner(history, cache, factory, options, note).run(out)


__all__ = [
    "MINE_OWNER",
    "History",
    "MineOptions",
    "MineReport",
    "is_source_file",
    "is_test_file",
    "mine",
    "state_path",
]
