"""slime / miles adapter: ``--custom-generate-function-path swe_rl.integrations.slime.generate`` and
``--custom-rm-path swe_rl.integrations.slime.reward_func``.

``generate`` runs one whole agent rollout for the task in ``sample.metadata["instance"]`` (rows made by
``swe-rl data prepare``): the policy is the trainer's SGLang router, spoken to token-in/token-out, so
the samples hold exactly the ids the model saw and generated. It grades the patch, sets the reward and
returns one ``Sample`` per step (dynamic_history, the default) or per exact multi-turn span. An
infrastructure failure returns samples marked ``remove_sample`` (status FAILED): never scored as -1.

Settings come from environment variables, so the trainer's own arguments stay untouched:
``SWE_RL_EXECUTOR`` (local | service:<rollout server URL> | ray), ``SWE_RL_BACKEND`` (ns | docker | a pool URL), ``SWE_RL_TOKENIZER`` (a model dir, or ``qwen`` for the
bundled Qwen vocabulary), ``SWE_RL_AGENT_CONFIG``, ``SWE_RL_STEP_LIMIT``, ``SWE_RL_DYNAMIC_HISTORY``
(1/0), ``SWE_RL_MAX_CONTEXT``.
"""

from __future__ import annotations

import os
from typing import Any

from swe_rl.llm.base import SamplingParams
from swe_rl.rl.samples import TrainingSample
from swe_rl.runs.rollout import rollout

STATUS = {"completed": "COMPLETED", "truncated": "TRUNCATED", "aborted": "ABORTED", "infra_error": "FAILED"}


def to_trainer_sample(ts: TrainingSample, template: Any, sample_cls: Any) -> Any:
    """A trainer ``Sample`` from one of ours, keeping the trainer's own fields (prompt, label, index...)."""
    sample = sample_cls(
        **{
            k: getattr(template, k)
            for k in ("group_index", "index", "prompt", "label")
            if hasattr(template, k)
        }
    )
    sample.tokens = list(ts.tokens)
    sample.response_length = ts.response_length
    sample.loss_mask = list(ts.loss_mask)
    sample.rollout_log_probs = list(ts.rollout_logprobs)
    sample.reward = ts.reward
    sample.status = getattr(sample_cls.Status, STATUS[ts.status])
    if ts.status == "infra_error" and hasattr(sample, "remove_sample"):
        sample.remove_sample = True
    sample.metadata = {
        **(getattr(template, "metadata", None) or {}),
        "instance_id": ts.instance_id,
        "trajectory_id": ts.trajectory_id,
        "step_indices": ts.step_indices,
    }
    return sample


async def generate(args: Any, sample: Any, sampling_params: dict[str, Any]) -> list[Any]:
    """slime/miles custom generate function: one agent rollout -> a list of Samples."""
    url = f"http://{args.sglang_router_ip}:{args.sglang_router_port}"
    tokenizer = os.environ.get("SWE_RL_TOKENIZER") or getattr(args, "hf_checkpoint", None) or "qwen"
    params = SamplingParams(
        max_tokens=int(sampling_params.get("max_new_tokens", 4096)),
        temperature=float(sampling_params.get("temperature", 1.0)),
        top_p=float(sampling_params.get("top_p", 1.0)),
    )
    ours = await rollout(sample.metadata["instance"], url, tokenizer, params)
    return [to_trainer_sample(ts, sample, type(sample)) for ts in ours]


async def reward_func(args: Any, samples: Any) -> Any:
    """slime/miles reward function: the reward set at rollout time (called with one Sample or a list)."""
    if isinstance(samples, list):
        return [s.reward if s.reward is not None else 0.0 for s in samples]
    return samples.reward if samples.reward is not None else 0.0
