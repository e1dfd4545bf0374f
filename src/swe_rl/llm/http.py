"""The HTTP call the model clients share: one POST, retried with backoff on transient failures only.

Transient = connection errors, timeouts, 408/409/425/429/5xx; ``Retry-After`` is honoured (up to 120 s).
A reply over 8 MiB or a non-retryable status raises at once, and an ``api_base`` that is no http(s) URL
(no scheme, no host) a ConfigError; what still fails after the retries is an LLMError. The attempts are
:func:`swe_rl.httpclient.request`'s (tenacity, with a wait that reads ``Retry-After``).
"""

from __future__ import annotations

from typing import Any

from swe_rl.httpclient import RetryPolicy, request
from swe_rl.llm.base import LLMError

MAX_BODY = 8 * 1024 * 1024
RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


def llm_policy(max_retries: int = 4, backoff_s: float = 0.5) -> RetryPolicy:
    """A model endpoint's retries: its transient statuses, a backoff held to 30 s, a Retry-After to 120 s."""
    return RetryPolicy(
        transient=RETRY_STATUS,
        retries=max_retries,
        backoff_s=backoff_s,
        backoff_cap_s=30.0,
        retry_after_cap_s=120.0,
    )


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
    reply = await request(
        session,
        "POST",
        url,
        llm_policy(max_retries, backoff_s),
        name=name,
        error=LLMError,
        max_body=MAX_BODY,
        json=payload,
        headers=headers or {},
    )
    return reply.body, reply.latency_s
