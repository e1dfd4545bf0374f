"""mini-swe-agent 2.4.6's own inspector (``mini-extra inspector``) opens a swe-rl run directory: it finds the
episodes by ``*.traj.json`` and shows their steps, run headless through Textual's test pilot. And its
preds.json convention, a dict keyed by instance id, is what swe-rl writes. And swe-rl's agent runs its own
shipped config, benchmarks/swebench_backticks.yaml, unchanged, with its text protocol (#23 item 5)."""

from __future__ import annotations

import importlib.resources
import json
import os
import re

import jinja2
import jinja2.meta
import pydantic
import pytest
import yaml
from tests.conftest import available_factory

from swe_rl.agent import mini_swe_agent
from swe_rl.agent.config import AgentConfig, load_agent_config
from swe_rl.errors import ConfigError
from swe_rl.llm.base import SamplingParams
from swe_rl.llm.oracle import oracle_replies, scripted_for
from swe_rl.llm.scripted import ScriptedLLM
from swe_rl.runs.evaluation import Attempts, EvalSettings, run_eval
from swe_rl.sandbox.base import ExecResult

# ./dev test installs it: in CI its absence is a failure, not a skip
if os.environ.get("CI"):
    from minisweagent.run.utilities import inspector
else:
    inspector = pytest.importorskip("minisweagent.run.utilities.inspector")


@pytest.mark.ns
async def test_mini_swe_agents_inspector_opens_a_swe_rl_run(tmp_path, task_by_id, envs):
    tasks = [task_by_id["swe-rl-builtin__textkit-3"], task_by_id["swe-rl-builtin__textkit-4"]]
    settings = EvalSettings(output_dir=tmp_path / "run", max_concurrent=2, args={"model": "oracle"})
    await run_eval(
        tasks,
        Attempts.here(
            lambda t: scripted_for("oracle", t), envs, available_factory("ns"), load_agent_config()
        ),
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


def _shipped_config(name: str):
    pytest.importorskip("minisweagent")  # absent: nothing to be compatible with
    path = importlib.resources.files("minisweagent.config") / "benchmarks" / name
    assert path.is_file(), f"mini-swe-agent no longer ships {name}"
    return path


def _mswea(reply: str) -> str:
    """A reply in mini-swe-agent 2.x's text protocol: the same command in a ```mswea_bash_command block."""
    return reply.replace("```bash\n", "```mswea_bash_command\n")


@pytest.mark.ns
async def test_swe_rl_runs_mini_swe_agents_own_swebench_backticks_config(tmp_path, task_by_id, envs):
    path = _shipped_config("swebench_backticks.yaml")
    config = load_agent_config(str(path))
    assert config.dialect == "mini-swe-agent" and config.step_limit == 250 and config.command_timeout == 60
    task = task_by_id["swe-rl-builtin__textkit-3"]
    replies = [_mswea(r) for r in oracle_replies(task)]
    # controls: swe-rl's flat format refuses the file, and the bash-only parser finds no action in these replies
    with pytest.raises(pydantic.ValidationError, match="agent"):
        AgentConfig.model_validate(yaml.safe_load(path.read_text()))
    assert all(re.findall(r"```(?:bash|sh)[ \t]*\n(.*?)```", r, re.DOTALL) == [] for r in replies)

    settings = EvalSettings(output_dir=tmp_path / "run", max_concurrent=1, args={"model": "oracle"})
    summary = await run_eval(
        [task],
        Attempts.here(lambda t: ScriptedLLM(replies, name="oracle"), envs, available_factory("ns"), config),
        SamplingParams(max_tokens=256),
        settings,
        quiet=True,
    )
    assert summary["resolved"] == 1 and summary["exit_statuses"] == {"submitted": 1}
    (found,) = (tmp_path / "run").rglob("*.traj.json")
    messages = json.loads(found.read_text())["messages"]
    assert messages[0]["content"] == config.system_template.rstrip("\n")  # no variables in it
    # the instance template got the problem statement as text (mini's `task`), not swe-rl's Task object
    assert f"Consider the following PR description:\n{task.problem_statement}" in messages[1]["content"]
    observation = messages[3]["content"]  # what the model saw after `git status && ls`: the config's template
    assert observation.startswith("<returncode>0</returncode>\n<output>\n") and "On branch" in observation
    assert "<exception>" not in observation and "turns left" not in observation


@pytest.mark.parametrize(
    "name",
    [
        "default.yaml",
        "mini.yaml",
        "mini_textbased.yaml",
        "benchmarks/swebench.yaml",
        "benchmarks/swebench_backticks.yaml",
        "benchmarks/swebench_xml.yaml",
        "benchmarks/programbench.yaml",
    ],
)
def test_every_whole_shipped_config_loads_and_renders(name):
    """Each template with the variables mini-swe-agent gives it (the tool-calling configs' prompts too,
    though they ask for tool calls, which swe-rl's text protocol does not offer)."""
    path = _shipped_config("../" + name)
    config = load_agent_config(str(path))
    values = mini_swe_agent.template_vars(
        config.template_vars, "Fix the bug.", n_model_calls=3, model_cost=0.0, elapsed_seconds=5
    )
    instance = config.render(config.instance_template, **values)
    uses_task = "task" in jinja2.meta.find_undeclared_variables(
        jinja2.Environment().parse(config.instance_template)
    )
    assert ("Fix the bug." in instance) == uses_task  # programbench's names no task
    assert config.render(config.system_template, **values).strip()
    long = ExecResult(returncode=1, output="x" * 30_000)
    timed_out = ExecResult(returncode=-1, output="", timed_out=True)
    for result in (long, timed_out):
        output = mini_swe_agent.output_vars(result, config.command_timeout)
        text = config.render(config.observation_template, output=output, **values)
        assert str(result.returncode) in text and len(text) < 20_000  # the template cuts long output
    assert "timed out" in text  # exception_info, shown by the templates that show it
    for finish in ({}, {"finish_reason": "length"}):
        error = config.render(config.format_error_template, actions=[], error="none found", **finish)
        assert error.strip()


def test_an_overlay_config_is_refused_by_name():
    with pytest.raises(ConfigError, match="overlay"):
        load_agent_config(str(_shipped_config("swebench_modal.yaml")))
