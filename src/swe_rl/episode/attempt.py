"""An eval attempt: one episode with a model named as the command line names it, as an eval result.

The attempt's own data (:class:`AttemptSpec`) is plain, so an attempt runs unchanged here or on a Ray node;
the run that asked for it writes its artifacts (runs/evaluation.py).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from swe_rl.agent.config import AgentConfig
from swe_rl.agent.context import ContextManager
from swe_rl.agent.trajectory import Trajectory
from swe_rl.envs.cache import EnvCache
from swe_rl.episode.record import EpisodeRecord
from swe_rl.episode.run import EpisodeSettings, run_episode
from swe_rl.harness.verdict import GradingMode
from swe_rl.llm.base import LLM, SamplingParams
from swe_rl.llm.cost import PricedLLM, PriceTable
from swe_rl.sandbox.base import Limits, SandboxFactory
from swe_rl.tasks.model import Task


class AttemptSettings(BaseModel):
    """How one eval attempt runs: where its artifacts go, its context window, its sandbox and its grading."""

    output_dir: Path
    max_context: int | None = Field(default=None, description="Context window; enables the context manager.")
    grade_timeout: float = 1800.0
    grading: GradingMode = Field(
        default="official", description="official (SWE-bench's verdict, steering flagged) or strict."
    )
    limits: Limits = Field(default_factory=Limits)
    prices: PriceTable | None = Field(default=None, description="Price every model call (llm.cost).")


class AttemptOutcome(BaseModel):
    """What an attempt produced; the caller writes it where the run lives."""

    result: EpisodeRecord
    trajectory: Trajectory | None = None
    patch: str = ""


class ModelSpec(BaseModel):
    """A model as the command line names it (``--llm/--model/--api-base``), built where the attempt runs.

    API keys are not part of it: a node reads its own ``OPENAI_API_KEY``.
    """

    llm: str | None = None
    model: str | None = None
    api_base: str | None = None


class AttemptSpec(BaseModel):
    """One eval attempt as plain data, so that it can run on another node."""

    task: dict[str, Any]
    attempt: int = 0
    model: ModelSpec
    agent: AgentConfig
    params: SamplingParams
    settings: AttemptSettings


def attempt_folder(output_dir: Path, instance_id: str, attempt: int) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
    return (
        output_dir / f"{instance_id}__{stamp}"
        if attempt == 0
        else output_dir / f"{instance_id}__a{attempt}__{stamp}"
    )


async def attempt_outcome(
    task: Task,
    attempt: int,
    llm: LLM,
    cache: EnvCache,
    factory: SandboxFactory,
    agent: AgentConfig,
    params: SamplingParams,
    settings: AttemptSettings,
) -> AttemptOutcome:
    """One attempt, graded; nothing written (the artifacts' folder is named in ``result.artifacts``)."""
    folder = attempt_folder(settings.output_dir, task.instance_id, attempt)
    context = ContextManager(settings.max_context, params.max_tokens) if settings.max_context else None
    episode = await run_episode(
        task,
        llm,
        cache=cache,
        factory=factory,
        agent=agent,
        params=params,
        settings=EpisodeSettings(
            limits=settings.limits, grade_timeout=settings.grade_timeout, grading=settings.grading
        ),
        context=context,
    )
    result = EpisodeRecord.of(episode, attempt=attempt, artifacts=str(folder))
    return AttemptOutcome(result=result, trajectory=episode.trajectory, patch=episode.patch or "")


def priced(llm: LLM, prices: PriceTable | None) -> LLM:
    """The model, pricing its calls where the table knows its price."""
    price = prices.lookup(llm.name) if prices is not None else None
    return PricedLLM(llm, price) if price is not None else llm


async def run_attempt_spec(spec: AttemptSpec, cache: EnvCache, factory: SandboxFactory) -> AttemptOutcome:
    """Run an :class:`AttemptSpec` here (on a Ray node): build its model, run, grade; write nothing."""
    from swe_rl.llm.select import choose_model
    from swe_rl.tasks.model import parse_task

    task = parse_task(spec.task, where="task")
    choice = choose_model(spec.model.llm, spec.model.model, spec.model.api_base)
    try:
        llm = priced(choice.factory(task), spec.settings.prices)
        return await attempt_outcome(
            task, spec.attempt, llm, cache, factory, spec.agent, spec.params, spec.settings
        )
    finally:
        await choice.close()


def failed_attempt(spec: AttemptSpec, error: str) -> AttemptOutcome:
    """The outcome of an attempt whose node was lost: an infra error, retried by ``--resume``."""
    instance_id = str(spec.task.get("instance_id", ""))
    folder = attempt_folder(spec.settings.output_dir, instance_id, spec.attempt)
    result = EpisodeRecord(
        instance_id=instance_id,
        attempt=spec.attempt,
        exit_status="infra_error",
        error=error,
        artifacts=str(folder),
    )
    return AttemptOutcome(result=result)
