"""Running git on the host with a fixed, config-independent environment."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from swe_rl.errors import InfraError

# Deterministic identity and no user/system config: builds give the same commit ids everywhere.
_FIXED_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_AUTHOR_NAME": "swe-rl",
    "GIT_AUTHOR_EMAIL": "swe-rl@example.invalid",
    "GIT_COMMITTER_NAME": "swe-rl",
    "GIT_COMMITTER_EMAIL": "swe-rl@example.invalid",
    "LC_ALL": "C",
}


# safe.directory: a cached testbed belongs to the ns sandboxes' uid (sandbox/identity.py)
_FIXED_CONFIG = [
    *("-c", "safe.directory=*"),
    *("-c", "core.autocrlf=false"),
    *("-c", "commit.gpgsign=false"),
    *("-c", "tag.gpgsign=false"),
]


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(_FIXED_ENV)
    if extra:
        env.update(extra)
    return env


def _command(args: Sequence[str]) -> list[str]:
    return ["git", *_FIXED_CONFIG, *args]


def _failed(args: Sequence[str], cwd: Path, said: str) -> InfraError:
    return InfraError(f"git {' '.join(args[:3])} failed in {cwd}: {said}")


def git(
    args: Sequence[str],
    cwd: Path,
    *,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    input: str | None = None,
) -> str:
    """Run ``git <args>`` in ``cwd``; return stdout. A failure raises :class:`InfraError` with stderr."""
    proc = subprocess.run(
        _command(args),
        cwd=cwd,
        env=git_env(env),
        input=input,
        capture_output=True,
        text=True,
        check=False,
    )
    if check and proc.returncode != 0:
        raise _failed(args, cwd, proc.stderr.strip() or proc.stdout.strip())
    return proc.stdout


def git_into(args: Sequence[str], cwd: Path, out: Path, *, input: str | None = None) -> None:
    """Run ``git <args>`` in ``cwd`` with its stdout written to ``out`` (binary output such as a pack)."""
    with out.open("wb") as stream:
        proc = subprocess.run(
            _command(args),
            cwd=cwd,
            env=git_env(),
            input=None if input is None else input.encode(),
            stdout=stream,
            stderr=subprocess.PIPE,
            check=False,
        )
    if proc.returncode != 0:
        raise _failed(args, cwd, proc.stderr.decode(errors="replace").strip())
