"""Waiting for an ns command's status without ever leaving the shell out of step with its caller (ns.py).

The persistent shell answers each request with one line, the command's exit status, in order. A caller that
stops waiting before that line is read (its own ``asyncio.wait_for`` ran out, its task group was cancelled)
used to leave the command running and its status unread, and let go of the sandbox's lock: the next command
read that status as its own (the old exit code, with its own output file empty), and every later one the
status before it; a reset in place did not resynchronise.

So the reply is awaited in a task of its own, which the caller's cancellation does not reach. When the caller
is cancelled, or the command times out, the command is stopped and its status read before :func:`await_status`
returns or the cancellation goes on (the caller still holds the lock meanwhile); further cancellations of the
caller wait for that too. The stop is sent again every :data:`STOP_EVERY` seconds: one sent before the shell
has started the command misses it. A command that has not stopped after ``grace`` seconds leaves the sandbox
unusable (the next use raises, ``reset()`` restarts bubblewrap), never out of step.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

STOP_EVERY = 0.2


async def await_status(
    drain: Callable[[], Awaitable[None]],
    read: Callable[[], Awaitable[int]],
    stop: Callable[[], Awaitable[None]],
    *,
    timeout: float,
    grace: float,
    unusable: Callable[[str], None],
) -> tuple[int, bool]:
    """The status of the command just written to the shell and whether it timed out (then 124). ``drain``:
    until the request is sent; ``read``: the shell's reply; ``stop``: kill the command (and what it started);
    ``unusable``: called with the reason when it could not be stopped."""

    async def reply() -> int:
        await drain()
        return await read()

    task = asyncio.ensure_future(reply())
    try:
        await asyncio.wait({task}, timeout=timeout)
        if task.done():
            return task.result(), False
        await _stop_until_read(task, stop, grace, unusable, "a timed-out command could not be stopped")
        return 124, True
    except asyncio.CancelledError:
        # errors (a closed channel) are already recorded by ``read``; the caller asked to stop, not for them
        with contextlib.suppress(Exception):
            await _uncancellable(
                _stop_until_read(task, stop, grace, unusable, "a cancelled command could not be stopped")
            )
        raise


async def _stop_until_read(
    task: asyncio.Future[int],
    stop: Callable[[], Awaitable[None]],
    grace: float,
    unusable: Callable[[str], None],
    why: str,
) -> None:
    """Stop the command until its reply ``task`` is done (its result, or error, is then the task's), for
    ``grace`` seconds at most; after that the reply is given up on and the sandbox marked unusable."""
    deadline = time.monotonic() + grace
    while not task.done():
        left = deadline - time.monotonic()
        if left <= 0:
            task.cancel()
            unusable(why)
            return
        await stop()
        await asyncio.wait({task}, timeout=min(STOP_EVERY, left))
    task.result()


async def _uncancellable(work: Awaitable[None]) -> None:
    """Await ``work`` to its end, whatever cancellations its caller gets meanwhile (the caller raises the one
    it was handling afterwards: the cancellation is delayed, not lost)."""
    task = asyncio.ensure_future(work)
    while not task.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(task)
    task.result()


__all__ = ["STOP_EVERY", "await_status"]
