"""Grading agrees with the official harness, and bad patches get clear, typed outcomes."""

from __future__ import annotations

import asyncio

import pytest
from swebench.harness.grading import get_eval_tests_report, get_logs_eval, get_resolution_status
from tests.conftest import available_factory

from swe_rl.harness.grade_patch import grade_patch, run_tests
from swe_rl.harness.official import test_spec as official_spec
from swe_rl.runs.validation import ValidationReport, validate_tasks
from swe_rl.sandbox import BACKENDS, get_factory


@pytest.fixture(scope="module")
def validations(tasks, envs) -> dict[str, ValidationReport]:
    """The builtin suite validated on every backend."""
    return {
        backend: asyncio.run(
            validate_tasks(tasks, envs, available_factory(backend), concurrency=2, quiet=True)
        )
        for backend in BACKENDS
    }


@pytest.fixture(scope="module")
def validation(validations) -> ValidationReport:
    return validations["local"]


@pytest.mark.ns
@pytest.mark.docker
@pytest.mark.parametrize("backend", BACKENDS)
def test_every_builtin_task_is_valid(validations, tasks, backend):
    validation = validations[backend]
    assert validation.errors == {}
    assert validation.invalid == [], [r.problems for r in validation.results if not r.valid]
    assert validation.valid == len(tasks)


@pytest.mark.ns
@pytest.mark.docker
def test_verdicts_are_identical_on_every_backend(validations):
    def verdicts(report: ValidationReport) -> list[tuple]:
        return [
            (r.instance_id, v.status, v.apply_method, v.tests_status)
            for r in report.results
            for v in (r.gold, r.empty)
        ]

    reference = verdicts(validations["local"])
    for backend, report in validations.items():
        assert verdicts(report) == reference, backend


def _official(task, log: str, tmp_path):
    """swebench's own functions on the same log, called directly."""
    path = tmp_path / f"{task.instance_id}.log"
    path.write_text(log)
    status_map, found = get_logs_eval(official_spec(task), str(path))
    gold = {"FAIL_TO_PASS": task.FAIL_TO_PASS, "PASS_TO_PASS": task.PASS_TO_PASS}
    report = get_eval_tests_report(status_map, gold)
    return found and get_resolution_status(report) == "RESOLVED_FULL", report


@pytest.mark.ns
@pytest.mark.docker
def test_verdicts_equal_swebench_grading_on_the_same_logs(validations, task_by_id, tmp_path):
    for result in [r for report in validations.values() for r in report.results]:
        task = task_by_id[result.instance_id]
        for verdict in (result.gold, result.empty):
            resolved, report = _official(task, verdict.log, tmp_path)
            assert verdict.resolved == resolved, task.instance_id
            for kind in ("FAIL_TO_PASS", "PASS_TO_PASS"):
                assert verdict.tests_status[kind] == report[kind], (task.instance_id, kind)


@pytest.mark.ns
@pytest.mark.docker
def test_ids_with_spaces_are_keyed_as_the_official_parser_keys_them(validation):
    gold = next(r.gold for r in validation.results if r.instance_id == "swe-rl-builtin__textkit-1")
    assert "tests/test_slug.py::test_runs_collapse[Hello" in gold.tests_status["FAIL_TO_PASS"]["success"]
    assert "PASSED tests/test_slug.py::test_runs_collapse[Hello  World-hello-world]" in gold.log


def test_empty_patch_is_not_resolved_without_running(task_by_id, envs):
    task = task_by_id["swe-rl-builtin__statkit-1"]
    for patch in ("", "  \n", None):
        verdict = asyncio.run(grade_patch(task, patch, get_factory("local"), envs.ensure(task)))
        assert (verdict.resolved, verdict.status) == (False, "empty_patch")


def test_patch_that_applies_nowhere(task_by_id, envs):
    task = task_by_id["swe-rl-builtin__statkit-1"]
    garbage = (
        "diff --git a/statkit/stats.py b/statkit/stats.py\n--- a/statkit/stats.py\n+++ b/statkit/stats.py\n"
        "@@ -1,3 +1,3 @@\n-this line is not there\n+replacement\n context\n"
    )
    verdict = asyncio.run(grade_patch(task, garbage, get_factory("local"), envs.ensure(task)))
    assert (verdict.resolved, verdict.status, verdict.apply_method) == (False, "apply_failed", None)
    assert verdict.log.count("Failed to apply patch with") == 4


def test_patch_touching_a_missing_file(task_by_id, envs):
    task = task_by_id["swe-rl-builtin__statkit-1"]
    missing = (
        "diff --git a/statkit/nope.py b/statkit/nope.py\n--- a/statkit/nope.py\n+++ b/statkit/nope.py\n"
        "@@ -1 +1 @@\n-a\n+b\n"
    )
    verdict = asyncio.run(grade_patch(task, missing, get_factory("local"), envs.ensure(task)))
    assert verdict.status == "apply_failed" and not verdict.resolved


def test_fuzzy_patch_falls_through_to_patch_fuzz(task_by_id, envs):
    """git apply refuses a hunk whose context drifted; `patch --fuzz=5` applies it, as the official chain does."""
    task = task_by_id["swe-rl-builtin__textkit-3"]
    drifted = task.patch.replace(' """``text`` cut to', ' """The ``text`` cut to')
    assert drifted != task.patch
    verdict = asyncio.run(grade_patch(task, drifted, get_factory("local"), envs.ensure(task)))
    assert verdict.apply_method == "patch --batch --forward --fuzz=5 -p1"
    assert verdict.resolved


def test_wrong_fix_is_unresolved_and_breaking_p2p_counts(task_by_id, envs):
    task = task_by_id["swe-rl-builtin__textkit-3"]
    # fixes the F2P test but breaks an existing one: not resolved
    breaking = task.patch.replace("+    if len(text) <= limit:", "+    if len(text) <= limit or True:")
    verdict = asyncio.run(grade_patch(task, breaking, get_factory("local"), envs.ensure(task)))
    assert not verdict.resolved and verdict.status == "unresolved"
    assert verdict.tests_status["PASS_TO_PASS"]["failure"]


def test_grading_runs_from_the_base_whatever_the_log_size(task_by_id, envs):
    task = task_by_id["swe-rl-builtin__inikit-1"]
    verdict = asyncio.run(run_tests(task, get_factory("local"), envs.ensure(task)))
    assert not verdict.resolved and verdict.timings["total"] > 0
    assert verdict.report["patch_successfully_applied"] is True
