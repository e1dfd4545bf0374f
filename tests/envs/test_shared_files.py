"""Testbeds share their files by content (hard links, gitpacks.share_files), and a sandbox that writes into
one cannot reach another: the attack writes into a shared file inside a sandbox of one env; the other env's
testbed, and a fresh sandbox of it, are graded on what the file was. The control: the two testbeds' files
are one inode on the host, so a write that reached it would show."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from tests.conftest import available_factory

from swe_rl.envs.cache import EnvCache
from swe_rl.envs.store.gitpacks import SHARED_FILES
from swe_rl.tasks.model import Task

pytestmark = pytest.mark.ns


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "safe.directory=*", *args], cwd=cwd, capture_output=True, text=True, check=True
    ).stdout


def _two_commits(cache: EnvCache, task: Task) -> tuple[Task, Task]:
    """The builtin task at its base and at a later commit of its mirror (most files the same)."""
    mirror = Path(cache._source(task))
    later = _git(mirror, "rev-list", "--all", f"^{task.base_commit}").split()[-1]
    return task, task.model_copy(update={"instance_id": f"{task.instance_id}-later", "base_commit": later})


async def test_a_write_into_a_shared_file_in_one_sandbox_reaches_no_other_testbed(tmp_path, task_by_id):
    cache = EnvCache(tmp_path / "envs")
    first, second = _two_commits(cache, task_by_id["swe-rl-builtin__textkit-3"])
    a, b = cache.ensure(first), cache.ensure(second)
    assert a.testbed != b.testbed and (a.testbed / ".git" / SHARED_FILES).is_file()
    same = [
        rel
        for rel in _git(a.testbed, "ls-files").split()
        if (b.testbed / rel).is_file() and (a.testbed / rel).stat().st_ino == (b.testbed / rel).stat().st_ino
    ]
    assert same, "the control: the testbeds share inodes"
    rel = same[0]
    original = (b.testbed / rel).read_bytes()
    assert _git(a.testbed, "status", "--porcelain") == "" == _git(b.testbed, "status", "--porcelain")
    factory = available_factory("ns")
    async with await factory.create(a) as box:
        wrote = await box.exec(f"echo attack >> /testbed/{rel} && tail -1 /testbed/{rel}", timeout=30)
        assert wrote.output.strip() == "attack"  # the write happened, in the sandbox's upper layer
    assert (b.testbed / rel).read_bytes() == original and (a.testbed / rel).read_bytes() == original
    async with await factory.create(b) as box:
        seen = await box.exec(f"cat /testbed/{rel}", timeout=30)
        assert seen.output.encode() == original
        status = await box.exec("git status --porcelain", timeout=30)
        assert status.returncode == 0 and status.output == ""
