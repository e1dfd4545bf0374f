"""Task synthesis by procedural bug injection (SWE-smith's procedural strategies, offline).

Take a repository whose test suite passes, inject a bug into a function the suite covers, run the
suite in a sandbox, and keep the change when some tests now fail: the task's base commit is the
buggy tree (an orphan commit), its gold patch the reverse change, its FAIL_TO_PASS the tests that
broke, its issue text written from their failure output. See :func:`synthesize`.

Modules: ``source`` (reading a repository), ``mutators`` / ``mutations`` (where and how bugs are
injected), ``runner`` (baseline and candidate runs in sandboxes), ``problem`` (issue text),
``repo`` (the bare repository of base commits), ``options`` (what a run is asked for and reports),
``pipeline`` (the deterministic search),
``splits`` (splits by function, stats), ``heldback`` (one held-back split of several runs, by
repository, function and bug string), ``output`` (writing the results atomically).
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from swe_rl.envs.cache import EnvCache
from swe_rl.errors import ConfigError, SynthError
from swe_rl.sandbox.base import SandboxFactory
from swe_rl.synth.mutations import DIFFICULTIES, MUTATION_KINDS
from swe_rl.synth.options import KindStats, SynthOptions, SynthReport
from swe_rl.synth.output import publish, remove_stale_staging, repo_path_for, split_path_for, staging_dir
from swe_rl.synth.pipeline import Note, Synthesizer
from swe_rl.synth.repo import TaskRepo
from swe_rl.synth.source import SourceTree, load_sources
from swe_rl.synth.splits import assign_splits, parse_split, stats


async def synthesize(
    repos: Sequence[str],
    out: Path,
    *,
    options: SynthOptions,
    cache: EnvCache,
    factory: SandboxFactory,
    split: dict[str, float] | None = None,
    note: Note = lambda _: None,
) -> SynthReport:
    """Synthesize tasks from ``repos`` (paths or ``builtin[:NAME]``) and write them to ``out`` (JSONL).

    Raises :class:`SynthError` for a repository that cannot be used (failing or empty suite, a file
    that does not parse) and when no valid task was found; nothing is written then.
    """
    if out.suffix != ".jsonl":
        raise ConfigError(f"--out must be a .jsonl file, got {out}")
    sources = [s for spec in repos for s in load_sources(spec)]
    names = [s.name for s in sources]
    if len(set(names)) != len(names):
        raise ConfigError(f"two repositories share a name ({', '.join(names)}); rename one folder")
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(out)
    staging = staging_dir(out)
    shutil.rmtree(staging, ignore_errors=True)
    try:
        repo = TaskRepo(staging / "repo.git")
        report = await Synthesizer(repo, cache, factory, options, note).run(sources)
        if not report.tasks:
            raise SynthError(
                f"no valid task from {', '.join(s.origin for s in sources)}: no mutation made a test fail"
            )
        repo.finish()
        written = publish(report.tasks, out, repo.path, shares=split, seed=options.seed)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return report.model_copy(update={"tasks": written})


__all__ = [
    "DIFFICULTIES",
    "MUTATION_KINDS",
    "KindStats",
    "SourceTree",
    "SynthOptions",
    "SynthReport",
    "assign_splits",
    "load_sources",
    "parse_split",
    "repo_path_for",
    "split_path_for",
    "stats",
    "synthesize",
]
