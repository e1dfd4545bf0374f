"""The HTML report, rendered by a real headless Chromium."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from tests.conftest import available_factory
from tests.report.browser import dump_dom, screenshot

from swe_rl.agent.config import load_agent_config
from swe_rl.llm.base import SamplingParams
from swe_rl.llm.oracle import scripted_for
from swe_rl.report import render_report
from swe_rl.runs.evaluation import Attempts, EvalSettings, run_eval

pytestmark = pytest.mark.ns


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, tasks, envs) -> Path:
    out = tmp_path_factory.mktemp("report") / "run"
    kinds = ["oracle", "never-submit", "format-errors"]
    by_id = {t.instance_id: kinds[i % 3] for i, t in enumerate(tasks[:3])}
    asyncio.run(
        run_eval(
            tasks[:3],
            Attempts.here(
                lambda t: scripted_for(by_id[t.instance_id], t),
                envs,
                available_factory("ns"),
                load_agent_config(step_limit=3),
            ),
            SamplingParams(),
            EvalSettings(output_dir=out),
            quiet=True,
        )
    )
    return out


def test_report_contents(run_dir):
    page = render_report(run_dir).read_text()
    assert "1/3 resolved" in page and "<svg" in page and "agent/turns_mean" in page
    assert "format errors in 33% of attempts" in page  # the format-errors model, and only it
    results = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert sorted(r["format_errors"] > 0 for r in results) == [False, False, True]
    data = json.loads(page.split('<script type="application/json" id="data">')[1].split("</script>")[0])
    assert len(data["trajectories"]) == 3


def test_viewer_opens_a_trajectory_in_chromium(run_dir, tmp_path, tasks):
    page = render_report(run_dir)
    key = f"{tasks[0].instance_id}%230"
    dom = dump_dom(f"file://{page}#{key}", tmp_path / "a")
    assert f"Trajectory: {tasks[0].instance_id}" in dom
    assert 'class="msg assistant"' in dom and "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" in dom
    assert dom.count('class="row"') == 3
    shot = screenshot(f"file://{page}#{key}", tmp_path / "b", tmp_path / "report.png")
    assert shot.stat().st_size > 20_000


def test_untrusted_trajectory_text_is_not_markup(tmp_path, tasks, envs):
    from swe_rl.llm.scripted import ScriptedLLM, bash_reply

    payload = "</script><img src=x onerror=\"document.title='pwned'\"><b>bold</b>"
    out = tmp_path / "run"
    asyncio.run(
        run_eval(
            tasks[:1],
            Attempts.here(
                lambda _t: ScriptedLLM([bash_reply(payload, f"echo '{payload}'")] * 3),
                envs,
                available_factory("ns"),
                load_agent_config(step_limit=1),
            ),
            SamplingParams(),
            EvalSettings(output_dir=out),
            quiet=True,
        )
    )
    page = render_report(out)
    assert page.read_text().count("</script>") == 2  # the data island cannot close its own tag
    dom = dump_dom(f"file://{page}#{tasks[0].instance_id}%230", tmp_path / "c")
    # rendered as text in the viewer; never as elements (the DOM would serialise those as <img src="x" ...>)
    assert "&lt;img src=x" in dom and '<img src="x"' not in dom and "<b>bold</b>" not in dom
    assert "pwned" not in dom.split("<title>")[1].split("</title>")[0]
