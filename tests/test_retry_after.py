"""Retry-After in both of RFC 9110's forms, read the same by every HTTP client here.

A proxy or load balancer in front of a pool or a model server may answer 503 with an HTTP-date. The
sandbox client read the header with ``float()`` and raised ValueError out of its retry loop; the other
two clients fell back to their own backoff. All three now wait as told, within their cap.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import aiohttp
import pytest

from swe_rl.httpclient import error_body, retry_after_s
from swe_rl.llm.http import post_json
from swe_rl.sandbox.remote import RemoteClient


def _date(seconds_ahead: float) -> str:
    return format_datetime(datetime.now(UTC) + timedelta(seconds=seconds_ahead), usegmt=True)


def test_both_forms_are_read_and_held_to_the_cap():
    assert retry_after_s("3", cap=60) == 3.0
    assert retry_after_s(" 7.5 ", cap=60) == 7.5
    assert retry_after_s("600", cap=60) == 60.0
    assert retry_after_s("-4", cap=60) == 0.0
    ahead = retry_after_s(_date(30), cap=60)
    assert ahead is not None and 25 <= ahead <= 30
    assert retry_after_s(_date(-3600), cap=60) == 0.0  # a date past is "now"
    assert retry_after_s("Fri, 31 Dec 9999 23:59:59 GMT", cap=60) == 60.0
    for unreadable in (None, "", "  ", "soon", "nan", "Mon, 99 Foo 2025 99:99:99 GMT"):
        assert retry_after_s(unreadable, cap=60) is None, unreadable


def test_error_body_reads_swe_rls_shape_and_names_anything_else():
    assert error_body(b'{"error": {"kind": "capacity", "message": "full"}}') == ("capacity", "full")
    assert error_body(b"<html>Bad Gateway</html>") == ("unknown", "<html>Bad Gateway</html>")
    assert error_body(b'{"error": "flat"}')[0] == "unknown"


class _Busy:
    """Answers the first POST with 503 and an HTTP-date Retry-After, then 200 ``{}``."""

    def __init__(self) -> None:
        self.posts = 0
        busy = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                busy.posts += 1
                if busy.posts == 1:
                    body = json.dumps({"error": {"kind": "capacity", "message": "full"}}).encode()
                    self.send_response(503)
                    self.send_header("Retry-After", _date(1))
                else:
                    body = b"{}"
                    self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"


@pytest.fixture
def busy() -> Iterator[_Busy]:
    served = _Busy()
    thread = threading.Thread(target=served.server.serve_forever, daemon=True)
    thread.start()
    yield served
    served.server.shutdown()
    thread.join()


async def test_the_sandbox_client_waits_for_an_http_date_and_retries(busy):
    header = _date(1)
    with pytest.raises(ValueError):
        float(header)  # control: how the client read the header before, on this very value
    client = RemoteClient(busy.url, retries=2, backoff_s=0.01)
    try:
        assert await client.post("/container/exec", {}) == {}
    finally:
        await client.close()
    assert busy.posts == 2


async def test_the_model_client_waits_for_an_http_date_and_retries(busy):
    async with aiohttp.ClientSession() as session:
        body, _ = await post_json(
            session, busy.url + "/v1/chat/completions", {}, name="policy", backoff_s=0.01
        )
    assert body == b"{}" and busy.posts == 2
