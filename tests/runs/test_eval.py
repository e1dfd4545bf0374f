"""``swe-rl eval`` end to end: scripted models, artifacts, resume, bad endpoints, broken envs."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.conftest import available_factory, unbuildable_task
from tests.service.servers import serve_in_thread

from swe_rl.agent.config import load_agent_config
from swe_rl.llm.base import SamplingParams
from swe_rl.llm.fake_server import FakeLLMServer
from swe_rl.llm.openai import OpenAIClient
from swe_rl.llm.oracle import oracle_policy, scripted_for
from swe_rl.runs.evaluation import Attempts, EvalSettings, run_eval

PARAMS = SamplingParams(max_tokens=512)


def _settings(tmp_path: Path, **kw) -> EvalSettings:
    return EvalSettings(
        output_dir=tmp_path / "run", max_concurrent=2, args={"model": "test", "api_key": "sk-x"}, **kw
    )


@pytest.mark.ns
async def test_oracle_resolves_every_builtin_task(tmp_path, tasks, envs):
    summary = await run_eval(
        tasks,
        Attempts.here(
            lambda t: scripted_for("oracle", t), envs, available_factory("ns"), load_agent_config()
        ),
        PARAMS,
        _settings(tmp_path),
        quiet=True,
    )
    assert (summary["total"], summary["resolved"], summary["errors"], summary["resolve_rate"]) == (
        len(tasks),
        len(tasks),
        0,
        1.0,
    )
    assert summary["args"]["api_key"] == "<redacted>" and "swe-rl" in summary["provenance"]["versions"]
    run = tmp_path / "run"
    results = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    assert {r["instance_id"] for r in results} == {t.instance_id for t in tasks}
    for r in results:
        folder = Path(r["artifacts"])
        assert folder.name.startswith(r["instance_id"] + "__")
        mini = f"{r['instance_id']}.traj.json"  # the episode in mini-swe-agent's format, for its tools
        assert {p.name for p in folder.iterdir()} == {"traj.json", mini, "patch.diff", "meta.json"}
        assert r["patch_source"] == "submission"
    preds = json.loads((run / "preds.json").read_text())  # a dict keyed by instance id
    assert set(preds) == {p["instance_id"] for p in preds.values()} == {t.instance_id for t in tasks}
    assert all(p["model_patch"] for p in preds.values())
    metrics = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
    assert metrics["agent/turns_mean"] == 3.0 and "agent/model_time_ratio" in metrics


@pytest.mark.ns
async def test_never_submitting_resolves_nothing_and_falls_back_to_the_diff(tmp_path, tasks, envs):
    subset = tasks[:3]
    summary = await run_eval(
        subset,
        Attempts.here(
            lambda t: scripted_for("never-submit", t),
            envs,
            available_factory("ns"),
            load_agent_config(step_limit=2),
        ),
        PARAMS,
        _settings(tmp_path),
        quiet=True,
    )
    assert summary["resolved"] == 0 and summary["errors"] == 0
    results = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert {r["patch_source"] for r in results} == {"diff_fallback"}
    assert {r["exit_status"] for r in results} == {"limits_exceeded"}


@pytest.mark.ns
async def test_endpoint_down_is_counted_not_crashed(tmp_path, tasks, envs):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = OpenAIClient("m", f"http://127.0.0.1:{port}/v1", max_retries=0)
    summary = await run_eval(
        tasks[:2],
        Attempts.here(lambda _t: client, envs, available_factory("ns"), load_agent_config()),
        PARAMS,
        _settings(tmp_path),
        quiet=True,
    )
    await client.close()
    assert (
        summary["errors"] == 2 and summary["resolved"] == 0 and summary["exit_statuses"] == {"infra_error": 2}
    )


@pytest.mark.ns
async def test_env_that_fails_to_build_is_an_error_for_that_task_only(tmp_path, tasks, envs):
    broken = unbuildable_task()
    summary = await run_eval(
        [broken, tasks[0]],
        Attempts.here(
            lambda t: scripted_for("oracle", t), envs, available_factory("ns"), load_agent_config()
        ),
        PARAMS,
        _settings(tmp_path),
        quiet=True,
    )
    assert summary["errors"] == 1 and summary["resolved"] == 1
    results = {
        json.loads(line)["instance_id"]: json.loads(line)
        for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()
    }
    assert "no local mirror of nobody/nothing" in results["nobody__nothing-1"]["error"]


@pytest.mark.ns
def test_killed_eval_resumes_without_rerunning_finished_instances(tmp_path, tasks):
    subset = tasks[:4]
    server = FakeLLMServer(oracle_policy(subset), delay_s=0.25)
    thread, loop = serve_in_thread(server)
    out = tmp_path / "run"
    args = [
        sys.executable,
        "-m",
        "swe_rl.cli.app",
        "eval",
        "--model",
        "fake",
        "--api-base",
        server.api_base,
        "-o",
        str(out),
        "-j",
        "1",
        "-b",
        "ns",
    ] + [a for t in subset for a in ("-i", t.instance_id)]
    try:
        first = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            lines = (
                (out / "results.jsonl").read_text().splitlines() if (out / "results.jsonl").exists() else []
            )
            if len(lines) >= 2:
                break
            time.sleep(0.1)
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
        finished = [
            json.loads(line)["instance_id"]
            for line in (out / "results.jsonl").read_text().splitlines()
            if line.strip()
        ]
        assert 2 <= len(finished) < 4
        dirs_before = {p.name for p in out.iterdir() if p.is_dir()}
        again = subprocess.run([*args, "--resume", "--json"], capture_output=True, text=True, timeout=300)
        assert again.returncode == 0, again.stderr
        summary = json.loads(again.stdout)
        assert (summary["total"], summary["resolved"], summary["errors"], summary["missing"]) == (4, 4, 0, 0)
        lines = [
            json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()
        ]
        assert sorted(r["instance_id"] for r in lines) == sorted(t.instance_id for t in subset)  # none twice
        new_dirs = {p.name for p in out.iterdir() if p.is_dir()} - dirs_before
        assert not any(d.split("__")[0] + "__" + d.split("__")[1] in finished for d in new_dirs)
        refused = subprocess.run(args, capture_output=True, text=True, timeout=60)
        assert refused.returncode == 2 and "--resume" in refused.stderr
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
