"""The agent loop against a real sandbox, with scripted models."""

from __future__ import annotations

import pytest
from tests.conftest import available_factory

from swe_rl.agent.actions import submission
from swe_rl.agent.config import load_agent_config
from swe_rl.agent.loop import run_agent
from swe_rl.llm.base import SamplingParams
from swe_rl.llm.oracle import oracle_replies
from swe_rl.llm.scripted import SUBMIT, ScriptedLLM, bash_reply

pytestmark = pytest.mark.ns

PARAMS = SamplingParams(max_tokens=256)


@pytest.fixture
def ns():
    return available_factory("ns")


async def _run(ns, env, task, replies, **overrides):
    config = load_agent_config(**overrides)
    async with await ns.create(env) as box:
        traj = await run_agent(task, box, ScriptedLLM(replies), config, PARAMS)
        diff = await box.diff()
    return traj, diff


async def test_oracle_submits_the_gold_patch(ns, task_by_id, envs):
    task = task_by_id["swe-rl-builtin__statkit-3"]
    traj, _ = await _run(ns, envs.ensure(task), task, oracle_replies(task))
    assert traj.exit_status == "submitted" and len(traj.steps) == 3
    assert traj.submission and "hi = min(lo + 1, len(data) - 1)" in traj.submission
    assert (
        traj.messages[0].role == "system" and task.problem_statement.strip()[:40] in traj.messages[1].content
    )
    assert "turns left" in traj.messages[3].content


async def test_format_errors_end_the_run(ns, task_by_id, envs):
    task = task_by_id["swe-rl-builtin__statkit-1"]
    replies = ["no block", "```bash\nls\n```\n```bash\npwd\n```", "still nothing"]
    traj, _ = await _run(ns, envs.ensure(task), task, replies, max_format_errors=3)
    assert traj.exit_status == "format_error_limit"
    assert [s.error for s in traj.steps] == ["format_error"] * 3
    assert "contained 2" in traj.messages[5].content


async def test_step_limit_and_diff_left_behind(ns, task_by_id, envs):
    task = task_by_id["swe-rl-builtin__statkit-1"]
    replies = [bash_reply("edit", f"echo {i} >> NOTES.txt") for i in range(5)]
    traj, diff = await _run(ns, envs.ensure(task), task, replies, step_limit=3)
    assert traj.exit_status == "limits_exceeded" and len(traj.steps) == 3 and traj.submission is None
    assert "NOTES.txt" in diff


async def test_long_output_is_shown_as_head_and_tail(ns, task_by_id, envs):
    task = task_by_id["swe-rl-builtin__statkit-1"]
    replies = [bash_reply("print", "seq 1 100000"), bash_reply("done", SUBMIT)]
    traj, _ = await _run(ns, envs.ensure(task), task, replies, output_limit=1000)
    observation = traj.messages[3].content
    assert "<output_head>" in observation and "<output_tail>" in observation and "100000" in observation
    assert len(observation) < 2500


async def test_command_timeout_is_reported_and_the_run_goes_on(ns, task_by_id, envs):
    task = task_by_id["swe-rl-builtin__statkit-1"]
    replies = [bash_reply("wait", "sleep 30"), bash_reply("done", SUBMIT)]
    traj, _ = await _run(ns, envs.ensure(task), task, replies, command_timeout=1)
    assert traj.steps[0].timed_out and "timed out after 1" in traj.messages[3].content
    assert traj.exit_status == "submitted"


async def test_repeated_commands_are_warned_then_stopped(ns, task_by_id, envs):
    task = task_by_id["swe-rl-builtin__statkit-1"]
    replies = [bash_reply("again", "ls")] * 20
    traj, _ = await _run(ns, envs.ensure(task), task, replies, max_repeated_commands=3, max_repeat_warnings=2)
    assert traj.exit_status == "limits_exceeded" and "repeated" in traj.exit_message
    assert sum(s.error == "repeated_command" for s in traj.steps) == 3
    assert "same command 3 times" in traj.messages[7].content


async def test_wall_time_limit(ns, task_by_id, envs):
    task = task_by_id["swe-rl-builtin__statkit-1"]
    replies = [bash_reply("slow", "sleep 0.4")] * 50
    traj, _ = await _run(ns, envs.ensure(task), task, replies, wall_time_s=1.0, max_repeat_warnings=100)
    assert traj.exit_status == "timeout"
    assert traj.total_time_s < 5


async def test_llm_failure_is_an_infra_error(ns, task_by_id, envs):
    task = task_by_id["swe-rl-builtin__statkit-1"]
    traj, _ = await _run(ns, envs.ensure(task), task, [bash_reply("one", "ls")])  # runs out of replies
    assert traj.exit_status == "infra_error" and "LLMError" in traj.exit_message


async def test_a_submission_over_the_output_cap_is_an_agent_error_never_cut(ns, task_by_id, envs):
    task = task_by_id["swe-rl-builtin__statkit-1"]
    env = envs.ensure(task)
    replies = [bash_reply("write", "seq 1 400000 > big.txt"), bash_reply("submit", SUBMIT)]
    async with await ns.create(env) as box:
        traj = await run_agent(task, box, ScriptedLLM(replies), load_agent_config(), PARAMS)
        control = await box.exec(SUBMIT, timeout=60)  # what the agent's submit printed: cut at the cap
    assert control.truncated and submission(control.output) is not None
    assert traj.exit_status == "agent_error" and traj.submission is None
    assert "over the output cap" in traj.exit_message


async def test_a_mini_swe_agent_config_runs_with_its_own_variables(ns, task_by_id, envs, tmp_path):
    task = task_by_id["swe-rl-builtin__statkit-1"]
    (tmp_path / "mini.yaml").write_text(
        """
agent:
  system_template: "Shell on {{ system }}; {{ step_limit }} steps."
  instance_template: "Task: {{ task }}"
  step_limit: 5
environment:
  env: {SWE_RL_MINI: from-the-config}
  timeout: 20
model:
  observation_template: "<returncode>{{ output.returncode }}</returncode>[{{ output.output }}]{{ n_model_calls }}"
  format_error_template: "{% if finish_reason is defined %}{{ finish_reason }}: {% endif %}{{ error }} {{ actions }}"
  model_name: ignored
"""
    )
    replies = [
        "no action here",
        "THOUGHT: env\n\n```mswea_bash_command\necho $SWE_RL_MINI\n```",
        "THOUGHT: done\n\n```mswea_bash_command\necho MINI_SWE_AGENT_FINAL_OUTPUT && echo patch\n```",
    ]
    config = load_agent_config(str(tmp_path / "mini.yaml"))
    async with await ns.create(envs.ensure(task)) as box:
        traj = await run_agent(task, box, ScriptedLLM(replies), config, PARAMS)
    assert traj.messages[0].content.endswith("; 5 steps.") and "{{" not in traj.messages[0].content
    assert traj.messages[1].content == f"Task: {task.problem_statement}"  # the text, not the Task object
    assert traj.messages[3].content == "stop: Expected exactly one action, found 0. []"
    assert traj.messages[5].content == "<returncode>0</returncode>[from-the-config\n]2"
    assert traj.exit_status == "submitted" and traj.submission == "patch\n"
