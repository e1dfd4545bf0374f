"""mini-swe-agent 2.4.6's own inspector (``mini-extra inspector``) opens a swe-rl run directory: it finds the
episodes by ``*.traj.json`` and shows their steps, run headless through Textual's test pilot. And its
preds.json convention, a dict keyed by instance id, is what swe-rl writes (#23 item 5)."""

from __future__ import annotations

import json
import os

import pytest
from tests.conftest import available_factory

from swe_rl.agent.config import load_agent_config
from swe_rl.llm.base import SamplingParams
from swe_rl.llm.scripted import scripted_for
from swe_rl.runs.evaluation import EvalSettings, run_eval

# ./dev test installs it: in CI its absence is a failure, not a skip
if os.environ.get("CI"):
    from minisweagent.run.utilities import inspector
else:
    inspector = pytest.importorskip("minisweagent.run.utilities.inspector")


async def test_mini_swe_agents_inspector_opens_a_swe_rl_run(tmp_path, task_by_id, envs):
    tasks = [task_by_id["swe-rl-builtin__textkit-3"], task_by_id["swe-rl-builtin__textkit-4"]]
    settings = EvalSettings(output_dir=tmp_path / "run", max_concurrent=2, args={"model": "oracle"})
    await run_eval(
        tasks,
        lambda t: scripted_for("oracle", t),
        envs,
        available_factory("ns"),
        load_agent_config(),
        SamplingParams(max_tokens=256),
        settings,
        quiet=True,
    )
    run = tmp_path / "run"
    found = sorted(run.rglob("*.traj.json"))  # the inspector's own discovery rule
    assert [p.name for p in found] == sorted(f"{t.instance_id}.traj.json" for t in tasks)
    app = inspector.TrajectoryInspector(found)
    async with app.run_test() as pilot:
        for i, task in enumerate(sorted(tasks, key=lambda t: t.instance_id)):
            assert app.i_trajectory == i and app.current_trajectory_name == f"{task.instance_id}.traj.json"
            assert app.messages, "the inspector loaded the episode's messages"
            assert len(app.steps) >= 3  # system+task, then one page per assistant turn
            assert "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" in json.dumps(app.messages)
            await pilot.press("L")  # next trajectory
    record = json.loads(found[0].read_text())
    assert record["trajectory_format"] == "mini-swe-agent-1.1"
    assert set(record["info"]) >= {"config", "exit_status", "mini_version", "model_stats", "submission"}
    assert record["info"]["exit_status"] == "submitted" and record["info"]["submission"].startswith("diff")
    preds = json.loads((run / "preds.json").read_text())
    assert sorted(preds) == sorted(t.instance_id for t in tasks)
    assert all(preds[k]["instance_id"] == k and preds[k]["model_patch"] for k in preds)
