"""One training rollout: agent in a sandbox against a token-level policy, graded, as training samples.

Run by the executors only (executors/local.py, which the rollout service and the Ray nodes run too): every
trainer adapter and batch run submits an ``EpisodeRequest`` to an executor instead, so placement, sandbox
reuse and the warm test runner apply to all of them (an import-linter contract forbids the direct path).
What it returns, :class:`~swe_rl.episode.result.RolloutResult`, is the episode layer's.
"""

from __future__ import annotations

import uuid
from typing import Any

from swe_rl.agent.config import AgentConfig
from swe_rl.agent.context import ContextManager
from swe_rl.agent.trajectory import Trajectory
from swe_rl.envs.cache import EnvCache
from swe_rl.episode.record import EpisodeRecord
from swe_rl.episode.result import RolloutResult, rollout_metrics, status_of, unscored_result
from swe_rl.episode.run import run_episode
from swe_rl.episode.spec import EpisodeSpec
from swe_rl.harness.grade_many import Grader
from swe_rl.llm.base import LLM, SamplingParams
from swe_rl.rl.rewards import OutcomeReward, combined_reward, prm_step_scores
from swe_rl.rl.samples import fill_ids_fixed_base, step_samples, trajectory_samples
from swe_rl.sandbox.base import SandboxFactory
from swe_rl.tasks.model import Task


async def run_rollout(
    task: Task,
    llm: LLM,
    factory: SandboxFactory,
    cache: EnvCache,
    config: AgentConfig,
    params: SamplingParams,
    *,
    spec: EpisodeSpec | None = None,
    context: ContextManager | None = None,
    outcome: OutcomeReward | None = None,
    tokenizer: Any = None,
    prm: tuple[LLM, Any] | None = None,
    grader: Grader | None = None,
) -> RolloutResult:
    """Agent in a pristine sandbox (reset in place when ``grader`` lends one, else fresh), patch graded in
    another, samples built from ids. Never raises InfraError;
    attribution as in episode/run.py (an agent's own damage is its outcome, a failure outside it unscored).
    ``tokenizer``: for a text-only policy (an OpenAI endpoint that returns no ids), steps without ids are
    encoded with the fixed-base method; with ids from the server, it is not used. ``prm``: a judge and
    its settings (``episode.request.ProcessReward``): the reward becomes outcome + coef * mean step score.
    ``spec``: the sandbox limits, the grading, the samples' shape and the reward of an episode that never
    submitted (default :meth:`.EpisodeSpec.for_training`: strict grading, the backend's limits; the request is
    one): ``spec.unsubmitted`` "unresolved" rewards such an episode as unresolved, whatever its diff's verdict
    (which ``resolved`` still reports), so that not submitting is never the better strategy. ``grader``:
    grades in reused sandboxes with a warm test runner (harness/grade_many.py)."""
    trajectory_id = uuid.uuid4().hex
    spec = spec or EpisodeSpec.for_training()
    episode = await run_episode(
        task, llm, cache=cache, factory=factory, agent=config, params=params, spec=spec, context=context,
        grader=grader,
    )  # fmt: skip
    traj = episode.trajectory
    if episode.error is not None or episode.verdict is None or traj is None:
        return unscored_result(episode)
    verdict = episode.verdict
    counted = episode.patch_source == "submission" or spec.unsubmitted == "graded"
    reward = (outcome or OutcomeReward())(verdict.resolved and counted)
    extra: dict[str, float] = {}
    if prm is not None and traj.steps:
        reward, extra = await _with_process_reward(reward, traj, task, *prm)
    build = step_samples if spec.dynamic_history else trajectory_samples
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
        metrics={**rollout_metrics(episode), **extra},
        record=EpisodeRecord.of(episode).model_copy(update={"status": status, "reward": reward}),
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
