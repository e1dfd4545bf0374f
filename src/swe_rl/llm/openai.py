"""An OpenAI-compatible chat client (vLLM, SGLang, any provider) on one pooled aiohttp session.

Transient failures (connection errors, timeouts, 429, 5xx) are retried with exponential backoff that
honours ``Retry-After``; what still fails becomes :class:`LLMError` (an InfraError), never an answer.
When the server returns token ids and logprobs (vLLM/SGLang with ``return_token_ids`` / ``logprobs``),
they are kept on the :class:`Completion`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from swe_rl.httpclient import LoopSession
from swe_rl.llm.base import Completion, LLMError, Message, SamplingParams
from swe_rl.llm.http import post_json


class OpenAIClient:
    """``POST {api_base}/chat/completions``."""

    def __init__(
        self,
        model: str,
        api_base: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 600.0,
        max_retries: int = 4,
        token_ids: bool = True,
        backoff_s: float = 0.5,
    ) -> None:
        self.name = model
        self.model = model
        self.api_base = api_base.rstrip("/")
        self._api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "")
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.token_ids = token_ids
        self.backoff_s = backoff_s
        self._sessions = LoopSession(self._new_session)

    def _payload(self, messages: Sequence[Message], params: SamplingParams) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [m.model_dump() for m in messages],
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
        }
        if params.seed is not None:
            payload["seed"] = params.seed
        if self.token_ids:  # vLLM/SGLang extensions; other servers ignore unknown fields or we retry without
            payload["logprobs"] = True
            payload["return_token_ids"] = True
        return payload

    async def complete(self, messages: Sequence[Message], params: SamplingParams) -> Completion:
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        body, latency = await post_json(
            await self._sessions.get(),
            f"{self.api_base}/chat/completions",
            self._payload(messages, params),
            name=self.name,
            headers=headers,
            max_retries=self.max_retries,
            backoff_s=self.backoff_s,
        )
        return _parse(body, latency, self.name)

    def _new_session(self) -> Any:
        import aiohttp

        return aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout_s))

    async def close(self) -> None:
        await self._sessions.close()


def _parse(body: bytes, latency: float, name: str) -> Completion:
    try:
        data = json.loads(body)
        choice = data["choices"][0]
        text = choice["message"]["content"]
        if not isinstance(text, str):
            raise TypeError("content is not a string")
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise LLMError(f"{name}: malformed reply ({type(exc).__name__}: {exc}): {body[:200]!r}") from None
    usage = data.get("usage") or {}
    logprobs = None
    content = (choice.get("logprobs") or {}).get("content")
    if isinstance(content, list):
        logprobs = [float(item.get("logprob", 0.0)) for item in content]
    return Completion(
        text=text,
        finish_reason=choice.get("finish_reason") or "stop",
        prompt_ids=data.get("prompt_token_ids") or choice.get("prompt_token_ids"),
        completion_ids=choice.get("token_ids"),
        logprobs=logprobs,
        prompt_tokens=usage.get("prompt_tokens"),
        completion_tokens=usage.get("completion_tokens"),
        latency_s=latency,
    )
