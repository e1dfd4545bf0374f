"""Render a run directory (eval or training rollouts) into one static HTML file.

The page (``templates/eval.html.j2``) embeds the run's data as JSON and renders its tables with a little
JavaScript that only ever sets ``textContent`` (trajectories are untrusted text); its charts are inline SVG
(:mod:`swe_rl.report.charts`). ``report.html#<instance_id>`` opens that trajectory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from swe_rl.episode.record import EpisodeRecord
from swe_rl.episode.summary import agent_metrics
from swe_rl.errors import ConfigError
from swe_rl.fileio import atomic_write_text
from swe_rl.report import charts
from swe_rl.report.page import render_page
from swe_rl.rundir import RunDir, read_json

MAX_OBSERVATION = 20_000


def _trajectory(folder: Path) -> dict[str, Any] | None:
    path = folder / RunDir.TRAJECTORY
    if not path.is_file():
        return None
    traj = read_json(path)
    for message in traj.get("messages", []):
        if len(message.get("content", "")) > MAX_OBSERVATION:
            message["content"] = message["content"][:MAX_OBSERVATION] + "\n[... cut for the report ...]"
    for step in traj.get("steps", []):
        step.get("completion", {}).pop("prompt_ids", None)  # ids are for trainers, not for reading
        step.get("completion", {}).pop("completion_ids", None)
        step.get("completion", {}).pop("logprobs", None)
    patch = folder / RunDir.PATCH
    traj["patch"] = patch.read_text(encoding="utf-8", errors="replace") if patch.is_file() else ""
    return traj


def render_report(run_dir: Path, out: Path | None = None) -> Path:
    """Write ``<run_dir>/report.html`` (or ``out``) and return its path; training runs get their curves."""
    from swe_rl.report.training import render_training_report

    run = RunDir(run_dir)
    if run.is_training:
        return render_training_report(run_dir, out)
    results = list(run.latest().values())
    if not results:
        raise ConfigError(f"{run_dir} has no results.jsonl entries: is it a swe-rl run directory?")
    summary = run.read_summary()
    trajectories = {}
    for r in results:
        if r.artifacts and (traj := _trajectory(Path(r.artifacts))) is not None:
            trajectories[f"{r.instance_id}#{r.attempt}"] = traj
    data = {
        "summary": summary,
        "results": [r.model_dump() for r in results],
        "trajectories": trajectories,
        "metrics": agent_metrics(results),
    }
    page = render_page(
        "eval.html.j2",
        title=f"swe-rl report: {run_dir.name}",
        headline=_headline(summary, results),
        charts=eval_charts(results),
        data=data,
    )
    target = out or run.report_path
    atomic_write_text(target, page)
    return target


def eval_charts(results: list[EpisodeRecord]) -> list[charts.Chart]:
    """Outcomes, steps and seconds per attempt, and where the time went (infra errors left out of all
    but the outcomes)."""
    finished = [r for r in results if not r.infra_error]
    resolved = sum(r.resolved for r in finished)
    overhead = sum(max(0.0, r.elapsed - r.model_time_s - r.env_time_s - r.eval_time_s) for r in finished)
    outcomes = {
        "resolved": resolved,
        "not resolved": len(finished) - resolved,
        "errors": len(results) - len(finished),
    }
    split = {
        "model": sum(r.model_time_s for r in finished),
        "env": sum(r.env_time_s for r in finished),
        "eval": sum(r.eval_time_s for r in finished),
        "overhead": overhead,
    }
    return [
        charts.bars("outcomes", "Outcomes", outcomes),
        charts.integer_histogram("steps", "Steps per attempt", [r.n_steps for r in finished], "steps"),
        charts.histogram("seconds", "Seconds per attempt", [r.elapsed for r in finished], "seconds"),
        charts.shares("time", "Where the time went", split),
    ]


def _headline(summary: dict[str, Any], results: list[EpisodeRecord]) -> str:
    rate = summary.get("resolve_rate")
    headline = f"{summary.get('resolved', 0)}/{summary.get('attempts', len(results))} resolved" + (
        f" ({rate:.1%})" if isinstance(rate, float) else ""
    )
    if isinstance(summary.get("format_error_rate"), float):
        headline += f" · format errors in {summary['format_error_rate']:.0%} of attempts"
    cost = sum(r.cost_usd for r in results)
    if cost or summary.get("run_cost_limit"):
        headline += f" · cost ${cost:.4f}"
        if summary.get("run_cost_limit"):
            headline += f" of ${summary['run_cost_limit']:g}"
    if summary.get("stopped"):
        headline += f" · stopped: {summary['stopped']}"
    return headline
