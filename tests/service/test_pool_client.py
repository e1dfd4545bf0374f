"""A trainer's process-wide ``pool:`` executor, called from one ``asyncio.run`` to the next."""

from __future__ import annotations

import asyncio

import pytest

from swe_rl.executors.local import LocalExecutor
from swe_rl.integrations.adapter_kit import close_shared_executors, shared_executor
from swe_rl.integrations.settings import AdapterSettings
from swe_rl.sandbox.base import EnvSpec
from tests.conftest import available_factory
from tests.service.servers import exec_server, pool_server

pytestmark = pytest.mark.ns


def test_a_shared_pool_executor_leases_from_two_event_loops_then_closes(textkit_env: EnvSpec):
    available_factory("ns")
    node = exec_server(None, "--capacity", "2").start()
    pool = pool_server([node]).start()
    spec = AdapterSettings(executor=f"pool:{pool.url}")

    async def echo() -> str:
        executor = shared_executor(spec)
        assert isinstance(executor, LocalExecutor)
        async with await executor.factory.create(textkit_env) as box:
            return (await box.exec("echo ok", timeout=30)).output

    try:
        # each asyncio.run has its own loop; a session kept from the first one is bound to a closed loop
        assert asyncio.run(echo()) == "ok\n"
        assert asyncio.run(echo()) == "ok\n"
        first = shared_executor(spec)
        asyncio.run(close_shared_executors())
        assert shared_executor(spec) is not first
        asyncio.run(close_shared_executors())
        assert node.get("/healthz")["running"] == 0
    finally:
        pool.stop()
        node.stop()
