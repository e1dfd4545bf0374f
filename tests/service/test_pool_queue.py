"""The pool's allocation queue: deadlines kept under load, slots handed over in order at a constant cost.

The loopback test is a behavioural bound, not a benchmark: 200 allocations at once against one free slot,
each willing to wait ``WAIT`` seconds, are all answered within ``WAIT + MARGIN`` (a margin a correct queue
meets on a loaded 2-core machine). The 2x overrun issue 21 reported did not come from the pool: it is what
a client sees whose connection pool is smaller than its concurrency (aiohttp's default, 100 connections,
starts the second hundred only as the first are answered: 2.36 s for ``wait`` 1 s here; with no limit,
1.34 s). What the old queue did cost was work: a ``Condition`` woken for every waiter on every freed slot,
5.9 s of CPU to hand 200 slots to a queue of 2,000 (in process, measured on this 2-core machine); the
queue now hands a slot to the head waiter's future directly, in 5 ms.
"""

from __future__ import annotations

import asyncio
import json
import time

import aiohttp
import pytest

from swe_rl.service.lease_pool import LeasePool
from tests.service.servers import exec_server, pool_server

WAIT = 1.0
MARGIN = 1.5
CLIENTS = 200


@pytest.fixture(scope="module")
def one_slot(textkit_env):
    node = exec_server(None, "--capacity", "1", backend="local").start()
    pool = pool_server([node]).start()
    yield pool
    pool.stop()
    node.stop()


async def _allocate(session: aiohttp.ClientSession, url: str, image: str) -> tuple[int, dict, float]:
    started = time.monotonic()
    async with session.post(url + "/allocate", json={"image": image, "wait": WAIT}) as resp:
        body = json.loads(await resp.read())
        return resp.status, body, time.monotonic() - started


@pytest.mark.ns
async def test_200_waiting_allocations_are_answered_by_their_deadline(one_slot, textkit_env):
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(60)) as session:
        replies = await asyncio.gather(
            *(_allocate(session, one_slot.url, textkit_env.key) for _ in range(CLIENTS))
        )
        granted = [body for status, body, _ in replies if status == 200]
        refused = [(body, took) for status, body, took in replies if status != 200]
        for body in granted:
            await session.post(one_slot.url + "/close", json={"lease_id": body["lease_id"]})
    # controls: the one slot was taken, every other request queued for it and waited out its deadline
    assert len(granted) == 1, [r[:2] for r in replies if r[0] != 503][:3]
    assert all(body["error"]["kind"] == "capacity" for body, _ in refused)
    assert min(took for _, took in refused) >= WAIT - 0.05
    slowest = max(took for _, _, took in replies)
    assert slowest < WAIT + MARGIN, f"an allocation waiting {WAIT}s was answered after {slowest:.2f}s"


def _full_pool() -> LeasePool:
    """A pool whose one node (never contacted) is healthy and full."""
    pool = LeasePool(
        ["http://127.0.0.1:9"],
        token=None,
        max_concurrent=10**6,
        per_node=None,
        ttl=60,
        wait=60,
        health_period=60,
        reap_period=60,
    )
    node = pool.nodes[0]
    node.healthy, node.capacity, node.leases = True, 1, 1
    return pool


async def test_freed_slots_go_to_the_longest_waiters_at_a_constant_cost():
    pool, order, served = _full_pool(), [], asyncio.Event()
    node = pool.nodes[0]

    async def wait_for_a_slot(i: int) -> None:
        granted = await pool._slot(time.monotonic() + 60)
        assert granted is node
        order.append(i)
        served.set()
        node.reserved -= 1  # what allocate does once the sandbox is made
        node.leases += 1

    waiters = [asyncio.ensure_future(wait_for_a_slot(i)) for i in range(2000)]
    await asyncio.sleep(0.05)
    assert pool.statistics()["queue"] == 2000, "control: every allocation is queued"
    cpu = time.process_time()
    for _ in range(200):
        node.leases -= 1  # a lease closes
        pool._grant()
        await served.wait()
        served.clear()
    cpu = time.process_time() - cpu
    assert order == list(range(200)), "first come, first served"
    assert cpu < 0.5, f"{cpu:.2f}s of CPU to hand 200 slots to a queue of 2000 (the old queue: 5.9 s)"
    for waiter in waiters:
        waiter.cancel()
    await asyncio.gather(*waiters, return_exceptions=True)
    assert pool.statistics()["queue"] == 0 and node.reserved == 0


async def test_a_waiter_that_leaves_gives_its_slot_to_the_next():
    pool = _full_pool()
    node = pool.nodes[0]
    first, second = (asyncio.ensure_future(pool._slot(time.monotonic() + 60)) for _ in range(2))
    late = asyncio.ensure_future(pool._slot(time.monotonic() + 0.1))
    await asyncio.sleep(0)
    node.leases -= 1
    pool._grant()  # the slot is the first waiter's ...
    assert node.reserved == 1
    first.cancel()  # ... whose client goes away before it runs
    assert await asyncio.gather(first, return_exceptions=True) != [node]
    assert await second is node and node.reserved == 1, "the slot went to the next waiter"
    assert await late is None, "a waiter whose deadline passes gets no slot"
    assert pool.statistics()["queue"] == 0
