"""A run directory, eval or training: every file name of both kinds is here, and only here.

An eval run (``swe-rl eval``; append-only, resumable):
<out>/results.jsonl                 one EpisodeRecord per finished attempt (appended whole, fsynced)
<out>/summary.json                  totals and episode/summary.py's summary (rates over graded attempts), args, provenance
<out>/preds.json                    SWE-bench predictions (instance_id, model_name_or_path, model_patch)
<out>/metrics.jsonl                 agent/* metrics
<out>/<instance_id>__<ts>/          traj.json, patch.diff, meta.json and <instance_id>.traj.json (the trajectory in
                                    mini-swe-agent's format); <instance_id>__a<N>__<ts>/ for attempt N > 0

A training run (``swe-rl train rl``):
<out>/rollouts.jsonl                one EpisodeRecord per rollout, with its step, reward and sample status
<out>/metrics.jsonl                 per step: rl/*, agent/* and the trainer's own metrics
<out>/config.json, summary.json     the settings; the per-step curve and where the final model is
<out>/checkpoint-<N>/               the trainer's state after N steps (``--resume`` continues from the newest
                                    one holding checkpoint_complete.json, the mark written after the save)
<out>/final/                        the model and tokenizer at the end
<out>/README.md                     the model card TRL writes

A supervised run (``swe-rl train sft``): config.json, metrics.jsonl, checkpoint-<N>/, final/ and
train_sft.json (its result).

Both: <out>/report.html (``swe-rl report``).

A demo (``swe-rl demo``, :class:`DemoDir`): <out>/validation.json, the sample predictions graded in the
official harness's layout (runs/grade_predictions.py), <out>/eval/ an eval run, <out>/train/ a training run.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from swe_rl.episode.record import EpisodeRecord
from swe_rl.episode.summary import summarize
from swe_rl.fileio import atomic_write_json

# a key that names a secret as its last word (api_key, hf_token, SWE_RL_TOKEN, Authorization), not one that
# counts or handles them (max_tokens, tokenizer, keys_seen)
_SECRET = re.compile(r"(^|[_\-])(key|apikey|token|secret|password|passwd|authorization)$", re.IGNORECASE)


def redact(obj: Any) -> Any:
    """A copy with the values of secret-looking keys replaced."""
    if isinstance(obj, dict):
        return {k: ("<redacted>" if _SECRET.search(str(k)) and v else redact(v)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [redact(v) for v in obj]
    return obj


class RunDir:
    """The files of one run directory; the records in it."""

    TRAJECTORY, PATCH, META = "traj.json", "patch.diff", "meta.json"  # an eval attempt's artifacts
    CHECKPOINT_PREFIX = "checkpoint-"  # transformers' Trainer names its checkpoints so
    CHECKPOINT_COMPLETE = "checkpoint_complete.json"  # written into a checkpoint once all of it is saved

    def __init__(self, path: Path) -> None:
        self.path = path
        self.results_path = path / "results.jsonl"
        self.rollouts_path = path / "rollouts.jsonl"
        self.episodes_path = path / "episodes.jsonl"  # a training run's episodes, as the policy saw them
        self.metrics_path = path / "metrics.jsonl"
        self.summary_path = path / "summary.json"
        self.preds_path = path / "preds.json"
        self.config_path = path / "config.json"
        self.report_path = path / "report.html"
        self.final_path = path / "final"
        self.sft_result_path = path / "train_sft.json"
        self.model_card_path = path / "README.md"  # TRL's, written into the trainer's output directory

    def attempt_dir(self, instance_id: str, attempt: int) -> Path:
        """A new folder for one eval attempt's artifacts, named by its task, attempt and start time."""
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
        return self.path / (
            f"{instance_id}__{stamp}" if attempt == 0 else f"{instance_id}__a{attempt}__{stamp}"
        )

    @staticmethod
    def mini_trajectory(instance_id: str) -> str:
        """The name of an attempt's trajectory in mini-swe-agent 2.x's format (its inspector finds
        ``*.traj.json``)."""
        return f"{instance_id}.traj.json"

    @property
    def is_training(self) -> bool:
        """A training run: rollouts, no eval results."""
        return self.rollouts_path.is_file() and not self.results_path.is_file()

    def checkpoints(self) -> list[tuple[int, Path]]:
        """The trainer's checkpoint directories by step, oldest first, complete or not."""
        found = []
        for child in self.path.glob(self.CHECKPOINT_PREFIX + "*"):
            step = child.name.removeprefix(self.CHECKPOINT_PREFIX)
            if child.is_dir() and step.isdigit():
                found.append((int(step), child))
        return sorted(found)

    def read_summary(self) -> dict[str, Any]:
        """summary.json, or an empty dict while the run has none."""
        return read_json(self.summary_path) if self.summary_path.is_file() else {}

    def load_rollouts(self) -> list[EpisodeRecord]:
        """A training run's records, in the order written; a torn last line (a crash mid-write) is ignored."""
        lines = (
            self.rollouts_path.read_text(encoding="utf-8").splitlines()
            if self.rollouts_path.is_file()
            else []
        )
        out = []
        for line in lines:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if "turns" in row and "n_steps" not in row:  # written before runs kept episode records
                row["n_steps"] = row["turns"]
            out.append(EpisodeRecord.model_validate(row))
        return out

    def load_results(self) -> list[EpisodeRecord]:
        """Results so far; a torn last line (a crash mid-write) is ignored."""
        if not self.results_path.is_file():
            return []
        out = []
        for line in self.results_path.read_text(encoding="utf-8").splitlines():
            try:
                out.append(EpisodeRecord.model_validate_json(line))
            except ValueError:
                continue
        return out

    def latest(self) -> dict[tuple[str, int], EpisodeRecord]:
        """The last result per (instance, attempt): a retried infra error is replaced by its retry."""
        return {(r.instance_id, r.attempt): r for r in self.load_results()}

    def append(self, result: EpisodeRecord) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        line = (result.model_dump_json() + "\n").encode()
        fd = os.open(self.results_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)

    def write_summary(
        self,
        results: Sequence[EpisodeRecord],
        total: int,
        args: dict[str, Any],
        provenance: dict[str, Any],
        n_samples: int = 1,
        extra: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        attempts = max(1, total * n_samples)
        ks = (1, n_samples) if n_samples > 1 else ()
        episodes = summarize(results, pass_at=ks)
        summary: dict[str, Any] = {
            "total": total,
            "attempts": attempts,
            "missing": attempts - len(results),
            **episodes.model_dump(exclude={"pass_at", "agent", "episodes"}),
            **(extra or {}),
            "args": redact(args),
            "provenance": provenance,
        }
        summary.update({f"pass_at_{k}": value for k, value in episodes.pass_at.items()})
        if not episodes.completed:  # resolved / (attempts - infrastructure errors) is 0/0: no rate
            summary["resolve_rate"] = None
        atomic_write_json(self.summary_path, summary)
        return summary

    def write_preds(self, preds: dict[str, dict[str, Any]]) -> None:
        atomic_write_json(self.preds_path, preds)  # keyed by instance id, as swebench and mini-swe-agent


class DemoDir:
    """What ``swe-rl demo`` writes: its tasks' validation, the graded sample predictions (named as the
    official harness names them, by runs/grade_predictions.py), an eval run and a training run."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.validation_path = path / "validation.json"
        self.eval = RunDir(path / "eval")
        self.train = RunDir(path / "train")


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))
