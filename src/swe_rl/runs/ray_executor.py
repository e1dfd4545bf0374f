"""Rollouts on a Ray cluster: each one a Ray task on a node with a free ``sandbox`` slot, near its env.

Nodes advertise custom resources computed from their real capacity (:func:`node_resources`;
``swe-rl cluster up`` prints the ``ray start`` lines):

- ``sandbox``: rollouts at once (one sandbox each: the agent's, then the grader's), from CPU and memory
- ``sandbox_start_up``: sandboxes being created at once
- ``env_io``: environments being built at once (disk and network bound)

Each rollout (agent + sandbox + grading) is a Ray task that needs one ``sandbox``: Ray's scheduler keeps
every node within its count. On every node a :class:`NodeHost` actor (named, one per node) owns the node's
env cache: it builds an env once however many rollouts want it (builds limited by ``env_io``), gates
sandbox creation by ``sandbox_start_up``, and reports the envs it holds and the rollouts it runs. The head
sends each rollout to a node that holds its env and has a free slot (soft affinity: Ray runs it elsewhere
when that node is gone or full), else to the node with most free slots, which then builds the env once.
A node that dies takes its rollouts with it: they are retried on other nodes up to ``retries`` times,
then come back as ``infra_error`` results, never scored.

Every node needs swe-rl installed (the same version) and its own cache (``SWE_RL_CACHE`` in the
environment of its ``ray start``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import time
import uuid
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from swe_rl.errors import ConfigError, MissingExtraError
from swe_rl.runs.rollout import RolloutResult
from swe_rl.tasks.model import Task, parse_task

if TYPE_CHECKING:
    from swe_rl.runs.evaluation import AttemptOutcome, AttemptSpec
    from swe_rl.runs.executor import RolloutRequest
    from swe_rl.sandbox.base import EnvSpec, Limits, Sandbox, SandboxFactory

NAMESPACE = "swe-rl"
RESOURCES = ("sandbox", "sandbox_start_up", "env_io")
SANDBOXES_PER_CPU = 4  # a rollout mostly waits on the model; its test runs take the CPU
MB_PER_SANDBOX = 512  # sandbox (~2 MB) + its Ray worker (~150 MB) + the repo's test processes
RESERVED_MB = 2048  # raylet, object store, the node's own processes
REFRESH_S = 5.0  # how often the head re-reads nodes and their envs
WATCH_S = 10.0  # how often a waiting rollout checks that some node can still run it


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


def connect(address: str | None) -> bool:
    """Join a Ray cluster (``address``, ``$RAY_ADDRESS``, or one running here); True if we started one.

    With no cluster to join, starts a one-node cluster on this machine that advertises its own capacity.
    """
    ray = import_ray()
    if ray.is_initialized():
        return False
    address = address or os.environ.get("RAY_ADDRESS")
    quiet = {"log_to_driver": False, "logging_level": "WARNING"}
    try:
        ray.init(address=address or "auto", **quiet)
        return False
    except ConnectionError:
        if address:
            raise ConfigError(f"no Ray cluster at {address} (start one with `swe-rl cluster up`)") from None
    ray.init(resources=node_resources(), **quiet)
    return True


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

    async def statistics(self) -> dict[str, Any]:
        """A snapshot: resources, envs held, builds per env, running rollouts, (start, end) of finished ones."""
        self._reap()
        if time.monotonic() - self.scanned > REFRESH_S:  # envs built by `swe-rl env build` meanwhile
            self.held |= {placement_key_of(s) for s in await asyncio.to_thread(self.cache.records)}
            self.scanned = time.monotonic()
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
def _factory(backend: str) -> SandboxFactory:
    from swe_rl.sandbox import get_factory

    return get_factory(backend)


def run_on_node(kind: str, payload: dict[str, Any], backend: str) -> tuple[dict[str, Any], str]:
    """The Ray task: one rollout (``kind`` rollout) or eval attempt (``attempt``) on this node."""
    node_id = import_ray().get_runtime_context().get_node_id()
    return asyncio.run(_on_node(node_id, kind, payload, backend)), node_id


async def _on_node(node_id: str, kind: str, payload: dict[str, Any], backend: str) -> dict[str, Any]:
    from swe_rl.envs.cache import EnvCache

    host = host_handle(node_id)
    record = payload["task"]
    rollout_id = uuid.uuid4().hex
    await host.begin.remote(rollout_id, str(record.get("instance_id", "")), os.getpid())
    try:
        with contextlib.suppress(Exception):  # the run's own ensure() fails the same way, typed
            await host.ensure.remote(record)
        factory = _StartUpGate(_factory(backend), host)
        if kind == "rollout":
            from swe_rl.runs.executor import LocalExecutor, RolloutRequest

            request = RolloutRequest.model_validate(payload)
            local = LocalExecutor(factory, EnvCache())
            result = await local.run_now(local.task(request.task), request)
            return result.model_dump(mode="json")
        from swe_rl.runs.evaluation import AttemptSpec, run_attempt_spec

        outcome = await run_attempt_spec(AttemptSpec.model_validate(payload), EnvCache(), factory)
        return outcome.model_dump(mode="json")
    finally:
        await host.end.remote(rollout_id)


@dataclass
class _Node:
    node_id: str
    slots: int
    held: set[str] = field(default_factory=set)


class _Lost(Exception):
    """A rollout's node or worker was lost (retry elsewhere)."""


class RayExecutor:
    """Rollouts as Ray tasks on the cluster's nodes (see the module docstring)."""

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        *,
        backend: str | None = None,
        retries: int = 1,
        tasks: list[Task] | None = None,
    ) -> None:
        self.ray = import_ray()
        self.backend = backend or os.environ.get("SWE_RL_BACKEND") or "ns"
        self.retries = retries
        self.tasks = {t.instance_id: t for t in tasks or []}
        self.owns_cluster = connect(address)
        self.nodes: dict[str, _Node] = {}
        self.inflight: Counter[str] = Counter()
        self.counts: Counter[str] = Counter()  # submitted, retried, lost, infra_errors
        self.refreshed = 0.0
        self._remote = self.ray.remote(run_on_node)
        self._refresh_nodes()
        if not self.nodes:
            raise ConfigError(
                "no node of this Ray cluster advertises 'sandbox' slots; start the nodes with the "
                "`ray start` commands that `swe-rl cluster up` prints"
            )
        self._refresh_envs_sync()

    # -- the Executor protocol --------------------------------------------------------------------
    async def run(self, request: RolloutRequest) -> RolloutResult:
        task = self._task(request.task)
        payload = request.model_dump(mode="json")
        payload["task"] = task.to_record()
        out = await self._submit("rollout", payload, task)
        if isinstance(out, str):
            return RolloutResult(status="infra_error", exit_status="infra_error", error=out)
        return RolloutResult.model_validate(out)

    async def run_attempt(self, spec: AttemptSpec) -> AttemptOutcome:
        """One ``swe-rl eval`` attempt on a node; the caller writes its artifacts."""
        from swe_rl.runs.evaluation import AttemptOutcome, failed_attempt

        task = parse_task(spec.task, where="task")
        out = await self._submit("attempt", spec.model_dump(mode="json"), task)
        if isinstance(out, str):
            return failed_attempt(spec, out)
        return AttemptOutcome.model_validate(out)

    async def close(self) -> None:
        if self.owns_cluster:
            self.ray.shutdown()

    async def statistics(self) -> dict[str, Any]:
        """The head's counters and every node host's snapshot."""
        hosts = [host_handle(n, create=False) for n in self.nodes]
        snaps = await asyncio.gather(*(h.statistics.remote() for h in hosts if h is not None))
        return {"counts": dict(self.counts), "nodes": list(snaps)}

    # -- placement --------------------------------------------------------------------------------
    def _task(self, spec: str | dict[str, Any]) -> Task:
        if isinstance(spec, dict):
            return parse_task(spec, where="request.task")
        if spec not in self.tasks:
            raise ConfigError(f"unknown instance id {spec!r} (send the full record instead)")
        return self.tasks[spec]

    def _choose(self, key: str, avoid: set[str]) -> tuple[str, bool] | None:
        """(node, spill): a warm node with a free slot, else the node with most free slots, else (all
        busy) the least loaded warm node, from which Ray may spill the rollout to whichever frees first."""
        nodes = [n for n in self.nodes.values() if n.node_id not in avoid] or list(self.nodes.values())
        if not nodes:
            return None

        def free(n: _Node) -> int:
            return n.slots - self.inflight[n.node_id]

        warm = [n for n in nodes if key in n.held]
        pick = [n for n in warm if free(n) > 0] or [n for n in nodes if free(n) > 0]
        spill = not pick
        best = max(pick or warm or nodes, key=lambda n: (free(n) / n.slots, n.slots))
        best.held.add(key)  # it will hold the env once this rollout starts: send its siblings there
        return best.node_id, spill

    async def _submit(self, kind: str, payload: dict[str, Any], task: Task) -> dict[str, Any] | str:
        """Run on some node; the result's dict, or why it was lost (every try)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        key, avoid, why = placement_key(task), set[str](), ""
        for _ in range(self.retries + 1):
            await self._maybe_refresh()
            chosen = self._choose(key, avoid)
            if chosen is None:
                why = "no alive node offers sandbox slots"
                break
            node, spill = chosen
            strategy = NodeAffinitySchedulingStrategy(node, soft=True, _spill_on_unavailable=spill)
            ref = self._remote.options(
                num_cpus=0, resources={"sandbox": 1}, max_retries=0, scheduling_strategy=strategy
            ).remote(kind, payload, self.backend)
            self.counts["submitted"] += 1
            self.inflight[node] += 1
            try:
                out, ran_on = await self._wait(ref)
            except _Lost as exc:
                why = str(exc)
                avoid.add(node)
                self.counts["lost"] += 1
                self._refresh_nodes()
                continue
            finally:
                self.inflight[node] -= 1
            if ran_on in self.nodes:
                self.nodes[ran_on].held.add(key)
            if isinstance(out, str):
                break
            return out
        self.counts["infra_errors"] += 1
        return f"InfraError: rollout of {task.instance_id} lost on Ray: {why}"

    async def _wait(self, ref: Any) -> tuple[dict[str, Any] | str, str]:
        """The task's result; _Lost when its node/worker died or no node can run it any more."""
        exc_mod = self.ray.exceptions
        future = asyncio.wrap_future(ref.future())
        try:
            while True:
                done, _ = await asyncio.wait({future}, timeout=WATCH_S)
                if done:
                    break
                if not alive_nodes():
                    self.ray.cancel(ref, force=True)
                    raise _Lost("no alive node offers sandbox slots")
            return future.result()
        except asyncio.CancelledError:
            self.ray.cancel(ref, force=True)  # the worker dies, and its sandboxes with it
            raise
        except exc_mod.RayTaskError as exc:
            cause = exc.cause
            if isinstance(cause, ConfigError):
                raise cause from None
            if isinstance(cause, exc_mod.RayError):  # the host actor died with the node
                raise _Lost(f"{type(cause).__name__}: {cause}") from None
            self.counts["worker_errors"] += 1
            return f"worker error {type(cause).__name__}: {cause}", ""
        except exc_mod.RayError as exc:  # worker crashed, node died, object lost
            raise _Lost(f"{type(exc).__name__}: {str(exc)[:300]}") from None

    def _refresh_nodes(self) -> None:
        alive = alive_nodes()
        for node_id in list(self.nodes):
            if node_id not in alive:
                del self.nodes[node_id]
        for node_id, totals in alive.items():
            slots = int(totals.get("sandbox", 0))
            known = self.nodes.setdefault(node_id, _Node(node_id, slots))
            known.slots = slots
        self.refreshed = time.monotonic()

    def _refresh_envs_sync(self) -> None:
        """Create the hosts (one per node) and learn which envs each holds."""
        ids = list(self.nodes)
        snaps = self.ray.get([host_handle(n).statistics.remote() for n in ids], timeout=120)
        for node_id, snap in zip(ids, snaps, strict=True):
            self.nodes[node_id].held.update(snap["envs"])

    async def _maybe_refresh(self) -> None:
        if time.monotonic() - self.refreshed < REFRESH_S:
            return
        self._refresh_nodes()
        for node_id in list(self.nodes):
            try:
                snap = await asyncio.wait_for(host_handle(node_id).statistics.remote(), REFRESH_S)
            except Exception:  # a node going away; the next refresh drops it
                continue
            if node_id in self.nodes:
                self.nodes[node_id].held.update(snap["envs"])


def cluster_status(address: str | None = None) -> list[dict[str, Any]]:
    """Every alive node: its swe-rl resources (total, free now), and its host's envs and rollouts."""
    ray = import_ray()
    connect(address)
    try:
        free = ray._private.state.available_resources_per_node()
    except Exception:  # a private API: without it, no "free" column
        free = {}
    out = []
    for node in ray.nodes():
        if not node.get("Alive"):
            continue
        node_id = node["NodeID"]
        host = host_handle(node_id, create=False)
        snap = ray.get(host.statistics.remote(), timeout=30) if host is not None else None
        out.append(
            {
                "node_id": node_id,
                "address": node.get("NodeManagerAddress"),
                "total": {k: int(node["Resources"].get(k, 0)) for k in RESOURCES},
                "free": {k: int(free.get(node_id, {}).get(k, 0)) for k in RESOURCES} if free else None,
                "host": snap,
            }
        )
    return out
