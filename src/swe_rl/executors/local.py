"""Episodes in this process, on this machine's sandboxes (or a pool server's), a bounded number at once."""

from __future__ import annotations

import asyncio
from typing import Any

from swe_rl.agent.config import AgentConfig, load_agent_config
from swe_rl.agent.context import ContextManager
from swe_rl.envs.cache import EnvCache
from swe_rl.episode.request import EpisodeRequest, HeldModel, NamedModel, Policy
from swe_rl.episode.result import RolloutResult, episode_result
from swe_rl.episode.run import run_episode
from swe_rl.errors import ConfigError
from swe_rl.executors.base import ModelFactory, policy_llm
from swe_rl.executors.models import ModelBook
from swe_rl.harness.grade_many import Grader
from swe_rl.llm.base import LLM
from swe_rl.rl.rollout import run_rollout
from swe_rl.sandbox.base import SandboxFactory
from swe_rl.sandbox.pool import SandboxPool
from swe_rl.tasks.model import Task, parse_task

# grading sandboxes kept between episodes (each with a warm runner, ~30 MiB), and as many agents' sandboxes
IDLE_GRADING = 16


class LocalExecutor:
    """Episodes in this process, on this machine's sandboxes, at most ``capacity`` at once.

    ``models``: the named models it builds and closes (default: a book of its own).
    ``reuse_grading``: run agents and grade in sandboxes reset in place between uses, the grading ones
    with a warm test runner (harness/grade_many.py; where the backend cannot, each gets a fresh sandbox). The
    sandboxes it keeps belong to the event loop that made them: only for an executor that lives in one
    loop and is closed (:meth:`close`).
    """

    name = "local"
    in_process = True

    def __init__(
        self,
        factory: SandboxFactory,
        cache: EnvCache | None = None,
        *,
        capacity: int = 4,
        tasks: list[Task] | None = None,
        models: ModelBook | None = None,
        reuse_grading: bool = False,
    ) -> None:
        self.factory = factory
        self.cache = cache or EnvCache()
        self.capacity = capacity
        self.tasks = {t.instance_id: t for t in tasks or []}
        self.models = models or ModelBook()
        self.grader = Grader(SandboxPool(factory, idle=min(capacity, IDLE_GRADING), reuse=reuse_grading))
        self.slots = asyncio.Semaphore(capacity)
        self.running = 0

    def task(self, spec: str | dict[str, Any]) -> Task:
        """The request's task; ConfigError (a 4xx in the service) for an unknown id or a bad record."""
        if isinstance(spec, dict):
            return parse_task(spec, where="request.task")
        task = self.tasks.get(spec)
        if task is None:
            raise ConfigError(f"unknown instance id {spec!r} (send the full record instead)")
        return task

    async def run(
        self, request: EpisodeRequest, *, task: Task | None = None, model: ModelFactory | None = None
    ) -> RolloutResult:
        """Run ``request`` in a slot, on ``task`` as the caller built it where given (``request.task`` must
        name it), else on the task ``request.task`` is or names; with ``model``, the model object of this
        process, where given (``request.model`` names it), else the model ``request.model`` is or names."""
        if task is None:
            task = self.task(request.task)
        elif request.instance_id != task.instance_id:
            raise ConfigError(
                f"request.task names {request.instance_id!r}, the task object given is {task.instance_id!r}"
            )
        async with self.slots:
            return await self.run_now(task, request, model)

    async def run_now(
        self, task: Task, request: EpisodeRequest, model: ModelFactory | None = None
    ) -> RolloutResult:
        """Run without taking a slot (the caller already holds one)."""
        llm, tokenizer, owned = await self._model(task, request, model)
        context = _context(request, tokenizer)
        judge = None
        if request.prm is not None:
            from swe_rl.llm.openai import OpenAIClient

            judge = OpenAIClient(request.prm.model, request.prm.url, token_ids=False)
        self.running += 1
        try:
            if not request.train:
                episode = await run_episode(
                    task,
                    llm,
                    cache=self.cache,
                    factory=self.factory,
                    agent=agent_config(request),
                    params=request.sampling,
                    spec=request,
                    context=context,
                    grader=self.grader,
                )
                return episode_result(episode, attempt=request.attempt)
            return await run_rollout(
                task,
                llm,
                self.factory,
                self.cache,
                agent_config(request),
                request.sampling,
                spec=request,
                context=context,
                tokenizer=tokenizer
                if request.policy is not None and request.policy.kind == "openai"
                else None,
                prm=(judge, request.prm) if judge is not None and request.prm is not None else None,
                grader=self.grader,
            )
        finally:
            self.running -= 1
            if owned:
                await llm.close()
            if judge is not None:
                await judge.close()

    async def _model(
        self, task: Task, request: EpisodeRequest, model: ModelFactory | None
    ) -> tuple[LLM, Any, bool]:
        """(the episode's model, the policy's tokenizer or None, whether the episode owns the model)."""
        from swe_rl.episode.attempt import priced

        if model is not None:  # the caller's object, which the caller closes
            if isinstance(request.model, Policy):
                raise ConfigError(
                    "a model object runs a request whose model is a held or named one, not a policy"
                )
            return priced(model(task), request.prices), None, False
        if isinstance(request.model, NamedModel | HeldModel):
            choice = await self.models.get(request.model)
            return priced(choice.factory(task), request.prices), None, False
        llm, tokenizer = await asyncio.to_thread(policy_llm, request.model)  # a first load takes seconds
        return llm, tokenizer, True

    async def close(self) -> None:
        """Close the models it built, its grading sandboxes and the sandbox factory's client, if it has one
        (a pool server's)."""
        await self.models.close()
        await self.grader.close()
        close = getattr(self.factory, "close", None)
        if close is not None:
            await close()


def agent_config(request: EpisodeRequest) -> AgentConfig:
    """The request's agent config: inline, or a shipped one by name, with the request's limits on top."""
    limits = {
        "step_limit": request.step_limit,
        "wall_time_s": request.wall_time_s,
        "cost_limit": request.cost_limit,
    }
    if request.agent is not None:
        return request.agent.model_copy(update={k: v for k, v in limits.items() if v is not None})
    return load_agent_config(request.agent_config, **limits)


def _context(request: EpisodeRequest, tokenizer: Any) -> ContextManager | None:
    """The context manager of a request with a window: counting with the policy's tokenizer where there is one."""
    if not request.max_context:
        return None
    if tokenizer is None:
        return ContextManager(request.max_context, request.sampling.max_tokens)
    return ContextManager(
        request.max_context,
        request.sampling.max_tokens,
        count=lambda t: len(tokenizer.encode(t, add_special_tokens=False)),
    )
