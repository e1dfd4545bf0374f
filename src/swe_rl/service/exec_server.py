"""The exec server: one per sandbox node (default :5000), the seed's endpoints over any sandbox backend.

``image`` in /container/create names an env key, an instance id or SWE-bench image name of the server's
task source (whose env is built on demand), or, on the docker backend, any local image.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route

from swe_rl.envs.cache import EnvCache
from swe_rl.envs.images.pull import ImageEntry, image_inventory
from swe_rl.errors import ConfigError, SweRlError
from swe_rl.harness.official import preload
from swe_rl.sandbox.base import EnvSpec, Limits, Sandbox, SandboxFactory
from swe_rl.sandbox.capacity import machine_capacity
from swe_rl.sandbox.exec_protocol import (
    CreateRequest,
    CreateResponse,
    DiffResponse,
    EvaluateRequest,
    EvaluateResponse,
    ExecRequest,
    ExecResponse,
    FileReadRequest,
    FileResponse,
    FileWriteRequest,
    IdRequest,
    OkResponse,
    timeout_note,
)
from swe_rl.service.evaluate import grade_officially, run_eval_script, unresolved
from swe_rl.service.server_kit import Access, Idempotency, Metrics, ServiceError, endpoint, parse
from swe_rl.tasks.image_names import canonical_image, image_name
from swe_rl.tasks.model import Task, parse_task


def default_capacity() -> int:
    """Sandboxes this node offers: bounded by CPU (32 idle shells per core) and memory (256 MiB each)."""
    return machine_capacity(per_cpu=32, mem_mb_each=256)


@dataclass
class Held:
    sandbox: Sandbox
    env: EnvSpec
    task: Task | None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    created: float = field(default_factory=time.time)


class ExecNode:
    """The node's state: live sandboxes by id. One object per app; no module globals."""

    def __init__(
        self, factory: SandboxFactory, cache: EnvCache, tasks: list[Task], capacity: int, limits: Limits
    ) -> None:
        self.factory = factory
        self.cache = cache
        self.limits = limits
        self.capacity = capacity
        self.boxes: dict[str, Held] = {}
        self.by_name = {t.instance_id: t for t in tasks}
        self.by_name.update({image_name(t.instance_id): t for t in tasks})
        self.by_name.update({image_name(t.instance_id, "swegym"): t for t in tasks})
        self.by_name.update({canonical_image(t.image_name): t for t in tasks if t.image_name})
        self.draining = False
        self._creating = 0

    def resolve(self, image: str) -> tuple[EnvSpec, Task | None]:
        task = self.by_name.get(image) or self.by_name.get(canonical_image(image))
        if task is not None:
            return self.cache.ensure(task), task
        spec = self.cache.get(image) or self.cache.get(self.cache.image_key(image) or "")
        if spec is not None:
            return spec, None
        if self.factory.backend == "docker":
            return EnvSpec(key=image, repo="", base_commit="HEAD", testbed=self.cache.root, image=image), None
        raise ServiceError("not_found", f"unknown image {image!r}: not an env key or a task of this node")

    def inventory(self) -> list[ImageEntry]:
        """What `swe-rl images ls` lists: imported envs, and the engine's evaluation images on docker nodes."""
        client = getattr(self.factory, "_client", None) if self.factory.backend == "docker" else None
        return image_inventory(self.cache, client)

    def task_for(self, instance: str | dict[str, Any] | None, default: Task | None) -> Task | None:
        """The task an evaluate request names: a record, an instance id of this node, else the image's."""
        if isinstance(instance, dict):
            return parse_task(instance, where="request")
        if instance:
            task = self.by_name.get(instance)
            if task is None:
                raise ServiceError("not_found", f"no task {instance!r} on this node")
            return task
        return default

    def get(self, container_id: str) -> Held:
        held = self.boxes.get(container_id)
        if held is None:
            raise ServiceError("not_found", f"no sandbox {container_id!r} on this node")
        return held

    def capped(self, asked: Limits | None) -> Limits:
        """The client's limits, never above the node's."""
        if asked is None:
            return self.limits
        top = self.limits
        return Limits(
            memory_mb=min(asked.memory_mb, top.memory_mb),
            pids=min(asked.pids, top.pids),
            cpus=min(asked.cpus, top.cpus),
            output_bytes=min(asked.output_bytes, top.output_bytes),
            disk_mb=min(asked.disk_mb, top.disk_mb),
            network=asked.network and top.network,
        )

    async def create(self, image: str, limits: Limits | None = None) -> str:
        if self.draining:
            raise ServiceError("draining", "this node is shutting down", retry_after=5)
        if len(self.boxes) + self._creating >= self.capacity:
            raise ServiceError("capacity", f"node full ({self.capacity} sandboxes)", retry_after=1)
        self._creating += 1
        try:
            try:
                env, task = await asyncio.to_thread(self.resolve, image)
            except ConfigError as exc:
                raise ServiceError("bad_request", str(exc)) from None
            box = await self.factory.create(env, self.capped(limits))  # its errors: by kind, at the endpoint
        finally:
            self._creating -= 1
        self.boxes[box.id] = Held(box, env, task)
        return box.id

    async def destroy(self, container_id: str) -> None:
        held = self.boxes.pop(container_id, None)
        if held is not None:
            await held.sandbox.close()

    async def close_all(self) -> None:
        self.draining = True
        await asyncio.gather(*(self.destroy(i) for i in list(self.boxes)), return_exceptions=True)

    def statistics(self) -> dict[str, Any]:
        return {
            "running": len(self.boxes),
            "capacity": self.capacity,
            "draining": self.draining,
            "cpus": os.cpu_count(),
            "backend": self.factory.backend,
        }


async def _sandbox_call(coro: Any) -> Any:
    """A sandbox call; swe-rl's errors go on to the endpoint, which answers each by its kind
    (``service.server_kit.error_kind``: a lost engine is node_down, an over-cap file too_large, ...)."""
    try:
        return await coro
    except SweRlError:
        raise
    except OSError as exc:
        raise ServiceError("bad_request", str(exc)) from None


class ExecHandlers:
    """The exec server's HTTP side over one node: a method per route, the routes, and the lifespan."""

    def __init__(self, node: ExecNode, token: str | Access | None) -> None:
        self.node = node
        self.token = token
        self.metrics = Metrics("swe_rl_exec")
        self.metrics.gauge("sandboxes", "Sandboxes live on this node.", lambda: len(node.boxes))
        self.exec_inner = self.metrics.histogram(
            "exec_inner_seconds",
            "Seconds a command took in its sandbox (no HTTP, no wait for the sandbox's lock).",
        )
        self.idempotency = Idempotency()
        self.grading_loaded: float | None = None  # seconds swebench's grading took to import, at start

    async def healthz(self, request: Request) -> dict[str, Any]:
        return {
            "ok": True,
            "running_containers": str(len(self.node.boxes)),
            "grading_loaded_s": self.grading_loaded,
            **self.node.statistics(),
        }

    async def images(self, request: Request) -> dict[str, Any]:
        node = self.node
        inventory = await asyncio.to_thread(node.inventory)
        names = sorted(
            {s.key for s in node.cache.records()} | set(node.by_name) | {e.name for e in inventory}
        )
        return {
            "ok": True,
            "images": names,
            "count": len(names),
            "inventory": [e.model_dump() for e in inventory],
        }

    async def status(self, request: Request) -> dict[str, Any]:
        """The seed's GET /status: the live sandboxes, by id."""
        boxes = {
            cid: {"env": held.env.key, "instance_id": held.task.instance_id if held.task else None}
            for cid, held in self.node.boxes.items()
        }
        return {"ok": True, "active_containers": len(boxes), "containers": boxes}

    async def containers(self, request: Request) -> dict[str, Any]:
        return {"ok": True, "containers": sorted(self.node.boxes)}

    async def create(self, request: Request) -> CreateResponse:
        req = await parse(request, CreateRequest)
        box_id = await self.node.create(req.image, req.limits)
        return CreateResponse(container_id=box_id, name=box_id)

    async def exec_(self, request: Request) -> ExecResponse:
        req = await parse(request, ExecRequest)
        held = self.node.get(req.container_id)
        async with held.lock:
            started = time.monotonic()
            result = await _sandbox_call(
                held.sandbox.exec(req.command, timeout=req.timeout, cwd=req.cwd, env=req.env)
            )
        self.exec_inner.observe(time.monotonic() - started)
        reply = ExecResponse(**result.model_dump(exclude={"truncated"}))
        if result.timed_out:  # as the seed answers a timeout: -1 and its sentence (after what ran)
            reply.returncode, reply.output = -1, reply.output + timeout_note(req.timeout)
        return reply

    async def diff(self, request: Request) -> DiffResponse:
        req = await parse(request, IdRequest)
        held = self.node.get(req.container_id)
        async with held.lock:
            patch = await _sandbox_call(held.sandbox.diff())
        return DiffResponse(patch=patch)

    async def reset(self, request: Request) -> OkResponse:
        held = self.node.get((await parse(request, IdRequest)).container_id)
        async with held.lock:
            await _sandbox_call(held.sandbox.reset())
        return OkResponse()

    async def read_file(self, request: Request) -> FileResponse:
        req = await parse(request, FileReadRequest)
        held = self.node.get(req.container_id)
        async with held.lock:
            data = await _sandbox_call(held.sandbox.read_file(req.path))
        return FileResponse(data_b64=base64.b64encode(data).decode())

    async def write_file(self, request: Request) -> OkResponse:
        req = await parse(request, FileWriteRequest)
        held = self.node.get(req.container_id)
        try:
            data = base64.b64decode(req.data_b64, validate=True)
        except ValueError:
            raise ServiceError("bad_request", "data_b64 is not base64") from None
        async with held.lock:
            await _sandbox_call(held.sandbox.write_file(req.path, data))
        return OkResponse()

    async def evaluate(self, request: Request) -> EvaluateResponse:
        req = await parse(request, EvaluateRequest)
        node = self.node
        held = node.get(req.container_id)
        if req.patch is not None:
            patch = req.patch
        else:
            async with held.lock:
                patch = await _sandbox_call(held.sandbox.diff())
        if req.eval_script:  # the seed's contract: the client's script decides
            return await run_eval_script(
                node.factory, held.env, node.limits, patch, req.eval_script, cwd=req.cwd, timeout=req.timeout
            )
        task = node.task_for(req.instance, held.task)
        if task is None:
            return unresolved(
                "nothing to grade by: no eval_script, and neither the request's 'instance' nor the image "
                f"{held.env.key!r} names a task of this node"
            )
        return await grade_officially(task, patch, node.factory, held.env, node.limits, timeout=req.timeout)

    async def destroy(self, request: Request) -> OkResponse:
        await self.node.destroy((await parse(request, IdRequest)).container_id)
        return OkResponse()

    async def render_metrics(self, request: Request) -> Any:
        return self.metrics.response()

    def routes(self) -> list[Route]:
        """/healthz and /metrics open to all, the rest behind the token and idempotent by X-Request-ID."""
        return [
            self._open("/healthz", self.healthz, "healthz"),
            self._open("/metrics", self.render_metrics, "metrics"),
            self._route("/images", self.images, ["GET"]),
            self._route("/status", self.status, ["GET"]),
            self._route("/containers", self.containers, ["GET"]),
            self._route("/container/create", self.create, ["POST"]),
            self._route("/container/exec", self.exec_, ["POST"]),
            self._route("/container/diff", self.diff, ["POST"]),
            self._route("/container/evaluate", self.evaluate, ["POST"]),
            self._route("/container/reset", self.reset, ["POST"]),
            self._route("/container/read_file", self.read_file, ["POST"]),
            self._route("/container/write_file", self.write_file, ["POST"]),
            self._route("/container/destroy", self.destroy, ["POST"]),
        ]

    def _open(self, path: str, handler: Any, name: str) -> Route:
        return Route(path, endpoint(handler, token=None, metrics=self.metrics, idempotency=None, name=name))

    def _route(self, path: str, handler: Any, methods: list[str]) -> Route:
        name = path.strip("/").replace("/", "_") or "root"
        wrapped = endpoint(
            handler, token=self.token, metrics=self.metrics, idempotency=self.idempotency, name=name
        )
        return Route(path, wrapped, methods=methods)

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        self.grading_loaded = await asyncio.to_thread(preload)
        yield
        await self.node.close_all()  # graceful drain: uvicorn finished in-flight requests; now nothing leaks


def create_app(
    factory: SandboxFactory,
    cache: EnvCache,
    tasks: list[Task] | None = None,
    *,
    token: str | Access | None = None,
    capacity: int | None = None,
    limits: Limits | None = None,
) -> Starlette:
    node = ExecNode(factory, cache, tasks or [], capacity or default_capacity(), limits or Limits())
    handlers = ExecHandlers(node, token)
    app = Starlette(routes=handlers.routes(), lifespan=handlers.lifespan)
    app.state.node = node
    app.state.metrics = handlers.metrics
    app.state.idempotency = handlers.idempotency
    return app
