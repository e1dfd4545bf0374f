"""One training rollout: agent in a sandbox against a token-level policy, graded, as training samples.

Shared by every executor (executors/: in-process, rollout service, Ray) and the trainer adapters
(integrations/, whose settings come from the environment: integrations/settings.py).
"""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import BaseModel, Field

from swe_rl.agent.config import AgentConfig
from swe_rl.agent.context import ContextManager
from swe_rl.agent.trajectory import Trajectory
from swe_rl.envs.cache import EnvCache
from swe_rl.episode.record import EpisodeRecord
from swe_rl.episode.run import Episode, EpisodeSettings, run_episode
from swe_rl.harness.grader import Grader
from swe_rl.llm.base import LLM, SamplingParams
from swe_rl.rl.rewards import OutcomeReward, combined_reward, prm_step_scores
from swe_rl.rl.samples import (
    SampleStatus,
    TrainingSample,
    fill_ids_fixed_base,
    status_of,
    step_samples,
    trajectory_samples,
)
from swe_rl.sandbox.base import SandboxFactory
from swe_rl.tasks.model import Task


class RolloutResult(BaseModel):
    """A graded rollout: what trainers need (samples with ids) and what people read (trajectory, metrics)."""

    status: SampleStatus
    exit_status: str
    reward: float | None = None
    resolved: bool | None = None
    error: str | None = None
    samples: list[TrainingSample] = Field(default_factory=list)
    trajectory: Trajectory | None = None
    patch: str | None = Field(default=None, description="What was graded (None: the agent left nothing).")
    metrics: dict[str, float] = Field(default_factory=dict)
    record: EpisodeRecord | None = Field(
        default=None,
        description="The episode's record, as a training run keeps it (its step set by the run).",
    )


async def run_rollout(
    task: Task,
    llm: LLM,
    factory: SandboxFactory,
    cache: EnvCache,
    config: AgentConfig,
    params: SamplingParams,
    *,
    dynamic_history: bool = True,
    context: ContextManager | None = None,
    outcome: OutcomeReward | None = None,
    tokenizer: Any = None,
    prm: tuple[LLM, Any] | None = None,
    settings: EpisodeSettings | None = None,
    grader: Grader | None = None,
) -> RolloutResult:
    """Agent in a fresh sandbox, patch graded in another, samples built from ids. Never raises InfraError;
    attribution as in episode/run.py (an agent's own damage is its outcome, a failure outside it unscored).
    ``tokenizer``: for a text-only policy (an OpenAI endpoint that returns no ids), steps without ids are
    encoded with the fixed-base method; with ids from the server, it is not used. ``prm``: a judge and
    its settings (``episode.request.ProcessReward``): the reward becomes outcome + coef * mean step score.
    ``settings``: the sandbox limits and grading (default: strict grading, the backend's limits);
    ``grader``: grades in reused sandboxes with a warm test runner (harness/grader.py)."""
    trajectory_id = uuid.uuid4().hex
    settings = settings or EpisodeSettings(grading="strict")
    episode = await run_episode(
        task, llm, cache=cache, factory=factory, agent=config, params=params, settings=settings, context=context,
        grader=grader,
    )  # fmt: skip
    traj = episode.trajectory
    if episode.error is not None or episode.verdict is None or traj is None:
        return _unscored(episode)
    verdict = episode.verdict
    reward = (outcome or OutcomeReward())(verdict.resolved)
    extra: dict[str, float] = {}
    if prm is not None and traj.steps:
        reward, extra = await _with_process_reward(reward, traj, task, *prm)
    build = step_samples if dynamic_history else trajectory_samples
    if tokenizer is not None:
        fill_ids_fixed_base(traj, tokenizer)
    samples = build(traj, trajectory_id, reward=reward) if traj.steps else []
    for sample in samples:
        sample.resolved = verdict.resolved
    status = status_of(traj)
    return RolloutResult(
        status=status,
        exit_status=episode.exit_status,
        reward=reward,
        resolved=verdict.resolved,
        samples=samples,
        trajectory=traj,
        patch=episode.patch,
        metrics={**_metrics(episode), **extra},
        record=EpisodeRecord.of(episode).model_copy(update={"status": status, "reward": reward}),
    )


def _unscored(episode: Episode) -> RolloutResult:
    """An infrastructure failure: no reward, no samples, its record kept."""
    return RolloutResult(
        status="infra_error",
        exit_status="infra_error",
        error=episode.error,
        trajectory=episode.trajectory,
        metrics=_metrics(episode) if episode.trajectory else {},
        record=EpisodeRecord.of(episode).model_copy(update={"status": "infra_error"}),
    )


def episode_result(episode: Episode, *, attempt: int = 0) -> RolloutResult:
    """An episode run for its record only (an eval attempt): no samples, no reward; the record as eval keeps it."""
    traj = episode.trajectory
    status: SampleStatus = "infra_error" if episode.error is not None or traj is None else status_of(traj)
    return RolloutResult(
        status=status,
        exit_status=episode.exit_status,
        resolved=episode.resolved,
        error=episode.error,
        trajectory=traj,
        patch=episode.patch,
        metrics=_metrics(episode) if traj is not None else {},
        record=EpisodeRecord.of(episode, attempt=attempt),
    )


async def _with_process_reward(
    reward: float, traj: Trajectory, task: Task, judge: LLM, settings: Any
) -> tuple[float, dict[str, float]]:
    """The outcome reward plus the judge's mean step score (``settings``: a ProcessReward), and its metrics."""
    scores = await prm_step_scores(
        judge, traj, task.problem_statement, m=settings.m, concurrency=settings.concurrency
    )
    scored = [s for s in scores if s is not None]
    extra = {"reward/outcome": reward, "reward/prm_scored_steps": float(len(scored))}
    if scored:
        extra["reward/prm_step_mean"] = sum(scored) / len(scored)
    return combined_reward(reward, scores, settings.coef), extra


def _metrics(episode: Episode) -> dict[str, float]:
    traj = episode.trajectory
    assert traj is not None
    total, eval_s = episode.total_s, episode.grade_s
    return {
        "agent/turns": float(len(traj.steps)),
        "agent/tool_calls": float(traj.tool_calls),
        "agent/total_time": total,
        "agent/model_query_time_sum": traj.model_time_s,
        "agent/env_execution_time_sum": traj.env_time_s,
        "agent/eval_time": eval_s,
        "agent/overhead_time": max(0.0, total - traj.model_time_s - traj.env_time_s - eval_s),
    }


def rollout_record(result: RolloutResult, instance_id: str = "", *, step: int | None = None) -> EpisodeRecord:
    """The rollout's record for a training run's episodes file, its step set.

    An executor that sent none (a lost node, an older rollout server) gets one made from the result itself.
    """
    traj = result.trajectory
    record = result.record or EpisodeRecord(
        instance_id=instance_id,
        exit_status=result.exit_status,
        error=result.error,
        status=result.status,
        resolved=bool(result.resolved),
        reward=result.reward,
        n_steps=len(traj.steps) if traj else 0,
        tool_calls=traj.tool_calls if traj else 0,
        format_errors=traj.format_errors if traj else 0,
    )
    update: dict[str, object] = {"step": step}
    if instance_id:
        update["instance_id"] = instance_id
    return record.model_copy(update=update)
