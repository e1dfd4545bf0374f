"""What the SkyRL and verl adapters share: a policy and rollout requests from ``SWE_RL_*`` settings, and
the exact per-trajectory span of a rollout (their executor is ``runs.executor.shared_executor``).

Both trainers take one sample per dataset row (verl always; SkyRL unless ``step_wise_trajectories``): the
first prompt's ids as the prompt and every later id as the response, loss mask 1 exactly on generated ids.
That span is :func:`swe_rl.rl.samples.trajectory_samples`' first sample: it is exact while each step's
prompt extends the previous prompt + reply. Where a prompt does not extend (the context manager dropped
turns, a template dropped an earlier ``<think>``), the later spans cannot join it without training on
tokens the model never saw, so they are left out and counted (``dropped_spans``); SkyRL's step-wise mode
trains on every step instead.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from swe_rl.errors import ConfigError
from swe_rl.llm.base import SamplingParams
from swe_rl.rl.samples import TrainingSample
from swe_rl.runs.executor import Policy, RolloutRequest
from swe_rl.runs.rollout import RolloutResult, request_from_env


def policy_from_env(
    default_url: str | None = None, *, default_kind: str = "sglang", tokenizer: str | None = None
) -> Policy:
    """The policy as ``SWE_RL_POLICY_URL`` / ``SWE_RL_POLICY_KIND`` / ``SWE_RL_TOKENIZER`` name it.

    ``default_url`` and ``default_kind`` are what the trainer offers (its inference endpoint); the variables
    win, and a URL from ``SWE_RL_POLICY_URL`` is an SGLang server unless ``SWE_RL_POLICY_KIND`` says
    otherwise. ConfigError when neither gives a URL.
    """
    url = os.environ.get("SWE_RL_POLICY_URL")
    if url:
        default_kind = "sglang"
    url = url or default_url
    if not url:
        raise ConfigError(
            "no policy endpoint: set SWE_RL_POLICY_URL to the trainer's SGLang server or router "
            "(or an OpenAI-compatible base URL ending in /v1 with SWE_RL_POLICY_KIND=openai)"
        )
    kind = os.environ.get("SWE_RL_POLICY_KIND") or default_kind
    if kind not in ("sglang", "openai"):
        raise ConfigError(f"SWE_RL_POLICY_KIND must be sglang or openai, not {kind!r}")
    return Policy(
        url=url,
        kind=kind,
        tokenizer=os.environ.get("SWE_RL_TOKENIZER") or tokenizer or "qwen",
        model=os.environ.get("SWE_RL_POLICY_MODEL") or "policy",
    )


def sampling_from(params: Mapping[str, Any] | None, default: SamplingParams) -> SamplingParams:
    """Our sampling settings from a trainer's dict (vLLM ``max_tokens`` or SGLang ``max_new_tokens``)."""
    params = params or {}
    max_tokens = params.get("max_tokens", params.get("max_new_tokens", params.get("max_generate_length")))
    temperature = params.get("temperature")
    top_p = params.get("top_p")
    seed = params.get("seed")
    return SamplingParams(
        max_tokens=int(max_tokens) if max_tokens is not None else default.max_tokens,
        temperature=float(temperature) if temperature is not None else default.temperature,
        top_p=float(top_p) if top_p is not None and 0 < float(top_p) <= 1 else default.top_p,
        seed=int(seed) if seed is not None else default.seed,
    )


def build_request(
    task: str | dict[str, Any], policy: Policy, params: SamplingParams, *, dynamic_history: bool
) -> RolloutRequest:
    """A request with the agent settings of ``SWE_RL_STEP_LIMIT``, ``SWE_RL_AGENT_CONFIG``, ``SWE_RL_MAX_CONTEXT``."""
    base = request_from_env(task if isinstance(task, dict) else {}, policy.url, policy.tokenizer, params)
    request: RolloutRequest = base.model_copy(
        update={"task": task, "policy": policy, "dynamic_history": dynamic_history}
    )
    return request


def task_of(row: Mapping[str, Any]) -> str | dict[str, Any]:
    """The task of a dataset row: ``instance`` at the top, in ``extra_info``/``metadata`` (``swe-rl data prepare``)."""
    for holder in (row, row.get("extra_info"), row.get("metadata"), row.get("env_extras")):
        if isinstance(holder, Mapping) and holder.get("instance") is not None:
            task = holder["instance"]
            if isinstance(task, str | dict):
                return task
    raise ConfigError(
        "the row has no task: put the task record (or its instance id) under 'instance', "
        "'extra_info.instance' or 'metadata.instance'"
    )


class Span(BaseModel):
    """One exact training span of a trajectory, with what the trainers report beside it."""

    prompt_ids: list[int]
    response_ids: list[int]
    loss_mask: list[int]
    logprobs: list[float]
    reward: float
    status: str
    turns: int
    dropped_spans: int = 0

    @classmethod
    def of(cls, sample: TrainingSample, *, turns: int, dropped: int = 0) -> Span:
        return cls(
            prompt_ids=sample.tokens[: sample.prompt_length],
            response_ids=sample.tokens[sample.prompt_length :],
            loss_mask=list(sample.loss_mask),
            logprobs=list(sample.rollout_logprobs),
            reward=sample.reward if sample.reward is not None else 0.0,
            status=sample.status,
            turns=turns,
            dropped_spans=dropped,
        )


def trajectory_span(result: RolloutResult) -> Span | None:
    """The first exact multi-turn span of a rollout made with ``dynamic_history=False``; None when the
    rollout failed on infrastructure or produced no step (nothing to train on, nothing to score)."""
    if result.status == "infra_error" or not result.samples:
        return None
    turns = len(result.trajectory.steps) if result.trajectory else len(result.samples[0].step_indices)
    return Span.of(result.samples[0], turns=turns, dropped=len(result.samples) - 1)


def healthy_group_means(spans: Sequence[Span | None], groups: Sequence[str]) -> dict[str, float]:
    """Per GRPO group, the mean reward of its healthy spans (0.0 when it has none).

    Trainers that cannot drop a failed rollout from a fixed-size batch give it this reward and no loss,
    so it leaves its group's mean, and every advantage, where it is.
    """
    healthy: dict[str, list[float]] = defaultdict(list)
    for span, group in zip(spans, groups, strict=True):
        if span is not None:
            healthy[group].append(span.reward)
    return {g: (sum(healthy[g]) / len(healthy[g]) if healthy[g] else 0.0) for g in groups}
