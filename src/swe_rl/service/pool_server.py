"""The pool server (default :18090): leases on sandboxes across exec-server nodes.

Leases expire unless renewed (heartbeat or any call) and a reaper destroys expired ones on their node;
a full cluster makes ``/allocate`` wait in a fair FIFO queue up to a deadline, then answer a typed 503
with Retry-After; nodes are health-checked, a dead node's leases fail fast as ``node_down`` and new
leases go elsewhere; a node that comes back (or a restarted pool) is reconciled: sandboxes no lease
owns are destroyed. Mutating calls are idempotent by ``X-Request-ID``, end to end.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from swe_rl.sandbox.wire import (
    AllocateRequest,
    AllocateResponse,
    EvaluateRequest,
    ExecRequest,
    FileReadRequest,
    FileWriteRequest,
    HeartbeatResponse,
    IdRequest,
    OkResponse,
)
from swe_rl.service.common import Access, Idempotency, Metrics, ServiceError, endpoint, parse

LeaseRequest = ExecRequest | IdRequest | EvaluateRequest | FileReadRequest


SEED_NODE_CAPACITY = 15  # the seed's SWE_MAX_CONTAINERS_PER_NODE default, for a node that reports none


@dataclass
class Node:
    url: str
    capacity: int = 0
    healthy: bool = False
    leases: int = 0
    reserved: int = 0
    failures: int = 0

    def limit(self, cap: int | None) -> int:
        return min(self.capacity, cap) if cap else self.capacity

    def free(self, cap: int | None) -> int:
        return self.limit(cap) - self.leases - self.reserved if self.healthy else 0


@dataclass
class Lease:
    lease_id: str
    node: Node
    container_id: str
    image: str
    ttl: float
    expires: float = 0.0
    failed: str | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def renew(self) -> None:
        self.expires = time.monotonic() + self.ttl


class LeasePool:
    """All the pool's state; one per app."""

    def __init__(
        self,
        urls: list[str],
        *,
        token: str | None,
        max_concurrent: int,
        per_node: int | None,
        ttl: float,
        wait: float,
        health_period: float,
        reap_period: float,
    ) -> None:
        self.nodes = [Node(u.rstrip("/")) for u in urls]
        self.token = token
        self.max_concurrent = max_concurrent
        self.per_node = per_node
        self.ttl = ttl
        self.wait = wait
        self.health_period = health_period
        self.reap_period = reap_period
        self.leases: dict[str, Lease] = {}
        self._waiters: deque[asyncio.Future[Node]] = deque()  # FIFO; a timed-out waiter is cancelled in place
        self._session: Any = None
        self.draining = False
        self.reaped = 0

    # -- talking to nodes ------------------------------------------------------------------------
    async def call(
        self,
        node: Node,
        path: str,
        body: dict[str, Any] | None,
        request_id: str | None,
        timeout: float = 60.0,
    ) -> tuple[int, bytes]:
        import aiohttp

        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        if request_id:
            headers["X-Request-ID"] = request_id
        try:
            if body is None:
                async with self._session.get(
                    node.url + path, headers=headers, timeout=aiohttp.ClientTimeout(total=timeout)
                ) as resp:
                    return resp.status, await resp.read()
            async with self._session.post(
                node.url + path, json=body, headers=headers, timeout=aiohttp.ClientTimeout(total=timeout)
            ) as resp:
                return resp.status, await resp.read()
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            self._mark_down(node, f"{type(exc).__name__}: {exc}")
            raise ServiceError("node_down", f"node {node.url} unreachable: {type(exc).__name__}") from None

    def _mark_down(self, node: Node, why: str) -> None:
        if node.healthy:
            node.healthy = False
            for lease in self.leases.values():
                if lease.node is node and lease.failed is None:
                    lease.failed = f"node {node.url} is down ({why})"
                    node.leases -= 1

    async def check(self, node: Node) -> None:
        try:
            status, body = await self.call(node, "/healthz", None, None, timeout=5)
        except ServiceError:
            node.failures += 1
            return
        if status != 200:
            self._mark_down(node, f"healthz HTTP {status}")
            return
        import json

        info = json.loads(body)
        # the seed's exec server reports no capacity: take the cap if one is set, else the seed's own default
        node.capacity = int(info["capacity"]) if "capacity" in info else (self.per_node or SEED_NODE_CAPACITY)
        if not node.healthy:
            node.healthy = True
            node.failures = 0
            await self.reconcile(node)
        self._grant()  # a node came back, or reports more capacity

    async def reconcile(self, node: Node) -> None:
        """Destroy the node's sandboxes that no live lease owns (after a node or pool restart)."""
        import json

        try:
            status, body = await self.call(node, "/containers", None, None)
        except ServiceError:
            return
        if status != 200:
            return
        owned = {
            lease.container_id for lease in self.leases.values() if lease.node is node and not lease.failed
        }
        for container in json.loads(body).get("containers", []):
            if container not in owned:
                with contextlib.suppress(ServiceError):
                    await self.call(node, "/container/destroy", {"container_id": container}, None)
        node.leases = len(owned)

    # -- leases -----------------------------------------------------------------------------------
    def _pick(self) -> Node | None:
        if sum(n.leases + n.reserved for n in self.nodes) >= self.max_concurrent:
            return None
        best = max(self.nodes, key=lambda n: n.free(self.per_node), default=None)
        return best if best is not None and best.free(self.per_node) > 0 else None

    async def allocate(self, req: AllocateRequest, request_id: str | None) -> AllocateResponse:
        if self.draining:
            raise ServiceError("draining", "the pool is shutting down", retry_after=5)
        wait = self.wait if req.wait is None else req.wait
        node = await self._slot(time.monotonic() + wait)
        if node is None:
            raise ServiceError(
                "capacity",
                f"no free sandbox slot within {wait:g}s",
                retry_after=max(1.0, self.reap_period),
            )
        status, body = 0, b""
        try:
            create = {"image": req.image, "limits": req.limits.model_dump() if req.limits else None}
            status, body = await self.call(node, "/container/create", create, request_id, timeout=600)
        finally:
            node.reserved -= 1
            if status != 200:
                self._grant()  # the slot is free again
        if status != 200:
            return _relay(status, body)  # type: ignore[return-value]
        import json

        container_id = json.loads(body)["container_id"]
        lease = Lease(self._new_lease_id(), node, container_id, req.image, req.ttl or self.ttl)
        lease.renew()
        node.leases += 1
        self.leases[lease.lease_id] = lease
        return AllocateResponse(
            lease_id=lease.lease_id, container_id=container_id, node_url=node.url, expires_in=lease.ttl
        )

    def _new_lease_id(self) -> str:
        # the seed's format, swe-lease- and 16 hex digits: its clients log it (they never parse it)
        while (lease_id := f"swe-lease-{uuid.uuid4().hex[:16]}") in self.leases:
            pass
        return lease_id

    async def _slot(self, deadline: float) -> Node | None:
        """A node with a slot reserved for the caller, in arrival order, or None once ``deadline`` passes.

        A freed slot is handed to the head waiter directly (``_grant``): no waiter wakes only to find
        it is not its turn, so a long queue costs nothing per release and every waiter leaves on time.
        """
        while self._waiters and self._waiters[0].done():
            self._waiters.popleft()
        if not self._waiters:  # nobody is ahead: take a free slot at once
            node = self._pick()
            if node is not None:
                node.reserved += 1
                return node
        granted: asyncio.Future[Node] = asyncio.get_running_loop().create_future()
        self._waiters.append(granted)
        try:
            await asyncio.wait([granted], timeout=max(0.0, deadline - time.monotonic()))
        except BaseException:  # the caller went away
            if granted.done():
                granted.result().reserved -= 1  # granted meanwhile: give the slot back
                self._grant()
            granted.cancel()
            raise
        if granted.done():
            return granted.result()
        granted.cancel()  # left in the queue; _grant skips it
        return None

    def _grant(self) -> None:
        """Hand free slots to the waiters at the head of the queue, first come first served."""
        while self._waiters:
            head = self._waiters[0]
            if head.done():  # timed out or went away
                self._waiters.popleft()
                continue
            node = self._pick()
            if node is None:
                return
            node.reserved += 1
            self._waiters.popleft()
            head.set_result(node)

    def _queued(self) -> int:
        return sum(not w.done() for w in self._waiters)

    def get(self, lease_id: str) -> Lease:
        lease = self.leases.get(lease_id)
        if lease is None:
            raise ServiceError("not_found", f"no lease {lease_id!r} (expired, closed or never allocated)")
        if lease.failed:
            raise ServiceError("node_down", lease.failed)
        lease.renew()
        return lease

    async def release(self, lease: Lease, request_id: str | None = None) -> None:
        if self.leases.pop(lease.lease_id, None) is None:
            return
        if not lease.failed:
            lease.node.leases -= 1
            with contextlib.suppress(ServiceError):
                await self.call(
                    lease.node, "/container/destroy", {"container_id": lease.container_id}, request_id
                )
        self._grant()

    async def reap(self) -> None:
        now = time.monotonic()
        for lease in [lease for lease in self.leases.values() if lease.expires < now]:
            self.reaped += 1
            await self.release(lease)

    async def loops(self) -> None:
        next_health = 0.0
        while True:
            if time.monotonic() >= next_health:
                await asyncio.gather(*(self.check(n) for n in self.nodes))
                next_health = time.monotonic() + self.health_period
            await self.reap()
            await asyncio.sleep(min(self.reap_period, self.health_period))

    def statistics(self) -> dict[str, Any]:
        """The ``pool`` object of ``GET /status``: the seed's fields first, swe-rl's own beside them."""
        return {
            "total_leases": len(self.leases),
            "nodes": [
                {
                    "url": n.url,
                    "active_containers": n.leases + n.reserved,  # the seed counts a slot from its reservation
                    "max_containers": n.limit(self.per_node),
                    "healthy": n.healthy,
                    "capacity": n.capacity,
                    "leases": n.leases,
                }
                for n in self.nodes
            ],
            "queue": self._queued(),
            "max_concurrent": self.max_concurrent,
            "per_node_cap": self.per_node,
            "reaped": self.reaped,
            "draining": self.draining,
        }


def _relay(status: int, body: bytes) -> Response:
    return Response(body, status_code=status, media_type="application/json")


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
    metrics = Metrics("swe_rl_pool")
    metrics.gauge("leases", lambda: len(pool.leases))
    metrics.gauge("queue_length", lambda: pool._queued())
    metrics.gauge("healthy_nodes", lambda: sum(n.healthy for n in pool.nodes))
    idem = Idempotency()

    async def allocate(request: Request) -> Any:
        return await pool.allocate(await parse(request, AllocateRequest), request.headers.get("x-request-id"))

    def forward(path: str, model: type[LeaseRequest]) -> Any:
        async def handler(request: Request) -> Response:
            req = await parse(request, model)  # capped while it streams in; malformed fields are a 400 here
            lease = pool.get(req.lease_id)
            body = {
                **req.model_dump(exclude_unset=True, exclude={"lease_id"}),
                "container_id": lease.container_id,
            }
            async with lease.lock:
                started = time.monotonic()
                status, data = await pool.call(
                    lease.node,
                    path,
                    body,
                    request.headers.get("x-request-id"),
                    timeout=float(getattr(req, "timeout", 180)) + 30,
                )
            metrics.observe("node_call_seconds", time.monotonic() - started)
            return _relay(status, data)

        return handler

    async def heartbeat(request: Request) -> HeartbeatResponse:
        lease = pool.get((await parse(request, IdRequest)).lease_id)
        return HeartbeatResponse(expires_in=lease.ttl)

    async def close(request: Request) -> OkResponse:
        req = await parse(request, IdRequest)
        lease = pool.leases.get(req.lease_id)
        if lease is not None:
            await pool.release(lease, request.headers.get("x-request-id"))
        return OkResponse()

    async def status(request: Request) -> dict[str, Any]:
        return {"ok": True, "pool": pool.statistics()}  # the seed's shape

    async def healthz(request: Request) -> dict[str, Any]:
        return {"ok": True, "healthy_nodes": sum(n.healthy for n in pool.nodes)}

    async def metrics_(request: Request) -> Any:
        return metrics.response()

    def route(path: str, handler: Any, methods: list[str] | None = None, auth: bool = True) -> Route:
        name = path.strip("/") or "root"
        return Route(
            path,
            endpoint(handler, token=token if auth else None, metrics=metrics, idempotency=idem, name=name),
            methods=methods or ["POST"],
        )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        import aiohttp

        pool._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1024))
        await asyncio.gather(*(pool.check(n) for n in pool.nodes))
        task = asyncio.ensure_future(pool.loops())
        try:
            yield
        finally:
            pool.draining = True
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await asyncio.gather(
                *(pool.release(lease) for lease in list(pool.leases.values())), return_exceptions=True
            )
            await pool._session.close()

    app = Starlette(
        routes=[
            route("/allocate", allocate),
            route("/exec", forward("/container/exec", ExecRequest)),
            route("/diff", forward("/container/diff", IdRequest)),
            route("/evaluate", forward("/container/evaluate", EvaluateRequest)),
            route("/reset", forward("/container/reset", IdRequest)),
            route("/read_file", forward("/container/read_file", FileReadRequest)),
            route("/write_file", forward("/container/write_file", FileWriteRequest)),
            route("/heartbeat", heartbeat),
            route("/close", close),
            route("/status", status, ["GET"]),
            route("/healthz", healthz, ["GET"], auth=False),
            route("/metrics", metrics_, ["GET"], auth=False),
        ],
        lifespan=lifespan,
    )
    app.state.pool = pool
    return app
