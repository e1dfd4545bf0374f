"""slime / miles adapter: ``--custom-generate-function-path swe_rl.integrations.slime.generate`` and
``--custom-rm-path swe_rl.integrations.slime.reward_func``.

``generate`` runs one whole agent rollout for the task in ``sample.metadata["instance"]`` (rows made by
``swe-rl data prepare``): the policy is the trainer's SGLang router, spoken to token-in/token-out, so
the samples hold exactly the ids the model saw and generated. It grades the patch, sets the reward and
returns one ``Sample`` per step (dynamic_history, the default) or per exact multi-turn span, each a copy
of the incoming sample (its ``session_id``, ``custom_rm_path``, ``generate_function_path``, metadata and
the rest kept) sharing one ``rollout_id`` (the incoming one, else its ``index``, as slime's own fan-out
does), so slime's rollout validation and loss reduction count the rollout once. An infrastructure
failure returns samples marked ``remove_sample`` (status FAILED): never scored as -1.

The reward is the seed's ``{"score": reward, "acc": 1.0 if resolved else 0.0}``, for launch scripts that
pass ``--reward-key score``; ``SWE_RL_SLIME_REWARD=float`` gives the bare float instead.

Settings come from environment variables, so the trainer's own arguments stay untouched:
``SWE_RL_EXECUTOR`` (local | service:<rollout server URL> | ray), ``SWE_RL_BACKEND`` (ns | docker | a pool URL), ``SWE_RL_TOKENIZER`` (a model dir, or ``qwen`` for the
bundled Qwen vocabulary), ``SWE_RL_AGENT_CONFIG``, ``SWE_RL_STEP_LIMIT``, ``SWE_RL_DYNAMIC_HISTORY``
(1/0), ``SWE_RL_MAX_CONTEXT``, ``SWE_RL_SLIME_REWARD`` (dict | float).
"""

from __future__ import annotations

import copy
import zlib
from typing import Any

from swe_rl.episode.result import TrainingSample
from swe_rl.integrations.adapter_kit import rollout
from swe_rl.integrations.settings import AdapterSettings
from swe_rl.llm.base import SamplingParams

STATUS = {"completed": "COMPLETED", "truncated": "TRUNCATED", "aborted": "ABORTED", "infra_error": "FAILED"}


def reward_format() -> str:
    """``dict`` (the seed's ``{"score", "acc"}``, the default) or ``float``, from ``SWE_RL_SLIME_REWARD``."""
    return AdapterSettings.from_environ().slime_reward


def trainer_reward(score: float | None, resolved: bool | None, kind: str) -> float | dict[str, float]:
    """The reward as the seed's reward function returns it: ``{"score", "acc"}``, or the bare score."""
    score = score if score is not None else 0.0
    if kind == "float":
        return score
    return {"score": score, "acc": 1.0 if resolved else 0.0}


def to_trainer_sample(
    ts: TrainingSample, template: Any, sample_cls: Any, *, kind: str = "dict", response: str | None = None
) -> Any:
    """A trainer ``Sample`` from one of ours: a copy of the incoming one (every trainer field kept) with
    the rollout's tokens, mask, log-probs, reward and status."""
    sample = copy.deepcopy(template) if isinstance(template, sample_cls) else sample_cls()
    sample.tokens = list(ts.tokens)
    sample.response_length = ts.response_length
    sample.loss_mask = list(ts.loss_mask)
    sample.rollout_log_probs = list(ts.rollout_logprobs)
    sample.reward = trainer_reward(ts.reward, ts.resolved, kind)
    sample.status = getattr(sample_cls.Status, STATUS[ts.status])
    if response is not None and hasattr(sample, "response"):
        sample.response = response
    if hasattr(sample, "rollout_id") and getattr(template, "rollout_id", None) is None:
        # siblings of one rollout share an id: the incoming index, as slime's own fan-out sets it
        index = getattr(template, "index", None)
        sample.rollout_id = index if index is not None else zlib.crc32(ts.trajectory_id.encode())
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
    tokenizer = AdapterSettings.from_environ().tokenizer or getattr(args, "hf_checkpoint", None) or "qwen"
    kind = reward_format()
    params = SamplingParams(
        max_tokens=int(sampling_params.get("max_new_tokens", 4096)),
        temperature=float(sampling_params.get("temperature", 1.0)),
        top_p=float(sampling_params.get("top_p", 1.0)),
    )
    ours = await rollout(sample.metadata["instance"], url, tokenizer, params)
    decode = _decoder(tokenizer) if ours and ours[0].status != "infra_error" else None
    return [
        to_trainer_sample(
            ts,
            sample,
            type(sample),
            kind=kind,
            response=decode(ts.tokens[ts.prompt_length :]) if decode else None,
        )
        for ts in ours
    ]


def _decoder(name: str) -> Any:
    from swe_rl.rl.tokenizer import load_tokenizer

    tok = load_tokenizer(name)
    return lambda ids: tok.decode(ids, skip_special_tokens=False)


async def reward_func(args: Any, samples: Any) -> Any:
    """slime/miles reward function: the reward set at rollout time (called with one Sample or a list)."""
    empty = trainer_reward(0.0, False, reward_format())
    if isinstance(samples, list):
        return [s.reward if s.reward is not None else empty for s in samples]
    return samples.reward if samples.reward is not None else empty


def reward_post_process(args: Any, samples: Any) -> tuple[list[float], list[float]]:
    """slime/miles ``--custom-reward-post-process-path``: group-normalized rewards where an
    infrastructure failure (``remove_sample``) takes no part in its group's mean and std.

    slime's own post-process zeroes a removed sample's loss but counts its reward in the group statistics,
    and reshapes by position (wrong once a rollout fans out into step samples). Here a group is the
    samples' ``group_index`` (else the instance id), each trajectory counts once, and its advantage goes
    to every sample it produced; a removed sample's reward is 0.0.
    """
    from swe_rl.rl.advantages import healthy_group_advantages

    flat = [s for group in samples for s in group] if samples and isinstance(samples[0], list) else samples
    raw = [float(s.get_reward_value(args)) for s in flat]
    estimator = getattr(args, "advantage_estimator", "grpo")
    if estimator not in ("grpo", "gspo", "reinforce_plus_plus_baseline") or not getattr(
        args, "rewards_normalization", True
    ):
        return raw, list(raw)
    trajectories: dict[Any, tuple[float, Any, bool]] = {}
    for s, reward in zip(flat, raw, strict=True):
        meta = s.metadata or {}
        group = s.group_index if s.group_index is not None else meta.get("instance_id")
        trajectories.setdefault(meta.get("trajectory_id", id(s)), (reward, group, not s.remove_sample))
    keys = list(trajectories)
    rewards, groups, healthy = zip(*trajectories.values(), strict=True) if keys else ((), (), ())
    scale = estimator in ("grpo", "gspo") and getattr(args, "grpo_std_normalization", True)
    adv = healthy_group_advantages(rewards, groups, healthy, scale=scale, single_mean=None)
    by_key = dict(zip(keys, adv, strict=True))
    return raw, [by_key[(s.metadata or {}).get("trajectory_id", id(s))] for s in flat]
