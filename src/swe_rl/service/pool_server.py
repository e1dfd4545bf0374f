"""The pool server (default :18090): leases on sandboxes across exec-server nodes, over HTTP.

The leases themselves (expiry, the fair allocation queue, node health and reconciliation) are the
:class:`~swe_rl.service.lease_pool.LeasePool`'s; this module answers the seed's routes from it, with
calls on a lease relayed to its node. Mutating calls are idempotent by ``X-Request-ID``, end to end.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from swe_rl.sandbox.exec_protocol import (
    AllocateRequest,
    EvaluateRequest,
    ExecRequest,
    FileReadRequest,
    FileWriteRequest,
    HeartbeatResponse,
    IdRequest,
    OkResponse,
)
from swe_rl.service.lease_pool import LeasePool, relay
from swe_rl.service.server_kit import Access, Idempotency, Metrics, endpoint, parse

LeaseRequest = ExecRequest | IdRequest | EvaluateRequest | FileReadRequest


class PoolHandlers:
    """The pool server's HTTP side over one LeasePool: a method per route, the routes, the lifespan."""

    def __init__(self, pool: LeasePool, token: str | Access | None) -> None:
        self.pool = pool
        self.token = token
        self.metrics = Metrics("swe_rl_pool")
        self.metrics.gauge("leases", "Live leases.", lambda: len(pool.leases))
        self.metrics.gauge("queue_length", "Allocations waiting for a free slot.", pool.queued)
        self.metrics.gauge(
            "healthy_nodes",
            "Exec nodes passing their health check.",
            lambda: sum(n.healthy for n in pool.nodes),
        )
        self.node_call = self.metrics.histogram(
            "node_call_seconds",
            "Seconds a call relayed on a lease took on its node (after the lease's lock).",
        )
        self.idempotency = Idempotency()

    async def allocate(self, request: Request) -> Any:
        req = await parse(request, AllocateRequest)
        return await self.pool.allocate(req, request.headers.get("x-request-id"))

    def forward(self, path: str, model: type[LeaseRequest]) -> Callable[[Request], Awaitable[Response]]:
        """A handler that relays a call on a lease to ``path`` on the lease's node, for its sandbox."""

        async def handler(request: Request) -> Response:
            req = await parse(request, model)  # capped while it streams in; malformed fields are a 400 here
            lease = self.pool.get(req.lease_id)
            body = {
                **req.model_dump(exclude_unset=True, exclude={"lease_id"}),
                "container_id": lease.container_id,
            }
            async with lease.lock:
                started = time.monotonic()
                status, data = await self.pool.call(
                    lease.node,
                    path,
                    body,
                    request.headers.get("x-request-id"),
                    timeout=float(getattr(req, "timeout", 180)) + 30,
                )
            self.node_call.observe(time.monotonic() - started)
            return relay(status, data)

        return handler

    async def heartbeat(self, request: Request) -> HeartbeatResponse:
        lease = self.pool.get((await parse(request, IdRequest)).lease_id)
        return HeartbeatResponse(expires_in=lease.ttl)

    async def close(self, request: Request) -> OkResponse:
        req = await parse(request, IdRequest)
        lease = self.pool.leases.get(req.lease_id)
        if lease is not None:
            await self.pool.release(lease, request.headers.get("x-request-id"))
        return OkResponse()

    async def status(self, request: Request) -> dict[str, Any]:
        return {"ok": True, "pool": self.pool.statistics()}  # the seed's shape

    async def healthz(self, request: Request) -> dict[str, Any]:
        return {"ok": True, "healthy_nodes": sum(n.healthy for n in self.pool.nodes)}

    async def render_metrics(self, request: Request) -> Any:
        return self.metrics.response()

    def routes(self) -> list[Route]:
        """The seed's routes: POST behind the token, /healthz and /metrics open to all."""
        return [
            self._route("/allocate", self.allocate),
            self._route("/exec", self.forward("/container/exec", ExecRequest)),
            self._route("/diff", self.forward("/container/diff", IdRequest)),
            self._route("/evaluate", self.forward("/container/evaluate", EvaluateRequest)),
            self._route("/reset", self.forward("/container/reset", IdRequest)),
            self._route("/read_file", self.forward("/container/read_file", FileReadRequest)),
            self._route("/write_file", self.forward("/container/write_file", FileWriteRequest)),
            self._route("/heartbeat", self.heartbeat),
            self._route("/close", self.close),
            self._route("/status", self.status, ["GET"]),
            self._route("/healthz", self.healthz, ["GET"], auth=False),
            self._route("/metrics", self.render_metrics, ["GET"], auth=False),
        ]

    def _route(self, path: str, handler: Any, methods: list[str] | None = None, auth: bool = True) -> Route:
        name = path.strip("/") or "root"
        wrapped = endpoint(
            handler,
            token=self.token if auth else None,
            metrics=self.metrics,
            idempotency=self.idempotency,
            name=name,
        )
        return Route(path, wrapped, methods=methods or ["POST"])

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        await self.pool.start()
        try:
            yield
        finally:
            await self.pool.shutdown()


def create_app(
    urls: list[str],
    *,
    token: str | Access | None = None,
    node_token: str | None = None,
    max_concurrent: int | None = None,
    per_node: int | None = None,
    ttl: float = 600.0,
    wait: float = 60.0,
    health_period: float = 2.0,
    reap_period: float = 1.0,
) -> Starlette:
    pool = LeasePool(
        urls,
        token=node_token,
        max_concurrent=max_concurrent or 128,
        per_node=per_node,
        ttl=ttl,
        wait=wait,
        health_period=health_period,
        reap_period=reap_period,
    )
    handlers = PoolHandlers(pool, token)
    app = Starlette(routes=handlers.routes(), lifespan=handlers.lifespan)
    app.state.pool = pool
    return app
