"""Render a run directory (eval or training rollouts) into one static HTML file.

The page embeds the run's data as JSON and renders it with a little JavaScript that only ever sets
``textContent`` (trajectories are untrusted text). ``report.html#<instance_id>`` opens that trajectory.
"""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from typing import Any

from swe_rl.episode.record import EpisodeRecord
from swe_rl.episode.summary import agent_metrics
from swe_rl.errors import ConfigError
from swe_rl.fileio import atomic_write_text
from swe_rl.report import svg
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
    page = _page(run_dir, summary, results, trajectories)
    target = out or run.report_path
    atomic_write_text(target, page)
    return target


def _charts(results: list[EpisodeRecord]) -> str:
    finished = [r for r in results if not r.infra_error]
    resolved = sum(r.resolved for r in finished)
    overhead = sum(max(0.0, r.elapsed - r.model_time_s - r.env_time_s - r.eval_time_s) for r in finished)
    return "".join(
        [
            svg.bars(
                "Outcomes",
                ["resolved", "not resolved", "errors"],
                [resolved, len(finished) - resolved, len(results) - len(finished)],
            ),
            svg.histogram("Steps per attempt", [r.n_steps for r in finished], bins=8),
            svg.histogram("Seconds per attempt", [round(r.elapsed, 2) for r in finished], bins=8, unit="s"),
            svg.stacked(
                "Where the time went",
                {
                    "model": sum(r.model_time_s for r in finished),
                    "env": sum(r.env_time_s for r in finished),
                    "eval": sum(r.eval_time_s for r in finished),
                    "overhead": overhead,
                },
            ),
        ]
    )


def _page(
    run_dir: Path, summary: dict[str, Any], results: list[EpisodeRecord], trajectories: dict[str, Any]
) -> str:
    data = {
        "summary": summary,
        "results": [r.model_dump() for r in results],
        "trajectories": trajectories,
        "metrics": agent_metrics(results),
    }
    blob = json.dumps(data).replace("</", "<\\/")
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
    return _TEMPLATE.format(
        title=escape(f"swe-rl report: {run_dir.name}"),
        headline=escape(headline),
        charts=_charts(results),
        data=blob,
    )


_TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }}
h1 {{ font-size: 1.4em; }} svg {{ margin: 0 1em 1em 0; border: 1px solid #ddd; font-size: 11px; }} .t {{ font-weight: bold; }}
table {{ border-collapse: collapse; }} td, th {{ border-bottom: 1px solid #eee; padding: 3px 8px; text-align: left; }}
tr.row {{ cursor: pointer; }} tr.row:hover {{ background: #f3f7ff; }}
.ok {{ color: #2f7d32; font-weight: bold; }} .no {{ color: #c62828; }} .err {{ color: #ef6c00; }}
.msg {{ border-left: 4px solid #bbb; margin: .6em 0; padding: .3em .6em; white-space: pre-wrap; font-family: ui-monospace, monospace; font-size: 12px; }}
.system {{ border-color: #9e9e9e; background: #fafafa; }} .user {{ border-color: #1565c0; background: #f5f9ff; }}
.assistant {{ border-color: #2f7d32; background: #f6fbf6; }} pre.patch {{ background: #f7f7f7; padding: .6em; overflow: auto; }}
#viewer {{ margin-top: 1.5em; }} .meta {{ color: #555; }}
</style></head><body>
<h1>{title}</h1>
<p id="headline">{headline}</p>
<div id="charts">{charts}</div>
<h2>Instances</h2>
<table id="results"><thead><tr><th>instance</th><th>attempt</th><th>resolved</th><th>exit status</th><th>patch</th>
<th>steps</th><th>seconds</th><th>cost $</th><th>error</th></tr></thead><tbody></tbody></table>
<h2>Metrics</h2><table id="metrics"><tbody></tbody></table>
<div id="viewer"></div>
<script type="application/json" id="data">{data}</script>
<script>
const DATA = JSON.parse(document.getElementById("data").textContent);
function el(tag, cls, text) {{ const e = document.createElement(tag); if (cls) e.className = cls; if (text !== undefined) e.textContent = text; return e; }}
const body = document.querySelector("#results tbody");
for (const r of DATA.results) {{
  const tr = el("tr", "row"); tr.dataset.key = r.instance_id + "#" + r.attempt;
  const cells = [r.instance_id, r.attempt, r.resolved ? "yes" : "no", r.exit_status, r.patch_source, r.n_steps, r.elapsed.toFixed(1), (r.cost_usd || 0).toFixed(4), r.error || ""];
  cells.forEach((c, i) => {{ const td = el("td", i === 2 ? (r.resolved ? "ok" : "no") : (i === 8 && c ? "err" : ""), String(c)); tr.appendChild(td); }});
  tr.addEventListener("click", () => {{ location.hash = encodeURIComponent(tr.dataset.key); }});
  body.appendChild(tr);
}}
const mt = document.querySelector("#metrics tbody");
for (const [k, v] of Object.entries(DATA.metrics)) {{ const tr = el("tr"); tr.appendChild(el("td", "", k)); tr.appendChild(el("td", "", Number(v).toFixed(3))); mt.appendChild(tr); }}
function show(key) {{
  const viewer = document.getElementById("viewer"); viewer.replaceChildren();
  const t = DATA.trajectories[key] || DATA.trajectories[key + "#0"]; if (!t) return;
  const r = DATA.results.find(x => x.instance_id + "#" + x.attempt === key || x.instance_id === key) || {{}};
  viewer.appendChild(el("h2", "", "Trajectory: " + t.instance_id));
  viewer.appendChild(el("p", "meta", `model ${{t.model}} · exit ${{t.exit_status}} ${{t.exit_message || ""}} · ${{t.steps.length}} steps · verdict: ${{r.resolved ? "resolved" : "not resolved"}} (${{r.grade_status || r.error || "-"}})`));
  t.messages.forEach((m, i) => {{ const d = el("div", "msg " + m.role); d.appendChild(el("b", "", m.role + (i > 1 ? " · turn " + Math.floor((i - 1) / 2) : "") + "\\n")); d.appendChild(document.createTextNode(m.content)); viewer.appendChild(d); }});
  viewer.appendChild(el("h3", "", "Patch"));
  viewer.appendChild(el("pre", "patch", t.patch || "(empty)"));
}}
window.addEventListener("hashchange", () => show(decodeURIComponent(location.hash.slice(1))));
if (location.hash) show(decodeURIComponent(location.hash.slice(1)));
</script></body></html>
"""
