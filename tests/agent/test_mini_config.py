"""mini-swe-agent's config format read by load_agent_config, without mini-swe-agent installed (the
contract test with its own shipped files is tests/integrations/test_mini_swe_agent.py)."""

from __future__ import annotations

import pytest
import yaml

from swe_rl.agent.config import AgentConfig, load_agent_config
from swe_rl.agent.mini_swe_agent import IGNORED, MAPPED
from swe_rl.errors import ConfigError

MINI = {
    "agent": {
        "system_template": "You are on {{ system }}.",
        "instance_template": "Fix this:\n{{ task }}\n({{ step_limit }} steps)",
        "step_limit": 0,
        "cost_limit": 2.5,
        "mode": "yolo",
    },
    "environment": {"cwd": "/testbed", "timeout": 45, "env": {"PAGER": "cat"}, "environment_class": "docker"},
    "model": {
        "model_name": "anthropic/claude",
        "model_kwargs": {"temperature": 0.0},
        "observation_template": "<returncode>{{ output.returncode }}</returncode>\n{{ output.output }}",
        "format_error_template": (
            "{% if finish_reason is defined and finish_reason == 'length' %}cut off"
            "{% else %}{{ error }} ({{ actions | length }}){% endif %}"
        ),
    },
    "run": {"task": "ignored"},
}


def _write(tmp_path, data) -> str:
    path = tmp_path / "mini.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_a_mini_swe_agent_config_maps_onto_agent_config(tmp_path):
    config = load_agent_config(_write(tmp_path, MINI))
    assert config.dialect == "mini-swe-agent"
    assert config.system_template == MINI["agent"]["system_template"]
    assert config.step_limit is None and config.cost_limit == 2.5  # mini's 0: no limit
    assert config.command_timeout == 45 and config.env == {"PAGER": "cat"}
    assert config.observation_template == MINI["model"]["observation_template"]
    assert config.action_regex is None and config.max_format_errors == 3
    assert (
        config.template_vars["cwd"] == "/testbed" and config.template_vars["model_name"] == "anthropic/claude"
    )
    # overrides still apply on top, by swe-rl's field names
    assert load_agent_config(_write(tmp_path, MINI), step_limit=7).step_limit == 7


def test_mini_swe_agent_defaults_where_a_key_is_absent(tmp_path):
    bare = {"agent": {k: MINI["agent"][k] for k in ("system_template", "instance_template")}}
    config = load_agent_config(_write(tmp_path, bare))
    assert config.step_limit is None and config.cost_limit == 3.0  # mini-swe-agent's own defaults
    assert config.command_timeout == 30 and "output.returncode" in config.observation_template


def test_an_unknown_key_is_named(tmp_path):
    data = {**MINI, "model": {**MINI["model"], "observaton_template": "x"}}
    with pytest.raises(ConfigError, match=r"unknown key model\.observaton_template"):
        load_agent_config(_write(tmp_path, data))
    with pytest.raises(ConfigError, match="unknown section 'agnet'"):
        load_agent_config(_write(tmp_path, {**MINI, "agnet": {}}))


def test_an_overlay_without_templates_is_refused_by_name(tmp_path):
    with pytest.raises(ConfigError, match=r"without agent\.system_template and agent\.instance_template"):
        load_agent_config(_write(tmp_path, {"environment": {"environment_class": "swerex_modal"}}))


def test_mapped_and_ignored_keys_do_not_overlap():
    for section in MAPPED:
        assert not MAPPED[section] & IGNORED[section]


def test_the_flat_format_is_unchanged(tmp_path):
    config = load_agent_config()
    assert config.dialect == "swe-rl" and config.step_limit == 40 and config.env == {}
    with pytest.raises(ConfigError, match="agnet"):  # a flat file still refuses unknown fields
        load_agent_config(_write(tmp_path, {**load_agent_config().model_dump(), "agnet": 1}))


def test_strict_undefined_still_catches_typos():
    config = load_agent_config()
    with pytest.raises(ConfigError, match="reslt"):
        config.render("{{ reslt.returncode }}", result=None)


def test_an_action_regex_with_two_groups_is_refused():
    fields = load_agent_config().model_dump()
    with pytest.raises(ValueError, match="one group"):
        AgentConfig.model_validate({**fields, "action_regex": "(a)(b)"})
    with pytest.raises(ValueError, match="no regex"):
        AgentConfig.model_validate({**fields, "action_regex": "(a"})
