"""The README's main job, end to end: `swe-rl demo` on the builtin suite, RL stage included."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.ns

pytest.importorskip("trl")


def test_demo_validates_grades_evaluates_and_trains(tmp_path):
    out = tmp_path / "demo"
    done = subprocess.run(
        [sys.executable, "-m", "swe_rl.cli.app", "demo", "-o", str(out), "--backend", "ns"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "valid tasks 12/12" in done.stdout and "UNEXPECTED" not in done.stdout
    validation = json.loads((out / "validation.json").read_text())
    assert validation["valid"] == validation["total"] == 12
    assert (out / "eval" / "report.html").is_file()
    summary = json.loads((out / "train" / "summary.json").read_text())
    assert summary["steps"] == 2 and all(c["infra_errors"] == 0 for c in summary["curve"])
    rollouts = (out / "train" / "rollouts.jsonl").read_text().splitlines()
    assert len(rollouts) == 4  # 2 steps x 1 task x 2 episodes, each graded
    assert "resolve rate per step" in (out / "train" / "report.html").read_text()
    # it says whether GRPO had anything to learn from (a random model: every group's rewards equal), and how big
    # its output is; no intermediate checkpoint or TRL model card beside what a user opens
    assert "changed no weight" in done.stdout or "updated the model" in done.stdout
    assert f"{out}/ holds " in done.stdout and " MiB" in done.stdout
    assert not list((out / "train").glob("checkpoint-*")) and not (out / "train" / "README.md").exists()
