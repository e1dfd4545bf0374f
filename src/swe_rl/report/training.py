"""The report of a training run (``swe-rl train rl``): learning curves and the episodes behind them.

Reads ``summary.json``, ``rollouts.jsonl`` and ``metrics.jsonl``; plots the resolve rate and the
format-error rate per step (fractions of episodes, infra errors left out), the mean reward, the loss,
and the time per step; lists every episode. Static, self-contained HTML.
"""

from __future__ import annotations

import json
from collections import defaultdict
from html import escape
from pathlib import Path
from typing import Any

from swe_rl.errors import ConfigError
from swe_rl.report import svg
from swe_rl.tasks.io import atomic_write_text


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


def is_training_run(run_dir: Path) -> bool:
    return (run_dir / "rollouts.jsonl").is_file() and not (run_dir / "results.jsonl").is_file()


def render_training_report(run_dir: Path, out: Path | None = None) -> Path:
    episodes = _jsonl(run_dir / "rollouts.jsonl")
    if not episodes:
        raise ConfigError(f"{run_dir} has no rollouts.jsonl entries: is it a swe-rl training run?")
    metrics = _jsonl(run_dir / "metrics.jsonl")
    summary = (
        json.loads((run_dir / "summary.json").read_text()) if (run_dir / "summary.json").is_file() else {}
    )
    per_step: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for e in episodes:
        per_step[int(e["step"])].append(e)
    resolve, fmt, reward = [], [], []
    for step in sorted(per_step):
        healthy = [e for e in per_step[step] if e["status"] != "infra_error"]
        if healthy:
            resolve.append((step, sum(bool(e["resolved"]) for e in healthy) / len(healthy)))
            fmt.append((step, sum(1 for e in healthy if e.get("format_errors")) / len(healthy)))
            reward.append((step, sum(e["reward"] or 0.0 for e in healthy) / len(healthy)))
    loss = [(m["step"], m["trl/loss"]) for m in metrics if "trl/loss" in m]
    times = [(m["step"], m["rl/rollout_time_s"]) for m in metrics if "rl/rollout_time_s" in m]
    charts = [
        svg.lines("resolve rate per step", {"resolve rate": resolve, "format errors": fmt}, y_range=(0, 1)),
        svg.lines("mean reward per step", {"reward": reward}),
        svg.lines("loss", {"loss": loss}),
        svg.lines("rollout time per step (s)", {"seconds": times}),
    ]
    rows = "".join(
        "<tr>"
        + "".join(
            f"<td>{escape(str(e.get(k, '')))}</td>"
            for k in (
                "step",
                "instance_id",
                "status",
                "exit_status",
                "resolved",
                "reward",
                "turns",
                "format_errors",
            )
        )
        + "</tr>"
        for e in episodes
    )
    head = "".join(
        f"<th>{k}</th>"
        for k in ("step", "instance", "status", "exit", "resolved", "reward", "turns", "format errors")
    )
    headline = f"{len(per_step)} steps, {len(episodes)} episodes"
    if resolve:  # one step is a few dozen episodes: the last quarter's mean says more than the last step
        tail = [rate for _, rate in resolve[-max(1, len(resolve) // 4) :]]
        best_step, best = max(resolve, key=lambda point: point[1])
        headline += (
            f"; resolve rate {resolve[0][1]:.0%} at the first step, {sum(tail) / len(tail):.0%} over the last"
            f" {len(tail)}, best {best:.0%} (step {best_step})"
        )
    config = json.loads((run_dir / "config.json").read_text()) if (run_dir / "config.json").is_file() else {}
    settings = json.dumps(summary.get("settings") or config.get("settings") or {}, indent=1)
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>swe-rl training: {escape(run_dir.name)}</title>
<style>body{{font:14px system-ui,sans-serif;margin:24px;color:#222}} svg{{margin:8px 16px 8px 0;border:1px solid #eee}}
svg text{{font-size:11px}} svg text.t{{font-weight:600}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ddd;padding:2px 6px;text-align:left}} pre{{background:#f6f6f6;padding:8px}}</style></head>
<body><h1>Training run {escape(run_dir.name)}</h1>
<p id="headline">{escape(headline)}.</p>
<div>{"".join(charts)}</div>
<h2>Settings</h2><pre>{escape(settings)}</pre>
<h2>Episodes</h2><table><tr>{head}</tr>{rows}</table></body></html>"""
    target = out or run_dir / "report.html"
    atomic_write_text(target, page)
    return target
