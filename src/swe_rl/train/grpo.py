"""``swe-rl train rl``: GRPO with TRL, whose rollouts are agent episodes (the rollout function:
integrations/trl.py).

Run directory: ``rollouts.jsonl`` (one ``EpisodeRecord`` per episode, with its step, reward and status),
``episodes.jsonl`` (per episode its step, instance and conversation: what the policy read and replied, so a
run's behaviour can be read afterwards, not only its rates),
``metrics.jsonl`` (per step: resolve rate, rewards, agent/* metrics, TRL's loss), TRL's
``checkpoint-*`` (every step by default: ``--resume`` continues from the newest, train/resume.py),
``final/`` (model + tokenizer), ``summary.json`` and ``report.html`` with the curves.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, model_validator

from swe_rl.agent.config import AgentConfig
from swe_rl.envs.cache import EnvCache
from swe_rl.episode.result import RolloutResult, rollout_record
from swe_rl.episode.spec import EpisodeSpec, Unsubmitted
from swe_rl.episode.summary import step_curve
from swe_rl.errors import ConfigError, MissingExtraError
from swe_rl.executors.base import Executor
from swe_rl.fileio import atomic_write_json
from swe_rl.integrations.trl import SweRolloutFunc, swe_reward
from swe_rl.llm.base import SamplingParams
from swe_rl.rundir import RunDir
from swe_rl.runs.metrics import MetricsSink
from swe_rl.tasks.model import Task


class GRPOSettings(BaseModel):
    """A GRPO run: the model, its steps and groups, the optimizer, sampling, and more of TRL's config."""

    output_dir: Path
    model: str = Field(
        default="smollm2", description="smollm2 | tiny-qwen | tiny-qwen-m | a model directory."
    )
    steps: int = Field(default=10, ge=1, description="Optimizer steps.")
    tasks_per_step: int = Field(default=2, ge=1, description="Distinct tasks per step.")
    num_generations: int = Field(default=4, ge=2, description="Episodes per task (the GRPO group).")
    micro_batch: int = Field(
        default=0,
        ge=0,
        description="Episodes per forward and backward pass, their gradients summed into the step's one "
        "update (0: all of a step's at once). Bounds the memory of a step: activations grow with it.",
    )
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
        default=1,
        ge=0,
        description="Checkpoint every N steps, what --resume continues from (0: only the final model).",
    )
    keep_checkpoints: int | None = Field(
        default=2,
        ge=2,
        description="Newest checkpoints kept (None: all); at least two, so a kill during a save leaves one.",
    )
    freeze_embeddings: bool = Field(
        default=False,
        description="Keep the token embeddings and the LM head fixed (freeze_token_embeddings).",
    )
    seed: int = 0
    unsubmitted: Unsubmitted = Field(
        default_factory=lambda: EpisodeSpec.for_training().unsubmitted,
        description="The reward of an episode that never submitted: graded (its diff at the limit, "
        "SWE-agent's convention) or unresolved (mini-swe-agent's), so that not submitting does not pay.",
    )
    resample_rounds: int = Field(
        default=0,
        ge=0,
        description="Dynamic sampling (DAPO's): up to N times a step, each group whose episodes all got one "
        "reward is run again on a training task the step has not used, and a group that mixes rewards "
        "replaces it in the update (0: off). Every episode run is logged.",
    )
    trl: dict[str, Any] = Field(
        default_factory=dict, description="More GRPOConfig fields (e.g. top_entropy_quantile), applied last."
    )
    args: dict[str, Any] = Field(default_factory=dict)

    @property
    def episodes_per_step(self) -> int:
        return self.tasks_per_step * self.num_generations

    @model_validator(mode="after")
    def _micro_batch_divides_a_step(self) -> GRPOSettings:
        episodes = self.episodes_per_step
        if self.micro_batch and episodes % self.micro_batch:
            raise ValueError(
                f"micro_batch {self.micro_batch} does not divide a step's {episodes} episodes "
                f"({self.tasks_per_step} tasks x {self.num_generations})"
            )
        return self


class RolloutLog:
    """Appends one episode record per rollout to rollouts.jsonl, its conversation to episodes.jsonl, and one
    metrics line per trainer step. An episode dynamic sampling left out of the update carries
    ``"dropped": true`` in both files (a key of these files only: ``EpisodeRecord`` ignores it)."""

    def __init__(self, run_dir: Path) -> None:
        run = RunDir(run_dir)
        self.path = run.rollouts_path
        self.episodes = run.episodes_path
        self.metrics = MetricsSink(run.metrics_path, [])

    def step(
        self,
        step: int,
        ids: Sequence[str],
        results: Sequence[RolloutResult],
        metrics: dict[str, float],
        dropped: Sequence[tuple[str, RolloutResult]] = (),
    ) -> None:
        kept: list[tuple[str, RolloutResult, dict[str, bool]]] = [
            (i, r, {}) for i, r in zip(ids, results, strict=True)
        ]
        with self.path.open("a") as records, self.episodes.open("a") as episodes:
            for instance_id, result, mark in [*kept, *((i, r, {"dropped": True}) for i, r in dropped)]:
                record = rollout_record(result, instance_id, step=step).model_dump(mode="json")
                records.write(json.dumps({**record, **mark}) + "\n")
                episodes.write(json.dumps({**episode_line(result, instance_id, step), **mark}) + "\n")
        self.metrics.log(metrics, step=step)


def episode_line(result: RolloutResult, instance_id: str, step: int) -> dict[str, Any]:
    """One line of episodes.jsonl: the episode's step, instance, outcome and messages (no token ids: the
    trainer's samples have those)."""
    traj = result.trajectory
    return {
        "step": step,
        "instance_id": instance_id,
        "exit_status": result.exit_status,
        "resolved": result.resolved,
        "reward": result.reward,
        "messages": [m.model_dump() for m in traj.messages] if traj is not None else [],
    }


def train_grpo(
    tasks: Sequence[Task],
    settings: GRPOSettings,
    cache: EnvCache,
    agent: AgentConfig,
    *,
    executor: Executor | None = None,
    quiet: bool = False,
    resume: bool = False,
) -> dict[str, Any]:
    """GRPO with TRL on ``tasks``; returns the run summary (also written to summary.json).

    ``cache``: where the tasks' envs are built before the first step (the executor's own, for a local one).
    ``executor``: where the episodes run (default: the one the ``SWE_RL_*`` settings name); the rollout
    function closes it at the end. ``resume``: continue the run in ``settings.output_dir`` from its newest
    complete checkpoint (the same settings and tasks; train/resume.py)."""
    try:
        import torch
        from datasets import Dataset
        from trl import GRPOConfig
    except ImportError as exc:
        raise MissingExtraError(exc.name or "trl", "train", "RL training with TRL") from None
    _check(tasks, settings, {f.name for f in dataclasses.fields(GRPOConfig)})
    if quiet:
        _quiet_libraries()
    checkpoint = _resume_point(tasks, settings) if resume else None
    if not resume:
        _new_run_dir(tasks, settings)
    out = settings.output_dir
    for task in tasks:  # build every env once, up front, so the first step does not pay for it
        cache.ensure(task)
    model, tokenizer = _policy(settings)
    cuda = torch.cuda.is_available()  # load_model put the model there
    log = RolloutLog(out)
    params = SamplingParams(**settings.model_dump(include={"max_tokens", "temperature", "top_p"}))
    rollout = SweRolloutFunc(
        tasks, agent, params, executor=executor, log=log, max_concurrent=settings.max_concurrent,
        spec=EpisodeSpec.for_training(unsubmitted=settings.unsubmitted), resample_rounds=settings.resample_rounds,
        seed=settings.seed,
    )  # fmt: skip
    try:  # the rollout function's executor is closed in the event loop its kept sandboxes live in
        bf16 = bool(cuda and torch.cuda.is_bf16_supported())
        trainer = _trainer_class()(
            model=model,
            reward_funcs=[swe_reward],
            args=GRPOConfig(**_grpo_config(settings, cuda=cuda, bf16=bf16, quiet=quiet)),
            train_dataset=Dataset.from_list([{"prompt": t.instance_id} for t in tasks]),
            processing_class=tokenizer,
            rollout_func=rollout,
        )
        _fit_trainer(trainer, log, settings, cuda=cuda, quiet=quiet)
        started = time.monotonic()
        trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    finally:
        rollout.close()
    return _finish(trainer, tokenizer, settings, rollout, time.monotonic() - started)


def _policy(settings: GRPOSettings) -> tuple[Any, Any]:
    """The model to train (on the GPU when torch sees one) and its tokenizer, with a pad token."""
    from swe_rl.llm.hf import load_model
    from swe_rl.train.models import model_source

    model, tokenizer = load_model(model_source(settings.model))
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if settings.freeze_embeddings:
        freeze_token_embeddings(model)
    return model, tokenizer


def _check(tasks: Sequence[Task], settings: GRPOSettings, config_fields: set[str]) -> None:
    if not tasks:
        raise ConfigError("no training tasks")
    unknown = sorted(set(settings.trl) - config_fields)
    if unknown:
        raise ConfigError(f"not GRPOConfig fields: {', '.join(unknown)} (TRL's GRPOConfig lists them)")


def _quiet_libraries() -> None:
    import warnings

    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")


def _new_run_dir(tasks: Sequence[Task], settings: GRPOSettings) -> None:
    out = settings.output_dir
    if RunDir(out).rollouts_path.exists():
        raise ConfigError(
            f"{out} already holds a training run; --resume {out} continues it, or choose another --output-dir"
        )
    out.mkdir(parents=True, exist_ok=True)
    config = {
        "kind": "rl",
        "settings": settings.model_dump(mode="json"),
        "instance_ids": [t.instance_id for t in tasks],
    }
    atomic_write_json(RunDir(out).config_path, config)


# what may differ on --resume: where and how fast it runs, how often it saves; not what it computes
RESUME_FREE = frozenset({"output_dir", "max_concurrent", "save_steps", "keep_checkpoints", "args"})


def _resume_point(tasks: Sequence[Task], settings: GRPOSettings) -> Path | None:
    """The checkpoint to continue (None: from step 0), the run's logs rewound to it."""
    from swe_rl.train.resume import check_unchanged, open_run, start

    out = settings.output_dir
    config = open_run(out, "rl", RunDir(out).summary_path)
    given = settings.model_dump(mode="json")
    check_unchanged(config["settings"], given, [k for k in given if k not in RESUME_FREE])
    ids = [t.instance_id for t in tasks]
    if config.get("instance_ids", ids) != ids:
        raise ConfigError(f"--resume {out}: the tasks differ from the run's ({len(config['instance_ids'])})")
    return start(out)


def _trainer_class() -> Any:
    """TRL's GRPOTrainer with a task order that a resumed run continues (train/resume.py EpochOrder)."""
    from trl import GRPOTrainer

    from swe_rl.train.resume import EpochOrder

    class ResumableGRPOTrainer(GRPOTrainer):
        def _get_train_sampler(self, dataset: Any = None) -> Any:
            return EpochOrder(super()._get_train_sampler(dataset))

    return ResumableGRPOTrainer


def _grpo_config(settings: GRPOSettings, *, cuda: bool, bf16: bool, quiet: bool) -> dict[str, Any]:
    """TRL's GRPOConfig fields for the settings; ``settings.trl`` last, so it can override any."""
    episodes = settings.episodes_per_step
    micro = settings.micro_batch or episodes
    return {
        "output_dir": str(settings.output_dir),
        "max_steps": settings.steps,
        # one generation of a step's episodes, then its micro-batches' gradients summed into one update
        "per_device_train_batch_size": micro,
        "gradient_accumulation_steps": episodes // micro,
        "steps_per_generation": episodes // micro,
        "num_generations": settings.num_generations,
        "learning_rate": settings.learning_rate,
        "beta": settings.beta,
        "temperature": settings.temperature,
        "top_p": settings.top_p,
        "logging_steps": 1,
        "save_steps": settings.save_steps or settings.steps + 1,
        "save_strategy": "steps" if settings.save_steps else "no",
        "save_total_limit": settings.keep_checkpoints,
        "report_to": "none",
        "use_cpu": not cuda,
        "bf16": bf16,
        "gradient_checkpointing": cuda,  # recomputing activations only pays where memory is short
        "seed": settings.seed,
        "disable_tqdm": quiet,
        "remove_unused_columns": False,
        "mask_truncated_completions": False,
        "max_completion_length": None,
        **settings.trl,
    }


def _fit_trainer(trainer: Any, log: RolloutLog, settings: GRPOSettings, *, cuda: bool, quiet: bool) -> None:
    """The CPU LM head, TRL's metrics into metrics.jsonl, and (quiet) no console output of TRL's own."""
    if not cuda:  # on CPU, TRL's tiled LM head is ~3x slower than plain logits (train/lm_head.py)
        from swe_rl.train.lm_head import plain_lm_head

        plain_lm_head(trainer.model, settings.temperature)
    from swe_rl.train.resume import completion_callback

    trainer.add_callback(_trl_metrics_callback(log))
    trainer.add_callback(completion_callback())
    if quiet:
        from transformers.trainer_callback import PrinterCallback, ProgressCallback

        trainer.remove_callback(PrinterCallback)  # metrics.jsonl has them; keep the console to our lines
        trainer.remove_callback(ProgressCallback)


def _finish(
    trainer: Any, tokenizer: Any, settings: GRPOSettings, rollout: SweRolloutFunc, train_s: float
) -> dict[str, Any]:
    out = settings.output_dir
    final = RunDir(out).final_path
    trainer.save_model(str(final))
    tokenizer.save_pretrained(str(final))
    summary = training_summary(out)
    summary.update(
        {
            "train_time_s": train_s,
            "split_episodes": rollout.split_episodes,
            "model": settings.model,
            "final_model": str(final),
            "settings": settings.model_dump(mode="json"),
        }
    )
    atomic_write_json(RunDir(out).summary_path, summary)
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
    """The per-step curve (episode/summary.py's ``step_curve``) of the run's records."""
    curve = step_curve(RunDir(run_dir).load_rollouts())
    return {"curve": curve, "steps": len(curve)}
