"""What an executor is given and what it promises: the requests (plain data, sent across the network as
they are) and the protocols every executor serves."""

from __future__ import annotations

from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field, model_validator

from swe_rl.episode.attempt import AttemptOutcome, AttemptSpec
from swe_rl.errors import ConfigError
from swe_rl.llm.base import LLM, SamplingParams
from swe_rl.rl.rollout import RolloutResult


class Policy(BaseModel):
    """The model being trained, as the rollout reaches it."""

    url: str = Field(
        min_length=1,
        max_length=2048,
        description="SGLang server/router (kind sglang) or OpenAI-compatible base URL ending in /v1 (kind openai).",
    )
    kind: Literal["sglang", "openai"] = Field(
        default="sglang",
        description="sglang: token ids in and out (exact). openai: chat completions; ids from the server "
        "when it returns them, else re-encoded with the tokenizer (fixed-base method).",
    )
    tokenizer: str = Field(
        default="qwen", description="'qwen' (bundled vocabulary) or a tokenizer directory."
    )
    model: str = Field(default="policy", max_length=512, description="Model name sent to an OpenAI endpoint.")


class ProcessReward(BaseModel):
    """A judge LLM (OpenAI-compatible) scores every step m times; reward = outcome + coef * mean step score."""

    url: str = Field(min_length=1, max_length=2048, description="Judge base URL ending in /v1.")
    model: str = Field(default="judge", max_length=512)
    m: int = Field(default=3, ge=1, le=16, description="Judgements per step.")
    coef: float = Field(default=1.0, description="Weight of the mean step score.")
    concurrency: int = Field(default=8, ge=1, le=256, description="Judge calls at once per rollout.")


class RolloutRequest(BaseModel):
    task: str | dict[str, Any] = Field(
        description="A full task record, or an instance id the executor knows."
    )
    policy: Policy
    sampling: SamplingParams = Field(default_factory=SamplingParams)
    step_limit: int | None = Field(default=None, ge=1, le=1000)
    agent_config: str | None = Field(
        default=None, max_length=256, description="Shipped agent config name (default swebench)."
    )
    max_context: int | None = Field(
        default=None, ge=256, description="Context window; enables the context manager."
    )
    dynamic_history: bool = True
    prm: ProcessReward | None = Field(default=None, description="Process rewards from a judge (seed's PRM).")

    @model_validator(mode="after")
    def _context_fits_a_reply(self) -> RolloutRequest:
        if self.max_context is not None and self.max_context <= self.sampling.max_tokens:
            raise ValueError(
                f"max_context ({self.max_context}) must exceed sampling.max_tokens ({self.sampling.max_tokens})"
            )
        return self


class Executor(Protocol):
    """Runs rollouts somewhere; never raises for infrastructure failures (they come back as infra_error)."""

    name: str

    async def run(self, request: RolloutRequest) -> RolloutResult: ...

    async def close(self) -> None: ...


def policy_tokenizer(policy: Policy) -> Any:
    """The policy's tokenizer; ConfigError when it cannot be loaded (the request is at fault)."""
    from swe_rl.rl.tokenizer import load_tokenizer

    try:
        return load_tokenizer(policy.tokenizer)
    except ConfigError:
        raise
    except Exception as exc:  # a missing directory, a corrupt tokenizer file
        raise ConfigError(f"cannot load tokenizer {policy.tokenizer!r}: {exc}") from None


def policy_llm(policy: Policy) -> tuple[LLM, Any]:
    """The client for a policy, and its tokenizer."""
    tokenizer = policy_tokenizer(policy)
    if policy.kind == "sglang":
        from swe_rl.llm.sglang import SGLangClient

        return SGLangClient(policy.url, tokenizer), tokenizer
    from swe_rl.llm.openai import OpenAIClient

    return OpenAIClient(policy.model, policy.url), tokenizer


class AttemptExecutor(Protocol):
    """Runs eval attempts somewhere (``--executor ray``); a lost node is an infra_error outcome, not an exception."""

    name: str

    async def run_attempt(self, spec: AttemptSpec) -> AttemptOutcome: ...

    async def close(self) -> None: ...
