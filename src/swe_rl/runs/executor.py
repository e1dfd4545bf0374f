"""Where a rollout runs: in this process (``local``), on a rollout server (``service``), on Ray (``ray``).

A :class:`RolloutRequest` is plain data (the task record, the policy's endpoint and tokenizer, sampling
and agent settings), so the same request runs unchanged in this process, on a rollout server across the
network, or in a Ray worker on another node. Trainer adapters and tools hold an :class:`Executor` and
call ``await executor.run(request)``; switching ``--executor`` changes nothing else in their configuration.
Every executor returns a :class:`RolloutResult` and reports infrastructure failures as ``infra_error``
results rather than raising, so a trainer never scores a dead node as a wrong answer.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field, model_validator

from swe_rl.agent.config import load_agent_config
from swe_rl.agent.context import ContextManager
from swe_rl.envs.cache import EnvCache
from swe_rl.errors import ConfigError
from swe_rl.llm.base import LLM, SamplingParams
from swe_rl.runs.rollout import RolloutResult, run_rollout
from swe_rl.sandbox.base import SandboxFactory
from swe_rl.tasks.model import Task, parse_task

EXECUTOR_SPECS = (
    "local | local:<backend> | pool:<pool server URL> | service:<rollout server URL> | ray | ray:<address>"
)


class Policy(BaseModel):
    """The model being trained, as the rollout reaches it."""

    url: str = Field(
        min_length=1,
        max_length=2048,
        description="SGLang server/router (kind sglang) or OpenAI-compatible base URL ending in /v1 (kind openai).",
    )
    kind: Literal["sglang", "openai"] = Field(
        default="sglang",
        description="sglang: token ids in and out (exact). openai: chat completions; ids from the server "
        "when it returns them, else re-encoded with the tokenizer (fixed-base method).",
    )
    tokenizer: str = Field(
        default="qwen", description="'qwen' (bundled vocabulary) or a tokenizer directory."
    )
    model: str = Field(default="policy", max_length=512, description="Model name sent to an OpenAI endpoint.")


class ProcessReward(BaseModel):
    """A judge LLM (OpenAI-compatible) scores every step m times; reward = outcome + coef * mean step score."""

    url: str = Field(min_length=1, max_length=2048, description="Judge base URL ending in /v1.")
    model: str = Field(default="judge", max_length=512)
    m: int = Field(default=3, ge=1, le=16, description="Judgements per step.")
    coef: float = Field(default=1.0, description="Weight of the mean step score.")
    concurrency: int = Field(default=8, ge=1, le=256, description="Judge calls at once per rollout.")


class RolloutRequest(BaseModel):
    task: str | dict[str, Any] = Field(
        description="A full task record, or an instance id the executor knows."
    )
    policy: Policy
    sampling: SamplingParams = Field(default_factory=SamplingParams)
    step_limit: int | None = Field(default=None, ge=1, le=1000)
    agent_config: str | None = Field(
        default=None, max_length=256, description="Shipped agent config name (default swebench)."
    )
    max_context: int | None = Field(
        default=None, ge=256, description="Context window; enables the context manager."
    )
    dynamic_history: bool = True
    prm: ProcessReward | None = Field(default=None, description="Process rewards from a judge (seed's PRM).")

    @model_validator(mode="after")
    def _context_fits_a_reply(self) -> RolloutRequest:
        if self.max_context is not None and self.max_context <= self.sampling.max_tokens:
            raise ValueError(
                f"max_context ({self.max_context}) must exceed sampling.max_tokens ({self.sampling.max_tokens})"
            )
        return self


class Executor(Protocol):
    """Runs rollouts somewhere; never raises for infrastructure failures (they come back as infra_error)."""

    name: str

    async def run(self, request: RolloutRequest) -> RolloutResult: ...

    async def close(self) -> None: ...


def policy_tokenizer(policy: Policy) -> Any:
    """The policy's tokenizer; ConfigError when it cannot be loaded (the request is at fault)."""
    from swe_rl.rl.tokenizer import load_tokenizer

    try:
        return load_tokenizer(policy.tokenizer)
    except ConfigError:
        raise
    except Exception as exc:  # a missing directory, a corrupt tokenizer file
        raise ConfigError(f"cannot load tokenizer {policy.tokenizer!r}: {exc}") from None


def policy_llm(policy: Policy) -> tuple[LLM, Any]:
    """The client for a policy, and its tokenizer."""
    tokenizer = policy_tokenizer(policy)
    if policy.kind == "sglang":
        from swe_rl.llm.sglang import SGLangClient

        return SGLangClient(policy.url, tokenizer), tokenizer
    from swe_rl.llm.openai import OpenAIClient

    return OpenAIClient(policy.model, policy.url), tokenizer


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
        llm, tokenizer = policy_llm(request.policy)
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


def get_executor(
    spec: str = "local",
    *,
    backend: str | None = None,
    capacity: int | None = None,
    token: str | None = None,
    pool_slots: int | None = None,
    rollout_timeout_s: float | None = None,
) -> Executor:
    """An executor from a spec (``EXECUTOR_SPECS``).

    ``backend``: the sandbox backend of a local executor (default ns); ``capacity``: its rollouts at once
    (default :func:`default_capacity`); ``pool_slots``: rollouts at once against a pool (default 128);
    ``token``: the pool's or rollout servers' bearer token; ``rollout_timeout_s``: a rollout server's limit.
    """
    kind, _, arg = spec.partition(":")
    if kind == "local":
        from swe_rl.sandbox import get_factory

        chosen = arg or backend or "ns"
        return LocalExecutor(get_factory(chosen, token=token), capacity=capacity or default_capacity())
    if kind == "pool":  # rollouts here, sandboxes from a pool server (the seed's layout)
        from swe_rl.sandbox import get_factory

        url = arg or backend or ""
        if not url.startswith(("http://", "https://")):
            raise ConfigError("--executor pool needs the pool server's URL: pool:<URL>")
        return LocalExecutor(get_factory(url, token=token), capacity=pool_slots or 128)
    if kind == "service":
        if not arg:
            raise ConfigError("--executor service:<URL> needs the rollout server's URL")
        from swe_rl.runs.service_executor import ServiceExecutor

        return ServiceExecutor(arg, token, timeout_s=rollout_timeout_s)
    if kind == "ray":
        from swe_rl.runs.ray_executor import RayExecutor

        return RayExecutor(address=arg or None, backend=backend, token=token)
    raise ConfigError(f"unknown executor {spec!r}; use {EXECUTOR_SPECS}")


def default_capacity() -> int:
    """Rollouts at once on this machine: 8 per usable CPU and 512 MiB each.

    A rollout mostly waits on the policy; its sandbox is busy only while a command or the tests run.
    """
    from swe_rl.sandbox.capacity import machine_capacity

    return machine_capacity(per_cpu=8, mem_mb_each=512)
