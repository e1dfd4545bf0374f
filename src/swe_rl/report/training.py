"""The report of a training run (``swe-rl train rl``): learning curves and the episodes behind them.

Reads ``summary.json``, ``rollouts.jsonl`` and ``metrics.jsonl``; plots the resolve rate and the
format-error rate per step (fractions of episodes, infra errors left out), the mean reward, the loss,
and the time per step, all on one step axis; says in words which steps' updates were zero because every
reward of a group was equal; lists every episode. Static, self-contained HTML
(``templates/training.html.j2``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from swe_rl.episode.record import EpisodeRecord
from swe_rl.episode.summary import step_curve
from swe_rl.errors import ConfigError
from swe_rl.fileio import atomic_write_text
from swe_rl.report import charts
from swe_rl.report.page import render_page
from swe_rl.rundir import RunDir, read_json

EPISODE_COLUMNS = {
    "step": "step",
    "instance_id": "instance",
    "status": "status",
    "exit_status": "exit",
    "resolved": "resolved",
    "reward": "reward",
    "n_steps": "turns",
    "format_errors": "format errors",
}


def _jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line cut by a crash: the rest of the run still renders
    return rows


def render_training_report(run_dir: Path, out: Path | None = None) -> Path:
    """Write the report of the training run in ``run_dir`` (to ``report.html`` there unless ``out``)."""
    run = RunDir(run_dir)
    records = run.load_rollouts()
    if not records:
        raise ConfigError(f"{run_dir} has no {run.rollouts_path.name} entries: is it a swe-rl training run?")
    metrics = _jsonl(run.metrics_path)
    summary = run.read_summary()
    config = read_json(run.config_path) if run.config_path.is_file() else {}
    settings = summary.get("settings") or config.get("settings") or {}
    curve = [point for point in step_curve(records) if point["resolve_rate"] is not None]
    times = step_times(metrics)
    headline = _headline(records, [(p["step"], p["resolve_rate"]) for p in curve])
    if means := {k: sum(v for _, v in pts) / len(pts) for k, pts in times.items() if pts}:
        headline += "; mean time per step: " + ", ".join(f"{k} {v:.1f} s" for k, v in means.items())
    page = render_page(
        "training.html.j2",
        title=f"Training run {run_dir.name}",
        headline=headline + ".",
        updates=update_notes(records, metrics, float(settings.get("beta") or 0.0)),
        charts=training_charts(records, curve, metrics, times),
        settings=json.dumps(settings, indent=1),
        episode_heads=list(EPISODE_COLUMNS.values()),
        episode_rows=[[str(getattr(r, k)) for k in EPISODE_COLUMNS] for r in records],
    )
    target = out or run.report_path
    atomic_write_text(target, page)
    return target


def training_charts(
    records: list[EpisodeRecord],
    curve: list[dict[str, Any]],
    metrics: list[dict[str, Any]],
    times: dict[str, Sequence[tuple[float, float]]],
) -> list[charts.Chart]:
    """The learning curves on one step axis (the rollout steps): resolve and format-error rates, mean reward,
    the loss of the update each step's episodes made, and ``times`` (:func:`step_times`)."""
    steps = [r.step or 0 for r in records]
    x_range = (min(steps), max(steps))
    resolve = [(p["step"], p["resolve_rate"]) for p in curve]
    fmt = [(p["step"], p["format_error_rate"]) for p in curve]
    reward = [(p["step"], p["reward_mean"] or 0.0) for p in curve]
    loss = [(_rollout_step(m), m["trl/loss"]) for m in metrics if "trl/loss" in m]
    return [
        charts.lines(
            "rates",
            "resolve rate per step",
            {"resolve rate": resolve, "format errors": fmt},
            x_range=x_range,
            percent=True,
        ),
        charts.lines("reward", "mean reward per step", {"reward": reward}, x_range=x_range),
        charts.lines("loss", "loss of each step's update", {"loss": loss}, x_range=x_range),
        charts.lines("time", "time per step (s)", times, x_range=x_range),
    ]


def _rollout_step(metric: dict[str, Any]) -> int:
    """The rollout step an update learned from: TRL logs an update with the step it made, one after the
    rollout's."""
    return int(metric["step"]) - 1


def step_times(metrics: list[dict[str, Any]]) -> dict[str, Sequence[tuple[float, float]]]:
    """A step's time split, per step: the rollout (wall), its generation (the batched ``generate`` calls),
    and the forward and backward passes (TRL's step time, which holds the rollout, less it; logged with
    the step after the rollout's, see :func:`_rollout_step`)."""
    rollout = {m["step"]: m["rl/rollout_time_s"] for m in metrics if "rl/rollout_time_s" in m}
    split: dict[str, Sequence[tuple[float, float]]] = {"rollout": sorted(rollout.items())}
    if generate := [(m["step"], m["rl/generate_time_s"]) for m in metrics if "rl/generate_time_s" in m]:
        split["generation"] = generate
    update = [
        (_rollout_step(m), m["trl/step_time"] - rollout[_rollout_step(m)])
        for m in metrics
        if "trl/step_time" in m and _rollout_step(m) in rollout
    ]
    if update:
        split["forward + backward"] = update
    return split


def update_notes(records: list[EpisodeRecord], metrics: list[dict[str, Any]], beta: float) -> list[str]:
    """A sentence for each step with a group (one task's episodes in that step) whose rewards are all equal:
    GRPO's advantage is a reward less its group's mean, so such a group gives zero advantage; where every
    group of a step is so, the step's update is zero (with no KL penalty, ``beta`` 0)."""
    groups: dict[int, dict[str, list[float]]] = {}
    for r in records:
        if r.reward is not None:  # infra errors are dropped from the batch, not scored
            groups.setdefault(r.step or 0, {}).setdefault(r.instance_id, []).append(r.reward)
    grad_norm = {_rollout_step(m): m["trl/grad_norm"] for m in metrics if "trl/grad_norm" in m}
    notes = []
    for step, by_task in sorted(groups.items()):
        equal = {task: rewards for task, rewards in by_task.items() if len(set(rewards)) == 1}
        if not equal:
            continue
        if len(equal) < len(by_task):
            these = "that group gives" if len(equal) == 1 else "those groups give"
            notes.append(
                f"Step {step}: in {len(equal)} of its {len(by_task)} groups every reward was equal, so {these} "
                "zero advantage and nothing to learn; the update came from the other groups."
            )
            continue
        values = ", ".join(sorted({f"{rewards[0]:g}" for rewards in equal.values()}))
        which = "its one group" if len(by_task) == 1 else f"each of its {len(by_task)} groups"
        said = f"Step {step}: every reward of {which} was equal ({values}), so "
        said += "every advantage (a reward less its group's mean) was zero and "
        if beta:
            said += f"the reward gave no gradient: only the KL penalty (beta {beta:g}) moved the weights."
        else:
            said += "the update was zero by construction: this step changed no weight"
            said += f" (TRL's grad norm: {grad_norm[step]:g})." if step in grad_norm else "."
        notes.append(said)
    return notes


def _headline(records: list[EpisodeRecord], resolve: list[tuple[Any, Any]]) -> str:
    headline = f"{len({r.step for r in records})} steps, {len(records)} episodes"
    if resolve:  # one step is a few dozen episodes: the last quarter's mean says more than the last step
        tail = [rate for _, rate in resolve[-max(1, len(resolve) // 4) :]]
        best_step, best = max(resolve, key=lambda point: point[1])
        headline += (
            f"; resolve rate {resolve[0][1]:.0%} at the first step, {sum(tail) / len(tail):.0%} over the last"
            f" {len(tail)}, best {best:.0%} (step {best_step})"
        )
    return headline
