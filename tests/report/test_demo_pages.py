"""The pictures of the demo's own reports as Chromium lays them out: `swe-rl demo` run once, its eval and
training pages opened, each chart's texts, ticks and markers measured (see browser.PROBE)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from tests.report.browser import laid_out_charts

from swe_rl.report import render_report

pytestmark = pytest.mark.ns

pytest.importorskip("trl")


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("pages") / "demo"
    done = subprocess.run(
        [sys.executable, "-m", "swe_rl.cli.app", "demo", "-o", str(out), "--backend", "ns"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def laid_out(demo, tmp_path_factory) -> dict[str, list[dict[str, Any]]]:
    scratch = tmp_path_factory.mktemp("probe")
    return {kind: laid_out_charts(demo / kind / "report.html", scratch) for kind in ("eval", "train")}


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _title(chart: dict[str, Any]) -> str:
    titled = [t["label"] for t in chart["texts"] if str(t.get("id", "")).endswith("-title")]
    return (titled or [chart["texts"][0]["label"]])[0]


def _number(label: str) -> float | None:
    try:
        return float(label.replace("\u2212", "-").rstrip("s%"))
    except ValueError:
        return None


def _overlap(a: dict[str, float], b: dict[str, float]) -> float:
    width = min(a["right"], b["right"]) - max(a["left"], b["left"])
    height = min(a["bottom"], b["bottom"]) - max(a["top"], b["top"])
    return max(0.0, width) * max(0.0, height)


def overlapping_labels(chart: dict[str, Any]) -> list[tuple[str, str]]:
    """Pairs of texts of one chart drawn on each other (a count label on the title, say)."""
    texts = chart["texts"]
    return [
        (a["label"], b["label"])
        for i, a in enumerate(texts)
        for b in texts[i + 1 :]
        if _overlap(a["box"], b["box"]) > 1.0
    ]


def cut_labels(chart: dict[str, Any]) -> list[str]:
    """Texts that reach past their SVG's viewport, which clips them ("forward + backwar")."""
    svg = chart["svg"]
    return [
        t["label"]
        for t in chart["texts"]
        if t["box"]["left"] < svg["left"] - 0.5
        or t["box"]["right"] > svg["right"] + 0.5
        or t["box"]["top"] < svg["top"] - 0.5
        or t["box"]["bottom"] > svg["bottom"] + 0.5
    ]


def test_the_steps_histogram_has_one_bin_per_integer_step(demo, laid_out):
    steps = Counter(r["n_steps"] for r in _jsonl(demo / "eval" / "results.jsonl"))
    (chart,) = [c for c in laid_out["eval"] if _title(c) == "Steps per attempt"]
    numbers = [t["label"] for t in chart["texts"] if _number(t["label"]) is not None]
    assert numbers and all(_number(n).is_integer() for n in numbers), numbers  # type: ignore[union-attr]
    span = range(min(steps), max(steps) + 1)
    assert chart["data"]["bins"] == [[k, steps[k]] for k in span]
    assert [t["label"] for t in chart["ticks"]] == [str(k) for k in span]
    counts = [t["label"] for t in chart["texts"] if "-count-" in str(t.get("id"))]
    assert counts == [str(steps[k]) for k in span if steps[k]]  # one count over each bar that has one


@pytest.mark.parametrize("kind", ["eval", "train"])
def test_no_label_sits_on_another_or_is_cut_by_its_chart(laid_out, kind):
    assert len(laid_out[kind]) == 4
    for chart in laid_out[kind]:
        assert overlapping_labels(chart) == [], _title(chart)
        assert cut_labels(chart) == [], _title(chart)


def test_the_time_legend_names_every_part_in_full(laid_out):
    (chart,) = [c for c in laid_out["train"] if _title(c) == "time per step (s)"]
    legend = [t["label"] for t in chart["texts"] if t.get("within") == "time-legend"]
    assert legend == ["rollout", "generation", "forward + backward"]
    assert set(chart["data"]["series"]) == {"rollout", "generation", "forward + backward"}


def test_every_training_chart_starts_at_the_first_rollout_step(demo, laid_out):
    first = min(r["step"] for r in _jsonl(demo / "train" / "rollouts.jsonl"))
    titles = [_title(c) for c in laid_out["train"]]
    assert "loss of each step's update" in titles, titles
    for chart in laid_out["train"]:
        ticks = chart["ticks"]
        assert ticks and ticks[0]["label"] == str(first), (_title(chart), ticks)
        assert chart["data"]["x_range"][0] == first
        assert chart["lines"], _title(chart)
        for name, points in chart["data"]["series"].items():
            assert points[0][0] == first, (_title(chart), name, points)
        for name, xs in chart["lines"].items():  # the first marker sits on the first tick
            assert abs(xs[0] - ticks[0]["x"]) < 1.0, (_title(chart), name, xs, ticks)


def _updates(page: Path) -> str:
    html = page.read_text()
    return html.split('<div id="updates">')[1].split("</div>")[0] if 'id="updates"' in html else ""


ZERO = re.compile(
    r"Step (\d+): every reward of (?:its one group|each of its \d+ groups) was equal \(-1\), so every "
    r"advantage \(a reward less its group&#39;s mean\) was zero and the update was zero by construction"
)


def test_equal_rewards_are_said_to_give_a_zero_update(demo, tmp_path):
    rollouts = _jsonl(demo / "train" / "rollouts.jsonl")
    groups: dict[tuple[int, str], set[float]] = {}
    for r in rollouts:
        groups.setdefault((r["step"], r["instance_id"]), set()).add(r["reward"])
    assert all(len(rewards) == 1 for rewards in groups.values())  # a random model: every reward -1
    steps = sorted({r["step"] for r in rollouts})
    assert [int(s) for s in ZERO.findall(_updates(demo / "train" / "report.html"))] == steps

    # the same run with one episode of the last step resolved: that step's group differs, and so its update
    run = tmp_path / "train"
    shutil.copytree(demo / "train", run, ignore=shutil.ignore_patterns("final", "report.html"))
    changed = next(r for r in rollouts if r["step"] == steps[-1])
    changed.update(resolved=True, reward=1.0)
    (run / "rollouts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rollouts))
    assert [int(s) for s in ZERO.findall(_updates(render_report(run)))] == steps[:-1]
