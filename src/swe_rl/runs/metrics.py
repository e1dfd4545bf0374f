"""Run and batch metrics with the names trainers log (``episode/summary.py``; docs/SERVICE.md)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any


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
