"""One lease's slow call never takes its node down for the other leases, and the agent's huge file makes
the diff the agent's outcome over the remote backend too. Real exec servers (ns) and pools on loopback."""

from __future__ import annotations

import asyncio
import time

import pytest

from swe_rl.errors import BackendLostError, OutputLimitError
from swe_rl.sandbox.exec_protocol import AllocateRequest
from swe_rl.sandbox.remote import RemoteFactory
from swe_rl.service.lease_pool import LeasePool
from swe_rl.service.server_kit import ServiceError
from tests.conftest import available_factory
from tests.service.servers import exec_server, pool_server

pytestmark = pytest.mark.ns


@pytest.fixture(scope="module")
def node():
    available_factory("ns")
    server = exec_server(None, "--capacity", "4").start()
    yield server
    server.stop()


async def test_a_sparse_100g_file_fails_the_diff_fast_and_the_nodes_other_leases_keep_working(
    node, textkit_env
):
    pool = pool_server([node]).start()
    factory = RemoteFactory(pool.url, ttl=60)
    try:
        agent, other = await factory.create(textkit_env), await factory.create(textkit_env)
        made = await agent.exec("truncate -s 100G sparse.bin && stat -c %s sparse.bin", timeout=30)
        assert int(made.output) == 100 * 1024**3  # control: 100G apparent size
        started = time.monotonic()
        with pytest.raises(OutputLimitError) as refused:  # the agent's over-cap patch, as on every backend
            await asyncio.wait_for(agent.diff(), 60)
        assert not isinstance(refused.value, BackendLostError), refused.value  # the agent's, not infra
        assert "sparse.bin" in str(refused.value) and time.monotonic() - started < 30
        assert (await other.exec("echo alive", timeout=10)).output == "alive\n"
        assert (await agent.exec("echo still", timeout=10)).output == "still\n"
        assert all(n["healthy"] for n in pool.get("/status")["pool"]["nodes"])
        await agent.close()
        await other.close()
    finally:
        await factory.close()
        pool.stop()


async def test_a_call_that_times_out_on_a_live_node_is_that_calls_error_not_a_node_down(node, textkit_env):
    pool = LeasePool(
        [node.url],
        token=None,
        max_concurrent=8,
        per_node=None,
        ttl=60,
        wait=30,
        health_period=3600,
        reap_period=3600,
    )
    await pool.start()
    try:
        image = textkit_env.image or textkit_env.key
        slow, other = [await pool.allocate(AllocateRequest(image=image), None) for _ in range(2)]
        lease = pool.get(slow.lease_id)
        body = {"container_id": lease.container_id, "command": "sleep 4", "timeout": 30}
        with pytest.raises(ServiceError) as late:
            await pool.call(lease.node, "/container/exec", body, None, timeout=1)
        assert late.value.kind == "sandbox_error" and "did not answer" in str(late.value)
        assert lease.node.healthy and pool.get(other.lease_id).failed is None
        other_lease = pool.get(other.lease_id)
        echo = {"container_id": other_lease.container_id, "command": "echo ok", "timeout": 10}
        status, _ = await pool.call(other_lease.node, "/container/exec", echo, None, timeout=30)
        assert status == 200
        # control: a node that stops answering its health check is down, and its leases fail fast
        node.proc.send_signal(19)  # SIGSTOP
        try:
            await pool.check(lease.node)
        finally:
            node.proc.send_signal(18)  # SIGCONT
        assert not lease.node.healthy
        with pytest.raises(ServiceError, match="is down"):
            pool.get(other.lease_id)
    finally:
        await pool.shutdown()
