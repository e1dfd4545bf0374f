"""Whatever reaches a handler is answered in the structured shape ``{ok: false, error: {kind, message}}``.

swe-rl's own errors get the kind that says whose fault they are; anything else is ``internal`` (500), still
structured, never a bare 500 with a traceback. The handlers here are the test's own; the wrapper is the
servers' (``swe_rl.service.server_kit.endpoint``).
"""

from __future__ import annotations

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route
from starlette.testclient import TestClient

from swe_rl.errors import (
    BackendLostError,
    ConfigError,
    EnvBuildError,
    MissingExtraError,
    OutputLimitError,
    SandboxError,
    SandboxUnavailableError,
    SweRlError,
)
from swe_rl.service.server_kit import Metrics, endpoint

CASES = [
    (SandboxError("the shell died"), 502, "sandbox_error"),
    (SandboxUnavailableError("no overlayfs"), 502, "sandbox_error"),
    (BackendLostError("dockerd does not answer"), 502, "node_down"),
    (EnvBuildError("pip failed"), 502, "sandbox_error"),
    (OutputLimitError("file over 64 MiB"), 413, "too_large"),
    (ConfigError("the record has no test_cmd"), 400, "bad_request"),
    (MissingExtraError("docker", "docker", "the docker backend"), 500, "internal"),
    (SweRlError("something of ours"), 500, "internal"),
    (RuntimeError("a bug"), 500, "internal"),
    (KeyError("missing"), 500, "internal"),
]


def _client(exc: BaseException) -> TestClient:
    async def handler(request: Request) -> dict:
        raise exc

    async def fine(request: Request) -> dict:
        return {"ok": True}

    metrics = Metrics("test")
    app = Starlette(
        routes=[
            Route("/raise", endpoint(handler, token=None, metrics=metrics, idempotency=None, name="raise")),
            Route("/fine", endpoint(fine, token=None, metrics=metrics, idempotency=None, name="fine")),
        ]
    )
    return TestClient(app, raise_server_exceptions=False)


@pytest.mark.parametrize(("exc", "status", "kind"), CASES, ids=[type(c[0]).__name__ for c in CASES])
def test_an_exception_in_a_handler_is_a_structured_error(exc, status, kind):
    with _client(exc) as client:
        assert client.get("/fine").json() == {"ok": True}  # control: the wrapper passes answers through
        response = client.get("/raise")
    assert response.status_code == status, response.text
    body = response.json()
    assert body["ok"] is False and body["error"]["kind"] == kind, body
    assert type(exc).__name__ in body["error"]["message"] and "Traceback" not in response.text
