"""One aiohttp session per running event loop, closed with its loop or by :meth:`LoopSession.close`.

An aiohttp session belongs to the loop it was made in; a client kept across ``asyncio.run`` calls (a
trainer's process-wide executor) must not reuse it on the next loop. :class:`LoopSession` makes a session
for the running loop and registers it with that loop as an async generator, so a loop that shuts down
(``asyncio.run``, ``asyncio.Runner``: they finalize async generators) closes the session before it closes.
A loop that stops without that step leaves its session to the garbage collector.

Also the two readings every HTTP client here shares: a ``Retry-After`` header and swe-rl's error body.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import AsyncGenerator, Callable
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import aiohttp


async def _closing(session: aiohttp.ClientSession) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        await session.close()


class LoopSession:
    """The session that ``make`` builds, one per running loop; ``await get()`` in the loop that uses it."""

    def __init__(self, make: Callable[[], aiohttp.ClientSession]) -> None:
        self._make = make
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closer: AsyncGenerator[None, None] | None = None

    async def get(self) -> aiohttp.ClientSession:
        """This loop's session (a new one for a new loop, or after the last one was closed)."""
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._loop is not loop:
            self._release()
            self._session = self._make()
            self._loop = loop
            self._closer = _closing(self._session)
            await anext(self._closer)  # now the loop knows it and closes it at shutdown
        return self._session

    async def close(self) -> None:
        """Close the session now when it belongs to this loop; else hand it to its own loop."""
        closer, loop = self._closer, self._loop
        if closer is not None and loop is asyncio.get_running_loop():
            self._closer = self._session = self._loop = None
            await closer.aclose()
        else:
            self._release()

    def _release(self) -> None:
        """Forget the session; its loop closes it if that loop still runs (in another thread)."""
        closer, loop = self._closer, self._loop
        self._closer = self._session = self._loop = None
        if closer is not None and loop is not None and loop.is_running() and not loop.is_closed():
            asyncio.run_coroutine_threadsafe(closer.aclose(), loop)


def retry_after_s(value: str | None, *, cap: float) -> float | None:
    """The seconds a ``Retry-After`` header asks for, held to ``[0, cap]``; None when absent or unreadable.

    Both forms of RFC 9110 (10.2.3) are read: delta-seconds, and an HTTP-date (a proxy's or a load
    balancer's), counted from now.
    """
    if not value or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    if math.isnan(seconds):
        return None
    return min(cap, max(0.0, seconds))


def error_body(data: bytes) -> tuple[str, str]:
    """(kind, message) of swe-rl's error body ``{"error": {"kind", "message"}}``; else ("unknown", its start)."""
    try:
        err = json.loads(data)["error"]
        return str(err["kind"]), str(err["message"])
    except (ValueError, KeyError, TypeError):
        return "unknown", data[:200].decode(errors="replace")
