"""TRL's rollouts go through the executor ``SWE_RL_EXECUTOR`` names, as every trainer's do: its placement,
its sandboxes reused across episodes and steps (the rollout function keeps one event loop for the run), and
a refusal where the trainer's in-process model cannot go. Real TRL, a tiny Qwen3, real ns sandboxes."""

from __future__ import annotations

import json

import pytest
from tests.conftest import available_factory, tiny_grpo_settings

from swe_rl.agent.config import load_agent_config
from swe_rl.errors import ConfigError
from swe_rl.llm.base import SamplingParams

torch = pytest.importorskip("torch")
trl_mod = pytest.importorskip("swe_rl.integrations.trl", exc_type=ImportError)
grpo_mod = pytest.importorskip("swe_rl.train.grpo", exc_type=ImportError)
adapter_kit = pytest.importorskip("swe_rl.integrations.adapter_kit", exc_type=ImportError)


@pytest.fixture
def reusing_local_executor(monkeypatch):  # type: ignore[no-untyped-def]
    available_factory("ns")  # skips where ns sandboxes cannot run
    monkeypatch.setenv("SWE_RL_EXECUTOR", "local:ns")
    monkeypatch.setenv("SWE_RL_REUSE", "1")
    monkeypatch.setenv("SWE_RL_CAPACITY", "2")


@pytest.mark.ns
def test_the_rollout_function_runs_on_the_executor_swe_rl_executor_names(tasks, monkeypatch):
    monkeypatch.setenv("SWE_RL_EXECUTOR", "service:http://127.0.0.1:9")
    with pytest.raises(ConfigError, match="executor service runs episodes in other processes"):
        trl_mod.SweRolloutFunc(tasks[:1], load_agent_config(), SamplingParams())  # the policy is here
    monkeypatch.setenv("SWE_RL_EXECUTOR", "local:ns")
    monkeypatch.setenv("SWE_RL_REUSE", "1")
    func = trl_mod.SweRolloutFunc(tasks[:1], load_agent_config(), SamplingParams())
    try:
        assert func.executor.name == "local" and func.executor.grader.reuse
    finally:
        func.close()


@pytest.mark.ns
def test_grpo_episodes_reuse_the_executors_sandboxes_across_steps(
    tasks, envs, tmp_path, reusing_local_executor
):
    executor = adapter_kit.executor_from()  # what the rollout function makes when given none (test above)
    assert executor.name == "local" and executor.capacity == 2 and executor.grader.reuse
    settings = tiny_grpo_settings(tmp_path / "run", steps=2, save_steps=0)
    agent = load_agent_config(step_limit=2)
    grpo_mod.train_grpo(tasks[:1], settings, envs, agent, executor=executor, quiet=True)
    rows = [json.loads(line) for line in (tmp_path / "run/rollouts.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 0, 1, 1]
    # control: every episode ran its agent to an ending of its own (a sandbox kept from a closed event loop
    # would fail its first command: an infra or agent error)
    assert all(r["exit_status"] not in ("infra_error", "agent_error") and r["n_steps"] > 0 for r in rows), (
        rows
    )
    stats = executor.grader.pool.counts("agent")
    # step 0's two agents got new sandboxes, step 1's got the same two back, reset in place
    assert stats["created"] == 2 and stats["reused"] == 2, stats
