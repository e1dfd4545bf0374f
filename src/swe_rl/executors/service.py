"""The ``service`` executor: each rollout is one ``POST /run`` to a rollout server (``swe-rl serve rollout``).

The trainer's side of the rollout service. One pooled aiohttp session per event loop
(:class:`swe_rl.httpclient.LoopSession`). ``url`` may list several rollout servers (comma-separated):
each rollout goes to the one with the fewest of this client's rollouts in flight and stays there for its
retries; a server that refuses connections is skipped. Every rollout gets one ``X-Request-ID`` that
stays the same across retries, so a retried request joins or replays the first rollout and the server
runs it once. A full server's ``503`` is retried after its ``Retry-After`` until
``max_wait_s``; dropped connections and 502/504 are retried with backoff. What still fails (server
unreachable, timed out, a broken reply) comes back as an ``infra_error`` result and never raises; the
server's typed 4xx (a bad request, an unknown instance id, a wrong token) raises :class:`ConfigError`,
because retrying a wrong request cannot help. A cancelled or timed-out call cancels its rollout on the
server (``DELETE /run/{id}``), freeing the sandbox at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from swe_rl import httpclient
from swe_rl.episode.result import RolloutResult
from swe_rl.errors import ConfigError, InfraError
from swe_rl.executors.base import EpisodeRequest, ModelFactory, refuse_model, refuse_task
from swe_rl.tasks.model import Task

RETRYABLE = frozenset({502, 504})
BUSY = 503  # capacity or draining: wait as the server asks


@dataclass(frozen=True)
class ServiceStats:
    """What went over the link to the rollout server (request and reply bodies, without HTTP headers)."""

    rollouts: int
    requests: int
    retries: int
    bytes_sent: int
    bytes_received: int
    infra_errors: int


class ServiceExecutor:
    """Rollouts on the rollout server(s) at ``url`` (comma-separated); ``token`` defaults to ``$SWE_RL_TOKEN``."""

    name = "service"
    in_process = False

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        timeout_s: float | None = None,
        connect_timeout_s: float = 10.0,
        retries: int = 4,
        backoff_s: float = 0.2,
        max_wait_s: float = 1800.0,
    ) -> None:
        self.urls = [u.strip().rstrip("/") for u in url.split(",") if u.strip()]
        bad = [u for u in self.urls if not u.startswith(("http://", "https://"))]
        if bad or not self.urls:
            raise ConfigError(f"rollout server URLs must start with http:// or https://, got {url!r}")
        self.url = ",".join(self.urls)
        self._in_flight = dict.fromkeys(self.urls, 0)
        self._turn = 0
        self._server_of: dict[str, str] = {}  # request id -> the server running it
        self._token = token or None
        self.timeout_s = timeout_s or 3600.0
        self.connect_timeout_s = connect_timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.max_wait_s = max_wait_s
        self._sessions = httpclient.LoopSession(
            _new_session
        )  # a trainer may call from several loops over its life
        self._counts = {k: 0 for k in ServiceStats.__dataclass_fields__}

    def statistics(self) -> ServiceStats:
        return ServiceStats(**self._counts)

    def _headers(self, request_id: str) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "X-Request-ID": request_id}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        return headers

    def _pick(self, avoid: str | None = None) -> str:
        """The server with the fewest of our rollouts in flight (round robin among equals)."""
        choices = [u for u in self.urls if u != avoid] or self.urls
        least = min(self._in_flight[u] for u in choices)
        n = len(self.urls)
        for i in range(n):
            url = self.urls[(self._turn + i) % n]
            if url in choices and self._in_flight[url] == least:
                self._turn = (self._turn + i + 1) % n
                return url
        return choices[0]

    def _assign(self, request_id: str, url: str) -> None:
        old = self._server_of.get(request_id)
        if old is not None:
            self._in_flight[old] -= 1
        self._server_of[request_id] = url
        self._in_flight[url] += 1

    async def run(
        self, request: EpisodeRequest, *, task: Task | None = None, model: ModelFactory | None = None
    ) -> RolloutResult:
        if model is not None:
            raise refuse_model(self.name, request.model)  # the servers build their models from the request
        if task is not None:
            raise refuse_task(self.name, task)  # the servers parse the record the request carries
        request_id = uuid.uuid4().hex
        self._counts["rollouts"] += 1
        self._assign(request_id, self._pick())
        try:
            result = await self._run(request, request_id)
        except asyncio.CancelledError:
            await self._cancel_remote(request_id)
            raise
        finally:
            self._in_flight[self._server_of.pop(request_id)] -= 1
        if result.status == "infra_error":
            self._counts["infra_errors"] += 1
        return result

    async def _run(self, request: EpisodeRequest, request_id: str) -> RolloutResult:
        import aiohttp

        body = request.model_dump_json().encode()
        try:
            reply = await httpclient.request(
                await self._sessions.get(),
                "POST",
                lambda: self._server_of[request_id] + "/run",  # the server may change between attempts
                self._policy(),
                name="rollout server",
                error=InfraError,
                watch=self._watcher(request_id, len(body)),
                data=body,
                headers=self._headers(request_id),
                timeout=aiohttp.ClientTimeout(total=self.timeout_s, sock_connect=self.connect_timeout_s),
            )
        except InfraError as exc:  # unreachable, busy too long, no answer in time, an unexpected status
            return _infra(str(exc))
        return _result(reply.body, reply.url)

    def _policy(self) -> httpclient.RetryPolicy:
        """502/504 and dropped connections: backoff within ``retries``; 503: as asked, until ``max_wait_s``.
        Any other status (409: cancelled on the server by a DELETE /run/{id}) ends it as an infra_error."""
        return httpclient.RetryPolicy(
            transient=RETRYABLE,
            busy=frozenset({BUSY}),
            retries=self.retries,
            backoff_s=self.backoff_s,
            retry_after_cap_s=60.0,
            retry_after_on_transient=False,
            busy_wait_s=1.0,
            max_wait_s=self.max_wait_s,
        )

    def _watcher(self, request_id: str, sent: int) -> httpclient.Watcher:
        """Counts the link's traffic, moves the request off a server that is full or unreachable, refuses
        a typed 4xx (ConfigError), and ends a request with no answer in time (cancelled on the server)."""
        import aiohttp

        async def watch(event: httpclient.Event) -> None:
            server = self._server_of[request_id]
            if isinstance(event, httpclient.Attempt):
                self._counts["requests"] += 1
                self._counts["bytes_sent"] += sent
                self._counts["retries"] += int(event.number > 1)
            elif isinstance(event, httpclient.Reply):
                self._counts["bytes_received"] += len(event.body)
                kind, _ = httpclient.error_body(event.body)
                if 400 <= event.status < 500 and kind != "cancelled":
                    raise ConfigError(f"rollout server {server} refused the request: {event.describe()}")
                if event.status == BUSY:  # refused, nothing ran: try again there or on a less busy server
                    self._assign(request_id, self._pick(avoid=server))
            elif isinstance(event.error, aiohttp.ClientConnectorError | aiohttp.ConnectionTimeoutError):
                self._assign(request_id, self._pick(avoid=server))  # nothing reached it: try another
            elif isinstance(event.error, TimeoutError):
                await self._cancel_remote(request_id)
                raise InfraError(f"rollout server {server} gave no answer within {self.timeout_s:.0f}s")

        return watch

    async def _cancel_remote(self, request_id: str) -> None:
        """Best effort: free the rollout's slot and sandbox on the server now (it would notice later anyway)."""
        import aiohttp

        url = self._server_of.get(request_id, self.urls[0])
        with contextlib.suppress(Exception):
            session = await self._sessions.get()
            async with session.delete(
                f"{url}/run/{request_id}",
                headers=self._headers(request_id),
                timeout=aiohttp.ClientTimeout(total=5),
            ) as resp:
                await resp.read()

    async def close(self) -> None:
        await self._sessions.close()


def _new_session() -> Any:
    import aiohttp

    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))


def _infra(error: str) -> RolloutResult:
    return RolloutResult(status="infra_error", exit_status="infra_error", error=error)


def _result(data: bytes, url: str) -> RolloutResult:
    try:
        return RolloutResult.model_validate_json(data)
    except ValidationError as exc:
        return _infra(f"rollout server {url} sent a reply that is not a rollout: {exc.errors()[0]['msg']}")
