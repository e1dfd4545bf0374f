"""A run directory: append-only results, atomic summary/preds, per-instance artifacts, resume.

<out>/results.jsonl                 one InstanceResult per finished attempt (appended whole, fsynced)
<out>/summary.json                  totals, resolve rate, pass@k, args, provenance
<out>/preds.json                    SWE-bench predictions (instance_id, model_name_or_path, model_patch)
<out>/metrics.jsonl                 agent/* metrics
<out>/<instance_id>__<ts>/          traj.json, patch.diff, meta.json
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from math import comb
from pathlib import Path
from typing import Any

from swe_rl.episode.record import InstanceResult
from swe_rl.tasks.io import atomic_write_json

_SECRET = re.compile(r"(key|token|secret|password|authorization)", re.IGNORECASE)


def redact(obj: Any) -> Any:
    """A copy with the values of secret-looking keys replaced."""
    if isinstance(obj, dict):
        return {k: ("<redacted>" if _SECRET.search(str(k)) and v else redact(v)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [redact(v) for v in obj]
    return obj


class RunDir:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.results_path = path / "results.jsonl"

    def load_results(self) -> list[InstanceResult]:
        """Results so far; a torn last line (a crash mid-write) is ignored."""
        if not self.results_path.is_file():
            return []
        out = []
        for line in self.results_path.read_text(encoding="utf-8").splitlines():
            try:
                out.append(InstanceResult.model_validate_json(line))
            except ValueError:
                continue
        return out

    def latest(self) -> dict[tuple[str, int], InstanceResult]:
        """The last result per (instance, attempt): a retried infra error is replaced by its retry."""
        return {(r.instance_id, r.attempt): r for r in self.load_results()}

    def append(self, result: InstanceResult) -> None:
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
        results: Sequence[InstanceResult],
        total: int,
        args: dict[str, Any],
        provenance: dict[str, Any],
        n_samples: int = 1,
        extra: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        finished = [r for r in results if not r.infra_error]
        errors = len(results) - len(finished)
        resolved = sum(r.resolved for r in finished)
        attempts = max(1, total * n_samples)
        summary: dict[str, Any] = {
            "total": total,
            "attempts": attempts,
            "completed": len(finished),
            "resolved": resolved,
            "resolve_rate": resolved / (attempts - errors) if attempts - errors > 0 else 0.0,
            "errors": errors,
            "missing": attempts - len(results),
            "no_patch": sum(1 for r in finished if r.patch_source == "none"),
            "exit_statuses": _count(r.exit_status for r in results),
            "avg_steps": sum(r.n_steps for r in finished) / len(finished) if finished else 0.0,
            "format_error_rate": (
                sum(1 for r in finished if r.format_errors) / len(finished) if finished else 0.0
            ),
            "avg_elapsed_s": sum(r.elapsed for r in finished) / len(finished) if finished else 0.0,
            "cost_usd": sum(r.cost_usd for r in results),
            "avg_cost_usd": sum(r.cost_usd for r in finished) / len(finished) if finished else 0.0,
            **(extra or {}),
            "args": redact(args),
            "provenance": provenance,
        }
        if n_samples > 1:
            summary["pass_at_1"] = pass_at_k(finished, 1)
            summary[f"pass_at_{n_samples}"] = pass_at_k(finished, n_samples)
        atomic_write_json(self.path / "summary.json", summary)
        return summary

    def write_preds(self, preds: dict[str, dict[str, Any]]) -> None:
        atomic_write_json(
            self.path / "preds.json", preds
        )  # keyed by instance id, as swebench and mini-swe-agent


def pass_at_k(results: Sequence[InstanceResult], k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021) averaged over instances."""
    by_instance: dict[str, list[bool]] = {}
    for r in results:
        by_instance.setdefault(r.instance_id, []).append(r.resolved)
    scores = []
    for outcomes in by_instance.values():
        n, c = len(outcomes), sum(outcomes)
        scores.append(1.0 if n - c < k else 1.0 - comb(n - c, k) / comb(n, k) if n >= k else float(c > 0))
    return sum(scores) / len(scores) if scores else 0.0


def _count(values: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))
