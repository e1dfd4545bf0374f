"""The grading spec (harness/evalscript.GradingSpec: the row's or the table's spec, the composed test command,
the log parser) is derived once per grading and passed along, as swebench builds one TestSpec per instance:
fresh, and through a reused Grader, in both modes. The derivations are counted where the harness calls them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from tests.conftest import available_factory
from tests.harness.test_reward_hacking import WRAP

from swe_rl.harness import evalscript, official
from swe_rl.harness.grade_many import Grader
from swe_rl.harness.grade_patch import grade_patch
from swe_rl.sandbox.pool import SandboxPool

DERIVED = {evalscript: ("row_spec", "spec_for", "parser_name"), official: ("parser_name",)}


@pytest.mark.ns
async def test_the_grading_spec_is_derived_once_per_grading(task_by_id, envs, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    task = task_by_id[WRAP]
    env = envs.ensure(task)
    calls: Counter[str] = Counter()

    def counted(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def counting(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return function(*args, **kwargs)

        return counting

    for module, names in DERIVED.items():
        for name in names:
            monkeypatch.setattr(module, name, counted(name, getattr(module, name)))
    grader = Grader(SandboxPool(available_factory("ns"), idle=1))
    try:
        for mode in ("official", "strict"):
            for way in ("fresh", "reused"):
                calls.clear()
                if way == "fresh":
                    verdict = await grade_patch(
                        task, task.patch, available_factory("ns"), env, timeout=120, mode=mode
                    )
                else:
                    verdict = await grader.grade(task, task.patch, env, timeout=120, mode=mode)
                assert verdict.resolved, verdict.log[-2000:]
                assert calls == Counter(row_spec=1, spec_for=1, parser_name=1), (mode, way, calls)
    finally:
        await grader.close()


@pytest.mark.ns
async def test_a_runner_that_is_the_repository_under_test_is_not_sealed(task_by_id, envs) -> None:  # type: ignore[no-untyped-def]
    """pytest-dev/pytest's patches change its tests' runner, which its tests run inside itself: strict mode runs
    no seal there, and a log that resolves is unverifiable (not a pass from the log, not a wrong answer). The
    control: the same task under its own name is sealed and resolves."""
    base = task_by_id[WRAP]
    env = envs.ensure(base)
    own = base.model_copy(update={"repo": "pytest-dev/pytest"})
    assert evalscript.GradingSpec.of(base).seal_runner == "pytest"
    assert evalscript.GradingSpec.of(own).seal_runner is None
    factory = available_factory("ns")
    strict = await grade_patch(own, own.patch, factory, env, timeout=120, mode="strict")
    assert (strict.resolved, strict.status, strict.seal) == (False, "unverifiable", ""), strict.log[-2000:]
    assert "runner is the repository under test (pytest-dev/pytest)" in strict.log
    official_run = await grade_patch(own, own.patch, factory, env, timeout=120, mode="official")
    assert official_run.resolved, official_run.log[-2000:]
    control = await grade_patch(base, base.patch, factory, env, timeout=120, mode="strict")
    assert (control.resolved, control.seal) == (True, "confirmed"), control.log[-2000:]
