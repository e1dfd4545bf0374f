"""A relative --repo-cache works: the mirror's path is made absolute before git runs elsewhere (#22)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from swe_rl.envs.repos import find_repo_source
from swe_rl.envs.testbed import make_testbed


def _git(cwd, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def test_a_relative_repo_cache_builds_a_testbed(tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    _git(work, "init", "-q")
    (work / "a.py").write_text("x = 1\n")
    _git(work, "add", "a.py")
    _git(work, "commit", "-qm", "one")
    commit = _git(work, "rev-parse", "HEAD")
    subprocess.run(
        ["git", "clone", "-q", "--mirror", str(work), str(tmp_path / "mirrors/acme/widget.git")], check=True
    )
    monkeypatch.chdir(tmp_path)
    source = find_repo_source("acme/widget", Path("mirrors"))
    assert source.startswith("/"), source
    make_testbed(source, commit, tmp_path / "elsewhere" / "testbed")  # git runs in another directory
    assert (tmp_path / "elsewhere" / "testbed" / "a.py").read_text() == "x = 1\n"
