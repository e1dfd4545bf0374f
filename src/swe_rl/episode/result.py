"""What an executor hands back for one episode: :class:`RolloutResult`, for eval and training alike.

An eval attempt's result (:func:`episode_result`) carries the episode's record, trajectory and patch; a
training rollout's (rl/rollout.py, run by the executors) carries its training samples and reward too.
The samples' type lives here, beside the result that carries them; how they are built from a trajectory's
ids is rl/samples.py.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from swe_rl.agent.trajectory import ExitStatus, Trajectory
from swe_rl.episode.record import EpisodeRecord
from swe_rl.episode.run import Episode

SampleStatus = Literal["completed", "truncated", "aborted", "infra_error"]
STATUS_OF: dict[ExitStatus, SampleStatus] = {
    "submitted": "completed",
    "limits_exceeded": "truncated",
    "timeout": "truncated",
    "format_error_limit": "aborted",
    "agent_error": "aborted",  # the agent broke its own sandbox: scored with the failure reward
    "infra_error": "infra_error",
}


def status_of(traj: Trajectory) -> SampleStatus:
    return STATUS_OF[traj.exit_status or "infra_error"]


class TrainingSample(BaseModel):
    tokens: list[int] = Field(description="Prompt ids then response ids.")
    prompt_length: int
    loss_mask: list[int] = Field(description="One per response id: 1 where the model generated it.")
    rollout_logprobs: list[float] = Field(description="One per response id; 0.0 where not generated.")
    reward: float | None = None
    resolved: bool | None = Field(default=None, description="Whether the rollout's patch resolved the task.")
    advantage: float | None = None
    status: SampleStatus
    instance_id: str
    trajectory_id: str
    step_indices: list[int]

    @property
    def response_length(self) -> int:
        return len(self.tokens) - self.prompt_length


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
        metrics=rollout_metrics(episode) if traj is not None else {},
        record=EpisodeRecord.of(episode, attempt=attempt),
    )


def unscored_result(episode: Episode) -> RolloutResult:
    """A training rollout that failed on infrastructure: no reward, no samples, its record kept."""
    return RolloutResult(
        status="infra_error",
        exit_status="infra_error",
        error=episode.error,
        trajectory=episode.trajectory,
        metrics=rollout_metrics(episode) if episode.trajectory else {},
        record=EpisodeRecord.of(episode).model_copy(update={"status": "infra_error"}),
    )


def rollout_metrics(episode: Episode) -> dict[str, float]:
    """The episode's ``agent/*`` metrics (DESIGN §8), for an episode whose agent ran."""
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
