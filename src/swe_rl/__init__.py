"""swe-rl: train and evaluate software-engineering agents with reinforcement learning.

Importing this package has no side effects and pulls in no heavy dependency (torch, ray,
transformers, docker, trainers); those load lazily inside the modules that need them.
"""

from swe_rl.errors import (
    ConfigError,
    EnvBuildError,
    InfraError,
    MissingExtraError,
    SandboxError,
    SandboxUnavailableError,
    SweRlError,
    TaskFormatError,
)

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "EnvBuildError",
    "InfraError",
    "MissingExtraError",
    "SandboxError",
    "SandboxUnavailableError",
    "SweRlError",
    "TaskFormatError",
    "__version__",
]
