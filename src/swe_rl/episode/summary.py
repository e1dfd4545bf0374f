"""One summary of any set of episode records: an eval run, a training step, a whole training run.

Every rate is over the graded episodes: an infrastructure failure is counted (``errors``) but never scored
as a wrong answer, and an episode that did not run is not in the records at all. The ``agent/*`` metrics are
the names the miles/NeMo-Gym SWE agent logs (docs/SERVICE.md, ``info.agent_metrics``).
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from math import comb
from typing import Any

from pydantic import BaseModel, Field

from swe_rl.episode.record import EpisodeRecord


class RunSummary(BaseModel):
    """What a set of episodes came to."""

    episodes: int = Field(description="Records summarized, infrastructure failures included.")
    completed: int = Field(description="Graded episodes: the denominator of every rate.")
    resolved: int
    resolve_rate: float = Field(description="resolved / completed (0.0 when nothing was graded).")
    errors: int = Field(description="Infrastructure failures: not graded, not scored.")
    no_patch: int = Field(description="Graded episodes that left no patch.")
    unverifiable: int = Field(
        default=0,
        description="Graded episodes whose strict grading ran tests no seal covers and whose log resolved "
        "(Verdict status 'unverifiable'): not resolved.",
    )
    exit_statuses: dict[str, int]
    avg_steps: float
    format_error_rate: float = Field(description="Graded episodes with at least one malformed reply.")
    avg_elapsed_s: float
    cost_usd: float = Field(description="Every episode's model cost, failures included.")
    avg_cost_usd: float
    reward_mean: float | None = Field(default=None, description="Over graded episodes that carry a reward.")
    pass_at: dict[int, float] = Field(
        default_factory=dict, description="Unbiased pass@k per k asked for, averaged over instances."
    )
    agent: dict[str, float] = Field(default_factory=dict, description="agent/* timings and counts.")


def summarize(records: Sequence[EpisodeRecord], *, pass_at: Sequence[int] = ()) -> RunSummary:
    """The summary of ``records`` (pass@k for each k in ``pass_at``)."""
    graded = [r for r in records if not r.infra_error]
    rewards = [r.reward for r in graded if r.reward is not None]
    return RunSummary(
        episodes=len(records),
        completed=len(graded),
        resolved=sum(r.resolved for r in graded),
        resolve_rate=_mean([float(r.resolved) for r in graded]),
        errors=len(records) - len(graded),
        no_patch=sum(1 for r in graded if r.patch_source == "none"),
        unverifiable=sum(1 for r in graded if r.grade_status == "unverifiable"),
        exit_statuses=dict(Counter(r.exit_status for r in records)),
        avg_steps=_mean([r.n_steps for r in graded]),
        format_error_rate=_mean([float(r.format_errors > 0) for r in graded]),
        avg_elapsed_s=_mean([r.elapsed for r in graded]),
        cost_usd=sum(r.cost_usd for r in records),
        avg_cost_usd=_mean([r.cost_usd for r in graded]),
        reward_mean=_mean(rewards) if rewards else None,
        pass_at={k: pass_at_k(graded, k) for k in pass_at},
        agent=agent_metrics(graded),
    )


def step_curve(records: Sequence[EpisodeRecord]) -> list[dict[str, Any]]:
    """A training run's curve: per step, its episodes and infrastructure failures, and its resolve rate,
    format-error rate and mean reward over its graded episodes (None where it has none)."""
    per_step: dict[int, list[EpisodeRecord]] = {}
    for record in records:
        per_step.setdefault(record.step or 0, []).append(record)
    curve = []
    for step in sorted(per_step):
        summary = summarize(per_step[step])
        graded = summary.completed > 0
        curve.append(
            {
                "step": step,
                "episodes": summary.episodes,
                "infra_errors": summary.errors,
                "resolve_rate": summary.resolve_rate if graded else None,
                "format_error_rate": summary.format_error_rate if graded else None,
                "reward_mean": summary.reward_mean,
            }
        )
    return curve


def pass_at_k(records: Sequence[EpisodeRecord], k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021) averaged over instances."""
    by_instance: dict[str, list[bool]] = {}
    for r in records:
        by_instance.setdefault(r.instance_id, []).append(r.resolved)
    scores = []
    for outcomes in by_instance.values():
        n, c = len(outcomes), sum(outcomes)
        scores.append(1.0 if n - c < k else 1.0 - comb(n - c, k) / comb(n, k) if n >= k else float(c > 0))
    return sum(scores) / len(scores) if scores else 0.0


def agent_metrics(records: Sequence[EpisodeRecord]) -> dict[str, float]:
    """``agent/*`` metrics over graded (non-infra-error) records."""
    ok = [r for r in records if not r.infra_error]
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


def _mean(values: Sequence[float]) -> float:
    return float(statistics.fmean(values)) if values else 0.0
