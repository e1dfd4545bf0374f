"""The class of cause a build report gives each unusable instance, row by row of CAUSE_RULES, and the summary.

Where a real swe-rl function says it, the reason is that function's own message (as ``env build`` records it).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from swe_rl.envs.build.repo_sources import find_repo_source
from swe_rl.envs.build.testbed import make_testbed
from swe_rl.envs.build.uv_output import missing_library
from swe_rl.errors import EnvBuildError, InfraError, SandboxError, SweRlError
from swe_rl.harness.validate import conda_only_evidence, network_evidence
from swe_rl.harness.verdict import Verdict
from swe_rl.runs.buildreport import CAUSE_RULES, BuildEntry, BuildSummary, cause_of, failure_reason
from swe_rl.tasks.specs import check_system


def _raised(call) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(SweRlError) as caught:
        call()
    return failure_reason(caught.value)


def _examples(tmp_path: Path) -> list[tuple[str, str, str]]:
    """(status, reason, cause): at least one for every row of the table, and for the fallback."""
    unparseable = Verdict(
        instance_id="x", resolved=False, status="unparseable_log", log="collected 3 items\n"
    )
    offline = Verdict(
        instance_id="x",
        resolved=False,
        status="unresolved",
        test_output="E   urllib.error.URLError: <urlopen error [Errno 101] Network is unreachable>\n",
    )
    skipped = Verdict(
        instance_id="x",
        resolved=False,
        status="unresolved",
        test_output="SKIPPED [1] t.py:3585: could not import 'cdms2': No module named 'cdms2'\n",
    )
    header = "hint: you may need to install a library that provides `ffi.h` for `cffi@1.15.0`"
    install_log = "install command exited 1 (log /c/logs/k.install.log):\nerror: subprocess-exited-with-error"
    return [
        (
            "unfetchable",
            _raised(lambda: find_repo_source("nobody/nowhere", tmp_path)),
            "repository not fetchable",
        ),
        ("failed", "ConfigError: Python 3.5 is needed but not installed; provide it", "python not installed"),
        (
            "failed",
            _raised(lambda: check_system(["swe-rl-no-such-tool"], "the tests")),
            "system library missing",
        ),
        ("failed", f"EnvBuildError: {install_log}{missing_library(header)}", "system library missing"),
        (
            "failed",
            _raised(lambda: make_testbed(str(tmp_path / "none"), "0" * 40, tmp_path / "t")),
            "checkout failed",
        ),
        ("failed", f"EnvBuildError: {install_log}", "build failed"),
        ("invalid", "gold patch not resolved (test_timeout; failing: -)", "timeout"),
        ("error", failure_reason(InfraError("the harness timed out after 1800 s")), "timeout"),
        ("invalid", f"gold patch not resolved: {unparseable.summary()}", "unparseable log"),
        (
            "invalid",
            "gold patch not resolved (unresolved; failing: tests/test_a.py::test_b)",
            "gold does not resolve",
        ),
        (
            "invalid",
            f"gold patch not resolved (unresolved; failing: t.py::test_get); needs the network, which sandboxes "
            f"do not have: {network_evidence(offline)}",
            "needs the network",
        ),
        (
            "invalid",
            "gold patch not resolved (unresolved; failing: t.py::test_cdms2); needs a conda-only package the "
            f"official env installs (none on PyPI): {conda_only_evidence(skipped, 1, ['cdms2'])}",
            "conda-only package",
        ),
        ("invalid", "the unchanged base commit already resolves the task", "empty resolves"),
        ("error", failure_reason(SandboxError("sandbox died")), "grading infrastructure"),
        ("failed", "ConfigError: a record we have never seen", "other"),
    ]


def test_every_example_gets_its_cause_and_every_rule_is_reached(tmp_path: Path) -> None:
    examples = _examples(tmp_path)
    got = [cause_of(BuildEntry(instance_id="i", status=s, reason=r)) for s, r, _ in examples]  # type: ignore[arg-type]
    assert got == [cause for _, _, cause in examples], [r for s, r, _ in examples]
    assert {rule.cause for rule in CAUSE_RULES} <= set(got), "a row of the table that no example reaches"


def test_a_usable_instance_has_no_cause_and_the_first_matching_rule_wins() -> None:
    assert cause_of(BuildEntry(instance_id="i", status="valid")) is None
    assert cause_of(BuildEntry(instance_id="i", status="built")) is None
    both = "gold patch not resolved (unresolved; failing: -); the unchanged base commit already resolves the task"
    assert cause_of(BuildEntry(instance_id="i", status="invalid", reason=both)) == "gold does not resolve"
    # a status outside a rule's statuses is not matched by it, whatever the reason says
    timed_build = "EnvBuildError: install command exited 1: Read timed out"
    assert cause_of(BuildEntry(instance_id="i", status="failed", reason=timed_build)) == "build failed"


def test_a_long_reason_keeps_its_first_line_and_its_tail() -> None:
    reason = failure_reason(EnvBuildError("\n".join(f"line {i}" for i in range(10))))
    assert reason == "EnvBuildError: line 0\n...\nline 6\nline 7\nline 8\nline 9"


def test_the_summary_counts_each_repository_and_all_of_them() -> None:
    entries = [
        BuildEntry(instance_id="a-1", repo="o/a", status="valid", seconds=10),
        BuildEntry(
            instance_id="a-2",
            repo="o/a",
            status="invalid",
            seconds=5,
            reason="the unchanged base commit already resolves the task",
        ),
        BuildEntry(
            instance_id="b-1", repo="o/b", status="unfetchable", reason="RepoNotFoundError: no mirror"
        ),
        BuildEntry(
            instance_id="b-2", repo="o/b", status="failed", reason="EnvBuildError: install command exited 1"
        ),
        BuildEntry(
            instance_id="b-3", repo="o/b", status="failed", reason="EnvBuildError: install command exited 2"
        ),
    ]
    summary = BuildSummary.of(entries)
    assert list(summary.repos) == ["o/a", "o/b"]
    a, b = summary.repos["o/a"], summary.repos["o/b"]
    assert (a.total, a.valid, a.invalid, a.seconds, a.causes) == (2, 1, 1, 15.0, {"empty resolves": 1})
    assert (b.total, b.unfetchable, b.failed, b.valid) == (3, 1, 2, 0)
    assert b.causes == {"repository not fetchable": 1, "build failed": 2}
    overall = summary.overall
    assert (overall.total, overall.valid, overall.invalid, overall.failed, overall.unfetchable) == (
        5,
        1,
        1,
        2,
        1,
    )
    assert summary.disk is None


def test_network_errors_class_an_instance_only_where_they_can_account_for_its_failures() -> None:
    """matplotlib-20488 failed 68 tests on a setuptools_scm warning, and two lines of its output were a failed
    name resolution: not an instance that needs the network. requests-5414's 4 failures came with 24 such lines."""
    two = "E       socket.gaierror: [Errno -2] Name or service not known\n" * 2
    verdict = Verdict(instance_id="x", resolved=False, status="unresolved", test_output=two)
    assert network_evidence(verdict, failing=68) is None
    evidence = network_evidence(verdict, failing=2)
    assert evidence is not None and evidence.startswith("2 line(s) of network errors")


def test_the_merge_script_puts_a_side_reports_entries_in_and_sums_up_again(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    from swe_rl.runs.buildreport import BuildReport

    def report(path: Path, **entries: str) -> Path:
        made = BuildReport(validated=True, backend="ns")
        made.entries = {i: BuildEntry(instance_id=i, repo="a/b", status=s) for i, s in entries.items()}  # type: ignore[arg-type]
        made.summary = BuildSummary.of(made.entries.values())
        path.write_text(made.model_dump_json())
        return path

    whole = report(tmp_path / "whole.json", one="valid", two="failed")
    side = report(tmp_path / "side.json", two="valid", three="invalid")
    script = Path(__file__).parents[2] / "bench" / "verified_merge.py"
    done = subprocess.run([sys.executable, script, whole, side], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    merged = BuildReport.load(whole)
    assert {i: e.status for i, e in merged.entries.items()} == {
        "one": "valid",
        "two": "valid",
        "three": "invalid",
    }
    assert merged.summary is not None and (merged.summary.overall.valid, merged.summary.overall.invalid) == (
        2,
        1,
    )
    other = json.loads(side.read_text())
    other["backend"] = "docker"
    side.write_text(json.dumps(other))
    refused = subprocess.run(
        [sys.executable, script, whole, side], capture_output=True, text=True, check=False
    )
    assert refused.returncode != 0 and "backend differ" in refused.stderr
