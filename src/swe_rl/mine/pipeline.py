"""Mining end to end: history -> candidates -> exclusion -> inferred env -> validation -> task records.

Candidates are decided ``concurrency`` at a time; each decision is saved as it is made, and the task
file is written from the decisions in history order, so the rows never depend on which run finished
first or on what an earlier, interrupted run had decided already.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from swe_rl.envs.cache import EnvCache
from swe_rl.errors import ConfigError, EnvBuildError, MineError
from swe_rl.harness.grade_many import Grader
from swe_rl.mine.envinfer import DEPENDENCY_FILES, PytestSource, infer_env
from swe_rl.mine.history import KEEP_RULE, Candidate, Commit, History, drop_reason
from swe_rl.mine.problem import problem_statement
from swe_rl.mine.state import (
    Decision,
    Exclusion,
    MineState,
    fingerprint,
    load_exclusion,
    load_state,
    save_state,
    state_path,
    write_tasks,
)
from swe_rl.mine.validate import validate
from swe_rl.sandbox.base import SandboxFactory
from swe_rl.sandbox.pool import SandboxPool
from swe_rl.tasks.model import Task

MINE_OWNER = "swe-rl-mine"
VALIDATION_RULE = "FAIL_TO_PASS non-empty; two before/after rounds agree"
# bumped when a rule changes what a candidate's decision is: a state file of other rules is not resumed
RULES = 6
Note = Callable[[str], None]


def safe_name(text: str) -> str:
    """``text`` as a name for files and instance ids: runs of other characters than letters, digits, ``_``,
    ``.`` and ``-`` become one ``-``."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.") or "repo"


def final(decision: Decision | None) -> bool:
    """Whether a saved decision stands on a rerun. A timeout does not: it may be the machine's load (other
    jobs on its cores), not the candidate, so a rerun validates that candidate again."""
    return decision is not None and not decision.reason.startswith("timeout")


def under(path: str, prefixes: tuple[str, ...]) -> bool:
    """Whether ``path`` is one of ``prefixes`` or inside one of them (a directory), component-wise."""
    return any(path == p or path.startswith(p.rstrip("/") + "/") for p in prefixes)


def candidates_of(
    history: History, commits: list[Commit], paths: tuple[str, ...] = ()
) -> tuple[list[Commit], Counter[tuple[str, str]]]:
    """The candidates among ``commits`` (the first-parent line, oldest first), in history order, and the
    (stage, reason) counts of what was not one. Each merge of a long-lived branch is replaced by that branch's
    own line (:meth:`History.branch_line`): its pull requests are candidates one by one, as SWE-bench's are.
    With ``paths``, a change none of whose source files is (under) one of them is not a candidate."""
    dropped: Counter[tuple[str, str]] = Counter()
    unfolded: list[Commit] = []
    for commit in commits:
        branch = history.branch_line(commit)
        if branch is None:
            unfolded.append(commit)
            continue
        line, merges_left_out = branch
        dropped["history", "branch merge (its own commits and pull requests are candidates)"] += 1
        if merges_left_out:  # the main line merged into the branch, or a branch merge unfolded in turn
            dropped["history", "merge inside an unfolded branch"] += merges_left_out
        unfolded += line
    candidates: list[Commit] = []
    for commit in unfolded:
        if not commit.parents:
            dropped["history", "root commit (no base)"] += 1
            continue
        sources, tests, _ = history.split(commit)
        if reason := drop_reason(sources, tests):
            dropped["history", reason] += 1
            continue
        if paths and not any(under(source, paths) for source in sources):
            dropped["history", "no source file under --path"] += 1
            continue
        candidates.append(commit)
    return candidates, dropped


class MineOptions(BaseModel):
    """Which history to mine and how."""

    model_config = ConfigDict(frozen=True)

    since: str | None = Field(default=None, description="First commit date to consider (git's date formats).")
    until: str | None = Field(default=None, description="Last commit date to consider.")
    max_candidates: int | None = Field(
        default=None, ge=1, description="Validate at most this many candidates."
    )
    paths: tuple[str, ...] = Field(
        default=(), description="Only changes to a source file at or under one of these paths."
    )
    concurrency: int = Field(default=2, ge=1, description="Candidates validated at once.")
    pytest: PytestSource = Field(
        default="dated", description="pytest as of the commit (dated) or the host's."
    )
    timeout: float = Field(default=300.0, gt=0, description="Seconds per test run.")
    exclude: tuple[str, ...] = Field(default=(), description="Task files whose fixes are never mined.")


class MineReport(BaseModel):
    """What a run found: the tasks, and how many candidates each stage dropped, by reason."""

    tasks: list[Task]
    commits: int = Field(description="Commits of the first-parent line in the range.")
    candidates: int = Field(description="Changes touching source and tests (after --max-candidates).")
    dropped: dict[str, dict[str, int]] = Field(description="Stage -> reason -> count.")
    resumed: int = Field(default=0, description="Candidates decided by an earlier run.")
    seconds: float
    decide_seconds: float = Field(
        default=0.0, description="Time spent deciding the candidates, summed over them and over every run."
    )


class Miner:
    """One mining run over one repository (:meth:`run`)."""

    def __init__(
        self,
        history: History,
        cache: EnvCache,
        factory: SandboxFactory,
        options: MineOptions,
        note: Note,
        *,
        name: str | None = None,
    ) -> None:
        self.history, self.cache, self.factory, self.opts, self.note = history, cache, factory, options, note
        folder = name or history.path.name.removesuffix(".git")  # owner__name for a mirror named by the user
        self.name = safe_name(folder)
        self.started = time.monotonic()
        self.grader = Grader(SandboxPool(factory, idle=options.concurrency))
        self.exclusion = Exclusion()

    async def run(self, out: Path) -> MineReport:
        """Mine into ``out`` (JSONL) with its state file beside it."""
        try:
            return await self._run(out)
        finally:
            await self.grader.close()

    async def _run(self, out: Path) -> MineReport:
        if not self.history.has_tests():
            raise MineError(f"{self.history.path}: no test files at HEAD (tests/, test_*.py, *_test.py)")
        commits = self.history.commits(self.opts.since, self.opts.until)
        self.exclusion = load_exclusion(list(self.opts.exclude))
        candidates, dropped = candidates_of(self.history, commits, self.opts.paths)
        if self.opts.max_candidates is not None:
            candidates = candidates[: self.opts.max_candidates]
        path = state_path(out)
        options = self.opts.model_dump(exclude={"since", "until", "max_candidates", "paths", "concurrency"})
        exclusion = (sorted(self.exclusion.commits), sorted(self.exclusion.patches))
        state, said = load_state(path, fingerprint(RULES, self.history.path, options, exclusion))
        if said:
            self.note(said)
        resumed = sum(final(state.decided.get(c.commit)) for c in candidates)
        self.note(f"{self.history.path}: {len(commits)} commits, {len(candidates)} candidates to validate")
        await self._decide_all(candidates, state, path)
        decisions = [state.decided[c.commit] for c in candidates]
        for d in decisions:
            if not d.kept:
                dropped[d.stage, d.reason] += 1
        records = [d.record for d in decisions if d.kept and d.record is not None]
        write_tasks(out, records)
        by_stage: dict[str, dict[str, int]] = {}
        for (stage, reason), count in sorted(dropped.items()):
            by_stage.setdefault(stage, {})[reason] = count
        return MineReport(
            tasks=[Task.model_validate(r) for r in records],
            commits=len(commits),
            candidates=len(candidates),
            dropped=by_stage,
            resumed=resumed,
            seconds=round(time.monotonic() - self.started, 2),
            decide_seconds=round(sum(d.seconds for d in decisions), 1),
        )

    async def _decide_all(self, candidates: list[Commit], state: MineState, path: Path) -> None:
        limit = asyncio.Semaphore(self.opts.concurrency)
        total = len(candidates)

        async def one(index: int, commit: Commit) -> None:
            if final(state.decided.get(commit.commit)):
                return
            async with limit:
                started = time.monotonic()
                decision = await self._decide(commit)
            decision.seconds = round(time.monotonic() - started, 1)
            state.decided[commit.commit] = decision
            save_state(path, state)
            outcome = (
                f"kept ({len(decision.record['FAIL_TO_PASS'])} FAIL_TO_PASS)"
                if decision.kept and decision.record
                else f"dropped at {decision.stage}: {decision.reason}"
            )
            elapsed = time.monotonic() - self.started
            self.note(f"[{index + 1}/{total} {elapsed:6.1f}s] {commit.commit[:12]}: {outcome}")

        await asyncio.gather(*(one(i, c) for i, c in enumerate(candidates)))

    async def _decide(self, commit: Commit) -> Decision:
        cand = await asyncio.to_thread(self.history.candidate, commit)
        if why := self.exclusion.why(cand.base, cand.patch):
            return Decision(kept=False, stage="exclude", reason=why)
        files = await asyncio.to_thread(self.history.files, cand.base)
        anchor = await asyncio.to_thread(self.history.env_anchor, cand.base, DEPENDENCY_FILES)
        inference = infer_env(
            lambda p: self.history.show(cand.base, p), files, as_of=anchor.created_at, pytest=self.opts.pytest
        )
        if inference.reason:
            return Decision(kept=False, stage="env", reason="no env inferred", detail=inference.reason)
        about = {"env": inference.why, "env_dated_by": anchor.model_dump()}
        task = self._task(cand, inference.fields, about, env_commit=anchor.commit)
        try:
            env = await asyncio.to_thread(self.cache.ensure, task)
        except (EnvBuildError, ConfigError) as exc:
            return Decision(kept=False, stage="env", reason="env build failed", detail=str(exc)[-2000:])
        checked = await validate(task, env, self.factory, self.grader, timeout=self.opts.timeout)
        if checked.reason:
            return Decision(kept=False, stage="validate", reason=checked.reason, detail=checked.detail)
        subjects = await asyncio.to_thread(self.history.subjects, cand.merged) if cand.merge else []
        statement = problem_statement(
            cand.message, subjects, checked.fail_to_pass, checked.before_log, cand.patch, cand.source_files
        )
        final = task.model_copy(
            update={
                "FAIL_TO_PASS": checked.fail_to_pass,
                "PASS_TO_PASS": checked.pass_to_pass,
                "problem_statement": statement,
            }
        )
        return Decision(kept=True, record=final.to_record())

    def _task(
        self, cand: Candidate, env_fields: dict[str, Any], about: dict[str, Any], *, env_commit: str
    ) -> Task:
        """The candidate as a task record, its test lists still empty; its env resolved as of ``env_commit``
        (the environment setup commit the env cache dates a row's install by)."""
        return Task(
            instance_id=f"{MINE_OWNER}__{self.name}-{cand.commit[:12]}",
            repo=f"{MINE_OWNER}/{self.name}",
            base_commit=cand.base,
            environment_setup_commit=env_commit,
            patch=cand.patch,
            test_patch=cand.test_patch,
            created_at=cand.created_at,
            repo_source=str(self.history.path),
            **env_fields,
            mine={
                "commit": cand.commit,
                "base": cand.base,
                "merge": cand.merge,
                "merged_commits": cand.merged,
                "via": cand.via,
                "rule": f"{KEEP_RULE}; {VALIDATION_RULE}",
                "source_files": cand.source_files,
                "test_files": cand.test_files,
                "left_out": cand.left_out,
                **about,
            },
        )
