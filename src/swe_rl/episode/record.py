"""The record of one finished episode: one line of a run's episodes file, for eval and training alike.

An eval run appends one per attempt (``results.jsonl``); a training run one per rollout of each step
(``rollouts.jsonl``, where ``step``, ``reward`` and ``status`` are set too). Both kinds of run are summarized
by the same function over these records (episode/summary.py).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from swe_rl.episode.run import Episode


class EpisodeRecord(BaseModel):
    """One episode, as a run keeps it: what happened, how long it took, what it cost; never the transcript."""

    instance_id: str
    attempt: int = 0
    step: int | None = Field(default=None, description="The training step; None in an eval run.")
    resolved: bool = False
    reward: float | None = Field(default=None, description="The training reward; None in an eval run.")
    status: str | None = Field(
        default=None, description="The training sample's status (completed, truncated, aborted, infra_error)."
    )
    exit_status: str
    patch_source: str = "none"  # submission | diff_fallback | none
    n_steps: int = 0
    tool_calls: int = 0
    format_errors: int = 0  # replies without exactly one command block
    error: str | None = None
    elapsed: float = 0.0
    model_time_s: float = 0.0
    env_time_s: float = 0.0
    eval_time_s: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    grade_status: str | None = None
    artifacts: str | None = None

    @property
    def infra_error(self) -> bool:
        return self.exit_status == "infra_error" or self.error is not None

    @classmethod
    def of(cls, episode: Episode, *, attempt: int = 0, artifacts: str | None = None) -> EpisodeRecord:
        """The record of an episode (a caller adds what only it knows: the step, reward, sample status)."""
        record = cls(
            instance_id=episode.instance_id,
            attempt=attempt,
            exit_status=episode.exit_status,
            artifacts=artifacts,
            patch_source=episode.patch_source or "none",
            error=episode.error,
            elapsed=episode.total_s,
        )
        traj = episode.trajectory
        if traj is not None:
            record.n_steps, record.tool_calls = len(traj.steps), traj.tool_calls
            record.format_errors = traj.format_errors
            record.model_time_s, record.env_time_s = traj.model_time_s, traj.env_time_s
            record.prompt_tokens, record.completion_tokens = traj.prompt_tokens, traj.completion_tokens
            record.cost_usd = traj.cost_usd
        if episode.verdict is not None:
            record.resolved, record.grade_status = episode.verdict.resolved, episode.verdict.status
            record.eval_time_s = episode.grade_s
        return record
