"""What the trainer adapters share: an executor, a policy and rollout requests from ``SWE_RL_*`` settings,
and the exact per-trajectory span of a rollout (the hooks' executor is :func:`shared_executor`; TRL's
rollout function keeps its own, :func:`executor_from`).

SkyRL, verl and TRL take one sample per dataset row (verl and TRL always; SkyRL unless
``step_wise_trajectories``): the first prompt's ids as the prompt and every later id as the response, loss
mask 1 exactly on generated ids.
That span is :func:`swe_rl.rl.samples.trajectory_samples`' first sample: it is exact while each step's
prompt extends the previous prompt + reply. Where a prompt does not extend (the context manager dropped
turns, a template dropped an earlier ``<think>``), the later spans cannot join it without training on
tokens the model never saw, so they are left out and counted (``dropped_spans``); SkyRL's step-wise mode
trains on every step instead.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from swe_rl.episode.result import RolloutResult, TrainingSample, rollout_record
from swe_rl.episode.spec import EpisodeSpec
from swe_rl.episode.summary import summarize
from swe_rl.errors import ConfigError
from swe_rl.executors.base import EpisodeRequest, Executor, Policy
from swe_rl.integrations.settings import AdapterSettings
from swe_rl.llm.base import SamplingParams


def policy_from_env(
    default_url: str | None = None,
    *,
    default_kind: str = "sglang",
    tokenizer: str | None = None,
    settings: AdapterSettings | None = None,
) -> Policy:
    """The policy as ``SWE_RL_POLICY_URL`` / ``SWE_RL_POLICY_KIND`` / ``SWE_RL_TOKENIZER`` name it.

    ``default_url`` and ``default_kind`` are what the trainer offers (its inference endpoint); the variables
    win, and a URL from ``SWE_RL_POLICY_URL`` is an SGLang server unless ``SWE_RL_POLICY_KIND`` says
    otherwise. ConfigError when neither gives a URL.
    """
    settings = settings or AdapterSettings.read()
    url = settings.policy_url
    if url:
        default_kind = "sglang"
    url = url or default_url
    if not url:
        raise ConfigError(
            "no policy endpoint: set SWE_RL_POLICY_URL to the trainer's SGLang server or router "
            "(or an OpenAI-compatible base URL ending in /v1 with SWE_RL_POLICY_KIND=openai)"
        )
    kind = settings.policy_kind or default_kind
    if kind not in ("sglang", "openai"):
        raise ConfigError(f"SWE_RL_POLICY_KIND must be sglang or openai, not {kind!r}")
    return Policy(
        url=url,
        kind=kind,
        tokenizer=settings.tokenizer or tokenizer or "qwen",
        model=settings.policy_model or "policy",
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
    task: str | dict[str, Any],
    policy: Policy,
    params: SamplingParams,
    *,
    dynamic_history: bool | None = None,
    settings: AdapterSettings | None = None,
) -> EpisodeRequest:
    """A training episode's request (EpisodeSpec.for_training's defaults) with the agent settings of
    ``SWE_RL_STEP_LIMIT``, ``SWE_RL_AGENT_CONFIG``, ``SWE_RL_MAX_CONTEXT``, the process rewards of ``SWE_RL_PRM_*``,
    ``SWE_RL_UNSUBMITTED`` and ``SWE_RL_DYNAMIC_HISTORY``, where set. ``dynamic_history``: the samples' shape
    the trainer needs (None: the setting's)."""
    settings = settings or AdapterSettings.read()
    chosen = {
        "max_context": settings.max_context,
        "dynamic_history": settings.dynamic_history if dynamic_history is None else dynamic_history,
        "unsubmitted": settings.unsubmitted,
    }
    spec = EpisodeSpec.for_training(**{name: value for name, value in chosen.items() if value is not None})
    return EpisodeRequest(
        task=task,
        model=policy,
        sampling=params,
        step_limit=settings.step_limit,
        agent_config=settings.agent_config,
        prm=settings.prm,
        **dict(spec),
    )


async def rollout(
    task: str | dict[str, Any], policy_url: str, tokenizer: str, params: SamplingParams
) -> list[TrainingSample]:
    """slime's and miles' entry: settings from the environment, an SGLang policy, samples out.

    Runs on the executor ``SWE_RL_EXECUTOR`` names (one per process). An infrastructure failure gives one
    placeholder sample with status ``infra_error`` (to be removed from the batch, never scored).
    """
    settings = AdapterSettings.read()
    policy = Policy(url=policy_url, kind="sglang", tokenizer=tokenizer)
    request = build_request(task, policy, params, settings=settings)
    result = await shared_executor(settings).run(request)
    if result.status == "infra_error":
        instance_id = task.get("instance_id", "") if isinstance(task, dict) else task
        return [infra_placeholder(str(instance_id))]
    return result.samples


def infra_placeholder(instance_id: str) -> TrainingSample:
    """A sample that stands for a failed rollout: trainers remove it from the batch, never score it.

    One response token under loss mask 0, the shape slime's own agent example gives its aborted
    placeholder: slime's and miles' ``get_responses`` slice ``tokens[-response_length:]``, the whole
    sequence at length 0, against an empty logits slice.
    """
    return TrainingSample(
        tokens=[0, 0],
        prompt_length=1,
        loss_mask=[0],
        rollout_logprobs=[0.0],
        status="infra_error",
        instance_id=instance_id,
        trajectory_id=uuid.uuid4().hex,
        step_indices=[],
    )


def executor_from(settings: AdapterSettings | None = None) -> Executor:
    """A new executor, where the settings place rollouts (``SWE_RL_EXECUTOR``, ``SWE_RL_BACKEND``,
    ``SWE_RL_REUSE``, ...); its caller closes it (in the event loop it ran in, where it reuses sandboxes)."""
    settings = settings or AdapterSettings.read()
    return settings.placement.build(capacity=settings.capacity, token=settings.token)


_SHARED: dict[tuple[Any, ...], Executor] = {}


def shared_executor(settings: AdapterSettings | None = None) -> Executor:
    """The executor the settings name (:func:`executor_from`), made once per process and setting.

    For trainer hooks, which have nowhere to keep one; :func:`close_shared_executors` ends them.
    """
    settings = settings or AdapterSettings.read()
    key = (settings.placement.model_dump_json(), settings.token, settings.capacity)
    if key not in _SHARED:
        _SHARED[key] = executor_from(settings)
    return _SHARED[key]


async def close_shared_executors() -> None:
    """Close every shared executor and forget it (the next :func:`shared_executor` call makes a new one)."""
    executors = list(_SHARED.values())
    _SHARED.clear()
    for executor in executors:
        await executor.close()


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


def episode_metrics(results: Sequence[RolloutResult]) -> dict[str, float]:
    """``rl/*`` metrics of one step's episodes (episode/summary.py's rates, over the graded ones) and the
    mean of each ``agent/*`` metric."""
    records = [rollout_record(r) for r in results]
    summary = summarize(records)
    out: dict[str, float] = {"rl/episodes": float(summary.episodes), "rl/infra_errors": float(summary.errors)}
    if summary.completed:
        out["rl/resolve_rate"] = summary.resolve_rate
        out["rl/reward_mean"] = summary.reward_mean or 0.0
        out["rl/format_error_rate"] = summary.format_error_rate
        healthy = [r for r, record in zip(results, records, strict=True) if not record.infra_error]
        for k in sorted({k for r in healthy for k in r.metrics}):
            values = [r.metrics[k] for r in healthy if k in r.metrics]
            out[f"{k}_mean"] = sum(values) / len(values)
    return out
