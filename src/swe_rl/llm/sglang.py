"""SGLang's native ``/generate``: token ids in, token ids and logprobs out (token-in/token-out).

The prompt is templated and tokenized here with the policy's own tokenizer, so the ids the model saw are
known exactly; the server returns the generated ids with their logprobs. From the second turn on, a
prompt is the previous prompt + the ids the model generated + the template's ids for the new messages
(llm/token_prompts.py), so the model reads back its own tokens, not a re-tokenization of their text. Transient failures are retried
as in the OpenAI client; what still fails is an LLMError.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from swe_rl.httpclient import LoopSession
from swe_rl.llm.base import Completion, LLMError, Message, SamplingParams
from swe_rl.llm.http import post_json
from swe_rl.llm.token_prompts import PromptExtender


class SGLangClient:
    """``POST {url}/generate`` with ``input_ids``; ``tokenizer`` is a transformers tokenizer with a chat template."""

    def __init__(
        self,
        url: str,
        tokenizer: Any,
        *,
        name: str = "sglang",
        timeout_s: float = 600.0,
        max_retries: int = 4,
        backoff_s: float = 0.5,
        template_kwargs: dict[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.url = url.rstrip("/")
        self.tokenizer = tokenizer
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.template_kwargs = template_kwargs or {}
        self.extender = PromptExtender(tokenizer, **self.template_kwargs)
        self._sessions = LoopSession(self._new_session)

    def prompt_ids(self, messages: Sequence[Message]) -> list[int]:
        """The chat template's ids; after the first turn, the last prompt + completion ids extended."""
        return self.extender.prompt_ids(messages)

    async def complete(self, messages: Sequence[Message], params: SamplingParams) -> Completion:
        prompt = self.prompt_ids(messages)
        sampling: dict[str, Any] = {
            "max_new_tokens": params.max_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
        }
        if params.seed is not None:
            sampling["sampling_seed"] = params.seed
        payload = {"input_ids": prompt, "sampling_params": sampling, "return_logprob": True}
        body, latency = await post_json(
            await self._sessions.get(),
            f"{self.url}/generate",
            payload,
            name=self.name,
            max_retries=self.max_retries,
            backoff_s=self.backoff_s,
        )
        completion = self._parse(body, prompt, latency)
        self.extender.record(messages, completion.text, [*prompt, *(completion.completion_ids or [])])
        return completion

    def _parse(self, body: bytes, prompt: list[int], latency: float) -> Completion:
        try:
            data = json.loads(body)
            meta = data["meta_info"]
            pairs = meta["output_token_logprobs"]
            ids = [int(p[1]) for p in pairs]
            logprobs = [float(p[0]) for p in pairs]
            finish = meta.get("finish_reason") or {}
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise LLMError(
                f"{self.name}: malformed /generate reply ({type(exc).__name__}): {body[:200]!r}"
            ) from None
        text = data.get("text")
        if not isinstance(text, str):
            text = self.tokenizer.decode(ids, skip_special_tokens=True)
        return Completion(
            text=text,
            finish_reason=str(finish.get("type", "stop")) if isinstance(finish, dict) else str(finish),
            prompt_ids=prompt,
            completion_ids=ids,
            logprobs=logprobs,
            prompt_tokens=len(prompt),
            completion_tokens=len(ids),
            latency_s=latency,
        )

    def _new_session(self) -> Any:
        import aiohttp

        return aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout_s))

    async def close(self) -> None:
        await self._sessions.close()
