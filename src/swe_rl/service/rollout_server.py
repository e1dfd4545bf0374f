"""The rollout server: a whole agent rollout (agent + sandbox + grading) per ``POST /run``.

The trainer sends a task (a record, or an instance id of the server's task source) and its policy (an
SGLang ``/generate`` URL and the policy's tokenizer); the server runs the agent next to its sandboxes and
answers with the status, reward, verdict, per-step token samples and metrics. Requests beyond the
server's capacity queue (FIFO, via the semaphore's waiters) up to ``wait`` seconds, then get a typed 503
with Retry-After; a retry with the same ``X-Request-ID`` returns the first rollout without running it
again; a dead policy or sandbox ends as ``infra_error``, never as a reward. A body in NeMo-Gym's SWE
agent shape (``responses_create_params``, as miles sends it) is answered in that shape (gym_agent.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import uuid
from collections.abc import Callable
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.gzip import GZipMiddleware
from starlette.requests import Request
from starlette.routing import Route

from swe_rl.envs.cache import EnvCache
from swe_rl.episode.result import RolloutResult
from swe_rl.errors import ConfigError
from swe_rl.executors import default_capacity
from swe_rl.executors.base import EpisodeRequest, Policy, policy_tokenizer
from swe_rl.executors.local import LocalExecutor, agent_config
from swe_rl.executors.models import ModelBook
from swe_rl.harness.official import preload
from swe_rl.sandbox.base import Limits, SandboxFactory
from swe_rl.service import gym_agent
from swe_rl.service.server_kit import (
    MAX_BODY,
    Access,
    Idempotency,
    Metrics,
    ServiceError,
    endpoint,
    load_object,
    read_body,
    validate,
)
from swe_rl.tasks.model import Task


class RunResponse(RolloutResult):
    ok: bool = True
    instance_id: str


class RolloutNode:
    """A local executor behind HTTP: FIFO queueing up to ``wait`` seconds, cancellation by id."""

    def __init__(
        self,
        factory: SandboxFactory,
        cache: EnvCache,
        tasks: list[Task],
        capacity: int,
        wait: float,
        reuse_grading: bool = False,
    ) -> None:
        self.executor = LocalExecutor(
            factory,
            cache,
            capacity=capacity,
            tasks=tasks,
            models=ModelBook(local_models=False),
            reuse_grading=reuse_grading,  # its sandboxes are closed with the app (lifespan)
        )
        self.capacity = capacity
        self.wait = wait
        self.waiting = 0
        self.active: dict[str, asyncio.Task[RunResponse]] = {}

    @property
    def running(self) -> int:
        return self.executor.running

    async def run_cancellable(
        self, req: EpisodeRequest, rollout_id: str, request: Request, retries_waiting: Callable[[], int]
    ) -> RunResponse:
        """Run as a task that ``DELETE /run/{id}`` or the client's disconnecting cancels (freeing its sandbox).

        A disconnect is forgiven when a retry with the same request id is waiting for this rollout.
        """
        task = asyncio.ensure_future(self.run(req))
        self.active[rollout_id] = task
        watcher = asyncio.ensure_future(_cancel_on_disconnect(request, task, retries_waiting))
        try:
            return await task
        except asyncio.CancelledError:
            if task.cancelled():
                raise ServiceError("cancelled", f"rollout {rollout_id} was cancelled") from None
            raise
        finally:
            watcher.cancel()
            self.active.pop(rollout_id, None)

    def cancel(self, rollout_id: str) -> bool:
        task = self.active.get(rollout_id)
        if task is None or task.done():
            return False
        task.cancel()
        return True

    def check(self, req: EpisodeRequest) -> Task:
        """The request's task, once everything the request names is known good: a typed 4xx otherwise."""
        try:
            task = self.executor.task(req.task)
        except ConfigError as exc:
            raise ServiceError(
                "not_found" if isinstance(req.task, str) else "bad_request", str(exc)
            ) from None
        if req.agent is not None:
            raise ServiceError(
                "bad_request",
                "agent: a rollout server runs shipped agent configs only; name one in agent_config",
            )
        if req.limits is not None and req.limits != Limits():
            raise ServiceError(
                "bad_request", "limits: a rollout server's sandboxes run with its operator's limits"
            )
        if req.agent_config is not None and not re.fullmatch(r"[A-Za-z0-9_-]+", req.agent_config):
            raise ServiceError("bad_request", "agent_config: a shipped config name, not a path on the server")
        try:
            agent_config(req)
            if isinstance(req.model, Policy):
                policy_tokenizer(req.model)
            else:  # a named model it may build, or a held one (no model object reaches a server: refused)
                self.executor.models.check(req.model)
        except ConfigError as exc:
            raise ServiceError("bad_request", str(exc)) from None
        return task

    async def run(self, req: EpisodeRequest) -> RunResponse:
        # before taking a slot, so a bad request never waits in the queue; in a thread, as the first load of a
        # tokenizer takes seconds and the server must keep answering (/healthz, other runs) meanwhile
        task = await asyncio.to_thread(self.check, req)
        self.waiting += 1
        try:
            await asyncio.wait_for(self.executor.slots.acquire(), self.wait)
        except TimeoutError:
            raise ServiceError(
                "capacity", f"all {self.capacity} rollout slots busy for {self.wait:.0f}s", retry_after=5
            ) from None
        finally:
            self.waiting -= 1
        try:
            result = await self.executor.run_now(task, req)
        finally:
            self.executor.slots.release()
        return RunResponse(instance_id=task.instance_id, **result.model_dump())


DISCONNECT_GRACE_S = 2.0


async def _cancel_on_disconnect(
    request: Request, task: asyncio.Task[Any], retries_waiting: Callable[[], int]
) -> None:
    """A trainer that gave up (closed its connection, no retry waiting) frees the rollout's slot and sandbox."""
    while not task.done():
        if await request.is_disconnected():
            await asyncio.sleep(DISCONNECT_GRACE_S)  # a retry of a dropped connection arrives within this
            if not retries_waiting():
                task.cancel()
            return
        await asyncio.sleep(0.2)


class RolloutHandlers:
    """The rollout server's HTTP side over one node: a method per route, and the routes."""

    def __init__(self, node: RolloutNode, token: str | Access | None, gym_tokenizer: str) -> None:
        self.node = node
        self.token = token
        self.gym_tokenizer = gym_tokenizer
        self.metrics = Metrics("swe_rl_rollout")
        self.metrics.gauge("running", "Rollouts running.", lambda: node.running)
        self.metrics.gauge("waiting", "Rollouts waiting for capacity.", lambda: node.waiting)
        self.rollouts = self.metrics.counter("rollouts_total", "Rollouts answered, by status.", ("status",))
        self.idempotency = Idempotency()
        self.grading_loaded: float | None = None  # seconds swebench's grading took to import, at start

    async def run(self, request: Request) -> RunResponse | dict[str, Any]:
        body = await read_body(request, MAX_BODY)
        # which request it is, parsed as every server parses (server_kit.validate): malformed is a 400
        gym = validate(gym_agent.GymRunRequest, body) if gym_agent.is_gym_body(load_object(body)) else None
        if gym is not None:
            req = gym_agent.rollout_request(gym, self.gym_tokenizer, self.node.executor.tasks)
        else:
            req = validate(EpisodeRequest, body)
        rollout_id = request.headers.get("x-request-id") or uuid.uuid4().hex
        response = await self.node.run_cancellable(
            req, rollout_id, request, lambda: self.idempotency.waiting(rollout_id)
        )
        self.rollouts.labels(status=response.status).inc()
        if gym is not None:
            return gym_agent.gym_response(response, response.instance_id, gym)
        return response

    async def cancel(self, request: Request) -> dict[str, Any]:
        return {"ok": True, "cancelled": self.node.cancel(request.path_params["rollout_id"])}

    async def healthz(self, request: Request) -> dict[str, Any]:
        node, grader = self.node, self.node.executor.grader
        return {
            "ok": True,
            "running": node.running,
            "waiting": node.waiting,
            "capacity": node.capacity,
            "grading_loaded_s": self.grading_loaded,
            "grading_sandboxes": grader.stats if grader.reuse else None,
            "agent_sandboxes": grader.pool.counts("agent") if grader.reuse else None,
        }

    async def render_metrics(self, request: Request) -> Any:
        return self.metrics.response()

    def routes(self) -> list[Route]:
        """POST /run (idempotent by X-Request-ID) and DELETE /run/{id} behind the token; the rest open."""
        metrics = self.metrics
        return [
            Route(
                "/run",
                endpoint(
                    self.run, token=self.token, metrics=metrics, idempotency=self.idempotency, name="run"
                ),
                methods=["POST"],
            ),
            Route(
                "/run/{rollout_id}",
                endpoint(self.cancel, token=self.token, metrics=metrics, idempotency=None, name="cancel"),
                methods=["DELETE"],
            ),
            Route(
                "/healthz",
                endpoint(self.healthz, token=None, metrics=metrics, idempotency=None, name="healthz"),
            ),
            Route(
                "/metrics",
                endpoint(self.render_metrics, token=None, metrics=metrics, idempotency=None, name="metrics"),
            ),
        ]

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> Any:
        self.grading_loaded = await asyncio.to_thread(preload)
        try:
            yield
        finally:  # the grading sandboxes it keeps between rollouts
            await self.node.executor.grader.close()


def create_app(
    factory: SandboxFactory,
    cache: EnvCache,
    tasks: list[Task] | None = None,
    *,
    capacity: int | None = None,
    wait: float = 300.0,
    token: str | Access | None = None,
    gym_tokenizer: str = "qwen",
    reuse_grading: bool = False,
) -> Starlette:
    """``capacity`` defaults to what the machine's CPUs and memory allow (executors.default_capacity).

    ``gym_tokenizer``: the policy's tokenizer for NeMo-Gym-shaped requests (service/gym_agent.py), which
    name none. ``reuse_grading``: keep agent and grading sandboxes between rollouts (sandbox/pool.py,
    harness/grade_many.py); they are closed with the app."""
    node = RolloutNode(factory, cache, tasks or [], capacity or default_capacity(), wait, reuse_grading)
    handlers = RolloutHandlers(node, token, gym_tokenizer)
    app = Starlette(
        routes=handlers.routes(),
        lifespan=handlers.lifespan,
        # samples are lists of token ids: gzip (level 1, for clients that accept it) shrinks them ~3x
        middleware=[Middleware(GZipMiddleware, minimum_size=1024, compresslevel=1)],
    )
    app.state.node = node
    return app
