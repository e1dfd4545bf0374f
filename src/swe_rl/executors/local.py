"""Episodes in this process, on this machine's sandboxes (or a pool server's), a bounded number at once."""

from __future__ import annotations

import asyncio
from typing import Any

from swe_rl.agent.config import load_agent_config
from swe_rl.agent.context import ContextManager
from swe_rl.envs.cache import EnvCache
from swe_rl.errors import ConfigError
from swe_rl.executors.base import RolloutRequest, policy_llm
from swe_rl.rl.rollout import RolloutResult, run_rollout
from swe_rl.sandbox.base import SandboxFactory
from swe_rl.tasks.model import Task, parse_task


class LocalExecutor:
    """Rollouts in this process, on this machine's sandboxes, at most ``capacity`` at once."""

    name = "local"

    def __init__(
        self,
        factory: SandboxFactory,
        cache: EnvCache | None = None,
        *,
        capacity: int = 4,
        tasks: list[Task] | None = None,
    ) -> None:
        self.factory = factory
        self.cache = cache or EnvCache()
        self.capacity = capacity
        self.tasks = {t.instance_id: t for t in tasks or []}
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

    async def run(self, request: RolloutRequest) -> RolloutResult:
        task = self.task(request.task)
        async with self.slots:
            return await self.run_now(task, request)

    async def run_now(self, task: Task, request: RolloutRequest) -> RolloutResult:
        """Run without taking a slot (the caller already holds one)."""
        llm, tokenizer = await asyncio.to_thread(
            policy_llm, request.policy
        )  # a first tokenizer load takes seconds
        config = load_agent_config(request.agent_config, step_limit=request.step_limit)
        context = (
            ContextManager(
                request.max_context,
                request.sampling.max_tokens,
                count=lambda t: len(tokenizer.encode(t, add_special_tokens=False)),
            )
            if request.max_context
            else None
        )
        judge = None
        if request.prm is not None:
            from swe_rl.llm.openai import OpenAIClient

            judge = OpenAIClient(request.prm.model, request.prm.url, token_ids=False)
        self.running += 1
        try:
            return await run_rollout(
                task,
                llm,
                self.factory,
                self.cache,
                config,
                request.sampling,
                dynamic_history=request.dynamic_history,
                context=context,
                tokenizer=tokenizer if request.policy.kind == "openai" else None,
                prm=(judge, request.prm) if judge is not None and request.prm is not None else None,
            )
        finally:
            self.running -= 1
            await llm.close()
            if judge is not None:
                await judge.close()

    async def close(self) -> None:
        """Close the sandbox factory's client, if it has one (a pool server's)."""
        close = getattr(self.factory, "close", None)
        if close is not None:
            await close()
