"""LoopSession: one real aiohttp session per event loop, closed with its loop or by close()."""

from __future__ import annotations

import asyncio

import aiohttp

from swe_rl.httpclient import LoopSession


def test_each_loop_gets_its_own_session_and_a_finished_loop_closes_its_session():
    sessions = LoopSession(aiohttp.ClientSession)

    async def take() -> aiohttp.ClientSession:
        first = await sessions.get()
        assert await sessions.get() is first  # reused within the loop
        assert not first.closed
        return first

    one = asyncio.run(take())
    assert one.closed, "asyncio.run's shutdown closes the session of its loop"
    two = asyncio.run(take())
    assert two is not one and two.closed


async def test_close_closes_now_and_the_next_call_makes_a_new_session():
    sessions = LoopSession(aiohttp.ClientSession)
    first = await sessions.get()
    await sessions.close()
    assert first.closed
    second = await sessions.get()
    assert second is not first and not second.closed
    await sessions.close()
    await sessions.close()  # twice is fine
    assert second.closed
