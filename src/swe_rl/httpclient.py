"""What every HTTP client here shares: one session per event loop, the error body, ``Retry-After``, and
one retrying request.

:class:`LoopSession`: an aiohttp session belongs to the loop it was made in; a client kept across
``asyncio.run`` calls (a trainer's process-wide executor) must not reuse it on the next loop. It makes a
session for the running loop and registers it with that loop as an async generator, so a loop that shuts
down (``asyncio.run``, ``asyncio.Runner``: they finalize async generators) closes the session before it
closes. A loop that stops without that step leaves its session to the garbage collector.

:func:`request` sends one request until it is answered, as a :class:`RetryPolicy` says: connection faults,
timeouts and *transient* statuses are retried with jittered backoff (or after the server's
``Retry-After``) a bounded number of times; *busy* statuses ("full, come back later") are waited for as
asked until a deadline; any other status ends it. Each client decides what a failure is (the typed error
it raises, what it refuses at once) and watches the attempts (:data:`Watcher`): the pool-server sandbox
client (``sandbox/remote.py``), the model clients (``llm/http.py``) and the rollout-service client
(``executors/service.py``).
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any, TypeAlias

from pydantic import BaseModel, ConfigDict, Field

from swe_rl.errors import SweRlError

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


class RetryPolicy(BaseModel):
    """When a request is sent again and how long it waits first. A 200 is the answer; any other status
    that is neither transient nor busy ends the request at once."""

    model_config = ConfigDict(frozen=True)

    transient: frozenset[int] = Field(
        default=frozenset({502, 503, 504}),
        description="Statuses retried after a backoff, as a dropped connection or a timeout is.",
    )
    busy: frozenset[int] = Field(
        default=frozenset(),
        description="Statuses that mean 'full, come back later': waited as Retry-After asks (or "
        "busy_wait_s) until max_wait_s has passed, and not counted against retries.",
    )
    retries: int = Field(default=4, ge=0, description="Transient failures retried before the request fails.")
    backoff_s: float = Field(default=0.2, ge=0, description="The first backoff; doubled on each failure.")
    backoff_cap_s: float = Field(default=math.inf, gt=0, description="The doubled backoff's ceiling.")
    retry_after_cap_s: float = Field(default=60.0, ge=0, description="The longest Retry-After waited for.")
    retry_after_on_transient: bool = Field(
        default=True, description="A transient status's positive Retry-After replaces the backoff."
    )
    busy_wait_s: float = Field(default=1.0, ge=0, description="A busy status's wait when it names none.")
    max_wait_s: float = Field(
        default=math.inf, ge=0, description="How long busy answers are waited for, from the first attempt."
    )

    def backoff(self, failures: int) -> float:
        """The wait after the ``failures``-th transient failure: doubling, capped, with jitter in [0.5, 1)."""
        return min(self.backoff_cap_s, self.backoff_s * 2 ** (failures - 1)) * (0.5 + random.random() / 2)

    def retry_after(self, headers: Mapping[str, str]) -> float | None:
        """The positive wait a ``Retry-After`` asks for, within the cap (0, or a date past, is no wait asked)."""
        return retry_after_s(headers.get("Retry-After"), cap=self.retry_after_cap_s) or None


@dataclass(frozen=True)
class Reply:
    """One answer: its status, headers and whole body, and how long the attempt took."""

    url: str
    status: int
    headers: Mapping[str, str]
    body: bytes
    latency_s: float

    def describe(self) -> str:
        kind, message = error_body(self.body)
        return f"HTTP {self.status} {kind}: {message}"


@dataclass(frozen=True)
class Attempt:
    """An attempt about to be sent (``number`` counts from 1)."""

    url: str
    number: int


@dataclass(frozen=True)
class Fault:
    """An attempt that got no answer: a connection refused or dropped, a timeout, a broken body."""

    url: str
    error: BaseException


Event: TypeAlias = Attempt | Reply | Fault
Watcher: TypeAlias = Callable[[Event], Awaitable[None]]
"""Sees each attempt, answer and fault of a :func:`request`; what it raises ends the request."""


async def _ignore(event: Event) -> None:
    pass


async def request(
    session: aiohttp.ClientSession,
    method: str,
    url: str | Callable[[], str],
    policy: RetryPolicy,
    *,
    name: str,
    error: type[SweRlError],
    watch: Watcher = _ignore,
    max_body: int | None = None,
    **options: Any,
) -> Reply:
    """Send until a 200 comes back, as ``policy`` says; the 200's :class:`Reply`.

    ``url`` may be a callable, asked before each attempt (a client that moves a request to another
    server). ``watch`` sees every attempt, answer and fault before it is judged; what it raises ends the
    request (a typed refusal, say). What fails for good raises ``error`` naming ``name``, the URL and the
    last failure. ``options`` go to aiohttp's ``request`` (``json``, ``data``, ``headers``, ``timeout``).
    """
    import aiohttp

    deadline = time.monotonic() + policy.max_wait_s
    failures = number = 0
    while True:
        number += 1
        where = url() if callable(url) else url
        await watch(Attempt(where, number))
        delay: float | None = None
        counted = True  # a transient failure, counted against the retries whether or not it names a wait
        try:
            reply = await _send(session, method, where, options, max_body, name=name, error=error)
        except SweRlError:
            raise
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            await watch(Fault(where, exc))
            last = f"{type(exc).__name__}: {exc}"
        else:
            await watch(reply)
            if reply.status == 200:
                return reply
            last = reply.describe()
            if reply.status in policy.busy:
                counted = False
                delay = policy.retry_after(reply.headers) or policy.busy_wait_s
                if time.monotonic() + delay > deadline:
                    raise error(f"{name} at {where} busy for {policy.max_wait_s:.0f}s: {last}")
            elif reply.status not in policy.transient:
                raise error(f"{name} at {where}: {last}")
            elif policy.retry_after_on_transient:
                delay = policy.retry_after(reply.headers)
        if counted:
            failures += 1
            if failures > policy.retries:
                raise error(f"{name} at {where} failed after {failures} attempts: {last}")
        await asyncio.sleep(policy.backoff(failures) if delay is None else delay)


async def _send(
    session: aiohttp.ClientSession,
    method: str,
    url: str,
    options: dict[str, Any],
    max_body: int | None,
    *,
    name: str,
    error: type[SweRlError],
) -> Reply:
    started = time.monotonic()
    async with session.request(method, url, **options) as resp:
        if max_body is None:
            body = await resp.read()
        else:
            chunks = bytearray()
            async for chunk in resp.content.iter_chunked(65536):
                chunks += chunk
                if len(chunks) > max_body:
                    raise error(f"{name} at {url}: reply larger than {max_body} bytes")
            body = bytes(chunks)
        return Reply(url, resp.status, resp.headers, body, time.monotonic() - started)
