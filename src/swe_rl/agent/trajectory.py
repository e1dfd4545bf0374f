"""What an agent run leaves behind: every message, every step with the model's exact tokens."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from swe_rl.llm.base import Completion, Message

ExitStatus = Literal[
    "submitted", "limits_exceeded", "format_error_limit", "timeout", "agent_error", "infra_error"
]
"""How a run ended. ``agent_error``: the agent's own commands broke its sandbox (scored as a failure);
``infra_error``: something outside its control failed (never scored). docs/TRAINING.md has the table."""


class Step(BaseModel):
    index: int
    context: list[int] = Field(
        description="Indices into Trajectory.messages sent at this step, in order; "
        "-1 marks the omitted-turns marker."
    )
    omitted: int = Field(default=0, description="Turns the context manager left out at this step.")
    completion: Completion
    action: str | None = Field(default=None, description="The bash command, when the reply had exactly one.")
    observation: str = Field(default="", description="The message sent back to the model.")
    returncode: int | None = None
    timed_out: bool = False
    error: Literal["format_error", "repeated_command"] | None = None
    model_time_s: float = 0.0
    env_time_s: float = 0.0


class Trajectory(BaseModel):
    instance_id: str
    model: str
    messages: list[Message] = Field(default_factory=list)
    steps: list[Step] = Field(default_factory=list)
    exit_status: ExitStatus | None = None
    exit_message: str = ""
    submission: str | None = Field(default=None, description="The patch the agent submitted, if it did.")
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = Field(default=0.0, description="Sum of the priced model calls' costs.")
    model_time_s: float = 0.0
    env_time_s: float = 0.0
    total_time_s: float = 0.0

    @property
    def tool_calls(self) -> int:
        return sum(1 for s in self.steps if s.action is not None)

    @property
    def format_errors(self) -> int:
        """Replies that did not hold exactly one bash block."""
        return sum(1 for s in self.steps if s.error == "format_error")


MINI_FORMAT = "mini-swe-agent-1.1"


def mini_swe_agent_record(traj: Trajectory, submission: str, config: dict[str, Any]) -> dict[str, Any]:
    """``traj`` as mini-swe-agent 2.x writes ``<id>.traj.json`` (its inspector reads swe-rl runs so)."""
    from swe_rl import __version__

    return {
        "info": {
            "config": config,
            "exit_status": traj.exit_status,
            "mini_version": f"swe-rl {__version__}",
            "model_stats": {"instance_cost": traj.cost_usd, "api_calls": len(traj.steps)},
            "submission": submission,
        },
        "messages": [m.model_dump() for m in traj.messages],
        "trajectory_format": MINI_FORMAT,
    }
