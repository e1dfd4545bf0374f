"""The LLM protocol and the models it exchanges."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from swe_rl.errors import LLMError

__all__ = ["LLM", "Completion", "LLMError", "Message", "SamplingParams"]


class Message(BaseModel):
    model_config = ConfigDict(frozen=True)

    role: Literal["system", "user", "assistant"]
    content: str


class SamplingParams(BaseModel):
    model_config = ConfigDict(frozen=True)

    max_tokens: int = Field(default=2048, ge=1, description="New tokens per reply.")
    temperature: float = Field(default=0.0, ge=0.0, description="0 is greedy.")
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    seed: int | None = Field(default=None, description="Sampling seed, where the server supports one.")


class Completion(BaseModel):
    """One reply. Token ids and logprobs are set whenever the server returns them."""

    text: str
    finish_reason: str = "stop"
    prompt_ids: list[int] | None = Field(default=None, description="Exact ids of the prompt the model saw.")
    completion_ids: list[int] | None = Field(default=None, description="Ids the model generated.")
    logprobs: list[float] | None = Field(default=None, description="Logprob of each generated id.")
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float = 0.0
    cost_usd: float | None = Field(default=None, description="What the call cost, when priced (llm.cost).")


class LLM(Protocol):
    """A chat model."""

    name: str

    async def complete(self, messages: Sequence[Message], params: SamplingParams) -> Completion: ...

    async def close(self) -> None: ...
