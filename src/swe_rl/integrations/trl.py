"""TRL adapter: GRPO whose rollouts are whole agent episodes in sandboxes (``swe-rl train rl``).

TRL's ``GRPOTrainer`` takes a ``rollout_func(prompts, trainer)``; ours reads each prompt as an instance
id, runs the agent on that task with the trainer's own model as the policy (concurrent episodes batched
into one ``generate`` per turn, prompts extended id for id: llm/hf.py ``BatchedHFPolicy``), grades the
patch, and hands TRL one exact multi-turn sample per episode: the first prompt's ids as the prompt, every
later id as the completion, with ``env_mask`` = 1 exactly on generated ids (observations and template ids
are 0) and the rollout logprobs. The reward is the outcome reward (resolved or not); rewards and
advantages are per episode, groups being TRL's ``num_generations`` episodes of one task.

An infrastructure failure cannot leave TRL's fixed-size batch, so its episode carries no loss (mask all
0) and the mean reward of its group's healthy episodes (it shifts no advantage); it is counted in the
run's metrics and never scored as a wrong answer.

Run directory: ``rollouts.jsonl`` (one line per episode: step, task, status, resolved, reward, turns),
``metrics.jsonl`` (per step: resolve rate, rewards, agent/* metrics, TRL's loss), TRL's
``checkpoint-*``, ``final/`` (model + tokenizer), ``summary.json`` and ``report.html`` with the curves.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from swe_rl.agent.config import AgentConfig
from swe_rl.envs.cache import EnvCache
from swe_rl.errors import ConfigError, MissingExtraError
from swe_rl.integrations.common import healthy_group_means, trajectory_span
from swe_rl.llm.base import SamplingParams
from swe_rl.rl.rewards import OutcomeReward
from swe_rl.rl.rollout import RolloutResult, run_rollout
from swe_rl.runs.metrics import MetricsSink
from swe_rl.sandbox.base import SandboxFactory
from swe_rl.tasks.io import atomic_write_json
from swe_rl.tasks.model import Task


class GRPOSettings(BaseModel):
    output_dir: Path
    model: str = Field(
        default="smollm2", description="smollm2 | tiny-qwen | tiny-qwen-m | a model directory."
    )
    steps: int = Field(default=10, ge=1, description="Optimizer steps.")
    tasks_per_step: int = Field(default=2, ge=1, description="Distinct tasks per step.")
    num_generations: int = Field(default=4, ge=2, description="Episodes per task (the GRPO group).")
    learning_rate: float = Field(default=1e-5, gt=0)
    beta: float = Field(default=0.0, ge=0, description="KL coefficient (0: no reference model).")
    max_tokens: int = Field(default=256, ge=1, description="New tokens per turn.")
    temperature: float = Field(default=1.0, gt=0)
    top_p: float = Field(
        default=1.0,
        gt=0,
        le=1,
        description="Nucleus sampling of the rollouts (the loss uses the full softmax).",
    )
    max_concurrent: int = Field(default=16, ge=1, description="Episodes at once (sandboxes).")
    save_steps: int = Field(
        default=0, ge=0, description="Checkpoint every N steps (0: only the final model)."
    )
    freeze_embeddings: bool = Field(
        default=False,
        description="Keep the token embeddings and the LM head fixed (freeze_token_embeddings).",
    )
    seed: int = 0
    trl: dict[str, Any] = Field(
        default_factory=dict, description="More GRPOConfig fields (e.g. top_entropy_quantile), applied last."
    )
    args: dict[str, Any] = Field(default_factory=dict)


class RolloutLog:
    """Appends one JSON line per episode and one metrics line per trainer step."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / "rollouts.jsonl"
        self.metrics = MetricsSink(run_dir / "metrics.jsonl", [])

    def episodes(self, step: int, tasks: Sequence[str], results: Sequence[RolloutResult]) -> dict[str, float]:
        with self.path.open("a") as f:
            for instance_id, r in zip(tasks, results, strict=True):
                traj = r.trajectory
                f.write(
                    json.dumps(
                        {
                            "step": step,
                            "instance_id": instance_id,
                            "status": r.status,
                            "exit_status": r.exit_status,
                            "resolved": r.resolved,
                            "reward": r.reward,
                            "turns": len(traj.steps) if traj else 0,
                            "format_errors": traj.format_errors if traj else 0,
                            "error": r.error,
                        }
                    )
                    + "\n"
                )
        return episode_metrics(results)


def episode_metrics(results: Sequence[RolloutResult]) -> dict[str, float]:
    healthy = [r for r in results if r.status != "infra_error"]
    out: dict[str, float] = {
        "rl/episodes": float(len(results)),
        "rl/infra_errors": float(len(results) - len(healthy)),
    }
    if healthy:
        out["rl/resolve_rate"] = sum(bool(r.resolved) for r in healthy) / len(healthy)
        out["rl/reward_mean"] = sum(r.reward or 0.0 for r in healthy) / len(healthy)
        out["rl/format_error_rate"] = sum(
            1 for r in healthy if r.trajectory and r.trajectory.format_errors
        ) / len(healthy)
        keys = {k for r in healthy for k in r.metrics}
        for k in sorted(keys):
            values = [r.metrics[k] for r in healthy if k in r.metrics]
            out[f"{k}_mean"] = sum(values) / len(values)
    return out


class SweRolloutFunc:
    """TRL ``rollout_func``: each prompt is an instance id; one graded agent episode per prompt."""

    def __init__(
        self,
        tasks: Sequence[Task],
        factory: SandboxFactory,
        cache: EnvCache,
        agent: AgentConfig,
        params: SamplingParams,
        *,
        log: RolloutLog | None = None,
        max_concurrent: int = 16,
        outcome: OutcomeReward | None = None,
        window_s: float = 0.5,
    ) -> None:
        self.window_s = window_s  # episodes run in step: wait this long to batch a whole turn together
        self.tasks = {t.instance_id: t for t in tasks}
        self.factory = factory
        self.cache = cache
        self.agent = agent
        self.params = params
        self.log = log
        self.max_concurrent = max_concurrent
        self.outcome = outcome or OutcomeReward()
        self.split_episodes = 0
        self.last_metrics: dict[str, float] = {}

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        from swe_rl.llm.hf import BatchedHFPolicy

        ids = [self._instance(p) for p in prompts]
        model = trainer.accelerator.unwrap_model(trainer.model)
        tokenizer = trainer.processing_class
        policy = BatchedHFPolicy(model, tokenizer, max_batch=self.max_concurrent, window_s=self.window_s)
        started = time.monotonic()
        results = asyncio.run(self._episodes(ids, policy))
        step = int(trainer.state.global_step)
        metrics = episode_metrics(results)
        metrics["rl/rollout_time_s"] = time.monotonic() - started
        metrics["rl/generate_batch_mean"] = (
            sum(policy.batches) / len(policy.batches) if policy.batches else 0.0
        )
        if self.log is not None:
            self.log.episodes(step, ids, results)
            self.log.metrics.log(metrics, step=step)
        self.last_metrics = metrics
        return self.to_trl(ids, results, tokenizer)

    def _instance(self, prompt: Any) -> str:
        text = prompt if isinstance(prompt, str) else prompt[-1]["content"]
        if text not in self.tasks:
            raise ConfigError(f"rollout prompt {text!r} is not an instance id of the training tasks")
        return str(text)

    async def _episodes(self, ids: list[str], policy: Any) -> list[RolloutResult]:
        limit = asyncio.Semaphore(self.max_concurrent)

        async def one(instance_id: str) -> RolloutResult:
            async with limit:
                return await run_rollout(
                    self.tasks[instance_id],
                    policy,
                    self.factory,
                    self.cache,
                    self.agent,
                    self.params,
                    dynamic_history=False,
                    outcome=self.outcome,
                )

        try:
            return list(await asyncio.gather(*(one(i) for i in ids)))
        finally:
            await policy.close()

    def to_trl(self, ids: list[str], results: list[RolloutResult], tokenizer: Any) -> dict[str, list[Any]]:
        """TRL's rollout output: prompt/completion ids, logprobs, env_mask, and the rewards as extra fields."""
        spans = [trajectory_span(r) for r in results]
        means = healthy_group_means(spans, ids)
        eos = tokenizer.convert_tokens_to_ids(tokenizer.eos_token)
        out: dict[str, list[Any]] = {
            k: []
            for k in ("prompt_ids", "completion_ids", "logprobs", "env_mask", "swe_reward", "swe_status")
        }
        for instance_id, span in zip(ids, spans, strict=True):
            if span is None:
                first = self.tasks[instance_id].problem_statement[:64]
                out["prompt_ids"].append(list(tokenizer.encode(first, add_special_tokens=False)) or [eos])
                out["completion_ids"].append([eos])
                out["logprobs"].append([0.0])
                out["env_mask"].append([0])  # no loss: an infrastructure failure is not an answer
                out["swe_reward"].append(means[instance_id])
                out["swe_status"].append("infra_error")
                continue
            if span.dropped_spans:
                self.split_episodes += 1  # the template broke the prefix: train on the exact first part
            out["prompt_ids"].append(span.prompt_ids)
            out["completion_ids"].append(span.response_ids)
            out["logprobs"].append(span.logprobs)
            out["env_mask"].append(span.loss_mask)
            out["swe_reward"].append(span.reward)
            out["swe_status"].append(span.status)
        return out


def swe_reward(completions: list[Any], swe_reward: list[float], **_: Any) -> list[float | None]:
    """TRL reward function: the episode's outcome reward, set by the rollout function."""
    return list(swe_reward)


def train_grpo(
    tasks: Sequence[Task],
    settings: GRPOSettings,
    factory: SandboxFactory,
    cache: EnvCache,
    agent: AgentConfig,
    *,
    quiet: bool = False,
) -> dict[str, Any]:
    """GRPO with TRL on ``tasks``; returns the run summary (also written to summary.json)."""
    try:
        import torch
        from datasets import Dataset
        from trl import GRPOConfig, GRPOTrainer
    except ImportError as exc:
        raise MissingExtraError(exc.name or "trl", "train", "RL training with TRL") from None
    from swe_rl.llm.hf import load_model
    from swe_rl.rl.tokenizer import model_source

    if not tasks:
        raise ConfigError("no training tasks")
    unknown = sorted(set(settings.trl) - {f.name for f in dataclasses.fields(GRPOConfig)})
    if unknown:
        raise ConfigError(f"not GRPOConfig fields: {', '.join(unknown)} (TRL's GRPOConfig lists them)")
    if quiet:
        import warnings

        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")
    out = settings.output_dir
    if (out / "rollouts.jsonl").exists():
        raise ConfigError(f"{out} already holds a training run; choose another --output-dir")
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / "config.json", {"settings": settings.model_dump(mode="json")})
    for task in tasks:  # build every env once, up front, so the first step does not pay for it
        cache.ensure(task)
    model, tokenizer = load_model(model_source(settings.model))
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    cuda = torch.cuda.is_available()  # load_model put the model there
    if settings.freeze_embeddings:
        freeze_token_embeddings(model)
    log = RolloutLog(out)
    rollout = SweRolloutFunc(
        tasks,
        factory,
        cache,
        agent,
        SamplingParams(
            max_tokens=settings.max_tokens, temperature=settings.temperature, top_p=settings.top_p
        ),
        log=log,
        max_concurrent=settings.max_concurrent,
    )
    config = GRPOConfig(
        **{
            "output_dir": str(out),
            "max_steps": settings.steps,
            "per_device_train_batch_size": settings.tasks_per_step * settings.num_generations,
            "num_generations": settings.num_generations,
            "learning_rate": settings.learning_rate,
            "beta": settings.beta,
            "temperature": settings.temperature,
            "top_p": settings.top_p,
            "logging_steps": 1,
            "save_steps": settings.save_steps or settings.steps + 1,
            "save_strategy": "steps" if settings.save_steps else "no",
            "report_to": "none",
            "use_cpu": not cuda,
            "bf16": bool(cuda and torch.cuda.is_bf16_supported()),
            "gradient_checkpointing": cuda,  # recomputing activations only pays where memory is short
            "seed": settings.seed,
            "disable_tqdm": quiet,
            "remove_unused_columns": False,
            "mask_truncated_completions": False,
            "max_completion_length": None,
            **settings.trl,
        }
    )
    dataset = Dataset.from_list([{"prompt": t.instance_id} for t in tasks])
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[swe_reward],
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        rollout_func=rollout,
    )
    if not cuda:  # on CPU, TRL's tiled LM head is ~3x slower than plain logits (rl/lm_head.py)
        from swe_rl.rl.lm_head import plain_lm_head

        plain_lm_head(trainer.model, settings.temperature)
    trainer.add_callback(_trl_metrics_callback(log))
    if quiet:
        from transformers.trainer_callback import PrinterCallback, ProgressCallback

        trainer.remove_callback(PrinterCallback)  # metrics.jsonl has them; keep the console to our lines
        trainer.remove_callback(ProgressCallback)
    started = time.monotonic()
    trainer.train()
    final = out / "final"
    trainer.save_model(str(final))
    tokenizer.save_pretrained(str(final))
    summary = training_summary(out)
    summary.update(
        {
            "train_time_s": time.monotonic() - started,
            "split_episodes": rollout.split_episodes,
            "model": settings.model,
            "final_model": str(final),
            "settings": settings.model_dump(mode="json"),
        }
    )
    atomic_write_json(out / "summary.json", summary)
    return summary


def freeze_token_embeddings(model: Any) -> int:
    """Stop training the token embeddings and the LM head (one matrix when tied); returns the frozen count.

    For a small model with a large vocabulary (tiny-qwen-m: 9.7M of its 9.9M parameters are the 151k-row
    embedding) policy gradients wreck the head through Adam: an episode with a negative advantage pushes
    every other token's logit up by a tiny amount, Adam scales each row's update to the learning rate
    whatever the gradient's size, and within a few steps the mass of the 151k unused tokens swamps the
    replies (BENCHMARKS.md, "Learning on CPU"). With the rows fixed the policy learns in the layers.
    """
    frozen = 0
    seen: set[int] = set()
    for module in (model.get_input_embeddings(), model.get_output_embeddings()):
        weight = getattr(module, "weight", None)
        if weight is not None and id(weight) not in seen:
            seen.add(id(weight))
            weight.requires_grad_(False)
            frozen += weight.numel()
    return frozen


def _trl_metrics_callback(log: RolloutLog) -> Any:
    """TRL's own logs (loss, grad norm, KL, ...) into metrics.jsonl under ``trl/``."""
    from transformers import TrainerCallback

    class TRLMetrics(TrainerCallback):
        def on_log(
            self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **_: Any
        ) -> None:
            numbers = {f"trl/{k}": float(v) for k, v in (logs or {}).items() if isinstance(v, int | float)}
            if numbers:
                log.metrics.log(numbers, step=int(state.global_step))

    return TRLMetrics()


def training_summary(run_dir: Path) -> dict[str, Any]:
    """Resolve rate per step, first and last steps, from rollouts.jsonl."""
    per_step: dict[int, list[dict[str, Any]]] = defaultdict(list)
    path = run_dir / "rollouts.jsonl"
    if path.is_file():
        for line in path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                per_step[int(row["step"])].append(row)
    curve = []
    for step in sorted(per_step):
        rows = [r for r in per_step[step] if r["status"] != "infra_error"]
        curve.append(
            {
                "step": step,
                "episodes": len(per_step[step]),
                "infra_errors": len(per_step[step]) - len(rows),
                "resolve_rate": sum(bool(r["resolved"]) for r in rows) / len(rows) if rows else None,
                "format_error_rate": sum(1 for r in rows if r["format_errors"]) / len(rows) if rows else None,
            }
        )
    return {"curve": curve, "steps": len(curve)}
