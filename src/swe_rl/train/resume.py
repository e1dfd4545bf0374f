"""Resuming a training run (``swe-rl train rl|sft --resume RUN_DIR``) where it stopped.

The trainer (transformers' ``Trainer``, under TRL's) saves a ``checkpoint-N`` with the model, the optimizer,
the scheduler, every RNG state and its step counter; a callback here then writes the checkpoint's
completion mark, so a run killed while saving never resumes from half a checkpoint: the newest *marked*
checkpoint is the one continued, newer unmarked ones are deleted. The run's logs are rewound to that
checkpoint (the rows of the step that was in flight are dropped, that step runs again), so metrics.jsonl,
rollouts.jsonl and the curve read as one run.

What restores the sequence of steps: the trainer reloads the RNG states before the next step's batch is
used (the rollouts' sampling draws from torch's global generator), and :class:`EpochOrder` gives each
epoch of GRPO's task order the same permutation however many epochs this process iterated (TRL's
sampler draws epoch e's order as the e-th draw of one generator, which a resumed process starts afresh).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from swe_rl.errors import ConfigError
from swe_rl.fileio import atomic_write_json, atomic_write_text
from swe_rl.rundir import RunDir, read_json


def open_run(run_dir: Path, kind: str, finished: Path) -> dict[str, Any]:
    """The saved config.json of a ``kind`` run to resume; ConfigError if it is none or has finished."""
    run = RunDir(run_dir)
    if not run.config_path.is_file():
        raise ConfigError(f"--resume {run_dir}: not a training run (no {run.config_path.name})")
    config = read_json(run.config_path)
    saved_kind = config.get("kind", "rl" if run.is_training else None)
    if saved_kind != kind:
        what = f"a `train {saved_kind}` run" if saved_kind else "not a training run"
        raise ConfigError(f"--resume {run_dir}: {what}, not one of `train {kind}`")
    if finished.is_file():
        raise ConfigError(f"--resume {run_dir}: the run has finished ({finished.name}); nothing to resume")
    return dict(config)


def check_unchanged(saved: dict[str, Any], given: dict[str, Any], explicit: Iterable[str]) -> None:
    """ConfigError naming each explicitly given setting whose value differs from the saved run's."""
    changed = [
        f"{key} (the run has {saved.get(key)!r}, given {given.get(key)!r})"
        for key in explicit
        if given.get(key) != saved.get(key)
    ]
    if changed:
        raise ConfigError(
            "--resume continues a run with its own settings; these would change it: "
            + "; ".join(changed)
            + ". Drop them, or start a new run in another --output-dir."
        )


def start(run_dir: Path) -> Path | None:
    """The newest complete checkpoint (None: start at step 0); drops incomplete newer ones and rewinds logs."""
    run = RunDir(run_dir)
    chosen: tuple[int, Path] | None = None
    for step, path in reversed(run.checkpoints()):
        if chosen is None and (path / RunDir.CHECKPOINT_COMPLETE).is_file():
            chosen = (step, path)
        elif chosen is None:
            shutil.rmtree(path)  # a save the kill cut short; the step is trained and saved again
    done = chosen[0] if chosen else 0
    rewind_logs(run, done)
    return chosen[1] if chosen else None


def rewind_logs(run: RunDir, done: int) -> None:
    """Keep the log rows of the first ``done`` steps: rollouts, episodes and rollout metrics of steps < done
    (they are logged at the step's 0-based index), trainer rows at steps <= done (logged after the update),
    and no end-of-training row."""

    def metric_kept(row: dict[str, Any]) -> bool:
        if any(key.endswith("/train_runtime") for key in row):
            return False
        if any(key.startswith("rl/") for key in row):
            return int(row["step"]) < done
        return int(row["step"]) <= done

    for log in (run.rollouts_path, run.episodes_path):
        _keep_rows(log, lambda row: int(row.get("step") or 0) < done)
    _keep_rows(run.metrics_path, metric_kept)


def _keep_rows(path: Path, keep: Callable[[dict[str, Any]], bool]) -> None:
    if not path.is_file():
        return
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line torn by the kill
        if keep(row):
            kept.append(line + "\n")
    atomic_write_text(path, "".join(kept))


def completion_callback() -> Any:
    """A TrainerCallback that marks each checkpoint complete once the trainer has saved all of it."""
    from transformers import TrainerCallback

    class MarkComplete(TrainerCallback):
        def on_save(self, args: Any, state: Any, control: Any, **_: Any) -> None:
            path = Path(args.output_dir) / f"{RunDir.CHECKPOINT_PREFIX}{state.global_step}"
            if path.is_dir():
                atomic_write_json(path / RunDir.CHECKPOINT_COMPLETE, {"step": int(state.global_step)})

    return MarkComplete()


class EpochOrder:
    """TRL's ``RepeatSampler`` with epoch e's order a function of (seed, e): the same permutation as an
    uninterrupted run's e-th, also in a process that resumed at epoch e (the trainer calls ``set_epoch``)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.inner)

    def __iter__(self) -> Iterator[int]:
        import torch

        if getattr(self.inner, "shuffle", False) and self.inner.seed is not None:
            self.inner.generator.manual_seed(self.inner.seed)
            for _ in range(self.epoch):  # the draws of the epochs before
                torch.randperm(self.inner.num_samples, generator=self.inner.generator)
        return iter(self.inner)
