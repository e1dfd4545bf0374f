"""Cost accounting: prices from a table, cost per call and per run, per-attempt and per-run limits."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import available_factory

from swe_rl.agent.config import load_agent_config
from swe_rl.agent.trajectory import Trajectory
from swe_rl.episode.spec import EpisodeSpec
from swe_rl.errors import ConfigError
from swe_rl.llm.base import SamplingParams
from swe_rl.llm.cost import PROJECT_PRICES, load_prices
from swe_rl.llm.oracle import scripted_for
from swe_rl.runs.evaluation import Attempts, EvalSettings, run_eval

IN, OUT = 2e-6, 8e-6  # USD per token


@pytest.fixture
def price_file(tmp_path: Path) -> Path:
    path = tmp_path / "prices.json"
    path.write_text(
        json.dumps(
            {
                "scripted:oracle": {"input_cost_per_token": IN, "output_cost_per_token": OUT},
                "gpt-4o": {"input_cost_per_token": 1.0, "output_cost_per_token": 1.0},
            }
        )
    )
    return path


def test_price_table_layers_and_lookup(price_file):
    table = load_prices(price_file, use_litellm=False)
    assert table.require("gpt-4o").input_cost_per_token == 1.0, "the user's file overrides the project's"
    project = json.loads(PROJECT_PRICES.read_text())
    assert (
        table.require("openai/gpt-4o-mini").input_cost_per_token
        == project["gpt-4o-mini"]["input_cost_per_token"]
    )
    assert table.lookup("hf:smollm2").cost(1000, 1000) == 0.0, "local models are free unless priced"
    assert table.lookup("no-such-model") is None
    with pytest.raises(ConfigError, match="no price for model 'no-such-model'"):
        table.require("no-such-model")
    bad = price_file.with_name("bad.json")
    bad.write_text('{"m": {"input_cost_per_token": -1}}')
    with pytest.raises(ConfigError, match="bad price"):
        load_prices(bad, use_litellm=False)
    bad.write_text("[1, 2")
    with pytest.raises(ConfigError, match="cannot read price file"):
        load_prices(bad, use_litellm=False)


def _settings(tmp_path: Path, prices, **kw) -> EvalSettings:
    return EvalSettings(
        output_dir=tmp_path / "run", max_concurrent=1, episode=EpisodeSpec.for_eval(prices=prices), **kw
    )


def _expected_cost(folder: Path) -> float:
    traj = Trajectory.model_validate_json((folder / "traj.json").read_text())
    return sum(s.completion.prompt_tokens * IN + s.completion.completion_tokens * OUT for s in traj.steps)


@pytest.mark.ns
async def test_cost_per_call_per_attempt_and_per_run(tmp_path, tasks, envs, price_file):
    prices = load_prices(price_file, use_litellm=False)
    summary = await run_eval(
        tasks[:2],
        Attempts.here(
            lambda t: scripted_for("oracle", t), envs, available_factory("ns"), load_agent_config()
        ),
        SamplingParams(),
        _settings(tmp_path, prices),
        quiet=True,
    )
    results = [json.loads(x) for x in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert summary["resolved"] == 2
    for r in results:
        traj = Trajectory.model_validate_json((Path(r["artifacts"]) / "traj.json").read_text())
        assert all(s.completion.cost_usd and s.completion.cost_usd > 0 for s in traj.steps)
        assert r["cost_usd"] == pytest.approx(_expected_cost(Path(r["artifacts"])))
        assert traj.cost_usd == pytest.approx(r["cost_usd"])
    assert (
        summary["cost_usd"] == pytest.approx(sum(r["cost_usd"] for r in results)) and summary["cost_usd"] > 0
    )
    assert summary["stopped"] is None and summary["run_cost_usd"] == pytest.approx(summary["cost_usd"])


@pytest.mark.ns
async def test_attempt_cost_limit_ends_the_agent(tmp_path, tasks, envs, price_file):
    prices = load_prices(price_file, use_litellm=False)
    summary = await run_eval(
        tasks[:1],
        Attempts.here(
            lambda t: scripted_for("oracle", t),
            envs,
            available_factory("ns"),
            load_agent_config(cost_limit=1e-9),
        ),
        SamplingParams(),
        _settings(tmp_path, prices),
        quiet=True,
    )
    (r,) = [json.loads(x) for x in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert r["exit_status"] == "limits_exceeded" and r["n_steps"] == 1 and not r["resolved"]
    traj = json.loads((Path(r["artifacts"]) / "traj.json").read_text())
    assert "cost limit" in traj["exit_message"]
    assert summary["errors"] == 0, "a cost limit is an outcome, not an infrastructure error"


@pytest.mark.ns
def test_run_cost_limit_stops_with_exit_status_4_and_resumes(tmp_path, price_file):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    out = tmp_path / "run"
    base = [sys.executable, "-m", "swe_rl.cli.app", "eval", "--llm", "scripted:oracle", "-j", "1"]
    base += ["--max-instances", "3", "--price-file", str(price_file), "-o", str(out)]
    first = subprocess.run([*base, "--run-cost-limit", "1e-9"], capture_output=True, text=True, env=env)
    assert first.returncode == 4, first.stderr[-2000:]
    assert "run cost limit" in first.stderr
    summary = json.loads((out / "summary.json").read_text())
    lines = (out / "results.jsonl").read_text().splitlines()
    assert len(lines) == 1 and summary["missing"] == 2 and "2 attempts not started" in summary["stopped"]
    assert summary["cost_usd"] > 1e-9
    # a run past its limit stays consistent: every recorded attempt has its artifacts, nothing half-written
    folders = [p for p in out.iterdir() if p.is_dir()]
    assert [Path(json.loads(x)["artifacts"]).name for x in lines] == [p.name for p in folders]
    second = subprocess.run([*base, "--resume"], capture_output=True, text=True, env=env)
    assert second.returncode == 0, second.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["resolved"] == 3 and summary["missing"] == 0 and summary["stopped"] is None
    assert len((out / "results.jsonl").read_text().splitlines()) == 3


def test_a_limit_on_an_unpriced_model_is_refused(tmp_path):
    args = ["eval", "--model", "my-private-model", "--api-base", "http://127.0.0.1:9/v1", "--cost-limit", "1"]
    proc = subprocess.run(
        [sys.executable, "-m", "swe_rl.cli.app", *args, "-o", str(tmp_path / "r")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "no price for model 'my-private-model'" in proc.stderr
