"""What every HTTP client here shares: one session per event loop, the error body, ``Retry-After``, and
one retrying request.

:class:`LoopSession`: an aiohttp session belongs to the loop it was made in; a client kept across
``asyncio.run`` calls (a trainer's process-wide executor) must not reuse it on the next loop. It makes a
session for the running loop and registers it with that loop as an async generator, so a loop that shuts
down (``asyncio.run``, ``asyncio.Runner``: they finalize async generators) closes the session before it
closes. A loop that stops without that step leaves its session to the garbage collector.

:func:`request` sends one request until it is answered, as a :class:`RetryPolicy` says (tenacity runs the
attempts): connection faults, timeouts and *transient* statuses are retried with jittered backoff (or
after the server's ``Retry-After``) a bounded number of times; *busy* statuses ("full, come back later")
are waited for as asked until a deadline; any other status ends it, and so does a URL that is not one
(a ConfigError at once: no scheme, no host, a bad port). Each client decides what a failure is (the typed error
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
from typing import TYPE_CHECKING, Any, NoReturn, TypeAlias

from pydantic import BaseModel, ConfigDict, Field
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type
from tenacity.stop import stop_base
from tenacity.wait import wait_base

from swe_rl.errors import ConfigError, SweRlError

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


class _Retryable(Exception):
    """An attempt that may be sent again; its message is the request's error should it be the last.

    ``reply`` is the answer (None for a fault); ``failures`` counts the transient failures so far, this
    one included (a busy answer counts none).
    """

    def __init__(self, message: str, reply: Reply | None, *, busy: bool = False, failures: int = 0) -> None:
        super().__init__(message)
        self.reply, self.busy, self.failures = reply, busy, failures


def _failed(state: RetryCallState) -> _Retryable:
    assert state.outcome is not None  # tenacity asks wait and stop only after an attempt failed
    failed = state.outcome.exception()
    assert isinstance(failed, _Retryable)  # the only exception retried
    return failed


class _WaitAsAsked(wait_base):
    """The server's positive ``Retry-After`` (a busy status's; a transient one's if the policy says so),
    else ``busy_wait_s`` for a busy status, else a doubling backoff, capped, with jitter in [0.5, 1)."""

    def __init__(self, policy: RetryPolicy) -> None:
        self.policy = policy

    def asked(self, failed: _Retryable) -> float | None:
        policy = self.policy
        if failed.reply is None or not (failed.busy or policy.retry_after_on_transient):
            return None
        asked = retry_after_s(failed.reply.headers.get("Retry-After"), cap=policy.retry_after_cap_s)
        return asked or (policy.busy_wait_s if failed.busy else None)  # 0, or a date past: no wait asked

    def __call__(self, retry_state: RetryCallState) -> float:
        failed = _failed(retry_state)
        asked = self.asked(failed)
        if asked is not None:
            return asked
        backoff = self.policy.backoff_s * 2 ** (failed.failures - 1)
        return min(self.policy.backoff_cap_s, backoff) * random.uniform(0.5, 1.0)


class _StopAsAllowed(stop_base):
    """A transient failure past ``retries``; a busy answer whose wait would end past ``max_wait_s``."""

    def __init__(self, wait: _WaitAsAsked) -> None:
        self.wait = wait

    def __call__(self, retry_state: RetryCallState) -> bool:
        failed, policy = _failed(retry_state), self.wait.policy
        if not failed.busy:
            return failed.failures > policy.retries
        waited = retry_state.seconds_since_start or 0.0
        return waited + (self.wait.asked(failed) or 0.0) > policy.max_wait_s


def _retrying(policy: RetryPolicy, error: type[SweRlError]) -> AsyncRetrying:
    def give_up(retry_state: RetryCallState) -> NoReturn:
        failed = _failed(retry_state)
        raise error(str(failed)) from failed.__cause__

    wait = _WaitAsAsked(policy)
    return AsyncRetrying(
        retry=retry_if_exception_type(_Retryable),
        wait=wait,
        stop=_StopAsAllowed(wait),
        retry_error_callback=give_up,
    )


def _judged(
    reply: Reply, policy: RetryPolicy, failures: int, *, name: str, error: type[SweRlError]
) -> Exception:
    """What a reply other than a 200 is: busy, transient (the ``failures``-th), or ``error`` at once."""
    where, last = reply.url, reply.describe()
    if reply.status in policy.busy:
        return _Retryable(f"{name} at {where} busy for {policy.max_wait_s:.0f}s: {last}", reply, busy=True)
    if reply.status not in policy.transient:
        return error(f"{name} at {where}: {last}")
    return _Retryable(f"{name} at {where} failed after {failures} attempts: {last}", reply, failures=failures)


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
    last failure; a malformed URL raises ConfigError at once. ``options`` go to aiohttp's ``request``
    (``json``, ``data``, ``headers``, ``timeout``).
    """
    import aiohttp

    failures = 0
    async for attempt in _retrying(policy, error):
        with attempt:
            where = url() if callable(url) else url
            await watch(Attempt(where, attempt.retry_state.attempt_number))
            try:
                reply = await _send(session, method, where, options, max_body, name=name, error=error)
            except SweRlError:
                raise
            except (aiohttp.InvalidURL, aiohttp.NonHttpUrlClientError) as exc:
                raise ConfigError(f"{name}: {where!r} is not an http(s) URL with a host") from exc
            except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                await watch(Fault(where, exc))
                failures += 1
                last = f"{type(exc).__name__}: {exc}"
                raise _Retryable(
                    f"{name} at {where} failed after {failures} attempts: {last}", None, failures=failures
                ) from exc
            await watch(reply)
            if reply.status == 200:
                return reply
            failures += reply.status not in policy.busy
            raise _judged(reply, policy, failures, name=name, error=error)
    raise AssertionError("unreachable: tenacity returns or raises")  # pragma: no cover


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
