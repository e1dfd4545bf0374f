"""The candidate patch is applied by swebench 5's chain: git apply, --3way, --reject, patch --forward,
then accepted when the tree already holds it (``git apply --check --reverse``)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from tests.conftest import available_factory

from swe_rl.harness.grade_patch import grade_patch
from swe_rl.tasks.model import Task

pytestmark = pytest.mark.ns

WRAP = "swe-rl-builtin__textkit-3"
DOC = '    """``text`` cut to at most ``limit`` characters, ending in ``ellipsis`` when cut."""\n'
REWORDED = '    """``text`` cut to ``limit`` characters at most, ending in ``ellipsis`` when cut."""\n'


def _three_way_only(task: Task) -> str:
    """The gold patch after a first section that rewords its context line: the gold hunk's context no
    longer matches the tree, but its index line names the blob it was made on, which --3way merges from."""
    header, _, _ = task.patch.partition("@@ ")
    first = (
        header.replace("index 21abb16..f14503f", "index 21abb16..0000000")
        + '@@ -32,3 +32,3 @@ def truncate(text, limit, ellipsis="..."):\n'
        + f"-{DOC}+{REWORDED}"
        + '     if limit < 0:\n         raise ValueError("limit must not be negative")\n'
    )
    return first + task.patch


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=False)


def _apply_by_hand(testbed: Path, patch: str, tmp: Path) -> tuple[subprocess.CompletedProcess[str], ...]:
    """``git apply`` then ``git apply --3way`` of ``patch`` in a copy of ``testbed``."""
    repo = tmp / "repo"
    shutil.copytree(testbed, repo, symlinks=True)
    _git(repo, "update-index", "-q", "--refresh")  # the copy's stat data differs from its index's
    (tmp / "p.diff").write_text(patch)
    return tuple(_git(repo, "apply", "--verbose", *opt, str(tmp / "p.diff")) for opt in ([], ["--3way"]))


async def test_a_patch_only_3way_applies(task_by_id, envs, tmp_path):
    task = task_by_id[WRAP]
    env = envs.ensure(task)
    patch = _three_way_only(task)
    assert "index 21abb16" in task.patch and DOC in (Path(env.testbed) / "textkit/wrap.py").read_text()
    # control: on a copy of the testbed, plain git apply refuses it and --3way applies it
    plain, three_way = _apply_by_hand(Path(env.testbed), patch, tmp_path)
    assert plain.returncode != 0 and "patch does not apply" in plain.stderr
    assert three_way.returncode == 0, three_way.stderr

    factory = available_factory("ns")
    verdict = await grade_patch(task, patch, factory, env)
    assert verdict.apply_method == "git apply --verbose --3way"
    assert verdict.resolved and verdict.steering_files == []
    assert verdict.apply_log.count("Failed to apply patch with") == 1
    strict = await grade_patch(task, patch, factory, env, mode="strict")
    assert strict.resolved and strict.steering_files == [], strict.apply_log


async def test_a_patch_the_tree_already_holds_is_applied(task_by_id, envs):
    """Every method fails on a patch whose result is the base itself; the reverse check accepts it and the
    tests run on the tree as it is (unresolved), where no method at all is an apply failure."""
    task = task_by_id[WRAP]
    env = envs.ensure(task)
    # the gold patch reversed: made from the fixed tree to the base, so the base already holds its result
    lines = []
    for line in task.patch.replace("index 21abb16..f14503f", "index f14503f..21abb16").splitlines():
        if line.startswith("-") and not line.startswith("---"):
            line = "+" + line[1:]
        elif line.startswith("+") and not line.startswith("+++"):
            line = "-" + line[1:]
        lines.append(line)
    reverse = "\n".join(lines) + "\n"
    verdict = await grade_patch(task, reverse, available_factory("ns"), env)
    assert verdict.apply_method == "git apply --check --reverse"
    assert verdict.apply_log.count("Failed to apply patch with") == 4
    assert verdict.status == "unresolved" and verdict.report["patch_successfully_applied"]
