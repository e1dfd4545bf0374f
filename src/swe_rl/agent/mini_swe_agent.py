"""mini-swe-agent's own YAML configs: mapped onto AgentConfig, and the variables their templates get.

A mini-swe-agent config has ``agent``, ``environment`` and ``model`` sections (and maybe ``run``, its run
script's options). What swe-rl has an equivalent for is mapped; what belongs to mini-swe-agent's own
machinery (which model API, which container runtime, interactive modes) is ignored by name; any other key
is an error, so a typo never silently drops a setting. The templates then render with the variables
mini-swe-agent gives them (``DefaultAgent.get_template_vars`` and the text-based models of 2.x), not
swe-rl's: ``task`` is the problem statement text, an observation gets ``output``.
"""

from __future__ import annotations

import platform
from collections.abc import Mapping
from typing import Any

from swe_rl.errors import ConfigError
from swe_rl.sandbox.base import ExecResult

SECTIONS = ("agent", "environment", "model")

# Keys with a swe-rl equivalent (see from_mini_config).
MAPPED: dict[str, frozenset[str]] = {
    "agent": frozenset(
        {
            "system_template",
            "instance_template",
            "step_limit",
            "cost_limit",
            "wall_time_limit_seconds",
            "max_consecutive_format_errors",
        }
    ),
    "environment": frozenset({"timeout", "env"}),
    "model": frozenset({"observation_template", "format_error_template", "action_regex"}),
}

# Keys of mini-swe-agent 2.x's agent, environment and model classes that swe-rl deliberately ignores:
# swe-rl chooses the model, the sandbox, the working directory and where trajectories go itself.
IGNORED: dict[str, frozenset[str]] = {
    "agent": frozenset({"agent_class", "output_path", "mode", "whitelist_actions", "confirm_exit"}),
    "environment": frozenset(
        {
            "environment_class",
            "cwd",
            "cwd_auto_create",
            "interpreter",
            "image",
            "image_tag",
            "forward_env",
            "executable",
            "run_args",
            "exec_args",
            "global_args",
            "wrapper_args",
            "container_timeout",
            "pull_timeout",
            "startup_timeout",
            "runtime_timeout",
            "deployment_timeout",
            "deployment_extra_kwargs",
            "sandbox_build_retries",
            "install_pipx",
            "modal_sandbox_kwargs",
            "contree_config",
            "import_username",
            "import_password",
        }
    ),
    "model": frozenset(
        {
            "model_name",
            "model_class",
            "model_kwargs",
            "provider",
            "litellm_model_registry",
            "litellm_model_name_override",
            "set_cache_control",
            "cost_tracking",
            "multimodal_regex",
            "cost_per_call",
            "outputs",
            "sequence",
        }
    ),
}

# mini-swe-agent 2.x's defaults where a config leaves a mapped key out (its AgentConfig, its docker and
# local environments, its text-based model); our own wording for the two templates.
_AGENT_DEFAULTS: dict[str, Any] = {
    "step_limit": 0,
    "cost_limit": 3.0,
    "wall_time_limit_seconds": 0,
    "max_consecutive_format_errors": 3,
    "output_path": None,
}
_DEFAULT_TIMEOUT = 30
_DEFAULT_OBSERVATION = (
    "{% if output.exception_info %}<exception>{{ output.exception_info }}</exception>\n{% endif %}"
    "<returncode>{{ output.returncode }}</returncode>\n<output>\n{{ output.output }}</output>"
)
_DEFAULT_FORMAT_ERROR = "Reply with exactly one action in a fenced block; found {{ actions | length }}."


def is_mini_config(data: Mapping[str, Any]) -> bool:
    """A mini-swe-agent config, by its top-level sections (no swe-rl field has those names)."""
    return any(name in data for name in SECTIONS)


def from_mini_config(data: Mapping[str, Any], repeated_command_template: str) -> dict[str, Any]:
    """AgentConfig fields for a mini-swe-agent config. ``repeated_command_template`` fills the one template
    swe-rl has and mini-swe-agent lacks (it has no repeated-command guard)."""
    unknown = sorted(set(data) - {*SECTIONS, "run"})  # run: options of mini-swe-agent's run scripts
    if unknown:
        raise ConfigError(
            f"unknown section {unknown[0]!r} in a mini-swe-agent config (known: {', '.join(SECTIONS)}, run)"
        )
    agent, environment, model = (_section(data, name) for name in SECTIONS)
    missing = [f"agent.{key}" for key in ("system_template", "instance_template") if key not in agent]
    if missing:
        raise ConfigError(
            f"a mini-swe-agent config without {' and '.join(missing)}: swe-rl reads one whole config, "
            "not an overlay meant to be merged onto another (mini's repeated -c)"
        )
    settings = {**_AGENT_DEFAULTS, **agent}
    fields: dict[str, Any] = {
        "system_template": agent["system_template"],
        "instance_template": agent["instance_template"],
        "step_limit": _limit(settings["step_limit"]),
        "cost_limit": _limit(settings["cost_limit"]),
        "max_format_errors": _limit(settings["max_consecutive_format_errors"]),
        "command_timeout": environment.get("timeout", _DEFAULT_TIMEOUT),
        "env": environment.get("env") or {},
        "observation_template": model.get("observation_template", _DEFAULT_OBSERVATION),
        "format_error_template": model.get("format_error_template", _DEFAULT_FORMAT_ERROR),
        "action_regex": model.get("action_regex"),
        "repeated_command_template": repeated_command_template,
        "dialect": "mini-swe-agent",
        "template_vars": {**settings, **environment, **model},
    }
    if (wall_time := _limit(settings["wall_time_limit_seconds"])) is not None:
        fields["wall_time_s"] = wall_time  # 0 (none) keeps swe-rl's own wall-time bound
    return fields


def template_vars(
    config_vars: Mapping[str, Any], task: str, *, n_model_calls: int, model_cost: float, elapsed_seconds: int
) -> dict[str, Any]:
    """What mini-swe-agent gives its system, instance and observation templates: the config's own values,
    the agent machine's ``platform.uname()`` fields (``system``, ``release``, ...), counters, the task."""
    return {
        **platform.uname()._asdict(),
        **config_vars,
        "n_model_calls": n_model_calls,
        "model_cost": model_cost,
        "elapsed_seconds": elapsed_seconds,
        "task": task,
    }


def output_vars(result: ExecResult, timeout: float) -> dict[str, Any]:
    """A command's result as mini-swe-agent's environments report it (the template's ``output``)."""
    exception = (
        f"The command timed out after {timeout:g} seconds and was stopped." if result.timed_out else ""
    )
    return {"output": result.output, "returncode": result.returncode, "exception_info": exception}


def _section(data: Mapping[str, Any], name: str) -> dict[str, Any]:
    section = data.get(name) or {}
    if not isinstance(section, dict):
        raise ConfigError(f"the {name!r} section of a mini-swe-agent config must be a mapping")
    for key in section:
        if key not in MAPPED[name] and key not in IGNORED[name]:
            raise ConfigError(
                f"unknown key {name}.{key} in a mini-swe-agent config (swe-rl maps "
                f"{', '.join(sorted(MAPPED[name]))} and ignores {', '.join(sorted(IGNORED[name]))})"
            )
    return section


def _limit(value: Any) -> Any:
    """mini-swe-agent's 0 (or null) for "no limit" is swe-rl's None."""
    return None if value in (0, None) else value
