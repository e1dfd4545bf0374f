"""Small git repositories for synthesis tests."""

from __future__ import annotations

import subprocess
from pathlib import Path


def git_repo(root: Path, files: dict[str, str]) -> Path:
    """A repository at ``root`` with ``files`` (path -> text) in one commit on ``main``."""
    root.mkdir(parents=True)
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "lib"]):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=root,
            check=True,
            capture_output=True,
        )
    return root
