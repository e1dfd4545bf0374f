"""Repositories synthesis must refuse (clear typed error, nothing written), and a plain repo it accepts."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import available_factory
from tests.synth.repos import git_repo

from swe_rl.envs.cache import EnvCache
from swe_rl.errors import SynthError
from swe_rl.synth import SynthOptions, synthesize
from swe_rl.tasks.loaders import load_tasks

LIB = '''"""A tiny library."""


def add_all(xs):
    total = 0
    for x in xs:
        total += x
    return total


def clip(x, lo, hi):
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x
'''
TESTS = """from minilib import add_all, clip


def test_add_all():
    assert add_all([1, 2, 3]) == 6


def test_clip():
    assert clip(5, 0, 3) == 3
    assert clip(-1, 0, 3) == 0
    assert clip(2, 0, 3) == 2
"""


def _synth(repo: Path, out: Path, **options: object):  # type: ignore[no-untyped-def]
    opts = SynthOptions(n=3, seed=0, multi=0, concurrency=2, **options)  # type: ignore[arg-type]
    return asyncio.run(
        synthesize([str(repo)], out, options=opts, cache=EnvCache(), factory=available_factory("ns"))
    )


def _nothing_written(out: Path) -> None:
    assert sorted(p.name for p in out.parent.iterdir()) == [], "no task file, repo or staging left"


@pytest.mark.ns
@pytest.mark.parametrize(
    "case,files,message",
    [
        (
            "failing suite",
            {
                "minilib.py": LIB,
                "tests/test_minilib.py": TESTS + "\n\ndef test_broken():\n    assert add_all([]) == 1\n",
            },
            "fails before any mutation",
        ),
        ("no tests", {"minilib.py": LIB, "README.md": "no tests here\n"}, "ran no tests"),
        (
            "syntax error",
            {"minilib.py": LIB, "helpers.py": "def broken(:\n    pass\n", "tests/test_minilib.py": TESTS},
            "syntax error in helpers.py line 1",
        ),
    ],
)
def test_bad_repository_is_a_clear_error_and_writes_nothing(tmp_path, case, files, message):
    repo = git_repo(tmp_path / "repo", files)
    out = tmp_path / "out" / "tasks.jsonl"
    out.parent.mkdir()
    with pytest.raises(SynthError, match=message):
        _synth(repo, out)
    _nothing_written(out)


@pytest.mark.ns
def test_cli_reports_a_bad_repository_in_one_line(tmp_path):
    repo = git_repo(tmp_path / "repo", {"minilib.py": LIB})
    out = tmp_path / "out" / "tasks.jsonl"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "swe_rl.cli.app",
            "tasks",
            "synth",
            "--repo",
            str(repo),
            "--out",
            str(out),
            "-b",
            "ns",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "error:" in proc.stderr and "ran no tests" in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists() and not out.with_name("tasks.git").exists()


@pytest.mark.ns
def test_plain_repository_with_allowed_failures(tmp_path):
    """A repo from a path (git HEAD): tests failing at baseline are left out of every task."""
    broken = TESTS + "\n\ndef test_known_failure():\n    assert add_all([]) == 1\n"
    repo = git_repo(tmp_path / "repo", {"minilib.py": LIB, "tests/test_minilib.py": broken})
    out = tmp_path / "out" / "tasks.jsonl"
    report = _synth(repo, out, allow_failing=True)
    tasks = load_tasks(out)
    assert tasks and len(tasks) == len(report.tasks) <= 3
    for task in tasks:
        assert task.repo == "swe-rl-synth/repo"
        assert "tests/test_minilib.py::test_known_failure" not in task.FAIL_TO_PASS + task.PASS_TO_PASS
        assert task.patch.startswith("diff --git a/minilib.py b/minilib.py")
