"""The report of a training run (``swe-rl train rl``): learning curves and the episodes behind them.

Reads ``summary.json``, ``rollouts.jsonl`` and ``metrics.jsonl``; plots the resolve rate and the
format-error rate per step (fractions of episodes, infra errors left out), the mean reward, the loss,
and the time per step; lists every episode. Static, self-contained HTML.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

from swe_rl.episode.record import EpisodeRecord
from swe_rl.episode.summary import step_curve
from swe_rl.errors import ConfigError
from swe_rl.fileio import atomic_write_text
from swe_rl.report import svg
from swe_rl.rundir import RunDir, read_json


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
    curve = [point for point in step_curve(records) if point["resolve_rate"] is not None]
    times = step_times(metrics)
    charts = _charts(curve, metrics, times)
    headline = _headline(records, [(p["step"], p["resolve_rate"]) for p in curve])
    if means := {k: sum(v for _, v in pts) / len(pts) for k, pts in times.items() if pts}:
        headline += "; mean time per step: " + ", ".join(f"{k} {v:.1f} s" for k, v in means.items())
    config = read_json(run.config_path) if run.config_path.is_file() else {}
    settings = json.dumps(summary.get("settings") or config.get("settings") or {}, indent=1)
    page = _page(run_dir.name, headline, charts, settings, _episode_rows(records))
    target = out or run.report_path
    atomic_write_text(target, page)
    return target


def _charts(
    curve: list[dict[str, Any]],
    metrics: list[dict[str, Any]],
    times: dict[str, Sequence[tuple[float, float]]],
) -> list[str]:
    """The learning curves: resolve and format-error rates, mean reward, loss, per step; and ``times``
    (:func:`step_times`)."""
    resolve = [(p["step"], p["resolve_rate"]) for p in curve]
    fmt = [(p["step"], p["format_error_rate"]) for p in curve]
    reward = [(p["step"], p["reward_mean"] or 0.0) for p in curve]
    loss = [(m["step"], m["trl/loss"]) for m in metrics if "trl/loss" in m]
    return [
        svg.lines("resolve rate per step", {"resolve rate": resolve, "format errors": fmt}, y_range=(0, 1)),
        svg.lines("mean reward per step", {"reward": reward}),
        svg.lines("loss", {"loss": loss}),
        svg.lines("time per step (s)", times),
    ]


def step_times(metrics: list[dict[str, Any]]) -> dict[str, Sequence[tuple[float, float]]]:
    """A step's time split, per step: the rollout (wall), its generation (the batched ``generate`` calls),
    and the forward and backward passes (TRL's step time, which holds the rollout, less it; TRL logs it
    with the step the update made, one after the rollout's)."""
    rollout = {m["step"]: m["rl/rollout_time_s"] for m in metrics if "rl/rollout_time_s" in m}
    split: dict[str, Sequence[tuple[float, float]]] = {"rollout": sorted(rollout.items())}
    if generate := [(m["step"], m["rl/generate_time_s"]) for m in metrics if "rl/generate_time_s" in m]:
        split["generation"] = generate
    update = [
        (m["step"] - 1, m["trl/step_time"] - rollout[m["step"] - 1])
        for m in metrics
        if "trl/step_time" in m and m["step"] - 1 in rollout
    ]
    if update:
        split["forward + backward"] = update
    return split


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


def _episode_rows(records: list[EpisodeRecord]) -> str:
    """The episodes table's header row and one row per episode."""
    rows = "".join(
        "<tr>"
        + "".join(
            f"<td>{escape(str(getattr(r, k)))}</td>"
            for k in (
                "step",
                "instance_id",
                "status",
                "exit_status",
                "resolved",
                "reward",
                "n_steps",
                "format_errors",
            )
        )
        + "</tr>"
        for r in records
    )
    head = "".join(
        f"<th>{k}</th>"
        for k in ("step", "instance", "status", "exit", "resolved", "reward", "turns", "format errors")
    )
    return f"<tr>{head}</tr>{rows}"


def _page(name: str, headline: str, charts: list[str], settings: str, episode_rows: str) -> str:
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>swe-rl training: {escape(name)}</title>
<style>body{{font:14px system-ui,sans-serif;margin:24px;color:#222}} svg{{margin:8px 16px 8px 0;border:1px solid #eee}}
svg text{{font-size:11px}} svg text.t{{font-weight:600}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ddd;padding:2px 6px;text-align:left}} pre{{background:#f6f6f6;padding:8px}}</style></head>
<body><h1>Training run {escape(name)}</h1>
<p id="headline">{escape(headline)}.</p>
<div>{"".join(charts)}</div>
<h2>Settings</h2><pre>{escape(settings)}</pre>
<h2>Episodes</h2><table>{episode_rows}</table></body></html>"""
