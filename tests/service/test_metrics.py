"""Every server's ``GET /metrics``, scraped from a real process on loopback and read with prometheus_client's
own parser: each metric docs/SERVICE.md names is there, of its type, with its labels, and counts what was
done to that server (a request, a structured error, a lease and a command on it)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from swe_rl.service.server_kit import Metrics
from tests.service.servers import Scrape, Server, exec_server, free_port, pool_server, post


@dataclass(frozen=True)
class Spec:
    """What one server exposes, as SERVICE.md lists it."""

    prefix: str
    gauges: dict[str, float]  # each with its value on an idle server
    endpoints: list[str]  # each has <prefix>_<endpoint>_seconds
    bad_post: tuple[str, str]  # a POST path and its endpoint name, for a malformed body
    counters: list[str] = field(default_factory=list)  # beyond requests and errors, by family name
    histograms: list[str] = field(default_factory=list)  # beyond the endpoints'


SERVERS = {
    "exec": Spec(
        prefix="swe_rl_exec",
        gauges={"sandboxes": 0.0},
        histograms=["exec_inner_seconds"],
        endpoints=[
            "healthz",
            "metrics",
            "images",
            "status",
            "containers",
            "container_create",
            "container_exec",
            "container_diff",
            "container_evaluate",
            "container_reset",
            "container_read_file",
            "container_write_file",
            "container_destroy",
        ],
        bad_post=("/container/exec", "container_exec"),
    ),
    "pool": Spec(
        prefix="swe_rl_pool",
        gauges={"leases": 0.0, "queue_length": 0.0, "healthy_nodes": 1.0},
        histograms=["node_call_seconds"],
        endpoints=[
            "allocate",
            "exec",
            "diff",
            "evaluate",
            "reset",
            "read_file",
            "write_file",
            "heartbeat",
            "close",
            "status",
            "healthz",
            "metrics",
        ],
        bad_post=("/allocate", "allocate"),
    ),
    "rollout": Spec(
        prefix="swe_rl_rollout",
        gauges={"running": 0.0, "waiting": 0.0},
        counters=["rollouts"],
        endpoints=["run", "cancel", "healthz", "metrics"],
        bad_post=("/run", "run"),
    ),
}
BOUNDS = [str(float(b)) for b in Metrics.BUCKETS] + ["+Inf"]


@pytest.fixture(scope="module")
def servers():
    node = exec_server(None, "--capacity", "2", backend="local").start()
    pool = pool_server([node]).start()
    rollout = Server(["serve", "rollout", "--backend", "local", "--capacity", "1"], free_port()).start()
    yield {"exec": node, "pool": pool, "rollout": rollout}
    for server in (rollout, pool, node):
        server.stop()


@pytest.mark.parametrize("kind", SERVERS)
async def test_each_server_exposes_its_metrics_and_counts_requests_and_errors(servers, kind):
    server, spec = servers[kind], SERVERS[kind]
    prefix, (path, name) = spec.prefix, spec.bad_post
    before = Scrape(server.url)
    status, reply, _ = await post(server.url + path, b"not JSON")
    assert status == 400 and reply["error"]["kind"] == "bad_request", reply
    await asyncio.to_thread(server.get, "/healthz")
    after = Scrape(server.url)

    assert after.content_type == CONTENT_TYPE_LATEST
    families = {f"{prefix}_{g}": "gauge" for g in spec.gauges}
    families |= {f"{prefix}_{c}": "counter" for c in ["requests", "errors", *spec.counters]}
    families |= {f"{prefix}_{h}": "histogram" for h in spec.histograms}
    families |= {f"{prefix}_{e}_seconds": "histogram" for e in spec.endpoints}
    exposed = {family: after.families[family].type for family in families if family in after.families}
    assert exposed == families, sorted(after.families)
    for gauge, value in spec.gauges.items():
        assert after.value(f"{prefix}_{gauge}") == value, gauge

    def delta(sample: str, **labels: str) -> float:
        now = after.value(f"{prefix}_{sample}", **labels)
        assert now is not None, (sample, labels, sorted(after.families))
        return now - (before.value(f"{prefix}_{sample}", **labels) or 0.0)

    assert delta("errors_total", endpoint=name, kind="bad_request") == 1
    assert delta("requests_total", endpoint=name, status="400") == 1
    assert delta("requests_total", endpoint="healthz", status="200") == 1
    assert delta(f"{name}_seconds_count") == 1 and delta(f"{name}_seconds_sum") > 0
    bounds = [s.labels["le"] for s in after.families[f"{prefix}_{name}_seconds"].samples if "le" in s.labels]
    assert bounds == BOUNDS
    assert delta(f"{name}_seconds_bucket", le="+Inf") == 1


@pytest.mark.ns
async def test_a_lease_and_its_command_are_counted_on_the_pool_and_its_node(servers, textkit_env):
    node, pool = servers["exec"], servers["pool"]
    before_node, before_pool = Scrape(node.url), Scrape(pool.url)
    status, lease, _ = await post(pool.url + "/allocate", {"image": textkit_env.key})
    assert status == 200, lease
    try:
        status, ran, _ = await post(
            pool.url + "/exec", {"lease_id": lease["lease_id"], "command": "sleep 0.05", "timeout": 30}
        )
        assert status == 200 and ran["returncode"] == 0, ran
        held_node, held_pool = Scrape(node.url), Scrape(pool.url)
    finally:
        await post(pool.url + "/close", {"lease_id": lease["lease_id"]})
    assert held_node.value("swe_rl_exec_sandboxes") == 1 and held_pool.value("swe_rl_pool_leases") == 1

    def delta(after: Scrape, before: Scrape, sample: str) -> float:
        now = after.value(sample)
        assert now is not None, sample
        return now - (before.value(sample) or 0.0)

    assert delta(held_node, before_node, "swe_rl_exec_exec_inner_seconds_count") == 1
    assert delta(held_node, before_node, "swe_rl_exec_exec_inner_seconds_sum") >= 0.05
    assert delta(held_node, before_node, "swe_rl_exec_container_exec_seconds_count") == 1
    assert delta(held_pool, before_pool, "swe_rl_pool_node_call_seconds_count") == 1
    assert delta(held_pool, before_pool, "swe_rl_pool_exec_seconds_count") == 1
    closed_node, closed_pool = Scrape(node.url), Scrape(pool.url)
    assert closed_node.value("swe_rl_exec_sandboxes") == 0 and closed_pool.value("swe_rl_pool_leases") == 0


def test_each_metrics_has_a_registry_of_its_own():
    """Two servers of one kind in one process (as in these tests): each counts its own, and nothing lands in
    the library's process-wide registry, which would also refuse the second server's names."""
    first, second = Metrics("swe_rl_exec"), Metrics("swe_rl_exec")
    first.requests.labels(endpoint="healthz", status="200").inc()
    assert b'swe_rl_exec_requests_total{endpoint="healthz",status="200"} 1.0' in first.response().body
    assert b"swe_rl_exec_requests_total{" not in second.response().body
    assert b"swe_rl_" not in generate_latest(REGISTRY)
