"""The Ray executor against the in-process (local) executor, and throughput on 1, 2, 3 simulated nodes.

    python bench/ray_executor.py [--tasks 6] [--slots 2] [--attempts 12] [--noops 300]

The builtin suite, ``scripted:oracle`` (no model time), ns sandboxes, eval attempts (agent + grading).
A Ray cluster of raylets on this machine (``ray.cluster_utils``): a head without sandbox slots and up to
three worker nodes of ``--slots`` slots, each with its own env cache, pre-built, so that no env build is
timed. Reported:

- overhead per rollout: the same tasks one at a time, in process and through Ray (1 node, warm workers)
  alternately: wall per attempt seen by the caller, the attempt's own time, the difference, the ratio;
- Ray's own cost: a no-op task that needs a ``sandbox`` slot, one at a time and all at once;
- throughput: ``--attempts`` attempts with 1, 2, 3 nodes (concurrency = all slots), and in process with
  the same concurrency. One 2-core machine runs every node, so more nodes add slots, not CPUs;
- memory: RSS of an idle Ray worker (one per busy slot) and of a node's host actor.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from swe_rl.agent.config import load_agent_config
from swe_rl.envs.cache import EnvCache
from swe_rl.episode.request import EpisodeRequest, NamedModel
from swe_rl.executors.local import LocalExecutor
from swe_rl.llm.base import SamplingParams
from swe_rl.sandbox import get_factory
from swe_rl.tasks.builtin import builtin_tasks
from swe_rl.tasks.model import Task

PARAMS = SamplingParams(max_tokens=512)


def request(task: Task, *, remote: bool) -> EpisodeRequest:
    """One eval attempt of the oracle (``remote``: with the full record, to run on a node)."""
    return EpisodeRequest(
        task=task.to_record() if remote else task.instance_id,
        model=NamedModel(llm="scripted:oracle"),
        agent=load_agent_config(),
        sampling=PARAMS,
        train=False,
        grading="official",
    )


async def local_one(task: Task, executor: LocalExecutor) -> tuple[float, float]:
    t0 = time.perf_counter()
    result = await executor.run_task(task, request(task, remote=False))
    assert result.record is not None and result.record.resolved, result
    return time.perf_counter() - t0, result.record.elapsed


async def ray_one(executor: Any, task: Task) -> tuple[float, float]:
    t0 = time.perf_counter()
    result = await executor.run(request(task, remote=True))
    assert result.record is not None and result.record.resolved, result
    return time.perf_counter() - t0, result.record.elapsed


async def throughput(run_one: Any, tasks: list[Task], n: int, concurrency: int) -> float:
    limit = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with limit:
            await run_one(tasks[i % len(tasks)])

    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    return n / (time.perf_counter() - t0)


def worker_rss_mb() -> dict[str, float]:
    """Median RSS of Ray worker processes by title (ray::IDLE, ray::NodeHost...)."""
    found: dict[str, list[float]] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            title = (proc / "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
            rss = next(
                int(line.split()[1]) / 1024
                for line in (proc / "status").read_text().splitlines()
                if line.startswith("VmRSS:")
            )
        except (OSError, StopIteration):
            continue
        if title.startswith("ray::"):
            found.setdefault(title.split()[0], []).append(rss)
    return {k: round(statistics.median(v), 1) for k, v in found.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=6, help="tasks timed one at a time (each way)")
    ap.add_argument("--slots", type=int, default=2, help="sandbox slots per simulated node")
    ap.add_argument("--attempts", type=int, default=12, help="attempts per throughput row")
    ap.add_argument("--noops", type=int, default=300, help="no-op Ray tasks")
    args = ap.parse_args()

    import ray
    from ray.cluster_utils import Cluster

    from swe_rl.executors.ray import RayExecutor

    tasks = builtin_tasks()
    timed = tasks[: args.tasks]
    root = Path(tempfile.mkdtemp(prefix="bench-ray-"))
    for i in range(3):  # every node's cache holds the suite's envs: no build is timed
        node_cache = EnvCache(root / f"node{i}" / "envs")
        for t in tasks:
            node_cache.ensure(t)
    local_cache = EnvCache(root / "local" / "envs")
    for t in tasks:
        local_cache.ensure(t)
    here = LocalExecutor(get_factory("ns"), local_cache, capacity=1024)  # the run's concurrency bounds it

    results: dict[str, Any] = {"slots_per_node": args.slots, "tasks": len(timed)}

    async def local_rows() -> None:
        for conc in (args.slots, 2 * args.slots, 3 * args.slots):
            rate = await throughput(lambda t: local_one(t, here), tasks, args.attempts, conc)
            results.setdefault("local_throughput", {})[str(conc)] = round(rate, 3)

    asyncio.run(local_rows())
    print("local", results["local_throughput"], flush=True)

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    started = time.perf_counter()
    nodes = []

    def add_node() -> None:
        i = len(nodes)
        nodes.append(
            cluster.add_node(
                num_cpus=1,
                resources={"sandbox": args.slots, "sandbox_start_up": 1, "env_io": 1},
                env_vars={"SWE_RL_CACHE": str(root / f"node{i}")},
            )
        )
        cluster.wait_for_nodes()

    add_node()
    ray.init(address=cluster.address, log_to_driver=False)
    results["cluster_start_s"] = round(time.perf_counter() - started, 1)
    try:

        async def ray_rows() -> None:
            executor = RayExecutor(backend="ns")
            for t in tasks[: args.slots]:  # warm-up: workers started, modules imported
                await ray_one(executor, t)
            await local_one(timed[0], here)
            local, remote = [], []
            for t in timed:  # alternately, task by task, so that the machine's drift hits both
                local.append(await local_one(t, here))
                remote.append(await ray_one(executor, t))
            for name, rows in (("local", local), ("ray", remote)):
                results[name] = {
                    "wall_ms": round(1000 * statistics.median(w for w, _ in rows), 1),
                    "attempt_ms": round(1000 * statistics.median(e for _, e in rows), 1),
                    "overhead_ms": round(1000 * statistics.median(w - e for w, e in rows), 1),
                }
            results["ray_over_local_wall"] = round(sum(w for w, _ in remote) / sum(w for w, _ in local), 3)

            noop = ray.remote(lambda: None).options(num_cpus=0, resources={"sandbox": 1})
            ray.get(noop.remote())
            t0 = time.perf_counter()
            for _ in range(args.noops):
                await noop.remote()
            seq = (time.perf_counter() - t0) / args.noops
            t0 = time.perf_counter()
            await asyncio.gather(*(noop.remote() for _ in range(args.noops)))
            results["noop_task"] = {
                "one_at_a_time_ms": round(1000 * seq, 2),
                "all_at_once_per_s": round(args.noops / (time.perf_counter() - t0), 1),
            }
            await executor.close()

        asyncio.run(ray_rows())
        print("local", results["local"], "ray", results["ray"], results["noop_task"], flush=True)

        for n in (1, 2, 3):
            while len(nodes) < n:
                add_node()

            async def rate(n: int = n) -> None:
                executor = RayExecutor(backend="ns")
                conc = n * args.slots
                await throughput(lambda t: ray_one(executor, t), tasks, conc, conc)  # warm-up
                r = await throughput(lambda t: ray_one(executor, t), tasks, args.attempts, conc)
                results.setdefault("ray_throughput", {})[str(n)] = round(r, 3)
                results["rss_mb"] = worker_rss_mb()

            asyncio.run(rate())
            print("nodes", n, results["ray_throughput"][str(n)], flush=True)
    finally:
        ray.shutdown()
        cluster.shutdown()
    dest = Path(__file__).parent / "results" / "ray_executor.json"
    dest.write_text(json.dumps(results, indent=1))
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
