"""The node side of the Ray executor: each node's host actor, and the Ray task that runs one rollout.

A node advertises ``sandbox``, ``sandbox_start_up`` and ``env_io`` (:func:`node_resources`). Its
:class:`NodeHost` (a named, detached actor pinned to the node) owns the node's env cache: one build per env
however many rollouts want it (builds limited by ``env_io``), sandbox creation gated by
``sandbox_start_up``, and a record of the envs held and the rollouts run. :func:`run_on_node` is the Ray
task (one ``sandbox`` slot each): one episode request on this node's sandboxes.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import time
import uuid
from collections import Counter, deque
from typing import TYPE_CHECKING, Any

from swe_rl.errors import MissingExtraError
from swe_rl.tasks.model import Task, parse_task

if TYPE_CHECKING:
    from swe_rl.sandbox.base import EnvSpec, Limits, Sandbox, SandboxFactory

NAMESPACE = "swe-rl"
RESOURCES = ("sandbox", "sandbox_start_up", "env_io")
SANDBOXES_PER_CPU = 4  # a rollout mostly waits on the model; its test runs take the CPU
MB_PER_SANDBOX = 512  # its Ray worker (~260 MB measured) + sandbox (~2 MB) + the tests it runs
RESERVED_MB = 2048  # raylet, object store, the node's own processes
REFRESH_S = 5.0  # how often the head re-reads nodes and their envs


def import_ray() -> Any:
    """The ``ray`` module, or MissingExtraError naming the extra."""
    try:
        import ray
    except ImportError:
        raise MissingExtraError("ray", "ray", "the Ray executor") from None
    return ray


def node_resources(cpus: float | None = None, memory_mb: int | None = None) -> dict[str, int]:
    """The swe-rl resources a node advertises, from its CPUs and memory (this machine's by default,
    cgroup limits included)."""
    from swe_rl.sandbox.capacity import host_cpus, host_memory_mb

    cpus = cpus or host_cpus()
    memory_mb = memory_mb or host_memory_mb()
    sandbox = max(1, min(int(cpus * SANDBOXES_PER_CPU), (memory_mb - RESERVED_MB) // MB_PER_SANDBOX))
    return {
        "sandbox": sandbox,
        "sandbox_start_up": max(1, min(sandbox, int(cpus))),
        "env_io": max(1, min(4, int(cpus) // 4)),
    }


def placement_key(task: Task) -> str:
    """What a node must hold to run ``task`` warm: its repo at its base commit."""
    return f"{task.repo}@{task.base_commit}"


def host_name(node_id: str) -> str:
    from swe_rl import __version__

    return f"swe-rl-{__version__}-node-{node_id}"


def alive_nodes() -> dict[str, dict[str, float]]:
    """Alive nodes that offer sandbox slots: node id -> total resources."""
    ray = import_ray()
    return {
        n["NodeID"]: n["Resources"]
        for n in ray.nodes()
        if n.get("Alive") and n.get("Resources", {}).get("sandbox", 0) >= 1
    }


@functools.cache
def _host_class() -> Any:
    return import_ray().remote(NodeHost)


def host_handle(node_id: str, *, create: bool = True) -> Any:
    """The node's host actor (created on first use, pinned to the node); None if absent and not created."""
    ray = import_ray()
    if not create:
        try:
            return ray.get_actor(host_name(node_id), namespace=NAMESPACE)
        except ValueError:
            return None
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return (
        _host_class()
        .options(
            name=host_name(node_id),
            namespace=NAMESPACE,
            lifetime="detached",  # a node daemon: outlives one driver, dies with its node
            get_if_exists=True,
            num_cpus=0,
            max_concurrency=10_000,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
        )
        .remote()
    )


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class NodeHost:
    """One per node (a named async Ray actor): the node's env cache and throttles, and what it runs."""

    def __init__(self) -> None:
        from swe_rl.envs.cache import EnvCache

        ray = import_ray()
        self.node_id: str = ray.get_runtime_context().get_node_id()
        totals = alive_nodes().get(self.node_id, {})
        self.resources = {k: int(totals.get(k, 0)) for k in RESOURCES}
        self.cache = EnvCache()
        self.held = {placement_key_of(s) for s in self.cache.records()}
        self.scanned = time.monotonic()
        self.env_io = asyncio.Semaphore(max(1, self.resources["env_io"]))
        self.start_up = asyncio.Semaphore(max(1, self.resources["sandbox_start_up"]))
        self.starting: Counter[int] = Counter()  # worker pid -> start-up slots held
        self.building: dict[str, asyncio.Future[str]] = {}
        self.builds: Counter[str] = Counter()
        self.running: dict[str, tuple[str, int, float]] = {}  # rollout id -> (instance, pid, start)
        self.spans: deque[tuple[float, float]] = deque(maxlen=10_000)  # wall-clock (start, end)
        self.completed = 0

    async def ensure(self, record: dict[str, Any]) -> str:
        """Build the task's env on this node unless held; one build however many callers. Its key."""
        task = parse_task(record, where="task")
        key = placement_key(task)
        pending = self.building.get(key)
        if pending is None:
            pending = asyncio.ensure_future(self._build(task, key))
            self.building[key] = pending
            pending.add_done_callback(lambda _f: self.building.pop(key, None))
        return await asyncio.shield(pending)

    async def _build(self, task: Task, key: str) -> str:
        cold = key not in self.held
        async with self.env_io:
            spec = await asyncio.to_thread(self.cache.ensure, task)
        if cold:
            self.builds[key] += 1
            self.held.add(key)
        return spec.key

    async def acquire_start_up(self, pid: int) -> None:
        self._reap()
        await self.start_up.acquire()
        self.starting[pid] += 1

    async def release_start_up(self, pid: int) -> None:
        if self.starting[pid] > 0:
            self.starting[pid] -= 1
            self.start_up.release()

    async def begin(self, rollout_id: str, instance_id: str, pid: int) -> None:
        self.running[rollout_id] = (instance_id, pid, time.time())

    async def end(self, rollout_id: str) -> None:
        entry = self.running.pop(rollout_id, None)
        if entry is not None:
            self.spans.append((entry[2], time.time()))
            self.completed += 1

    async def envs(self) -> list[str]:
        """The envs this node holds (placement keys), including those built meanwhile by `swe-rl env build`."""
        if time.monotonic() - self.scanned > REFRESH_S:
            self.scanned = time.monotonic()
            self.held |= {placement_key_of(s) for s in await asyncio.to_thread(self.cache.records)}
        return sorted(self.held)

    async def statistics(self) -> dict[str, Any]:
        """A snapshot: resources, envs held, builds per env, running rollouts, (start, end) of finished ones."""
        self._reap()
        await self.envs()
        now = time.time()
        return {
            "node_id": self.node_id,
            "cache": str(self.cache.root),
            "resources": self.resources,
            "envs": sorted(self.held),
            "builds": dict(self.builds),
            "running": [
                {"instance_id": i, "pid": p, "for_s": round(now - t, 3)} for i, p, t in self.running.values()
            ],
            "completed": self.completed,
            "spans": list(self.spans),
        }

    def _reap(self) -> None:
        """Forget what workers that died (killed, OOM) held: their rollouts and start-up slots."""
        for rollout_id, (_, pid, _) in list(self.running.items()):
            if not _pid_alive(pid):
                del self.running[rollout_id]
        for pid, held in list(self.starting.items()):
            if held and not _pid_alive(pid):
                for _ in range(held):
                    self.start_up.release()
                del self.starting[pid]


def placement_key_of(spec: EnvSpec) -> str:
    return f"{spec.repo}@{spec.base_commit}"


class _StartUpGate:
    """A sandbox factory whose ``create`` holds one of the node's ``sandbox_start_up`` slots."""

    def __init__(self, factory: SandboxFactory, host: Any) -> None:
        self.factory, self.host, self.backend = factory, host, factory.backend

    async def create(self, env: EnvSpec, limits: Limits | None = None) -> Sandbox:
        pid = os.getpid()
        await self.host.acquire_start_up.remote(pid)
        try:
            return await self.factory.create(env, limits)
        finally:
            await self.host.release_start_up.remote(pid)


@functools.cache
def _factory(backend: str, token: str | None) -> SandboxFactory:
    from swe_rl.sandbox import get_factory

    return get_factory(backend, token=token)


def run_on_node(
    payload: dict[str, Any], backend: str, token: str | None = None
) -> tuple[dict[str, Any], str]:
    """The Ray task: one episode request (a training rollout or an eval attempt) on this node; ``token`` is a
    pool backend's bearer token."""
    node_id = import_ray().get_runtime_context().get_node_id()
    return asyncio.run(_on_node(node_id, payload, backend, token)), node_id


async def _on_node(node_id: str, payload: dict[str, Any], backend: str, token: str | None) -> dict[str, Any]:
    from swe_rl.envs.cache import EnvCache
    from swe_rl.episode.request import EpisodeRequest
    from swe_rl.executors.local import LocalExecutor

    host = host_handle(node_id)
    record = payload["task"]
    rollout_id = uuid.uuid4().hex
    await host.begin.remote(rollout_id, str(record.get("instance_id", "")), os.getpid())
    local = LocalExecutor(_StartUpGate(_factory(backend, token), host), EnvCache())
    try:
        with contextlib.suppress(Exception):  # the run's own ensure() fails the same way, typed
            await host.ensure.remote(record)
        request = EpisodeRequest.model_validate(payload)
        result = await local.run_now(local.task(request.task), request)
        return result.model_dump(mode="json")
    finally:
        await local.models.close()  # not local.close(): the factory is this worker's, shared by its tasks
        await host.end.remote(rollout_id)
