"""The sandbox pool (sandbox/pool.py): kept sandboxes reset in place and lent again, per use and key, the
oldest closed beyond ``idle``, none left unowned when a lease or a release is cancelled, and a use's tenant
let go before every reset and close. Real ns sandboxes (the local backend for one that keeps no process)."""

from __future__ import annotations

import asyncio

import pytest
from tests.conftest import available_factory

from swe_rl.errors import SandboxError
from swe_rl.sandbox.base import Limits
from swe_rl.sandbox.pool import Pooled, SandboxPool


class Recorder:
    """A tenant that notes what the pool told it, and runs a process in its sandbox as a warm runner does."""

    def __init__(self, pooled: Pooled, log: list[str]) -> None:
        self.pooled, self.log = pooled, log

    async def vacate(self) -> None:
        state = await self.pooled.box.exec("test -e left.txt && echo dirty || echo clean", timeout=30)
        self.log.append("vacate " + state.output.strip())

    def prepare(self) -> None:
        self.log.append("prepare")


@pytest.mark.ns
async def test_a_lease_gets_back_its_use_s_sandbox_reset_and_never_another_use_s(textkit_env):
    pool = SandboxPool(available_factory("ns"), idle=2)
    try:
        async with pool.sandbox(textkit_env, use="agent") as first:
            assert (await first.exec("echo x > left.txt && echo ok", timeout=30)).output.strip() == "ok"
        async with pool.sandbox(textkit_env, use="grading") as other:
            assert other is not first, "another use's shelf"
        async with pool.sandbox(textkit_env, use="agent") as again:
            assert again is first
            assert (await again.exec("test -e left.txt", timeout=30)).returncode == 1, "reset in place"
        assert pool.counts("agent") == {"created": 1, "reused": 1, "switched": 0}
        assert pool.counts("grading") == {"created": 1, "reused": 0, "switched": 0}
    finally:
        await pool.close()
    with pytest.raises(SandboxError):
        await first.exec("true", timeout=30)  # closed with the pool


@pytest.mark.ns
async def test_a_tenant_is_let_go_before_each_reset_and_close_and_told_after_a_reset(
    textkit_env, envs, task_by_id
):
    pool = SandboxPool(available_factory("ns"), idle=1)
    log: list[str] = []
    try:
        async with pool.lease(textkit_env, use="grading") as pooled:
            assert pooled.tenant is None
            pooled.tenant = Recorder(pooled, log)
            await pooled.box.exec("echo x > left.txt", timeout=30)
        assert log == ["vacate dirty", "prepare"], "let go before the reset, told after it"
        async with pool.lease(textkit_env, use="grading") as kept:
            assert kept is pooled and isinstance(kept.tenant, Recorder)
        other = envs.ensure(task_by_id["swe-rl-builtin__statkit-2"])
        async with pool.lease(other, use="grading") as switched:  # the same runtime: reset to the other env
            assert switched is pooled and switched.env_key == other.key and switched.workdir == other.workdir
        assert log[2:] == ["vacate clean", "prepare", "vacate clean", "vacate clean", "prepare"]
        assert pool.counts("grading") == {"created": 1, "reused": 2, "switched": 1}
        with pytest.raises(RuntimeError):
            async with pool.lease(other, use="grading"):
                raise RuntimeError("the lease failed")
        assert log[-1] == "vacate clean" and pool._shelf("grading").count == 0, "closed, not kept"
    finally:
        await pool.close()


@pytest.mark.ns
async def test_kept_sandboxes_beyond_the_limit_are_closed_oldest_first(textkit_env):
    """With sandboxes of several keys kept and taken out again while others come back (an evaluation at
    `-j 32` over many envs), the eviction that keeps at most ``idle`` closes the oldest kept one: a key
    whose last kept sandbox is in use has none to close. (This raised IndexError from an emptied list.)"""
    # sandboxes of one env with other limits are kept apart: three kinds of kept sandbox
    a, b, c = (Limits(memory_mb=mb) for mb in (4096, 4000, 3900))
    pool = SandboxPool(available_factory("ns"), idle=1)
    try:
        async with pool.sandbox(textkit_env, a):
            pass  # kept: a's sandbox
        async with pool.sandbox(textkit_env, a) as taken:
            async with pool.sandbox(textkit_env, b) as closed:
                pass  # kept: b's
            async with pool.sandbox(textkit_env, c):
                pass  # kept: c's, one too many: b's is closed
            assert (await taken.exec("true", timeout=30)).returncode == 0  # the one in use stays open
        with pytest.raises(SandboxError):
            await closed.exec("true", timeout=30)
        # a's came back last: kept, c's closed
        assert [limits for (_, limits), free in pool._shelf("agent").free.items() if free] == [
            a.model_dump_json()
        ]
        assert pool.counts("agent")["created"] == 3
    finally:
        await pool.close()


@pytest.mark.ns
async def test_a_sandbox_whose_release_is_cancelled_is_closed(textkit_env):
    """A task cancelled while its sandbox is being reset for the next use (a rollout's deadline) leaves that
    sandbox in no known state and on no shelf: it is closed, never left running unowned."""
    pool = SandboxPool(available_factory("ns"), idle=2)
    try:
        box = await pool.factory.create(textkit_env)
        await box.exec("sleep 100 & echo busy > /tmp/x", timeout=30)  # the control: it runs
        key = (repr(textkit_env.runtime()), "")
        release = asyncio.ensure_future(pool._release(key, Pooled(box, textkit_env.key), "agent"))
        await asyncio.sleep(0)  # it runs to its first wait, inside the reset
        release.cancel()
        with pytest.raises(asyncio.CancelledError):
            await release
        assert pool._shelf("agent").count == 0
        with pytest.raises(SandboxError):
            await box.exec("true", timeout=30)  # closed
    finally:
        await pool.close()


async def test_a_backend_that_cannot_reset_in_place_lends_a_fresh_sandbox_each_time(textkit_env):
    pool = SandboxPool(available_factory("local"), idle=2)
    log: list[str] = []
    try:
        async with pool.lease(textkit_env, use="agent") as first:
            first.tenant = Recorder(first, log)
        assert log == ["vacate clean"], "let go, never told of a reset"
        async with pool.lease(textkit_env, use="agent") as second:
            assert second is not first and second.tenant is None
        assert pool.counts("agent") == {"created": 2, "reused": 0, "switched": 0}
    finally:
        await pool.close()
