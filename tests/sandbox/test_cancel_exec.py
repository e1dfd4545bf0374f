"""Issue #38 item 5: a caller that cancels ``NsSandbox.exec`` (its own ``asyncio.wait_for``) must not leave the
sandbox out of step. Before the fix the command ran on, the lock was released, and its status was read as the
next command's: that one got the old exit code and empty output, every later one the status before it."""

from __future__ import annotations

import asyncio
import contextlib
import random

from tests.conftest import available_factory

from swe_rl.sandbox.reply import await_status

ROUNDS = 40


async def _check_in_step(box, n: int, rng: random.Random) -> None:  # type: ignore[no-untyped-def]
    code = rng.randrange(0, 120)
    result = await box.exec(f"echo {n}; exit {code}", timeout=30)
    assert (result.returncode, result.output) == (code, f"{n}\n"), f"round {n}"


async def test_a_cancelled_exec_leaves_every_later_reply_right(textkit_env):
    rng = random.Random(38)
    hit_running = 0
    async with await available_factory("ns").create(textkit_env) as box:
        for n in range(ROUNDS):
            # cancelled at a random point: before the request is sent, while the command runs, around its end
            delay, runs = rng.uniform(0, 0.06), rng.uniform(0, 0.04)
            command = f"touch /tmp/started.{n}; sleep {runs:.3f}; touch /tmp/ended.{n}; exit 3"
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(box.exec(command, timeout=30), delay)
            await _check_in_step(box, n, rng)
            await _check_in_step(box, n, rng)
            state = await box.exec(f"ls /tmp/started.{n} /tmp/ended.{n} 2>/dev/null", timeout=30)
            hit_running += state.output.split() == [f"/tmp/started.{n}"]
            if n % 10 == 9:  # and through resets in place
                await box.reset()
                assert box.restart_reason is None
                await _check_in_step(box, n, rng)
    # the control: many cancellations landed while the command ran (started, never ended: it was stopped),
    # the window where the status was left unread
    assert hit_running >= ROUNDS // 4, hit_running


async def test_cancellations_during_the_stop_do_not_desynchronise(textkit_env):
    """The caller cancelled again (five times, 10 ms apart) while the cancelled command is being stopped."""
    async with await available_factory("ns").create(textkit_env) as box:
        task = asyncio.ensure_future(box.exec("sleep 0.3; exit 5", timeout=30))
        await asyncio.sleep(0.05)
        for _ in range(5):
            task.cancel()
            await asyncio.sleep(0.01)
        with contextlib.suppress(asyncio.CancelledError):
            await task
        assert task.cancelled()
        await _check_in_step(box, 0, random.Random(1))


async def _nothing() -> None:
    return None


async def test_a_command_that_will_not_stop_makes_the_sandbox_unusable():
    """reply.py alone: a reply that never comes, however often the command is stopped."""
    stops: list[float] = []
    never: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    why: list[str] = []

    async def stop() -> None:
        stops.append(asyncio.get_running_loop().time())

    waiting = asyncio.ensure_future(
        await_status(_nothing, lambda: never, stop, timeout=30, grace=0.5, unusable=why.append)
    )
    await asyncio.sleep(0.05)
    waiting.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await waiting
    assert waiting.cancelled() and why == ["a cancelled command could not be stopped"]
    assert len(stops) >= 2, "the stop is sent again: one sent before the shell started the command misses it"


async def test_a_stop_that_missed_is_sent_again():
    """reply.py alone: timed out, the first stop misses (the command had not started); the second ends it."""
    reply: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    stops = 0

    async def stop() -> None:
        nonlocal stops
        stops += 1
        if stops == 2:
            reply.set_result(137)

    result = await await_status(_nothing, lambda: reply, stop, timeout=0.05, grace=5, unusable=print)
    assert result == (124, True) and stops == 2
