"""The remote backend: sandboxes leased from a pool server (or an exec server) over HTTP.

One pooled aiohttp session per factory and event loop (:class:`swe_rl.httpclient.LoopSession`). Every
call carries an ``X-Request-ID`` that stays the same across retries, so a retried exec returns the first
result and never runs twice. Transient failures (connection errors, 502/503/504) are retried with
backoff, or after a ``Retry-After`` of up to 60 s (:func:`swe_rl.httpclient.request`). What still fails is
charged by where it happened: an answer about the sandbox itself (``sandbox_error``, ``bad_request``)
is a SandboxError; a pool or node that cannot be reached, is down or answers anything else is a
BackendLostError (never the agent's doing).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import uuid
from typing import Any, Self

from swe_rl.errors import BackendLostError, OutputLimitError, SandboxError, SandboxUnavailableError
from swe_rl.httpclient import Event, LoopSession, Reply, RetryPolicy, error_body, request
from swe_rl.sandbox.base import EnvSpec, ExecResult, Limits
from swe_rl.sandbox.exec_protocol import AllocateResponse, timeout_note
from swe_rl.sandbox.shell import FILE_CAP

RETRYABLE = frozenset({502, 503, 504})
SANDBOX_KINDS = {"sandbox_error", "bad_request"}  # the node answered about this sandbox or this request


RETRY_AFTER_CAP_S = 60.0  # a server (or a proxy) that asks for longer is waited for this long


class RemoteClient:
    """HTTP plumbing: auth, request ids, retries."""

    def __init__(
        self, url: str, token: str | None = None, *, retries: int = 4, backoff_s: float = 0.2
    ) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.retries = retries
        self.backoff_s = backoff_s
        self._sessions = LoopSession(_new_session)

    async def post(
        self, path: str, body: dict[str, Any], *, timeout: float = 300.0, request_id: str | None = None
    ) -> dict[str, Any]:
        import aiohttp

        headers = {"X-Request-ID": request_id or uuid.uuid4().hex}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        policy = RetryPolicy(
            transient=RETRYABLE,
            retries=self.retries,
            backoff_s=self.backoff_s,
            retry_after_cap_s=RETRY_AFTER_CAP_S,
        )
        reply = await request(
            await self._sessions.get(),
            "POST",
            self.url + path,
            policy,
            name="pool server",
            error=BackendLostError,
            watch=_refuse,
            json=body,
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=timeout),
        )
        return dict(json.loads(reply.body))

    async def close(self) -> None:
        await self._sessions.close()


async def _refuse(event: Event) -> None:
    """An answer about the sandbox or the request, or a node that is down, is final: not retried."""
    if not isinstance(event, Reply) or event.status == 200:
        return
    kind, message = error_body(event.body)
    if kind == "too_large":
        raise OutputLimitError(f"{event.url}: {message}")
    if kind in SANDBOX_KINDS:
        raise SandboxError(f"{event.url}: {event.describe()}")
    if kind == "node_down":
        raise BackendLostError(f"{event.url}: {event.describe()}")


def _new_session() -> Any:
    import aiohttp

    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=256))


class RemoteSandbox:
    """A leased sandbox; a background task heartbeats the lease."""

    def __init__(
        self, client: RemoteClient, lease: AllocateResponse, env: EnvSpec, heartbeat_s: float
    ) -> None:
        self.id = lease.container_id
        self.lease_id = lease.lease_id
        self.env = env
        self._client = client
        self._closed = False
        self._beat = asyncio.ensure_future(self._heartbeat(heartbeat_s))

    async def _heartbeat(self, period: float) -> None:
        while True:
            await asyncio.sleep(period)
            with contextlib.suppress(SandboxError):
                await self._client.post("/heartbeat", {"lease_id": self.lease_id}, timeout=30)

    def _check(self) -> None:
        if self._closed:
            raise SandboxError(f"sandbox {self.id} is closed")

    async def exec(
        self, command: str, *, timeout: float, cwd: str | None = None, env: dict[str, str] | None = None
    ) -> ExecResult:
        self._check()
        data = await self._client.post(
            "/exec",
            {"lease_id": self.lease_id, "command": command, "cwd": cwd, "timeout": timeout, "env": env},
            timeout=timeout + 60,
        )
        timed_out = bool(data.get("timed_out", False))
        output = str(data["output"])
        if timed_out:  # the wire speaks the seed's -1 and sentence; the Sandbox contract's timeout is 124
            output = output.removesuffix(timeout_note(timeout))
        return ExecResult(
            returncode=124 if timed_out else data["returncode"],
            output=output,
            timed_out=timed_out,
            duration=data.get("duration", 0.0),
            output_bytes=data.get("output_bytes", 0),
        )

    async def read_file(self, path: str) -> bytes:
        self._check()
        try:
            data = await self._client.post("/read_file", {"lease_id": self.lease_id, "path": path})
        except SandboxError as exc:
            if "No such file" in str(exc):
                raise FileNotFoundError(str(exc)) from None
            if "HTTP 400 bad_request" in str(exc) and not isinstance(exc, BackendLostError):
                # the node's OSError (not a regular file, unreadable, a read that timed out), as the other
                # backends raise it: an answer about the file, which a command of the sandbox may have made
                raise OSError(str(exc)) from None
            raise
        return base64.b64decode(data["data_b64"])

    async def write_file(self, path: str, data: bytes) -> None:
        self._check()
        if len(data) > FILE_CAP:  # refused here, as every backend refuses it, not after sending it
            raise OutputLimitError(f"{self.id}: refusing to write {len(data)} bytes (limit {FILE_CAP})")
        await self._client.post(
            "/write_file",
            {"lease_id": self.lease_id, "path": path, "data_b64": base64.b64encode(data).decode()},
        )

    async def diff(self) -> str:
        self._check()
        return str((await self._client.post("/diff", {"lease_id": self.lease_id}))["patch"])

    async def reset(self) -> None:
        self._check()
        await self._client.post("/reset", {"lease_id": self.lease_id})

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._beat.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._beat
        with contextlib.suppress(SandboxError):
            await self._client.post("/close", {"lease_id": self.lease_id}, timeout=60)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class RemoteFactory:
    """Leases sandboxes from a pool server at ``url``."""

    backend = "remote"

    def __init__(
        self, url: str, token: str | None = None, *, ttl: float = 600.0, wait: float = 300.0
    ) -> None:
        self.client = RemoteClient(url, token)
        self.ttl = ttl
        self.wait = wait

    async def create(self, env: EnvSpec, limits: Limits | None = None) -> RemoteSandbox:
        image = env.image or env.key
        try:
            body = {
                "image": image,
                "ttl": self.ttl,
                "wait": self.wait,
                "limits": limits.model_dump() if limits else None,
            }
            data = await self.client.post("/allocate", body, timeout=self.wait + 600)
        except SandboxError as exc:
            if "ClientConnectorError" in str(exc):
                raise SandboxUnavailableError(f"no pool server at {self.client.url}: {exc}") from None
            raise
        return RemoteSandbox(
            self.client, AllocateResponse.model_validate(data), env, heartbeat_s=max(1.0, self.ttl / 3)
        )

    async def close(self) -> None:
        await self.client.close()
