"""The HTTP loop the model clients share: one POST, retried with backoff on transient failures only.

Transient = connection errors, timeouts, 408/409/425/429/5xx; ``Retry-After`` is honoured. A reply over
8 MiB or a non-retryable status raises at once; what still fails after the retries is an LLMError.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

from swe_rl.httpsession import retry_after_s
from swe_rl.llm.base import LLMError

MAX_BODY = 8 * 1024 * 1024
RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


async def post_json(
    session: Any,
    url: str,
    payload: dict[str, Any],
    *,
    name: str,
    headers: dict[str, str] | None = None,
    max_retries: int = 4,
    backoff_s: float = 0.5,
) -> tuple[bytes, float]:
    """(body of the 200 reply, its latency in seconds)."""
    import aiohttp

    last = "no attempt"
    for attempt in range(max_retries + 1):
        started = time.monotonic()
        delay = None
        try:
            async with session.post(url, json=payload, headers=headers or {}) as resp:
                body = await _read_capped(resp, name)
                if resp.status == 200:
                    return body, time.monotonic() - started
                last = f"HTTP {resp.status}: {body[:200].decode(errors='replace')}"
                if resp.status not in RETRY_STATUS:
                    raise LLMError(f"{name} at {url}: {last}")
                delay = retry_after_s(resp.headers.get("Retry-After"), cap=120.0)
        except (TimeoutError, aiohttp.ClientError, ConnectionError) as exc:
            last = f"{type(exc).__name__}: {exc}"
        if attempt < max_retries:
            await asyncio.sleep(
                delay
                if delay is not None
                else min(30.0, backoff_s * 2**attempt) * (0.5 + random.random() / 2)
            )
    raise LLMError(f"{name} at {url} failed after {max_retries + 1} attempts: {last}")


async def _read_capped(resp: Any, name: str) -> bytes:
    body = bytearray()
    async for chunk in resp.content.iter_chunked(65536):
        body += chunk
        if len(body) > MAX_BODY:
            raise LLMError(f"{name}: reply larger than {MAX_BODY} bytes")
    return bytes(body)
