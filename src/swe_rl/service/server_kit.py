"""What the servers are built from: typed errors, bearer auth, body limits, idempotent requests, metrics."""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from pydantic import BaseModel, TypeAdapter, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from swe_rl.errors import (
    BackendLostError,
    ConfigError,
    InfraError,
    MissingExtraError,
    OutputLimitError,
    SweRlError,
)
from swe_rl.sandbox.exec_protocol import (
    MAX_FILE,
    AllocateRequest,
    CreateRequest,
    ErrorBody,
    ErrorKind,
    ErrorResponse,
    EvaluateRequest,
    ExecRequest,
    FileReadRequest,
    FileWriteRequest,
    IdRequest,
)

M = TypeVar("M", bound=BaseModel)
STATUS: dict[ErrorKind, int] = {
    "bad_request": 400,
    "too_large": 413,
    "unauthorized": 401,
    "not_found": 404,
    "capacity": 503,
    "node_down": 502,
    "sandbox_error": 502,
    "timeout": 504,
    "draining": 503,
    "cancelled": 409,
    "internal": 500,
}
MIB = 1024 * 1024
MAX_BODY = 96 * MIB
CHUNKED_MAX = 8 * MIB
BODY_CAPS: dict[type[BaseModel], int] = {
    CreateRequest: MIB,
    IdRequest: MIB,
    FileReadRequest: MIB,
    AllocateRequest: MIB,
    ExecRequest: 8 * MIB,  # a command of MAX_COMMAND characters, JSON-escaped
    FileWriteRequest: MAX_FILE * 4 // 3 + MIB,  # a file of MAX_FILE bytes, base64
    EvaluateRequest: MAX_BODY,  # a patch of MAX_FILE characters and a script
}
_log = logging.getLogger(__name__)


class ServiceError(SweRlError):
    """An answer a handler gives by raising: the endpoint sends its kind's status and error body."""

    def __init__(self, kind: ErrorKind, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.retry_after = retry_after


def error_response(kind: ErrorKind, message: str, retry_after: float | None = None) -> JSONResponse:
    headers = {"Retry-After": f"{retry_after:.0f}"} if retry_after is not None else None
    body = ErrorResponse(error=ErrorBody(kind=kind, message=message)).model_dump()
    return JSONResponse(body, status_code=STATUS[kind], headers=headers)


def error_kind(exc: SweRlError) -> ErrorKind:
    """The wire kind of one of swe-rl's errors: whose fault it is decides 4xx or 5xx."""
    if isinstance(exc, OutputLimitError):
        return "too_large"
    if isinstance(exc, MissingExtraError):
        return "internal"  # the node lacks a dependency: not the request's fault
    if isinstance(exc, ConfigError):
        return "bad_request"
    if isinstance(exc, BackendLostError):
        return "node_down"  # what runs the sandboxes is gone: never the sandbox's (or its agent's) doing
    if isinstance(exc, InfraError):
        return "sandbox_error"
    return "internal"


async def read_body(request: Request, cap: int) -> bytearray:
    """The body, refused (``too_large``) as soon as it is known to pass ``cap``: a declared Content-Length
    over it before a byte is read, a chunked body once what arrived passes it (at most CHUNKED_MAX for a
    body that does not declare its length). Nothing much over the cap is ever held."""
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            length = int(declared)
        except ValueError:
            raise ServiceError("bad_request", "Content-Length is not a number") from None
        if length > cap:
            raise ServiceError("too_large", f"request body of {length} bytes; this endpoint takes {cap}")
        limit = cap
    else:
        limit = min(cap, CHUNKED_MAX)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise ServiceError(
                "too_large",
                f"request body over {limit} bytes"
                + ("" if declared is not None else " (a larger body must declare its Content-Length)"),
            )
    return body


async def parse(request: Request, model: type[M], cap: int | None = None) -> M:
    """The body as ``model``: over its cap (``BODY_CAPS``) is ``too_large``, invalid is ``bad_request``."""
    return validate(model, await read_body(request, cap or BODY_CAPS.get(model, MAX_BODY)))


def validate(model: type[M], body: bytes | bytearray) -> M:
    """A body already read, as ``model``; invalid is ``bad_request``.

    Every body of every server (exec, pool, rollout) is parsed here, by pydantic's JSON parser, never by
    ``json.loads``: it refuses what is not JSON, not UTF-8, nested deeper than its limit (a few hundred
    levels: 50,000 nested arrays made ``json.loads`` raise RecursionError, a 500) or a number out of range,
    each as a ``json_invalid`` error, so a malformed body is a 400 with the structured error body."""
    try:
        return model.model_validate_json(body or b"{}")
    except ValidationError as exc:
        raise _bad_request(exc) from None


_OBJECT: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])


def load_object(body: bytes | bytearray) -> dict[str, Any]:
    """A body already read, as a JSON object of any fields (to tell which request it is before validating
    it as that one): parsed as :func:`validate` parses, the same errors."""
    try:
        return _OBJECT.validate_json(body or b"{}")
    except ValidationError as exc:
        raise _bad_request(exc) from None


def _bad_request(exc: ValidationError, shown: int = 5) -> ServiceError:
    """Every field that is wrong, by name (a body with ``policy`` for ``model`` is told both: the one it
    lacks and the one it has no use for), the first ``shown`` of them."""
    errors = exc.errors()
    said = [f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in errors[:shown]]
    more = f" (and {len(errors) - shown} more)" if len(errors) > shown else ""
    return ServiceError("bad_request", "; ".join(said) + more)


class Idempotency:
    """Remembers responses by ``X-Request-ID``: a retry gets the first answer; a concurrent duplicate waits for it.

    Bounded three ways, oldest answers first: age (``ttl_s``), count and bytes (``max_bytes``: a client
    that tags every call, file reads included, must not grow the server without limit).
    """

    def __init__(
        self, ttl_s: float = 900.0, max_entries: int = 100_000, max_bytes: int = 256 * 1024 * 1024
    ) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.bytes = 0  # held in finished answers
        self._entries: OrderedDict[str, tuple[float, asyncio.Future[tuple[int, bytes]]]] = OrderedDict()
        self._waiting: dict[str, int] = {}
        self.replays = 0

    def waiting(self, request_id: str) -> int:
        """Retries now waiting for the first request with this id to finish."""
        return self._waiting.get(request_id, 0)

    async def run(self, request_id: str | None, handler: Callable[[], Awaitable[Response]]) -> Response:
        if not request_id:
            return await handler()
        self._expire()
        entry = self._entries.get(request_id)
        if entry is not None:
            self.replays += 1
            self._waiting[request_id] = self._waiting.get(request_id, 0) + 1
            try:
                status, body = await asyncio.shield(entry[1])
            finally:
                self._waiting[request_id] -= 1
                if not self._waiting[request_id]:
                    del self._waiting[request_id]
            return Response(
                body,
                status_code=status,
                media_type="application/json",
                headers={"X-Idempotent-Replay": "true"},
            )
        future: asyncio.Future[tuple[int, bytes]] = asyncio.get_running_loop().create_future()
        self._entries[request_id] = (time.monotonic(), future)
        try:
            response = await handler()
        except BaseException as exc:
            del self._entries[request_id]  # nothing happened that a retry must not repeat
            future.set_exception(exc)
            future.exception()  # mark retrieved
            raise
        future.set_result((response.status_code, bytes(response.body)))
        self.bytes += len(response.body)
        self._expire()
        return response

    def _expire(self) -> None:
        """Drop finished answers, oldest first, that are too old or over the count or byte budget (one
        still running is kept and skipped: a long command must not pin everything after it)."""
        now = time.monotonic()
        for request_id, (stamp, future) in list(self._entries.items()):
            within = len(self._entries) <= self.max_entries and self.bytes <= self.max_bytes
            if now - stamp < self.ttl_s and within:
                break
            if future.done():
                del self._entries[request_id]
                self.bytes -= len(future.result()[1])


class Metrics:
    """One server's Prometheus metrics, in a registry of its own (several servers share a test process; the
    library's default registry is process-wide). Every server counts its requests and its structured errors
    by endpoint, and ``endpoint`` adds a latency histogram per endpoint; each server declares the rest."""

    BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.registry = CollectorRegistry()
        self._histograms: dict[str, Histogram] = {}
        self.requests = self.counter(
            "requests_total", "Requests answered, by endpoint and HTTP status.", ("endpoint", "status")
        )
        self.errors = self.counter(
            "errors_total",
            "Requests answered with a structured error, by endpoint and kind.",
            ("endpoint", "kind"),
        )

    def counter(self, name: str, doc: str, labels: tuple[str, ...] = ()) -> Counter:
        """``name`` as exposed, ending in ``_total`` (the library would add it to the samples' name anyway)."""
        return Counter(f"{self.prefix}_{name}", doc, labels, registry=self.registry)

    def gauge(self, name: str, doc: str, read: Callable[[], float]) -> Gauge:
        """A gauge whose value is ``read()`` at each scrape."""
        gauge = Gauge(f"{self.prefix}_{name}", doc, registry=self.registry)
        gauge.set_function(read)
        return gauge

    def histogram(self, name: str, doc: str) -> Histogram:
        """A latency histogram in seconds over BUCKETS; asked for again by name, the same one."""
        if name not in self._histograms:
            self._histograms[name] = Histogram(
                f"{self.prefix}_{name}", doc, buckets=self.BUCKETS, registry=self.registry
            )
        return self._histograms[name]

    def response(self) -> Response:
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)


@dataclass(frozen=True)
class Access:
    """Who may call a server: a bearer token, and/or clients from an explicit address allow-list (for the
    seed's clients, which send no header, on a private network). Neither: anyone (loopback binds only)."""

    token: str | None = None
    allow: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()

    @classmethod
    def of(cls, token: str | Access | None) -> Access:
        return token if isinstance(token, Access) else cls(token=token)

    def allowed_address(self, host: str | None) -> bool:
        try:
            address = ipaddress.ip_address(host or "")
        except ValueError:
            return False
        return any(address in net for net in self.allow)


def check_token(request: Request, token: str | Access | None) -> None:
    access = Access.of(token)
    if not access.token and not access.allow:
        return
    given = request.headers.get("authorization", "")
    if access.token and hmac.compare_digest(given.encode(), f"Bearer {access.token}".encode()):
        return
    if access.allowed_address(request.client.host if request.client else None):
        return
    raise ServiceError("unauthorized", "missing or wrong bearer token (and not an allowed address)")


def endpoint(
    handler: Callable[[Request], Awaitable[Any]],
    *,
    token: str | Access | None,
    metrics: Metrics,
    idempotency: Idempotency | None,
    name: str,
) -> Callable[[Request], Awaitable[Response]]:
    """Wrap a handler: auth, typed errors (swe-rl's errors by ``error_kind``, anything else ``internal``; never
    a bare 500), idempotency, metrics."""

    seconds = metrics.histogram(f"{name}_seconds", f"Seconds to answer a request to {name}.")

    def failed(kind: ErrorKind, message: str, retry_after: float | None = None) -> Response:
        metrics.errors.labels(endpoint=name, kind=kind).inc()
        return error_response(kind, message, retry_after)

    async def wrapped(request: Request) -> Response:
        started = time.monotonic()
        try:
            check_token(request, token)

            async def run() -> Response:
                result = await handler(request)
                if isinstance(result, Response):
                    return result
                return JSONResponse(result.model_dump() if isinstance(result, BaseModel) else result)

            if idempotency is not None and request.method == "POST":
                response = await idempotency.run(request.headers.get("x-request-id"), run)
            else:
                response = await run()
        except ServiceError as exc:
            response = failed(exc.kind, str(exc), exc.retry_after)
        except json.JSONDecodeError as exc:
            response = failed("bad_request", f"invalid JSON: {exc}")
        except SweRlError as exc:
            kind = error_kind(exc)
            if kind == "internal":
                _log.exception("%s: %s", name, type(exc).__name__)
            response = failed(kind, f"{type(exc).__name__}: {exc}"[:4000])
        except Exception as exc:  # a bug: logged with its traceback, answered in the structured shape
            _log.exception("%s: unexpected %s", name, type(exc).__name__)
            response = failed("internal", f"{type(exc).__name__}: {exc}"[:4000])
        metrics.requests.labels(endpoint=name, status=str(response.status_code)).inc()
        seconds.observe(time.monotonic() - started)
        return response

    return wrapped
