"""The agent: a loop of model replies and bash commands in a sandbox, with its configs and context manager."""

from swe_rl.agent.config import AgentConfig, load_agent_config
from swe_rl.agent.context import ContextManager
from swe_rl.agent.loop import left_patch, run_agent
from swe_rl.agent.trajectory import ExitStatus, Step, Trajectory

__all__ = [
    "AgentConfig",
    "ContextManager",
    "ExitStatus",
    "Step",
    "Trajectory",
    "left_patch",
    "load_agent_config",
    "run_agent",
]
