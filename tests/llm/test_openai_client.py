"""The OpenAI-compatible client against a real HTTP server on loopback (the scripted fake)."""

from __future__ import annotations

import socket
import time

import pytest

from swe_rl.errors import ConfigError
from swe_rl.llm.base import LLMError, Message, SamplingParams
from swe_rl.llm.fake_server import FakeLLMServer, Fault
from swe_rl.llm.openai import OpenAIClient

MESSAGES = [Message(role="system", content="s"), Message(role="user", content="hello")]
PARAMS = SamplingParams(max_tokens=64, temperature=0.5, seed=7)


async def test_reply_and_request_shape():
    async with FakeLLMServer(["THOUGHT: hi\n```bash\nls\n```"]) as server:
        client = OpenAIClient("m", server.api_base, api_key="sk-secret")
        try:
            completion = await client.complete(MESSAGES, PARAMS)
        finally:
            await client.close()
    assert completion.text.startswith("THOUGHT: hi") and completion.completion_tokens
    request = server.requests[0]
    assert request["messages"][1] == {"role": "user", "content": "hello"}
    assert (request["max_tokens"], request["temperature"], request["seed"]) == (64, 0.5, 7)


async def test_transient_errors_are_retried_honouring_retry_after():
    async with FakeLLMServer([Fault(status=503), Fault(status=429, retry_after=0.3), "ok"]) as server:
        client = OpenAIClient("m", server.api_base, backoff_s=0.01)
        started = time.monotonic()
        try:
            completion = await client.complete(MESSAGES, PARAMS)
        finally:
            await client.close()
    assert completion.text == "ok" and len(server.requests) == 3
    assert time.monotonic() - started >= 0.3


@pytest.mark.parametrize(
    ("replies", "message"),
    [
        ([Fault(garbage=True, status=200)], "malformed reply"),
        ([Fault(status=400)], "HTTP 400"),
        ([Fault(status=500)] * 3, "failed after 3 attempts"),
        ([Fault(oversized_bytes=9 * 1024 * 1024)], "larger than"),
    ],
)
async def test_bad_endpoints_raise_llm_error(replies, message):
    async with FakeLLMServer(replies) as server:
        client = OpenAIClient("m", server.api_base, max_retries=2, backoff_s=0.01)
        try:
            with pytest.raises(LLMError, match=message):
                await client.complete(MESSAGES, PARAMS)
        finally:
            await client.close()


async def test_endpoint_down():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = OpenAIClient("m", f"http://127.0.0.1:{port}/v1", max_retries=1, backoff_s=0.01)
    try:
        with pytest.raises(LLMError, match=r"ClientConnectorError|Connect"):
            await client.complete(MESSAGES, PARAMS)
    finally:
        await client.close()


async def test_timeout():
    async with FakeLLMServer([Fault(delay_s=2.0), Fault(delay_s=2.0)]) as server:
        client = OpenAIClient("m", server.api_base, timeout_s=0.3, max_retries=1, backoff_s=0.01)
        try:
            with pytest.raises(LLMError, match="Timeout"):
                await client.complete(MESSAGES, PARAMS)
        finally:
            await client.close()


async def test_an_api_base_with_no_scheme_fails_at_once_as_a_config_error():
    """``--api-base 127.0.0.1:8000/v1``: a ConfigError on the first call, not five attempts per task."""
    async with FakeLLMServer(["ok"]) as server:
        client = OpenAIClient("m", server.api_base.removeprefix("http://"), backoff_s=1.0)
        started = time.monotonic()
        try:
            with pytest.raises(ConfigError, match="is not an http"):
                await client.complete(MESSAGES, PARAMS)
        finally:
            await client.close()
    assert server.api_base.startswith("http://") and server.requests == []
    assert time.monotonic() - started < 1.0, "no backoff: four retries would wait 7.5 s or more"
