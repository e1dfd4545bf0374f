"""Where swe-rl keeps its caches. Nothing is created at import time."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """Root of all caches: ``$SWE_RL_CACHE`` or ``~/.cache/swe-rl``."""
    env = os.environ.get("SWE_RL_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "swe-rl"


def repo_cache_dir() -> Path:
    """Default repo cache: bare mirrors at ``<dir>/<owner>/<name>.git``."""
    return cache_dir() / "repos"


def conda_executable() -> str | None:
    """A conda (or mamba) to make interpreters with where no other provider has the version: ``$SWE_RL_CONDA``."""
    return os.environ.get("SWE_RL_CONDA") or None
