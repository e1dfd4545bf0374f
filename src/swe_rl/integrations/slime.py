"""slime / miles adapter: ``--custom-generate-function-path swe_rl.integrations.slime.generate`` and
``--custom-rm-path swe_rl.integrations.slime.reward_func``.

``generate`` runs one whole agent rollout for the task in ``sample.metadata["instance"]`` (rows made by
``swe-rl data prepare``): the policy is the trainer's SGLang router, spoken to token-in/token-out, so
the samples hold exactly the ids the model saw and generated. It grades the patch, sets the reward and
returns one ``Sample`` per step (dynamic_history, the default) or per exact multi-turn span, each a copy
of the incoming sample (its ``session_id``, ``custom_rm_path``, ``generate_function_path``, metadata and
the rest kept) sharing one ``rollout_id`` (the incoming one, else its ``index``, as slime's own fan-out
does), so slime's rollout validation and loss reduction count the rollout once.

Statuses mean what slime and miles mean by them (THUDM/slime 624b824, radixark/miles 31f1ca9): ``ABORTED``
is a rollout that did not finish for reasons outside it (slime's own coding-agent example marks an
exception or a timeout so; miles' ``check_no_aborted`` filter drops its group, both trainers' fully-async
paths requeue it), so an infrastructure failure is one placeholder sample, ``ABORTED`` and
``remove_sample``, of response length 1 with loss mask ``[0]`` (the shape slime's example uses, which its
loss code's slicing accepts); it is never scored. Everything the agent did is a finished, scored rollout:
completed and aborted episodes (format errors, the agent's own sandbox broken) are ``COMPLETED``, truncated
ones (step, time or cost limit) ``TRUNCATED``; swe-rl's own status is kept in ``metadata["swe_rl_status"]``.

The reward has the shape the trainer reads: the bare float when ``--reward-key`` is not set (slime's
``get_reward_value`` then returns ``sample.reward`` as it is), the seed's ``{"score": reward, "acc": 1.0 if
resolved else 0.0}`` when it is ``score``. ``SWE_RL_SLIME_REWARD`` (dict | float) may state the shape; one
that the trainer's arguments would not read as swe-rl's reward is a ConfigError, as is any reward key but
``score``.

Settings come from environment variables, so the trainer's own arguments stay untouched:
``SWE_RL_EXECUTOR`` (local | service:<rollout server URL> | ray), ``SWE_RL_BACKEND`` (ns | docker | a pool
URL), ``SWE_RL_TOKENIZER`` (a model dir, or ``qwen`` for the bundled Qwen vocabulary), ``SWE_RL_AGENT_CONFIG``, ``SWE_RL_STEP_LIMIT``, ``SWE_RL_DYNAMIC_HISTORY``
(1/0), ``SWE_RL_MAX_CONTEXT``, ``SWE_RL_SLIME_REWARD`` (dict | float).
"""

from __future__ import annotations

import copy
import zlib
from typing import Any

from swe_rl.episode.result import TrainingSample
from swe_rl.errors import ConfigError
from swe_rl.integrations.adapter_kit import rollout
from swe_rl.integrations.settings import AdapterSettings
from swe_rl.llm.base import SamplingParams

# swe-rl's sample status -> slime's/miles' Sample.Status (the module's docstring says why)
STATUS = {
    "completed": "COMPLETED",
    "truncated": "TRUNCATED",
    "aborted": "COMPLETED",
    "infra_error": "ABORTED",
}

# slime 624b824's --advantage-estimator choices (slime/utils/arguments.py) and what its default reward
# post-process (slime/ray/rollout.py) does with each: group mean subtracted, then divided by the group's
# std (True) or not (False); None: rewards passed on raw. miles 31f1ca9 has the same list without cispo.
ESTIMATORS: dict[str, bool | None] = {
    "grpo": True,
    "gspo": True,
    "cispo": True,
    "reinforce_plus_plus_baseline": False,
    "reinforce_plus_plus": None,
    "ppo": None,
}


def reward_format(args: Any = None) -> str:
    """The reward's shape the trainer's arguments read as swe-rl's reward: ``float`` without
    ``--reward-key``, ``dict`` (the seed's ``{"score", "acc"}``) with ``--reward-key score``.

    ``SWE_RL_SLIME_REWARD`` may state it; a shape or key the trainer would not read as swe-rl's reward
    (slime's ``get_reward_value`` indexing a float, or handing a dict on as the reward) is a ConfigError.
    """
    settings = AdapterSettings.read()
    stated = settings.slime_reward if "slime_reward" in settings.model_fields_set else None
    key = getattr(args, "reward_key", None)
    eval_key = getattr(args, "eval_reward_key", None)
    if key not in (None, "score"):
        raise ConfigError(f"--reward-key {key!r}: swe-rl's reward is 'score' (or leave --reward-key unset)")
    if eval_key not in (None, "score", "acc"):
        raise ConfigError(f"--eval-reward-key {eval_key!r}: swe-rl's reward dict has 'score' and 'acc'")
    if eval_key and not key:
        raise ConfigError(
            "--eval-reward-key without --reward-key: training would read the reward dict as the reward; "
            "set --reward-key score too"
        )
    needed = "dict" if key else "float"
    if stated is not None and stated != needed:
        flag = "without --reward-key" if needed == "float" else f"with --reward-key {key}"
        raise ConfigError(
            f"SWE_RL_SLIME_REWARD={stated}, but the trainer runs {flag} and reads a {needed} reward: "
            f"unset SWE_RL_SLIME_REWARD or make it {needed}"
        )
    return needed


def trainer_reward(score: float | None, resolved: bool | None, kind: str) -> float | dict[str, float]:
    """The reward as the seed's reward function returns it: ``{"score", "acc"}``, or the bare score."""
    score = score if score is not None else 0.0
    if kind == "float":
        return score
    return {"score": score, "acc": 1.0 if resolved else 0.0}


def to_trainer_sample(
    ts: TrainingSample, template: Any, sample_cls: Any, *, kind: str = "float", response: str | None = None
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
        "swe_rl_status": ts.status,
        "instance_id": ts.instance_id,
        "trajectory_id": ts.trajectory_id,
        "step_indices": ts.step_indices,
    }
    return sample


async def generate(args: Any, sample: Any, sampling_params: dict[str, Any]) -> list[Any]:
    """slime/miles custom generate function: one agent rollout -> a list of Samples."""
    url = f"http://{args.sglang_router_ip}:{args.sglang_router_port}"
    tokenizer = AdapterSettings.read().tokenizer or getattr(args, "hf_checkpoint", None) or "qwen"
    kind = reward_format(args)
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
    empty = trainer_reward(0.0, False, reward_format(args))
    if isinstance(samples, list):
        return [s.reward if s.reward is not None else empty for s in samples]
    return samples.reward if samples.reward is not None else empty


def reward_post_process(args: Any, samples: Any) -> tuple[list[float], list[float]]:
    """slime/miles ``--custom-reward-post-process-path``: group-normalized rewards where an
    infrastructure failure (``remove_sample``) takes no part in its group's mean and std.

    slime's own post-process (624b824) zeroes a removed sample's loss but counts its reward in the group
    statistics, and reshapes by position: once a rollout fans out into step samples the count is not
    prompts x n, and the whole batch is one group. Here a group is the samples' ``group_index`` (else the
    instance id), each trajectory counts once, and its advantage goes to every sample it produced; a
    removed sample's reward is 0.0. Every estimator slime normalizes by group is normalized as slime
    does it (:data:`ESTIMATORS`); an estimator not in that list is a ConfigError, never raw rewards.
    """
    from swe_rl.rl.advantages import healthy_group_advantages

    flat = [s for group in samples for s in group] if samples and isinstance(samples[0], list) else samples
    raw = [_reward_value(s, args) for s in flat]
    estimator = getattr(args, "advantage_estimator", "grpo")
    if estimator not in ESTIMATORS:
        raise ConfigError(
            f"--advantage-estimator {estimator!r} is not one swe-rl's reward_post_process knows "
            f"({', '.join(ESTIMATORS)}): its group normalization is unknown"
        )
    scaled = ESTIMATORS[estimator]
    if scaled is None or not getattr(args, "rewards_normalization", True):
        return raw, list(raw)
    trajectories: dict[Any, tuple[float, Any, bool]] = {}
    for s, reward in zip(flat, raw, strict=True):
        meta = s.metadata or {}
        group = s.group_index if s.group_index is not None else meta.get("instance_id")
        trajectories.setdefault(meta.get("trajectory_id", id(s)), (reward, group, not s.remove_sample))
    keys = list(trajectories)
    rewards, groups, healthy = zip(*trajectories.values(), strict=True) if keys else ((), (), ())
    scale = scaled and getattr(args, "grpo_std_normalization", True)
    adv = healthy_group_advantages(rewards, groups, healthy, scale=scale, single_mean=None)
    by_key = dict(zip(keys, adv, strict=True))
    return raw, [by_key[(s.metadata or {}).get("trajectory_id", id(s))] for s in flat]


def _reward_value(sample: Any, args: Any) -> float:
    """The sample's reward as the trainer reads it (its ``get_reward_value``: ``--reward-key``), a float."""
    value = sample.get_reward_value(args) if hasattr(sample, "get_reward_value") else sample.reward
    if isinstance(value, dict):
        raise ConfigError(
            f"the reward is a dict ({sorted(value)}) and the trainer reads no --reward-key: "
            "pass --reward-key score, or let swe-rl give a float reward (SWE_RL_SLIME_REWARD unset)"
        )
    return float(value)
