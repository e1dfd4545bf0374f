"""NeMo-Gym's SWE agent ``POST /run``, as miles' swe-agent example speaks it, on the rollout server.

The peer read (docs/SERVICE.md, "NeMo-Gym / miles"): miles ``examples/swe-agent/generate_with_swe_agent.py``
at radixark/miles@c3889cd1 posts ``{responses_create_params: {input: []}, sampling_params, sglang_url,
**the task record}`` to ``$SWE_AGENT_GYM_URL/run``, served by ``responses_api_agents/mini_swe_agent/app.py``
of yueming-yuan/Gym@4fce289f (the example's submodule). miles reads ``reward``, ``messages``,
``metadata`` and ``info.{exit_status, agent_metrics}`` from the answer; NeMo-Gym's own clients read
``response.output``, whose assistant items carry the turn's token ids and logprobs.

A body with ``responses_create_params`` is this shape; anything else is swe-rl's own ``/run``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Container
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from swe_rl.episode.result import RolloutResult
from swe_rl.executors.base import EpisodeRequest, Policy
from swe_rl.llm.base import SamplingParams
from swe_rl.service.server_kit import ServiceError

GYM_KEYS = frozenset(
    {
        "responses_create_params",
        "sampling_params",
        "sglang_url",
        "policy_base_url",
        "policy_api_key",
        "subset",
        "split",
    }
)
"""Fields of the run request that are Gym's, not the task record's."""

EXIT_STATUS = {"submitted": "Submitted", "limits_exceeded": "LimitsExceeded", "timeout": "RolloutTruncated"}
"""swe-rl's exit statuses by the mini-swe-agent names miles maps to COMPLETED / TRUNCATED; the others
(format_error_limit, agent_error, infra_error) keep swe-rl's name, which miles reads as ABORTED."""


GYM_REWARD = "1.0 resolved, else 0.0"
"""The reward NeMo-Gym's own SWE agents give (nemo-gym 0.7.0 ``responses_api_agents/swe_agents/app.py`` and
``mini_swe_agent/app.py``), not swe-rl's OutcomeReward (-1.0 unresolved); an infra_error scores 0.0 and is
masked (``mask_sample``)."""


class ResponsesCreateParams(BaseModel):
    """The OpenAI Responses create params Gym's run request carries; miles sends ``{"input": []}``."""

    model_config = ConfigDict(extra="allow")

    input: str | list[dict[str, Any]] = Field(description="Required by Gym; the harness writes the prompt.")
    temperature: float | None = None
    top_p: float | None = None
    max_output_tokens: int | None = None


class GymRunRequest(BaseModel):
    """``MiniSWEAgentRunRequest``: the run request, the policy endpoint, the task record. The policy is the Gym
    fork's ``sglang_url`` (what miles sends) or upstream NeMo-Gym's ``policy_base_url``; one is required."""

    model_config = ConfigDict(extra="allow")

    responses_create_params: ResponsesCreateParams
    sglang_url: str | None = Field(
        default=None,
        min_length=1,
        max_length=2048,
        description="The policy's SGLang server, OpenAI base (``http://host:port/v1``): token ids in and out "
        "through its /generate. Optional in Gym, which then uses its configured model server; this server "
        "has none, so this or policy_base_url is required.",
    )
    policy_base_url: str | None = Field(
        default=None,
        min_length=1,
        max_length=2048,
        description="Upstream NeMo-Gym's policy: an OpenAI-compatible base URL (``.../v1``), called with chat "
        "completions; token ids as the server returns them, else re-encoded with the tokenizer (swe-rl's "
        "fixed-base method). Used where sglang_url is absent.",
    )
    policy_api_key: str | None = Field(
        default=None,
        description="Refused when set: a key would travel with the rollout request to the executor and into "
        "its records. The rollout server calls the policy with its own OPENAI_API_KEY.",
    )

    @field_validator("policy_api_key")
    @classmethod
    def _no_key(cls, value: str | None) -> str | None:
        if value:
            raise ValueError(
                "not accepted: a key would travel with the rollout to its executor and its records; set "
                "OPENAI_API_KEY where the rollout server runs"
            )
        return value

    sampling_params: dict[str, Any] | None = Field(
        default=None, description="SGLang sampling params (miles' GenerateState.sampling_params)."
    )
    instance_id: str = Field(min_length=1, max_length=512)


def is_gym_body(data: Any) -> bool:
    return isinstance(data, dict) and "responses_create_params" in data


def rollout_request(gym: GymRunRequest, tokenizer: str, known: Container[str]) -> EpisodeRequest:
    """The swe-rl request for a Gym one: the server's task by id (as Gym looks it up), else the record."""
    record = {k: v for k, v in (gym.model_extra or {}).items() if k not in GYM_KEYS}
    task: str | dict[str, Any] = gym.instance_id
    if gym.instance_id not in known:
        task = {**record, "instance_id": gym.instance_id}
    sp = gym.sampling_params or {}
    rcp = gym.responses_create_params
    given = {  # SGLang's names first (miles sends them), then the Responses API's
        "max_tokens": _first(sp.get("max_new_tokens"), rcp.max_output_tokens),
        "temperature": _first(sp.get("temperature"), rcp.temperature),
        "top_p": _first(sp.get("top_p"), rcp.top_p),
        "seed": sp.get("sampling_seed"),
    }
    try:
        sampling = SamplingParams(**{k: v for k, v in given.items() if v is not None})
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ServiceError("bad_request", f"sampling_params ({first['loc'][0]}): {first['msg']}") from None
    if gym.sglang_url:
        url = gym.sglang_url.rstrip("/").removesuffix("/v1")  # token ids in and out: SGLang's /generate
        policy = Policy(url=url, kind="sglang", tokenizer=tokenizer)
    elif gym.policy_base_url:
        name = (rcp.model_extra or {}).get("model")
        model = name if isinstance(name, str) and name else "policy"
        policy = Policy(url=gym.policy_base_url.rstrip("/"), kind="openai", tokenizer=tokenizer, model=model)
    else:
        raise ServiceError(
            "bad_request", "the policy: sglang_url (the Gym fork's) or policy_base_url is required"
        )
    return EpisodeRequest(task=task, model=policy, sampling=sampling)


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def gym_response(result: RolloutResult, instance_id: str, gym: GymRunRequest) -> dict[str, Any]:
    """``MiniSWEAgentVerifyResponse``: Gym's verify response plus the fields the fork adds for miles."""
    traj = result.trajectory
    infra = result.exit_status == "infra_error"
    messages = [m.model_dump() for m in traj.messages] if traj else []
    completions = [s.completion for s in traj.steps] if traj else []
    output, turn = [], 0
    for message in messages[2:]:
        if message["role"] != "assistant":
            output.append(_input_item(message))
            continue
        c = completions[turn]
        turn += 1
        output.append(
            {
                "id": f"cht_{uuid.uuid4()}",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [
                    {"type": "output_text", "text": message["content"], "annotations": [], "logprobs": None}
                ],
                "prompt_token_ids": c.prompt_ids or [],
                "generation_token_ids": c.completion_ids or [],
                "generation_log_probs": c.logprobs or [],
            }
        )
    return {
        "responses_create_params": {**gym.responses_create_params.model_dump(), "input": messages[:2]},
        "response": {
            "id": f"resp_{uuid.uuid4()}",
            "object": "response",
            "created_at": int(time.time()),
            "model": traj.model if traj else "policy",
            "status": "completed",
            "error": None,
            "incomplete_details": None,
            "instructions": None,
            "metadata": {},
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        },
        "reward": 1.0 if result.resolved and not infra else 0.0,  # as NeMo-Gym's SWE agents (see GYM_REWARD)
        # NeMo-Gym 0.7's own words for "this reward measures the infrastructure, not the policy": its scoring
        # leaves a masked sample out (miles reads info.exit_status instead)
        "mask_sample": infra,
        "failure_kind": "swe_rl:infra_error" if infra else None,
        "failure_reason": result.error if infra else None,
        "instance_id": instance_id,
        "metadata": {"resolved": result.resolved, "error": result.error},
        "messages": messages,
        "info": {
            "exit_status": EXIT_STATUS.get(result.exit_status, result.exit_status),
            "status": result.status,
            "agent_metrics": agent_metrics(result.metrics),
        },
    }


def _input_item(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "message",
        "role": message["role"],
        "status": "completed",
        "content": [{"type": "input_text", "text": message["content"]}],
    }


def agent_metrics(metrics: dict[str, float]) -> dict[str, float]:
    """The per-rollout keys miles' ``aggregate_agent_metrics`` averages, from swe-rl's ``agent/*`` metrics."""
    m = {k.removeprefix("agent/"): v for k, v in metrics.items() if k.startswith("agent/")}
    if not m:
        return {}
    turns = max(m.get("turns", 0.0), 1.0)
    total = max(m.get("total_time", 0.0), 1e-6)
    eval_s = m.get("eval_time", 0.0)
    model_s, env_s = m.get("model_query_time_sum", 0.0), m.get("env_execution_time_sum", 0.0)
    return {
        **m,
        "turns": int(m.get("turns", 0)),
        "tool_calls": int(m.get("tool_calls", 0)),
        "agent_run_time": max(0.0, m.get("total_time", 0.0) - eval_s),
        "time_per_turn": max(0.0, m.get("total_time", 0.0) - eval_s) / turns,
        "model_query_time_avg": model_s / turns,
        "env_execution_time_avg": env_s / turns,
        "model_time_ratio": model_s / total,
        "env_time_ratio": env_s / total,
        "eval_time_ratio": eval_s / total,
    }
