"""verl adapter: an agent loop registered as ``swe_rl`` (``@register`` in verl's agent-loop registry), whose
``run()`` runs one graded swe-rl rollout through an :class:`~swe_rl.executors.base.Executor` and returns
verl's ``AgentLoopOutput``.

Use: ``import swe_rl.integrations.verl`` where verl's agent-loop workers start (or list it in an
``agent_loop_config_path`` YAML: ``- name: swe_rl`` / ``_target_: swe_rl.integrations.verl.SweRlAgentLoop``),
set ``agent_name`` to ``swe_rl`` in the dataset and put the task record (or its instance id) under
``extra_info.instance``. The policy is ``SWE_RL_POLICY_URL`` (the SGLang server or router of verl's
rollout, token-in/token-out; ``SWE_RL_POLICY_KIND=openai`` for an OpenAI endpoint); the agent settings come
from the ``SWE_RL_*`` variables as for the other adapters; ``SWE_RL_MAX_TOKENS`` caps each reply (default
``rollout.response_length``).

The output is one exact multi-turn sample per row (verl trains one per row): ``prompt_ids`` the first
prompt's ids, ``response_ids`` every later id as sent and generated (no re-templating of final messages,
which verl's docs warn can stop PPO from converging), ``response_mask`` 1 exactly on generated ids,
``response_logprobs`` from the server, ``reward_score`` the outcome reward (so verl's reward function is
not called). A response longer than ``rollout.response_length`` is cut to it (the kept ids stay exact).

Not trained on, not scored as wrong: an infrastructure failure, or a first prompt longer than
``rollout.prompt_length`` (verl would left-truncate it, training on a context the model never saw), gives a
one-token output with ``response_mask`` 0 and ``extra_fields["swe_rl_status"]`` saying why. verl's agent
loop cannot drop a row, and a reward is required, so such a row gets reward 0.0; verl's own ``grpo`` counts
it in its group's mean and std. ``algorithm.adv_estimator=swe_rl_grpo`` (registered here) is verl's GRPO
with those rows left out of the statistics (a row whose ``response_mask`` is all 0 is not an answer):
the others get the advantages of the group without it.
"""

from __future__ import annotations

from typing import Any

from swe_rl.episode.result import RolloutResult
from swe_rl.errors import MissingExtraError
from swe_rl.integrations.adapter_kit import (
    build_request,
    policy_from_env,
    sampling_from,
    shared_executor,
    task_of,
    trajectory_span,
)
from swe_rl.integrations.settings import AdapterSettings
from swe_rl.llm.base import SamplingParams

try:
    import numpy as np
    import torch
    from verl.experimental.agent_loop.agent_loop import (
        AgentLoopBase,
        AgentLoopMetrics,
        AgentLoopOutput,
        register,
    )
    from verl.trainer.ppo.core_algos import register_adv_est
except ImportError as exc:  # verl and its imports (ray, hydra, omegaconf, tensordict, torch, PIL)
    raise MissingExtraError((exc.name or "verl").split(".")[0], "verl", "the verl agent loop") from None

AGENT_NAME = "swe_rl"
ADV_ESTIMATOR = "swe_rl_grpo"


@register_adv_est(ADV_ESTIMATOR)
def healthy_grpo_advantage(
    token_level_rewards: Any,
    response_mask: Any,
    index: Any,
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool = True,
    config: Any = None,
    **_: Any,
) -> tuple[Any, Any]:
    """verl's GRPO outcome advantage, with rows that carry no loss (an infrastructure failure, a prompt
    too long: ``response_mask`` all 0) left out of their group's mean and std; their advantage is 0."""
    from swe_rl.rl.advantages import healthy_group_advantages

    if config is not None:
        norm_adv_by_std_in_grpo = bool(config.get("norm_adv_by_std_in_grpo", norm_adv_by_std_in_grpo))
    scores = token_level_rewards.sum(dim=-1).tolist()
    healthy = (response_mask.sum(dim=-1) > 0).tolist()
    adv = healthy_group_advantages(
        scores, list(np.asarray(index)), healthy, scale=norm_adv_by_std_in_grpo, eps=epsilon
    )
    out = torch.tensor(adv, dtype=token_level_rewards.dtype).unsqueeze(-1) * response_mask
    return out, out


def to_agent_loop_output(
    result: RolloutResult, *, prompt_length: int, response_length: int, filler_id: int = 0
) -> Any:
    """verl's ``AgentLoopOutput`` for one rollout (made with ``dynamic_history=False``)."""
    span = trajectory_span(result)
    metrics = AgentLoopMetrics(
        generate_sequences=result.metrics.get("agent/model_query_time_sum", 0.0),
        tool_calls=result.metrics.get("agent/env_execution_time_sum", 0.0),
        compute_score=result.metrics.get("agent/eval_time", 0.0),
    )
    extra: dict[str, Any] = {
        "swe_rl_status": result.status,
        "swe_rl_resolved": result.resolved,
        "swe_rl_dropped_spans": span.dropped_spans if span else 0,
        "swe_rl_truncated_response": False,
    }
    if span is not None and len(span.prompt_ids) > prompt_length:
        extra["swe_rl_status"] = "prompt_too_long"
        span = None
    if span is None:
        return AgentLoopOutput(
            prompt_ids=[filler_id],
            response_ids=[filler_id],
            response_mask=[0],
            response_logprobs=[0.0],
            reward_score=0.0,
            num_turns=0,
            metrics=metrics,
            extra_fields=extra,
        )
    if len(span.response_ids) > response_length:
        extra["swe_rl_truncated_response"] = True
    traj = result.trajectory
    return AgentLoopOutput(
        prompt_ids=span.prompt_ids,
        response_ids=span.response_ids[:response_length],
        response_mask=span.loss_mask[:response_length],
        response_logprobs=span.logprobs[:response_length],
        reward_score=span.reward,
        num_turns=len(traj.messages) if traj is not None else 2 * span.turns + 1,
        metrics=metrics,
        extra_fields=extra,
    )


@register(AGENT_NAME)
class SweRlAgentLoop(AgentLoopBase):
    """One graded swe-rl rollout per dataset row; see the module docstring."""

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> Any:
        rollout = self.rollout_config
        settings = AdapterSettings.read()
        policy = policy_from_env(tokenizer=getattr(self.tokenizer, "name_or_path", None), settings=settings)
        max_tokens = settings.max_tokens or int(rollout.response_length)
        params = sampling_from({**sampling_params, "max_tokens": max_tokens}, SamplingParams(temperature=1.0))
        request = build_request(task_of(kwargs), policy, params, dynamic_history=False, settings=settings)
        result = await shared_executor(settings).run(request)
        filler = getattr(self.tokenizer, "pad_token_id", None)
        return to_agent_loop_output(
            result,
            prompt_length=int(rollout.prompt_length),
            response_length=int(rollout.response_length),
            filler_id=int(filler) if filler is not None else 0,
        )


__all__ = ["ADV_ESTIMATOR", "AGENT_NAME", "SweRlAgentLoop", "healthy_grpo_advantage", "to_agent_loop_output"]
