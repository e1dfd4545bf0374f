"""The one retrying request (swe_rl.httpclient.request) against real aiohttp servers on loopback."""

from __future__ import annotations

import math
import socket
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import aiohttp
import pytest
from aiohttp import web

from swe_rl.errors import BackendLostError, ConfigError, InfraError, LLMError, SweRlError
from swe_rl.httpclient import Attempt, Event, Fault, Reply, RetryPolicy, request, retry_after_s

Answer = tuple[int, dict[str, str], bytes]
OK: Answer = (200, {}, b'{"ok": true}')
FAST = RetryPolicy(retries=3, backoff_s=0.01)


def busy(retry_after: str | None = None, status: int = 503) -> Answer:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return status, headers, b'{"error": {"kind": "capacity", "message": "full"}}'


def _date(seconds_ahead: float) -> str:
    return format_datetime(datetime.now(UTC) + timedelta(seconds=seconds_ahead), usegmt=True)


class Scripted:
    """Answers each request with the next scripted answer (the last one repeats); records what came."""

    def __init__(self, answers: list[Answer]) -> None:
        self.answers = answers
        self.request_ids: list[str | None] = []
        self.times: list[float] = []
        self.url = ""

    async def handle(self, req: web.Request) -> web.Response:
        await req.read()
        self.request_ids.append(req.headers.get("X-Request-ID"))
        self.times.append(time.monotonic())
        status, headers, body = self.answers[min(len(self.times), len(self.answers)) - 1]
        return web.Response(status=status, headers=headers, body=body)

    @property
    def hits(self) -> int:
        return len(self.times)


@pytest.fixture
async def serve() -> AsyncIterator:
    runners: list[web.AppRunner] = []

    async def start(answers: list[Answer]) -> Scripted:
        scripted = Scripted(answers)
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", scripted.handle)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        port = runner.addresses[0][1]
        scripted.url = f"http://127.0.0.1:{port}/run"
        return scripted

    yield start
    for runner in runners:
        await runner.cleanup()


async def _send(url: str, policy: RetryPolicy, **kwargs) -> Reply:
    kwargs.setdefault("error", InfraError)
    async with aiohttp.ClientSession() as session:
        return await request(session, "POST", url, policy, name="test server", **kwargs)


async def test_a_503_with_retry_after_seconds_is_waited_for_then_retried(serve):
    server = await serve([busy("1"), OK])
    reply = await _send(server.url, FAST, headers={"X-Request-ID": "r1"})
    assert (reply.status, reply.body) == (200, b'{"ok": true}') and server.hits == 2
    assert server.times[1] - server.times[0] >= 0.95, "waited as asked, not the 10 ms backoff"
    assert server.request_ids == ["r1", "r1"], "the same request id on the retry"


async def test_a_503_with_an_http_date_is_waited_for_then_retried(serve):
    header = _date(2)  # whole seconds: between 1 and 2 s from now
    with pytest.raises(ValueError):
        float(header)  # control: the reading that broke the sandbox client's loop on this very value
    server = await serve([busy(header), OK])
    reply = await _send(server.url, FAST)
    assert reply.status == 200 and server.hits == 2
    assert server.times[1] - server.times[0] >= 0.9, "waited until the date, not the 10 ms backoff"


@pytest.mark.parametrize("retry_after", [None, "0.05"])
async def test_it_gives_up_after_its_attempts_with_the_callers_typed_error(serve, retry_after):
    """A 503 that names a wait counts against the retries as one that does not (else it never ends)."""
    server = await serve([busy(retry_after)])
    for error in (LLMError, BackendLostError):
        before = server.hits
        with pytest.raises(
            error, match=r"test server at .* failed after 4 attempts: HTTP 503 capacity: full"
        ):
            await _send(server.url, FAST, error=error)
        assert server.hits - before == 4  # retries=3: four attempts in all
    assert issubclass(LLMError, SweRlError) and issubclass(BackendLostError, SweRlError)


async def test_a_4xx_is_not_retried(serve):
    server = await serve([(404, {}, b'{"error": {"kind": "not_found", "message": "no such run"}}'), OK])
    with pytest.raises(InfraError, match="HTTP 404 not_found: no such run"):
        await _send(server.url, FAST)
    assert server.hits == 1


async def test_a_retry_after_longer_than_the_cap_is_held_to_the_cap(serve):
    assert retry_after_s("600", cap=math.inf) == 600.0  # control: the server really asks for ten minutes
    server = await serve([busy("600"), OK])
    started = time.monotonic()
    reply = await _send(server.url, RetryPolicy(retries=1, backoff_s=0.01, retry_after_cap_s=0.3))
    assert reply.status == 200 and 0.3 <= time.monotonic() - started < 10


async def test_a_zero_retry_after_backs_off_instead(serve):
    server = await serve([busy("0"), OK])
    reply = await _send(server.url, RetryPolicy(retries=1, backoff_s=0.4))
    assert reply.status == 200 and server.times[1] - server.times[0] >= 0.2  # jitter: 0.4 * [0.5, 1)


async def test_a_transient_status_may_ignore_retry_after(serve):
    server = await serve([busy("5", status=502), OK])
    policy = RetryPolicy(retries=1, backoff_s=0.01, retry_after_on_transient=False)
    reply = await _send(server.url, policy)
    assert reply.status == 200 and server.times[1] - server.times[0] < 1


async def test_busy_answers_are_waited_for_until_max_wait_and_not_counted_as_retries(serve):
    policy = RetryPolicy(transient=frozenset(), busy=frozenset({503}), retries=0, busy_wait_s=0.05)
    server = await serve([busy(), busy(), busy(), OK])
    assert (await _send(server.url, policy)).status == 200 and server.hits == 4
    with pytest.raises(InfraError):  # control: the same 503s, not busy and with no retries, end it at once
        await _send((await serve([busy(), OK])).url, policy.model_copy(update={"busy": frozenset()}))
    server = await serve([busy("0.2")])
    with pytest.raises(InfraError, match=r"busy for 1s: HTTP 503 capacity"):
        await _send(server.url, policy.model_copy(update={"max_wait_s": 1.0}))
    assert 4 <= server.hits <= 6


async def test_an_unreachable_server_is_retried_then_named(serve):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(LLMError, match="failed after 2 attempts: ClientConnectorError"):
        await _send(f"http://127.0.0.1:{port}/run", RetryPolicy(retries=1, backoff_s=0.01), error=LLMError)


async def test_the_watcher_sees_every_event_moves_the_request_and_can_end_it(serve):
    down = socket.socket()
    down.bind(("127.0.0.1", 0))
    targets = [f"http://127.0.0.1:{down.getsockname()[1]}/run", (await serve([busy(), OK])).url]
    seen: list[str] = []

    async def watch(event: Event) -> None:
        if isinstance(event, Attempt):
            seen.append(f"attempt {event.number}")
        elif isinstance(event, Fault):
            seen.append(type(event.error).__name__)
            targets.pop(0)  # nothing reached it: the next attempt goes to the next server
        else:
            seen.append(f"reply {event.status}")

    try:
        reply = await _send(lambda: targets[0], FAST, watch=watch)
    finally:
        down.close()
    assert reply.status == 200
    assert seen == ["attempt 1", "ClientConnectorError", "attempt 2", "reply 503", "attempt 3", "reply 200"]

    async def refuse(event: Event) -> None:
        if isinstance(event, Reply) and event.status == 503:
            raise ConfigError("refused")

    server = await serve([busy(), OK])
    with pytest.raises(ConfigError, match="refused"):
        await _send(server.url, FAST, watch=refuse)
    assert server.hits == 1


async def test_a_reply_over_max_body_raises_the_typed_error(serve):
    server = await serve([(200, {}, b"x" * 5000)])
    assert len((await _send(server.url, FAST, max_body=5000)).body) == 5000
    with pytest.raises(LLMError, match="larger than 4096 bytes"):
        await _send(server.url, FAST, error=LLMError, max_body=4096)
    assert server.hits == 2


@pytest.mark.parametrize(
    "malformed",
    ["127.0.0.1:{port}/run", "http//127.0.0.1:{port}/run", "http://:{port}/run", "http://[::1/run", "/run"],
)
async def test_a_malformed_url_is_a_config_error_at_once(serve, malformed):
    """No scheme, no host, bad host syntax: no retry can fix it (a refused connection keeps its retries)."""
    server = await serve([OK])
    port = server.url.split(":")[2].split("/")[0]
    attempts: list[int] = []

    async def watch(event: Event) -> None:
        if isinstance(event, Attempt):
            attempts.append(event.number)

    assert (await _send(server.url, FAST)).status == 200  # control: the same server with its scheme
    with pytest.raises(ConfigError, match=r"test server: '.*' is not an http\(s\) URL with a host"):
        await _send(malformed.format(port=port), RetryPolicy(retries=4, backoff_s=5.0), watch=watch)
    assert attempts == [1] and server.hits == 1
