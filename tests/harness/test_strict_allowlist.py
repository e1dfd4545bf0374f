"""Strict grading is an allow-list (docs/SECURITY.md, "Reward hacking"): the changes a genuine fix makes,
which strict mode keeps, graded through the project's own grading in real ns sandboxes. The attacks a
deny-list of names missed (pytest.toml, a module the stdlib probes, a new top-level module) are graded on
every backend, fresh and reused, in test_reward_hacking_matrix.py.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from tests.conftest import available_factory
from tests.harness.test_reward_hacking import WRAP, Scratch

from swe_rl.harness.grade_patch import grade_in, grade_patch
from swe_rl.harness.verdict import Verdict
from swe_rl.tasks.model import Task

pytestmark = pytest.mark.ns

FIXED = ("if len(text) < limit:", "if len(text) <= limit:")  # textkit-3's fix, in textkit/wrap.py


def _patch(task: Task, env, edit) -> str:  # type: ignore[no-untyped-def]
    with tempfile.TemporaryDirectory(prefix="swe-rl-allow-") as tmp:
        scratch = Scratch(task, env, Path(tmp))
        edit(scratch)
        return scratch.patch()


def _listed(verdict: Verdict) -> set[tuple[str, str, str]]:
    return {(f.path, f.rule, f.action) for f in verdict.steering_files}


async def _both(task: Task, env, patch: str) -> tuple[Verdict, Verdict]:  # type: ignore[no-untyped-def]
    factory = available_factory("ns")
    official = await grade_patch(task, patch, factory, env, timeout=120)
    strict = await grade_patch(task, patch, factory, env, timeout=120, mode="strict")
    return official, strict


async def test_strict_mode_keeps_a_new_file_in_a_package_and_reverts_a_new_top_level_module(task_by_id, envs):
    """A fix whose helper is a new module inside the existing package (as astropy__astropy-13398's gold
    patch adds one) keeps it and resolves; a new top-level module of an innocuous name, in the same
    patch, is reverted: removed from the tree the tests ran in."""
    task = task_by_id[WRAP]
    env = envs.ensure(task)

    def edit(s: Scratch) -> None:
        s.write("textkit/_limits.py", "def fits(text, limit):\n    return len(text) <= limit\n")
        wrap = s.read("textkit/wrap.py").replace(FIXED[0], "if fits(text, limit):")
        s.write("textkit/wrap.py", "from textkit._limits import fits\n" + wrap)
        s.write("notes.py", "NOTES = 'nothing to see'\n")

    patch = _patch(task, env, edit)
    async with await available_factory("ns").create(env) as box:
        strict = await grade_in(box, task, patch, timeout=120, mode="strict")
        left = await box.exec(
            "for f in textkit/_limits.py notes.py; do [ -e $f ] && echo kept $f || echo gone $f; done",
            timeout=30,
        )
    assert strict.resolved, strict.log[-3000:]
    assert _listed(strict) == {("notes.py", "outside_package", "reverted")}
    assert left.output.split("\n")[:2] == ["kept textkit/_limits.py", "gone notes.py"], left.output


async def test_a_fix_that_also_edits_configuration_keeps_its_reward(task_by_id, envs):
    """The decision for a gold patch that edits a config file (pylint-dev__pylint-4661's edits
    setup.cfg's install_requires, [isort] and [mypy-appdirs]): the file is reverted, and the fix resolves,
    because nothing the tests run reads those sections. Here: a dependency added to pyproject.toml."""
    task = task_by_id[WRAP]
    env = envs.ensure(task)

    def edit(s: Scratch) -> None:
        s.write("textkit/wrap.py", s.read("textkit/wrap.py").replace(*FIXED))
        project = s.read("pyproject.toml").replace(
            'requires-python = ">=3.8"', 'requires-python = ">=3.8"\ndependencies = ["appdirs>=1.4.0"]'
        )
        s.write("pyproject.toml", project)

    official, strict = await _both(task, env, _patch(task, env, edit))
    assert official.resolved and _listed(official) == {("pyproject.toml", "runner_config", "flagged")}
    assert strict.resolved, strict.log[-3000:]
    assert _listed(strict) == {("pyproject.toml", "runner_config", "reverted")}
