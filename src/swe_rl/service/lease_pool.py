"""The pool server's state: leases on sandboxes across exec-server nodes (pool_server.py serves it).

Leases expire unless renewed (heartbeat or any call) and a reaper destroys expired ones on their node;
a full cluster makes ``allocate`` wait in a fair FIFO queue up to a deadline, then answer a typed 503
with Retry-After; nodes are health-checked, a dead node's leases fail fast as ``node_down`` and new
leases go elsewhere; a node that comes back (or a restarted pool) is reconciled: sandboxes no lease
owns are destroyed.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from starlette.responses import Response

from swe_rl.sandbox.exec_protocol import AllocateRequest, AllocateResponse
from swe_rl.service.server_kit import ServiceError

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
        self._background: asyncio.Future[None] | None = None
        self.draining = False
        self.reaped = 0

    async def start(self) -> None:
        """Open the session to the nodes, check them all once, then keep checking and reaping."""
        import aiohttp

        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1024))
        await asyncio.gather(*(self.check(n) for n in self.nodes))
        self._background = asyncio.ensure_future(self.loops())

    async def shutdown(self) -> None:
        """Drain: refuse new leases, stop the loops, release every lease (destroying its sandbox)."""
        self.draining = True
        if self._background is not None:
            self._background.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._background
        await asyncio.gather(
            *(self.release(lease) for lease in list(self.leases.values())), return_exceptions=True
        )
        await self._session.close()

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
        except TimeoutError as exc:
            if isinstance(exc, aiohttp.ConnectionTimeoutError):  # a connect timeout: the node is unreachable
                self._mark_down(node, f"{type(exc).__name__}: {exc}")
                raise ServiceError(
                    "node_down", f"node {node.url} unreachable: {type(exc).__name__}"
                ) from None
            # the node took the call and is slow on it (an agent's huge diff, say): that call's error, not the
            # node's; whether the node is down is its health check's to say, never one lease's slow call
            raise ServiceError(
                "sandbox_error", f"node {node.url} did not answer {path} within {timeout:.0f} s"
            ) from None
        except (aiohttp.ClientError, OSError) as exc:
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
        except ServiceError as exc:
            node.failures += 1
            self._mark_down(node, str(exc))  # a health check that times out is a node down
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
            return relay(status, body)  # type: ignore[return-value]
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

    def queued(self) -> int:
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
            "queue": self.queued(),
            "max_concurrent": self.max_concurrent,
            "per_node_cap": self.per_node,
            "reaped": self.reaped,
            "draining": self.draining,
        }


def relay(status: int, body: bytes) -> Response:
    return Response(body, status_code=status, media_type="application/json")
