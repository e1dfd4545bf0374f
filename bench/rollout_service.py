"""The rollout service against the in-process rollout and the per-command execution service, in one run.

    python bench/rollout_service.py [--rounds 2]

The builtin suite, the scripted oracle policy behind the loopback fake SGLang server (real Qwen tokenizer,
no model time), ns sandboxes. Three ways to run the same rollouts, one after the other per task:

- in process: LocalExecutor on this machine's sandboxes (the trainer runs agent and sandboxes itself);
- rollout service: ServiceExecutor -> ``swe-rl serve rollout`` (a real process): one ``POST /run`` per rollout;
- per command: LocalExecutor whose sandboxes come from the execution service (pool -> exec server, real
  processes): the trainer runs the agent and sends every command, diff and grading step over HTTP.

Reported: wall time per rollout (median) and the service's overhead; requests and bytes (HTTP headers
included, counted by a TCP proxy on the link) per rollout on the trainer's link to the sandbox side, and,
for the service, the policy traffic that moves onto the link between the CPU and GPU machines.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.service.servers import Server, TcpProxy, exec_server, free_port, pool_server, serve_in_thread

from swe_rl.envs.cache import EnvCache
from swe_rl.executors.base import EpisodeRequest, Executor, Policy
from swe_rl.executors.local import LocalExecutor
from swe_rl.executors.service import ServiceExecutor
from swe_rl.llm.base import SamplingParams
from swe_rl.llm.fake_server import FakeLLMServer
from swe_rl.llm.oracle import oracle_policy
from swe_rl.rl.tokenizer import qwen_tokenizer
from swe_rl.sandbox import get_factory
from swe_rl.sandbox.remote import RemoteFactory
from swe_rl.tasks.builtin import builtin_tasks


def requests_total(url: str, prefix: str) -> float:
    """Sum of a server's ``<prefix>_requests_total`` counters (every endpoint, every status)."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    found = re.findall(rf'^{prefix}_requests_total\{{endpoint="([^"]+)"[^}}]*\}} (\S+)$', text, re.M)
    return sum(float(v) for endpoint, v in found if endpoint != "metrics")  # not our own reads


class Link:
    """Counts one link: a TCP proxy for bytes, the server's own metrics for requests."""

    def __init__(self, proxy: TcpProxy, metrics_url: str, prefix: str) -> None:
        self.proxy, self.metrics_url, self.prefix = proxy, metrics_url, prefix

    def read(self) -> tuple[float, int, int]:
        return requests_total(self.metrics_url, self.prefix), self.proxy.bytes_up, self.proxy.bytes_down


async def timed(executor: Executor, request: EpisodeRequest, link: Link | None) -> dict[str, Any]:
    before = link.read() if link else (0.0, 0, 0)
    t0 = time.perf_counter()
    result = await executor.run(request)
    wall = time.perf_counter() - t0
    after = link.read() if link else (0.0, 0, 0)
    assert result.resolved, result.error
    return {
        "wall_s": wall,
        "rollout_s": result.metrics["agent/total_time"],  # run_rollout's own time, where it ran
        "requests": after[0] - before[0],
        "bytes_up": after[1] - before[1],
        "bytes_down": after[2] - before[2],
    }


def med(rows: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(r[key] for r in rows))


async def measure(
    args: argparse.Namespace, llm: FakeLLMServer, rollout_url: str, pool_url: str
) -> dict[str, Any]:
    tasks, llm_url = builtin_tasks(), llm.url
    async with (
        TcpProxy(int(rollout_url.rsplit(":", 1)[1])) as to_rollout,
        TcpProxy(int(pool_url.rsplit(":", 1)[1])) as to_pool,
        TcpProxy(int(llm_url.rsplit(":", 1)[1])) as to_llm,
    ):
        service_link = Link(to_rollout, rollout_url, "swe_rl_rollout")
        pool_link = Link(to_pool, pool_url, "swe_rl_pool")
        remote_factory = RemoteFactory(to_pool.url)
        executors: dict[str, tuple[Executor, Link | None, str]] = {
            "in_process": (LocalExecutor(get_factory("ns"), capacity=1), None, llm_url),
            "service": (ServiceExecutor(to_rollout.url), service_link, to_llm.url),
            "per_command": (LocalExecutor(remote_factory, capacity=1), pool_link, llm_url),
        }
        rows: dict[str, list[dict[str, Any]]] = {name: [] for name in executors}
        policy: list[dict[str, Any]] = []  # the service's policy traffic (rollout server <-> inference)
        for rnd in range(args.rounds + 1):  # round 0 warms every path and is not counted
            for task in tasks:
                for name, (executor, link, url) in executors.items():
                    request = EpisodeRequest(
                        task=task.to_record(),
                        model=Policy(url=url, tokenizer="qwen"),
                        sampling=SamplingParams(max_tokens=512),
                    )
                    up, down, calls = to_llm.bytes_up, to_llm.bytes_down, len(llm.requests)
                    row = await timed(executor, request, link)
                    if rnd and name == "service":
                        policy.append(
                            {
                                "requests": len(llm.requests) - calls,
                                "bytes": to_llm.bytes_up - up + to_llm.bytes_down - down,
                            }
                        )
                    if rnd:
                        rows[name].append(row)
            print(f"round {rnd} done", file=sys.stderr)
        await remote_factory.close()
        await executors["service"][0].close()
    return summarise(rows, policy)


def summarise(rows: dict[str, list[dict[str, Any]]], policy: list[dict[str, Any]]) -> dict[str, Any]:
    local, service, per_cmd = rows["in_process"], rows["service"], rows["per_command"]
    wall = {name: round(med(r, "wall_s") * 1000, 1) for name, r in rows.items()}
    inner = {name: round(med(r, "rollout_s") * 1000, 1) for name, r in rows.items()}
    around = {
        name: round(statistics.median(x["wall_s"] - x["rollout_s"] for x in r) * 1000, 1)
        for name, r in rows.items()
    }

    def link(r: list[dict[str, Any]]) -> dict[str, float]:
        return {
            "requests": med(r, "requests"),
            "bytes_up": med(r, "bytes_up"),
            "bytes_down": med(r, "bytes_down"),
            "bytes": med([{"b": x["bytes_up"] + x["bytes_down"]} for x in r], "b"),
        }

    s_link, p_link = link(service), link(per_cmd)
    return {
        "rollouts_per_mode": len(local),
        "wall_ms_median": wall,
        "run_rollout_ms_median": inner,
        "outside_run_rollout_ms_median": around,
        "service_overhead_ms": round(wall["service"] - wall["in_process"], 1),
        "service_transport_ms": round(around["service"] - around["in_process"], 1),
        "service_over_in_process": round(wall["service"] / wall["in_process"], 3),
        "per_command_over_in_process": round(wall["per_command"] / wall["in_process"], 3),
        "trainer_link_per_rollout": {"service": s_link, "per_command": p_link},
        "per_command_over_service": {
            "requests": round(p_link["requests"] / s_link["requests"], 1),
            "bytes": round(p_link["bytes"] / s_link["bytes"], 2),
        },
        "service_policy_link_per_rollout": {
            "requests": med(policy, "requests"),
            "bytes": med(policy, "bytes"),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=2, help="Counted passes over the builtin suite.")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).with_name("results") / "rollout_service.json"
    )
    args = parser.parse_args()
    tasks = builtin_tasks()
    cache = EnvCache()
    for task in tasks:
        cache.ensure(task)
    llm = FakeLLMServer(oracle_policy(tasks), tokenizer=qwen_tokenizer())
    thread, loop = serve_in_thread(llm)
    rollout = Server(["serve", "rollout", "--backend", "ns", "--capacity", "4"], free_port()).start()
    node = exec_server().start()
    pool = pool_server([node]).start()
    try:
        results = asyncio.run(measure(args, llm, rollout.url, pool.url))
    finally:
        for server in (pool, node, rollout):
            server.stop()
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
