"""Agent configuration: templates and limits, loaded from YAML (swe-rl's flat format or a mini-swe-agent
config, see :mod:`swe_rl.agent.mini_swe_agent`)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from jinja2 import Environment, StrictUndefined, TemplateError
from pydantic import BaseModel, ConfigDict, Field, field_validator

from swe_rl.agent import mini_swe_agent
from swe_rl.errors import ConfigError

CONFIG_DIR = Path(__file__).parent / "configs"


class AgentConfig(BaseModel):
    """Everything that shapes an agent run. Templates are Jinja2 with StrictUndefined."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    system_template: str = Field(description="The system message.")
    instance_template: str = Field(description="The first user message; gets `task` and `workdir`.")
    observation_template: str = Field(description="A command's result; gets `result`, `remaining`, ...")
    format_error_template: str = Field(description="Sent when a reply has no or several bash blocks.")
    repeated_command_template: str = Field(description="Sent when the same command repeats.")
    step_limit: int | None = Field(default=40, ge=1, description="Model calls per run; None: no limit.")
    max_tokens_total: int = Field(default=200_000, ge=1, description="Prompt + completion tokens per run.")
    cost_limit: float | None = Field(
        default=None, gt=0, description="USD per run (priced model calls); reaching it ends the run."
    )
    wall_time_s: float = Field(
        default=1800, gt=0, description="Seconds per run, model and commands included."
    )
    command_timeout: float = Field(default=120, gt=0, description="Seconds per command.")
    output_limit: int = Field(
        default=10_000, ge=100, description="Characters of output shown before head+tail."
    )
    max_format_errors: int | None = Field(
        default=3, ge=1, description="Format errors in a row before giving up; None: no limit."
    )
    max_repeated_commands: int = Field(
        default=3, ge=2, description="Identical commands in a row that trigger a warning."
    )
    max_repeat_warnings: int = Field(default=2, ge=1, description="Warnings before the run is stopped.")
    env: dict[str, str] = Field(default_factory=dict, description="Environment variables of every command.")
    action_regex: str | None = Field(
        default=None,
        description="The command in a reply: what this regex's one group matches (mini-swe-agent's "
        "model.action_regex); None: a fenced ```bash, ```sh or ```mswea_bash_command block.",
    )
    dialect: Literal["swe-rl", "mini-swe-agent"] = Field(
        default="swe-rl",
        description="Which variables the templates get: swe-rl's (`task` the Task, `result`, ...) or "
        "mini-swe-agent's (`task` the problem statement, `output`, ...); set by loading its config.",
    )
    template_vars: dict[str, Any] = Field(
        default_factory=dict,
        description="Fixed values every template gets (mini-swe-agent's: its config's own sections).",
    )

    @field_validator("action_regex")
    @classmethod
    def _one_group(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            groups = re.compile(value).groups
        except re.error as exc:
            raise ValueError(f"action_regex is no regex: {exc}") from None
        if groups > 1:
            raise ValueError("action_regex may have at most one group (the command)")
        return value

    def render(self, template: str, **values: Any) -> str:
        try:
            return _jinja().from_string(template).render(**values)
        except TemplateError as exc:
            raise ConfigError(f"agent template error: {exc}") from None


def _jinja() -> Environment:
    return Environment(undefined=StrictUndefined, keep_trailing_newline=False, autoescape=False)


def load_agent_config(path: str | Path | None = None, **overrides: Any) -> AgentConfig:
    """A shipped config by name (``swebench``) or a YAML file, with field overrides on top. A file with
    mini-swe-agent's ``agent``/``environment``/``model`` sections is read as mini-swe-agent reads it."""
    name = str(path or "swebench")
    file = Path(name) if name.endswith((".yaml", ".yml")) else CONFIG_DIR / f"{name}.yaml"
    if not file.is_file():
        raise ConfigError(
            f"agent config not found: {file} (shipped: {', '.join(p.stem for p in CONFIG_DIR.glob('*.yaml'))})"
        )
    data = _read(file)
    if mini_swe_agent.is_mini_config(data):
        repeated = _read(CONFIG_DIR / "swebench.yaml")["repeated_command_template"]
        try:
            data = mini_swe_agent.from_mini_config(data, repeated_command_template=repeated)
        except ConfigError as exc:
            raise ConfigError(f"invalid agent config {file}: {exc}") from None
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return AgentConfig.model_validate(data)
    except ValueError as exc:
        raise ConfigError(f"invalid agent config {file}: {exc}") from None


def _read(file: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"agent config {file} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"agent config {file} must be a mapping of settings")
    return data
