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
    grader = Grader(available_factory("ns"), idle=1)
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
