"""Episodes on a Ray cluster (training rollouts and eval attempts alike): each one a Ray task on a node with a free ``sandbox`` slot, near its env.

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

This module is the head's side; the node's side (host actor, the Ray task) is :mod:`swe_rl.executors.ray_node`.
Every node needs swe-rl installed (the same version) and its own cache (``SWE_RL_CACHE`` in the
environment of its ``ray start``).
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from swe_rl.episode.result import RolloutResult
from swe_rl.errors import ConfigError
from swe_rl.executors.base import ModelFactory, refuse_model, refuse_task
from swe_rl.executors.ray_node import (
    NAMESPACE,
    REFRESH_S,
    RESOURCES,
    NodeHost,
    alive_nodes,
    host_handle,
    host_name,
    import_ray,
    node_resources,
    placement_key,
    run_on_node,
)
from swe_rl.tasks.model import Task, parse_task

if TYPE_CHECKING:
    from swe_rl.episode.request import EpisodeRequest

WATCH_S = 10.0  # how often a waiting rollout checks that some node can still run it

__all__ = [
    "NAMESPACE",
    "NodeHost",
    "RayExecutor",
    "cluster_status",
    "connect",
    "host_handle",
    "host_name",
    "node_resources",
]


# Every worker of the job imports swebench's grading when it starts (2-2.5 s on a 2-core machine), not at its first
# verdict: workers are reused across rollouts, and a rollout's time should not depend on the worker it got.
WORKER_ENV = {"worker_process_setup_hook": "swe_rl.harness.official.preload"}


def _reachable(address: str) -> None:
    """ConfigError now for a head nobody listens at (ray.init would retry for minutes)."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"Ray address {address!r} must look like host:port")
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as exc:
        raise ConfigError(f"no Ray cluster at {address}: {exc}") from None


def connect(address: str | None, *, start: bool = True) -> bool:
    """Join a Ray cluster (``address``, or one running here); True if we started one.

    The edges pass ``$RAY_ADDRESS`` as ``address`` where no address was named (the CLI, the adapters' settings).

    With no cluster to join, starts a one-node cluster on this machine that advertises its own capacity
    (unless ``start`` is false: then ConfigError).
    """
    ray = import_ray()
    if ray.is_initialized():
        return False
    if address and address != "auto":
        _reachable(address)
    quiet: dict[str, Any] = {"log_to_driver": False, "logging_level": "WARNING", "runtime_env": WORKER_ENV}
    try:
        ray.init(address=address or "auto", **quiet)
        return False
    except ConnectionError:
        if address or not start:
            where = f"at {address}" if address else "running here (give --address)"
            raise ConfigError(
                f"no Ray cluster {where}; `swe-rl cluster up` prints how to start one"
            ) from None
    ray.init(resources=node_resources(), **quiet)
    return True


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
    in_process = False

    def __init__(
        self,
        address: str | None = None,
        *,
        backend: str | None = None,
        token: str | None = None,
        retries: int = 1,
        tasks: list[Task] | None = None,
    ) -> None:
        self.ray = import_ray()
        self.backend = backend or "ns"
        self.token = token
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
    async def run(
        self, request: EpisodeRequest, *, task: Task | None = None, model: ModelFactory | None = None
    ) -> RolloutResult:
        if model is not None:
            raise refuse_model(self.name, request.model)  # the nodes build their models from the request
        if task is not None:
            raise refuse_task(self.name, task)  # the nodes parse the record the request carries
        task = self._task(request.task)
        payload = request.model_dump(mode="json")
        payload["task"] = task.to_record()
        out = await self._submit(payload, task)
        if isinstance(out, str):
            return RolloutResult(status="infra_error", exit_status="infra_error", error=out)
        return RolloutResult.model_validate(out)

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

    async def _submit(self, payload: dict[str, Any], task: Task) -> dict[str, Any] | str:
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
            ).remote(payload, self.backend, self.token)
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
        held = self.ray.get([host_handle(n).envs.remote() for n in ids], timeout=120)
        for node_id, envs in zip(ids, held, strict=True):
            self.nodes[node_id].held.update(envs)

    async def _maybe_refresh(self) -> None:
        if time.monotonic() - self.refreshed < REFRESH_S:
            return
        self._refresh_nodes()  # also marks the refresh done, so concurrent callers skip it
        ids = list(self.nodes)
        held = await asyncio.gather(
            *(asyncio.wait_for(host_handle(n).envs.remote(), REFRESH_S) for n in ids), return_exceptions=True
        )
        for node_id, envs in zip(ids, held, strict=True):
            if node_id in self.nodes and isinstance(envs, list):  # else: a node going away
                self.nodes[node_id].held.update(envs)


def cluster_status(address: str | None = None) -> list[dict[str, Any]]:
    """Every alive node: its swe-rl resources (total, free now), and its host's envs and rollouts."""
    ray = import_ray()
    connect(address, start=False)
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
