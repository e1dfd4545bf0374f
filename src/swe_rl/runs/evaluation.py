"""``swe-rl eval``: run a model on tasks, grade every patch, keep everything; resumable.

Each attempt: build (or find) the env, start a sandbox, run the agent, take the submitted patch (or the
sandbox's diff when the agent never submitted), grade it in a pristine sandbox, write the artifacts,
append one line to results.jsonl. An infrastructure failure ends only that attempt, as ``infra_error``;
``--resume`` retries those and skips the rest. What the agent's commands did to its own sandbox (a
deleted ``.git``, a killed container, an over-cap patch) is its outcome: ``agent_error``, an unresolved
attempt, counted in the resolve rate (docs/TRAINING.md, "Outcome attribution").
"""

from __future__ import annotations

import asyncio
import platform
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import Field

from swe_rl.agent.config import AgentConfig
from swe_rl.agent.trajectory import Trajectory, mini_swe_agent_record
from swe_rl.envs.cache import EnvCache
from swe_rl.episode.attempt import AttemptSettings
from swe_rl.episode.record import EpisodeRecord
from swe_rl.episode.request import EpisodeRequest, NamedModel
from swe_rl.episode.summary import agent_metrics
from swe_rl.executors.base import Executor
from swe_rl.fileio import atomic_write_json, atomic_write_text
from swe_rl.llm.base import LLM, SamplingParams
from swe_rl.rundir import RunDir
from swe_rl.runs.metrics import MetricsSink
from swe_rl.runs.progress import RunProgress
from swe_rl.sandbox.base import SandboxFactory
from swe_rl.tasks.model import Task

LLMFactory = Callable[[Task], LLM]


class EvalSettings(AttemptSettings):
    """A whole eval run: its attempts' settings and how many, how fast, and what it may spend."""

    max_concurrent: int = Field(default=2, ge=1)
    n_samples: int = Field(default=1, ge=1)
    resume: bool = False
    args: dict[str, Any] = Field(
        default_factory=dict, description="What the user asked for (redacted on disk)."
    )
    metrics_backends: list[str] = Field(default_factory=list, description="Also log to: tensorboard, wandb.")
    run_cost_limit: float | None = Field(
        default=None,
        gt=0,
        description="USD for the whole run (results.jsonl so far included): no attempt starts past it; "
        "attempts under way finish, each bounded by the agent's cost_limit.",
    )


class Attempts:
    """Where a run's attempts go: an executor, and the request each attempt becomes there.

    ``agent_name``: send the agent's config by this shipped name, with its limits, instead of inline (a
    rollout server runs shipped configs only); ``agent`` is then what that name loads to here.
    ``make_llm``: a model this process holds, the LLM of each attempt's task (``model`` names it in the
    records), given beside each request (an executor that runs attempts here: local or pool); None: the
    executor builds the model ``model`` names.
    """

    def __init__(
        self,
        executor: Executor,
        model: NamedModel,
        agent: AgentConfig,
        agent_name: str | None = None,
        *,
        make_llm: LLMFactory | None = None,
    ) -> None:
        self.executor, self.model, self.agent, self.agent_name = executor, model, agent, agent_name
        self.make_llm = make_llm

    @classmethod
    def here(
        cls,
        make_llm: LLMFactory,
        cache: EnvCache,
        factory: SandboxFactory,
        agent: AgentConfig,
        *,
        capacity: int = 1024,
        name: str = "here",
        reuse_grading: bool = False,
    ) -> Attempts:
        """Attempts in this process, with a model already built (``make_llm``: the model for each task;
        ``name``: the model's name). ``capacity`` bounds the executor; the run's ``max_concurrent`` bounds
        the attempts it starts. ``reuse_grading``: see :class:`~swe_rl.executors.local.LocalExecutor`
        (then :meth:`close` the attempts)."""
        from swe_rl.executors.local import LocalExecutor

        executor = LocalExecutor(factory, cache, capacity=capacity, reuse_grading=reuse_grading)
        return cls(executor, NamedModel(llm=name), agent, make_llm=make_llm)

    def request(
        self, task: Task, attempt: int, params: SamplingParams, settings: AttemptSettings
    ) -> EpisodeRequest:
        """The attempt's request. Where it runs in this process, it names the task (the object itself goes
        beside it, :meth:`run`); elsewhere it carries the full record, and of the prices the model's own, not
        the whole map (LiteLLM's has thousands of entries)."""
        here = self.executor.in_process
        spec = settings.episode
        if spec.prices is not None and not here:
            spec = spec.model_copy(update={"prices": spec.prices.only(self.model.model, self.model.llm)})
        agent: dict[str, Any] = {"agent": self.agent}
        if self.agent_name is not None:
            agent = {
                "agent_config": self.agent_name,
                "step_limit": self.agent.step_limit,
                "wall_time_s": self.agent.wall_time_s,
                "cost_limit": self.agent.cost_limit,
            }
        return EpisodeRequest(
            task=task.instance_id if here else task.to_record(),
            model=self.model,
            sampling=params,
            train=False,
            attempt=attempt,
            **dict(spec),
            **agent,
        )

    async def run(
        self, task: Task, attempt: int, params: SamplingParams, settings: AttemptSettings
    ) -> EpisodeRecord:
        """One attempt, its artifacts written under ``settings.output_dir``; its record."""
        folder = RunDir(settings.output_dir).attempt_dir(task.instance_id, attempt)
        request = self.request(task, attempt, params, settings)
        here = self.executor.in_process
        result = await self.executor.run(request, task=task if here else None, model=self.make_llm)
        record = (result.record or _lost(task, result.error)).model_copy(
            update={"attempt": attempt, "artifacts": str(folder)}
        )
        _write_artifacts(folder, task, result.trajectory, result.patch or "", record)
        return record

    async def close(self) -> None:
        await self.executor.close()


def _lost(task: Task, error: str | None) -> EpisodeRecord:
    """The record of an attempt the executor lost (a dead node): an infra error, retried by ``--resume``."""
    return EpisodeRecord(instance_id=task.instance_id, exit_status="infra_error", error=error or "lost")


async def run_eval(
    tasks: Sequence[Task],
    attempts: Attempts,
    params: SamplingParams,
    settings: EvalSettings,
    quiet: bool = False,
) -> dict[str, Any]:
    """Every attempt of every task, on the executor ``attempts`` holds; artifacts written here."""
    run = RunDir(settings.output_dir)
    _check_resumable(run, settings)
    done = {k: r for k, r in run.latest().items() if not r.infra_error} if settings.resume else {}
    todo = [(t, a) for t in tasks for a in range(settings.n_samples) if (t.instance_id, a) not in done]
    progress = RunProgress(len(todo), "eval", quiet=quiet)
    limit = asyncio.Semaphore(settings.max_concurrent)
    budget = RunBudget(settings.run_cost_limit, sum(r.cost_usd for r in run.load_results()))

    async def one(task: Task, attempt: int) -> None:
        async with limit:
            if budget.exhausted:
                budget.skipped += 1  # not started: missing from results.jsonl, so --resume runs it
                return
            result = await attempts.run(task, attempt, params, settings)
            budget.spent += result.cost_usd
            run.append(result)
            progress.advance(
                task.instance_id, _outcome(result), resolved=result.resolved, error=result.infra_error
            )

    try:
        await asyncio.gather(*(one(t, a) for t, a in todo))
    finally:
        summary = _finish(run, tasks, settings, budget)
        progress.close()
    return summary


def _check_resumable(run: RunDir, settings: EvalSettings) -> None:
    """ConfigError, before anything is written, unless ``run`` may take this run: an empty directory, or with
    ``resume`` one of the same model (another one's --resume rewrote summary.json's and preds.json's model
    while the trajectories kept the first: one run directory, two models)."""
    from swe_rl.errors import ConfigError

    if not settings.resume:
        if run.results_path.exists():
            raise ConfigError(
                f"{settings.output_dir} already holds a run; pass --resume to continue it "
                "or choose another --output-dir"
            )
        return
    before, now = run.read_summary().get("args", {}).get("model"), settings.args.get("model")
    if before is not None and now is not None and before != now:
        raise ConfigError(
            f"{settings.output_dir} is a run of model {before!r}, not {now!r}: --resume it with the same "
            "model, or choose another --output-dir"
        )


class RunBudget:
    """The run's spend against its cost limit (None: no limit)."""

    def __init__(self, limit: float | None, spent: float = 0.0) -> None:
        self.limit, self.spent = limit, spent
        self.skipped = 0

    @property
    def exhausted(self) -> bool:
        return self.limit is not None and self.spent >= self.limit

    def stopped(self) -> str | None:
        """Why attempts were left unstarted, if they were."""
        if not self.skipped:
            return None
        return (
            f"run cost limit ${self.limit:g} reached (spent ${self.spent:.4f}); "
            f"{self.skipped} attempts not started (--resume with a higher limit runs them)"
        )


def _finish(run: RunDir, tasks: Sequence[Task], settings: EvalSettings, budget: RunBudget) -> dict[str, Any]:
    results = list(run.latest().values())
    ids = {t.instance_id for t in tasks}
    results = [r for r in results if r.instance_id in ids]
    preds = {}
    for r in sorted(results, key=lambda r: (r.instance_id, r.attempt)):
        if r.attempt == 0 and r.artifacts:
            patch = Path(r.artifacts) / RunDir.PATCH
            preds[r.instance_id] = {
                "instance_id": r.instance_id,
                "model_name_or_path": settings.args.get("model", "swe-rl"),
                "model_patch": patch.read_text() if patch.is_file() else "",
            }
    run.write_preds(preds)
    MetricsSink(run.metrics_path, settings.metrics_backends).log(agent_metrics(results), step=0)
    cost = {"run_cost_limit": budget.limit, "run_cost_usd": budget.spent, "stopped": budget.stopped()}
    return run.write_summary(results, len(tasks), settings.args, provenance(), settings.n_samples, cost)


def _outcome(result: EpisodeRecord) -> str:
    if result.error:
        return f"ERROR {result.error[:120]}"
    return (
        f"{'resolved' if result.resolved else 'not resolved'} ({result.exit_status}, {result.n_steps} steps)"
    )


def _write_artifacts(
    folder: Path, task: Task, traj: Trajectory | None, patch: str, result: EpisodeRecord
) -> None:
    if traj is not None:
        atomic_write_text(folder / RunDir.TRAJECTORY, traj.model_dump_json(indent=1))
        # the same episode in mini-swe-agent's format, for its inspector
        record = mini_swe_agent_record(traj, patch, {"model": traj.model, "swe_rl": RunDir.TRAJECTORY})
        atomic_write_json(folder / RunDir.mini_trajectory(task.instance_id), record)
    atomic_write_text(folder / RunDir.PATCH, patch)
    atomic_write_json(
        folder / RunDir.META,
        {
            "instance_id": task.instance_id,
            "repo": task.repo,
            "base_commit": task.base_commit,
            "result": result.model_dump(),
            "provenance": provenance(),
        },
    )


def provenance() -> dict[str, Any]:
    from importlib import metadata

    import swe_rl

    versions = {"swe-rl": swe_rl.__version__, "python": platform.python_version()}
    for package in ("swebench", "pydantic", "transformers", "torch", "trl"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return {"versions": versions, "host": platform.node(), "time": datetime.now(UTC).isoformat()}
