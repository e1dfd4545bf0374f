"""The one place an episode happens, for evaluation and training alike.

An episode builds (or finds) the task's environment, runs the agent in a pristine sandbox of it (fresh, or
reset in place), takes the patch the agent leaves (its submission, else the sandbox's diff) and grades that
patch in another, pristine sandbox. Its attribution (docs/TRAINING.md, "Outcome attribution"): what the
agent's commands did to its own sandbox is the agent's outcome, graded as no patch; a failure outside its
control (env build, sandbox creation, a lost backend, the model, grading) is an infrastructure error,
carried in ``error`` and never graded or scored. Callers turn an :class:`Episode` into their records: an
eval result and its artifacts, or training samples and a reward.
"""

from __future__ import annotations

import asyncio
import time
from typing import Literal

from pydantic import BaseModel, Field

from swe_rl.agent.config import AgentConfig
from swe_rl.agent.context import ContextManager
from swe_rl.agent.loop import left_patch, run_agent
from swe_rl.agent.trajectory import Trajectory
from swe_rl.envs.cache import EnvCache
from swe_rl.episode.spec import EpisodeSpec
from swe_rl.errors import SweRlError
from swe_rl.harness.grade_many import Grader
from swe_rl.harness.grade_patch import grade_patch
from swe_rl.harness.verdict import Verdict
from swe_rl.llm.base import LLM, SamplingParams
from swe_rl.sandbox.base import SandboxFactory
from swe_rl.tasks.model import Task

PatchSource = Literal["submission", "diff_fallback"]


class Episode(BaseModel):
    """What an episode produced. ``error`` set: an infrastructure failure, with no verdict."""

    instance_id: str
    trajectory: Trajectory | None = None
    patch: str | None = Field(
        default=None,
        description="What was graded; None when the agent left nothing that can be (agent_error).",
    )
    patch_source: PatchSource | None = None
    verdict: Verdict | None = None
    error: str | None = Field(
        default=None, description="The infrastructure failure, typed, when there was one."
    )
    total_s: float = 0.0
    grade_s: float = 0.0

    @property
    def infra_error(self) -> bool:
        return self.error is not None

    @property
    def exit_status(self) -> str:
        if self.trajectory is None or self.trajectory.exit_status is None:
            return "infra_error"
        return self.trajectory.exit_status

    @property
    def resolved(self) -> bool | None:
        """True or False once graded; None for an infrastructure failure."""
        return None if self.verdict is None else self.verdict.resolved


async def run_episode(
    task: Task,
    llm: LLM,
    *,
    cache: EnvCache,
    factory: SandboxFactory,
    agent: AgentConfig,
    params: SamplingParams,
    spec: EpisodeSpec,
    context: ContextManager | None = None,
    grader: Grader | None = None,
) -> Episode:
    """Run one episode; never raises for an infrastructure failure (see the module's docstring).

    ``spec``: the agent's sandbox limits and the grading (an eval's or a training's: episode/spec.py; the
    request is one). ``grader``: grades in reused sandboxes (harness/grade_many.py), and its pool
    (sandbox/pool.py) lends the agent's sandbox; None: each in a fresh sandbox of ``factory``."""
    started = time.monotonic()
    episode = Episode(instance_id=task.instance_id)
    try:
        env = await asyncio.to_thread(cache.ensure, task)
        lent = grader.pool.sandbox(env, spec.limits) if grader is not None else None
        async with lent or await factory.create(env, spec.limits) as box:
            episode.trajectory = traj = await run_agent(
                task, box, llm, agent, params, context=context, workdir=env.workdir
            )
            episode.patch = await left_patch(traj, box)
        if traj.submission is not None:
            episode.patch_source = "submission"
        elif episode.patch and episode.patch.strip():
            episode.patch_source = "diff_fallback"
        if traj.exit_status == "infra_error":
            episode.error = traj.exit_message or "infrastructure failure during the agent's run"
        else:
            graded = time.monotonic()
            if grader is not None:
                episode.verdict = await grader.grade(
                    task, episode.patch, env, timeout=spec.grade_timeout, mode=spec.grading
                )
            else:
                episode.verdict = await grade_patch(
                    task, episode.patch, factory, env, timeout=spec.grade_timeout, mode=spec.grading
                )
            episode.grade_s = time.monotonic() - graded
    except SweRlError as exc:
        episode.error = f"{type(exc).__name__}: {exc}"
        episode.verdict = None
    episode.total_s = time.monotonic() - started
    return episode
