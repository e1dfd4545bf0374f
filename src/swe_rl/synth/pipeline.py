"""Synthesis end to end: sources -> baseline -> mutations -> validation in sandboxes -> task records.

Deterministic for a seed: candidates are enumerated in a fixed order, put in a seeded order that
takes turns between functions and mutation kinds, and the tasks kept are the *first* valid ones in
that order, whatever the concurrency. Phases:

A. single mutations, until enough single-mutation tasks are valid;
B. pairs and triples of one function's mutations (multi-location tasks), each part of which breaks
   a test on its own (parts are tested once and remembered);
C. more singles, if the first two phases fell short.
"""

from __future__ import annotations

import ast
import asyncio
import hashlib
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from swe_rl.envs.cache import EnvCache
from swe_rl.errors import ConfigError
from swe_rl.harness.grade_many import Grader
from swe_rl.sandbox.base import EnvSpec, SandboxFactory
from swe_rl.sandbox.pool import SandboxPool
from swe_rl.synth.mutations import MUTATION_KINDS, Candidate, combinations, same_bytecode
from swe_rl.synth.mutators import find_mutations
from swe_rl.synth.options import KindStats, SynthOptions, SynthReport
from swe_rl.synth.problem import problem_statement
from swe_rl.synth.repo import TaskRepo
from swe_rl.synth.runner import (
    Baseline,
    CandidateRun,
    candidate_timeout,
    precompile_env,
    run_baseline,
    run_candidate,
)
from swe_rl.synth.source import SYNTH_OWNER, SourceTree
from swe_rl.tasks.model import Task

Note = Callable[[str], None]


@dataclass
class _Prepared:
    source: SourceTree
    parsed: dict[str, tuple[str, ast.Module]]
    clean: str
    env: EnvSpec
    baseline: Baseline
    timeout: float

    def text(self, path: str) -> str:
        return self.parsed[path][0]


@dataclass(frozen=True)
class _Item:
    prepared: _Prepared = field(compare=False)
    candidate: Candidate

    @property
    def order_key(self) -> tuple[str, str]:
        return (self.prepared.source.name, self.candidate.key)


class Synthesizer:
    """Runs one synthesis; :meth:`run` returns the report with the tasks (records not yet written)."""

    def __init__(
        self, repo: TaskRepo, cache: EnvCache, factory: SandboxFactory, options: SynthOptions, note: Note
    ) -> None:
        self.repo, self.cache, self.factory, self.opts, self.note = repo, cache, factory, options, note
        self.stats: dict[str, KindStats] = {}
        self.results: dict[tuple[str, str], CandidateRun] = {}
        self._runs: dict[tuple[str, str], asyncio.Future[CandidateRun]] = {}
        self.started = time.monotonic()
        self._limit = asyncio.Semaphore(options.concurrency)
        # candidates run in sandboxes reset in place between runs, each with a warm test runner
        self.sandboxes = Grader(SandboxPool(factory, idle=options.concurrency))

    async def run(self, sources: Sequence[SourceTree]) -> SynthReport:
        try:
            return await self._search(sources)
        finally:
            await self.sandboxes.close()

    async def _search(self, sources: Sequence[SourceTree]) -> SynthReport:
        bad = set(self.opts.kinds) - set(MUTATION_KINDS)
        if bad:
            raise ConfigError(f"unknown mutation kind(s) {sorted(bad)}; known: {', '.join(MUTATION_KINDS)}")
        prepared = [await self._prepare(s) for s in sources]
        rng = random.Random(self.opts.seed)
        singles = _spread(self._singles(prepared), rng)
        total_singles = len(singles)
        wanted = set(self.opts.difficulties)
        single_ok = bool(wanted & {"one-line", "multi-line"})
        multi_target = (
            (round(self.opts.n * self.opts.multi) if single_ok else self.opts.n)
            if "multi-location" in wanted
            else 0
        )
        single_target = self.opts.n - multi_target
        usable = [i for i in singles if i.candidate.difficulty in wanted] if single_ok else singles
        self.note(f"{len(usable)} single mutations on covered lines; validating (target {self.opts.n} tasks)")
        kept: list[_Item] = []
        next_index = 0
        if single_ok:
            kept, next_index = await self._first_valid(usable, single_target, "single")
        if multi_target:
            # pairs and triples of one function's mutations; each part must break a test on its own
            combos = _spread(self._combos(singles), rng)
            self.note(f"{len(combos)} multi-location combinations of single mutations")
            found, _ = await self._first_valid(combos, multi_target, "multi")
            kept += found
        if len(kept) < self.opts.n and single_ok and next_index < len(usable):
            more, _ = await self._first_valid(usable[next_index:], self.opts.n - len(kept), "single+")
            kept += more
        tasks = [self._task(item) for item in kept]
        for item in kept:
            for kind in item.candidate.kinds:
                self.stats.setdefault(kind, KindStats()).kept += 1
        return SynthReport(
            tasks=tasks,
            asked=self.opts.n,
            seed=self.opts.seed,
            candidates=total_singles,
            per_kind=dict(sorted(self.stats.items())),
            baselines={
                p.source.name: {
                    "tests": len(p.baseline.statuses),
                    "passing": len(p.baseline.passing),
                    "seconds": p.baseline.seconds,
                    "covered_lines": sum(len(v) for v in p.baseline.covered.values()),
                }
                for p in prepared
            },
            seconds=round(time.monotonic() - self.started, 2),
        )

    # -- preparation ------------------------------------------------------------------------------
    async def _prepare(self, source: SourceTree) -> _Prepared:
        parsed = source.source_files(list(self.opts.src) or None)  # SynthError on a syntax error
        clean = await asyncio.to_thread(self.repo.write_source, source)
        env = await asyncio.to_thread(self.cache.ensure, self._clean_task(source, clean))
        await asyncio.to_thread(precompile_env, env)
        self.note(f"{source.origin}: running the unmutated test suite")
        baseline = await run_baseline(
            self.factory,
            env,
            self.opts.test_cmd,
            sorted(parsed),
            timeout=self.opts.baseline_timeout,
            origin=source.origin,
            allow_failures=self.opts.allow_failing,
        )
        self.note(
            f"{source.origin}: {len(baseline.passing)} passing tests in {baseline.seconds:.1f}s, "
            f"{sum(len(v) for v in baseline.covered.values())} source lines covered"
        )
        timeout = self.opts.timeout or candidate_timeout(
            baseline.seconds, factor=self.opts.timeout_factor, floor=self.opts.timeout_floor
        )
        return _Prepared(source, parsed, clean, env, baseline, timeout)

    def _env_fields(self) -> dict[str, Any]:
        """What every task of this run shares: how its environment is built and its tests run."""
        return {
            "test_cmd": self.opts.test_cmd,
            "log_parser": "parse_log_pytest",
            "python": self.opts.python,
            "install": self.opts.install,
            "env_seed": list(self.opts.env_seed),
            "repo_source": str(self.repo.path),
        }

    def _clean_task(self, source: SourceTree, commit: str) -> Task:
        return Task(
            instance_id=f"{SYNTH_OWNER}__{source.name}-clean",
            repo=source.repo,
            base_commit=commit,
            created_at=source.created_at,
            **self._env_fields(),
        )

    def _singles(self, prepared: list[_Prepared]) -> list[_Item]:
        items: dict[tuple[str, str], _Item] = {}
        seen_texts: set[tuple[str, str, str]] = set()
        for p in prepared:
            for path, (text, tree) in p.parsed.items():
                covered = p.baseline.covered
                lines = set(covered.get(path, [])) if covered else None
                for mutation in find_mutations(path, text, tree, lines):
                    if mutation.kind not in self.opts.kinds:
                        continue
                    cand = Candidate(mutations=(mutation,))
                    digest = hashlib.sha256(cand.apply(text).encode()).hexdigest()
                    if (p.source.name, path, digest) in seen_texts:
                        continue
                    seen_texts.add((p.source.name, path, digest))
                    item = _Item(p, cand)
                    items[item.order_key] = item
        return [items[k] for k in sorted(items)]

    def _combos(self, singles: list[_Item]) -> list[_Item]:
        by_source: dict[str, list[_Item]] = {}
        for item in singles:
            by_source.setdefault(item.prepared.source.name, []).append(item)
        out: list[_Item] = []
        for items in by_source.values():
            prepared = items[0].prepared
            texts = {path: text for path, (text, _) in prepared.parsed.items()}
            for combo in combinations([i.candidate for i in items], texts):
                out.append(_Item(prepared, combo))
        return sorted(out, key=lambda i: i.order_key)

    # -- validation -------------------------------------------------------------------------------
    async def _first_valid(self, items: list[_Item], want: int, label: str) -> tuple[list[_Item], int]:
        """The first ``want`` valid items in list order, and the index just past the last one taken.

        Items are tested ``concurrency`` at a time with no barrier between them; no new one starts once
        the completed prefix of the list holds ``want`` valid items, so the answer never depends on
        which run finished first.
        """
        done: dict[int, bool] = {}
        running: set[asyncio.Task[None]] = set()
        index = 0

        async def one(i: int) -> None:
            done[i] = (await self._try(items[i], label)).outcome == "valid"

        def prefix_valid() -> int:
            count, i = 0, 0
            while i in done:
                count += done[i]
                i += 1
            return count

        try:
            while True:
                while index < len(items) and len(running) < self.opts.concurrency and prefix_valid() < want:
                    running.add(asyncio.create_task(one(index)))
                    index += 1
                if not running:
                    break
                finished, running = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                for task in finished:
                    task.result()  # an infrastructure error stops the run
        except BaseException:
            for task in running:  # their sandboxes close on cancellation
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            raise
        valid = [i for i in sorted(done) if done[i]][:want]
        reached = valid[-1] + 1 if len(valid) == want else len(items)
        return [items[i] for i in valid], reached

    async def _try(self, item: _Item, label: str) -> CandidateRun:
        """The item's run, memoised: a single mutation is tested once, whoever asks for it."""
        key = item.order_key
        if key not in self._runs:
            self._runs[key] = asyncio.ensure_future(self._run(item, label))
        return await self._runs[key]

    async def _run(self, item: _Item, label: str) -> CandidateRun:
        p, cand = item.prepared, item.candidate
        if len(cand.mutations) > 1:
            for part in cand.mutations:
                alone = await self._try(_Item(p, Candidate(mutations=(part,))), label)
                if alone.outcome != "valid":
                    return CandidateRun(outcome="skipped", reason="a part breaks no test on its own")
        original = p.text(cand.path)
        mutated = cand.apply(original)
        unchanged = await asyncio.to_thread(same_bytecode, cand.path, original, mutated)
        if unchanged:  # provably equivalent: no test can tell them apart, so none is run
            run = CandidateRun(outcome="equivalent", reason="compiles to the original's bytecode; not run")
        else:
            async with self._limit:
                run = await run_candidate(
                    self.factory,
                    p.env,
                    self.opts.test_cmd,
                    {cand.path: mutated},
                    p.baseline,
                    timeout=p.timeout,
                    sandboxes=self.sandboxes,
                )
        self.results[item.order_key] = run
        for kind in cand.kinds:
            stats = self.stats.setdefault(kind, KindStats())
            stats.tried += 1
            stats.same_bytecode += unchanged
            stats.seconds += run.seconds
            setattr(stats, run.outcome, getattr(stats, run.outcome) + 1)
        first = cand.mutations[0]
        detail = f"{len(run.fail_to_pass)} failing" if run.outcome == "valid" else run.reason
        self.note(
            f"[{label} {len(self.results)} {time.monotonic() - self.started:6.1f}s] "
            f"{p.source.name}:{first.path}:{first.line} {'+'.join(cand.kinds)}: {run.outcome} ({detail}; "
            f"{run.seconds:.2f}s)"
        )
        return run

    # -- records ----------------------------------------------------------------------------------
    def _task(self, item: _Item) -> Task:
        p, cand = item.prepared, item.candidate
        run = self.results[item.order_key]
        tree = self.repo.mutated_tree(p.clean, {cand.path: cand.apply(p.text(cand.path))})
        base = self.repo.commit(tree, f"{p.source.name} snapshot", p.source.timestamp)
        instance_id = f"{SYNTH_OWNER}__{p.source.name}-{base[:12]}"
        self.repo.add_task(instance_id, base)
        return Task(
            instance_id=instance_id,
            repo=p.source.repo,
            base_commit=base,
            patch=self.repo.diff(base, p.clean),
            test_patch="",
            problem_statement=problem_statement(instance_id, run.fail_to_pass, run.log),
            created_at=p.source.created_at,
            version=p.source.version,
            environment_setup_commit=base,
            FAIL_TO_PASS=run.fail_to_pass,
            PASS_TO_PASS=run.pass_to_pass,
            **self._env_fields(),
            synth={
                "source": p.source.origin,
                "file": cand.path,
                "function": cand.function_key,
                "kinds": cand.kinds,
                "difficulty": cand.difficulty,
                "mutations": [
                    m.model_dump(include={"kind", "path", "function", "line", "end_line", "description"})
                    for m in cand.mutations
                ],
            },
        )


def _spread(items: list[_Item], rng: random.Random) -> list[_Item]:
    """A seeded order that takes turns between functions, and within a function between kinds.

    A plain shuffle hands most tasks to the one function with the most mutation sites (in a real
    library, half of the candidates sat in one function); taking turns keeps functions and kinds
    varied, which both training and splits by function need.
    """
    groups: dict[str, dict[str, list[_Item]]] = {}
    for item in sorted(items, key=lambda i: i.order_key):
        function = f"{item.prepared.source.name}:{item.candidate.function_key}"
        groups.setdefault(function, {}).setdefault("+".join(item.candidate.kinds), []).append(item)
    per_function: list[list[_Item]] = []
    for function in sorted(groups):
        by_kind = [groups[function][kind] for kind in sorted(groups[function])]
        for bucket in by_kind:
            rng.shuffle(bucket)
        rng.shuffle(by_kind)
        per_function.append(_round_robin(by_kind))
    rng.shuffle(per_function)
    return _round_robin(per_function)


def _round_robin(lists: list[list[_Item]]) -> list[_Item]:
    out: list[_Item] = []
    for turn in range(max((len(x) for x in lists), default=0)):
        out.extend(x[turn] for x in lists if turn < len(x))
    return out


__all__ = ["KindStats", "SynthOptions", "SynthReport", "Synthesizer"]
