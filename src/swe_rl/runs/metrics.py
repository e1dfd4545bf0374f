"""Run and batch metrics with the names trainers log (DESIGN.md section 8)."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from swe_rl.episode.record import InstanceResult


def _mean(values: Sequence[float]) -> float:
    return float(statistics.fmean(values)) if values else 0.0


def agent_metrics(results: Sequence[InstanceResult]) -> dict[str, float]:
    """``agent/*`` metrics over finished (non-infra-error) results."""
    ok = [r for r in results if not r.infra_error]
    if not ok:
        return {}
    total = [r.elapsed for r in ok]
    model = [r.model_time_s for r in ok]
    env = [r.env_time_s for r in ok]
    evals = [r.eval_time_s for r in ok]
    overhead = [max(0.0, r.elapsed - r.model_time_s - r.env_time_s - r.eval_time_s) for r in ok]
    turns = sum(r.n_steps for r in ok)
    calls = sum(r.tool_calls for r in ok)
    return {
        "agent/turns_mean": _mean([r.n_steps for r in ok]),
        "agent/turns_sum": float(turns),
        "agent/tool_calls_mean": _mean([r.tool_calls for r in ok]),
        "agent/tool_calls_sum": float(calls),
        "agent/format_error_rate": _mean([float(r.format_errors > 0) for r in ok]),
        "agent/total_time_mean": _mean(total),
        "agent/total_time_max": max(total),
        "agent/total_time_min": min(total),
        "agent/model_query_time_sum_mean": _mean(model),
        "agent/env_execution_time_sum_mean": _mean(env),
        "agent/eval_time_mean": _mean(evals),
        "agent/overhead_time_mean": _mean(overhead),
        "agent/time_per_turn": sum(total) / turns if turns else 0.0,
        "agent/model_query_time_avg": sum(model) / turns if turns else 0.0,
        "agent/env_execution_time_avg": sum(env) / calls if calls else 0.0,
        "agent/model_time_ratio": sum(model) / sum(total) if sum(total) else 0.0,
        "agent/env_time_ratio": sum(env) / sum(total) if sum(total) else 0.0,
    }


class MetricsSink:
    """Always a JSONL file; also wandb or tensorboard when installed and asked for."""

    def __init__(self, path: Path, backends: Sequence[str] = ()) -> None:
        self.path = path
        self._writers: list[Any] = []
        for backend in backends:
            if backend == "tensorboard":
                try:
                    from torch.utils.tensorboard import SummaryWriter

                    self._writers.append(SummaryWriter(str(path.parent / "tensorboard")))
                except ImportError:
                    pass
            elif backend == "wandb":
                try:
                    import wandb

                    self._writers.append(wandb)
                except ImportError:
                    pass

    def log(self, metrics: dict[str, float], step: int) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps({"step": step, "time": time.time(), **metrics}) + "\n")
        for writer in self._writers:
            if hasattr(writer, "add_scalar"):
                for key, value in metrics.items():
                    writer.add_scalar(key, value, step)
            else:
                writer.log(metrics, step=step)
