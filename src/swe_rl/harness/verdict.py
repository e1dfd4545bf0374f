"""The result of grading one patch."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from swe_rl.harness.official import START_TEST_OUTPUT
from swe_rl.harness.screen import ScreenFlag
from swe_rl.harness.steering import SteeringFile

ApplyMethod = Literal[
    "git apply --verbose",
    "git apply --verbose --3way",
    "git apply --verbose --reject",
    "patch --batch --forward --fuzz=5 -p1",
    "git apply --check --reverse",
]
"""swebench 5's chain, in its order; the last: no method applied it, but the tree already holds it."""
GradeStatus = Literal[
    "resolved",
    "unresolved",
    "unparseable_log",
    "apply_failed",
    "empty_patch",
    "test_timeout",
    "refused",
    "sandbox_broken",
    "unverifiable",
]
"""``unparseable_log``: the tests ran but their log parses to no test at all (e.g. a pytest too old to print
the ``-rA`` summary): not resolved, and said so rather than shown as an ordinary failure.
``sandbox_broken``: the patched code's tests broke the grading sandbox (killed its init or shell): not
resolved, and scored, never an infrastructure error.
``unverifiable``: strict mode, tests run by a command the seal does not cover (a row's own eval script, a tox that makes its own envs), on
a Python without audit hooks (before 3.8), or by a ``bin/test`` that did not run sympy's own runner, whose log
resolves: not resolved, since the code under test writes that log; counted apart
(``RunSummary.unverifiable``)."""
GradingMode = Literal["official", "strict"]


class Verdict(BaseModel):
    """How a patch fared. Always data: an infrastructure failure raises InfraError instead."""

    instance_id: str
    resolved: bool
    status: GradeStatus
    apply_method: ApplyMethod | None = Field(default=None, description="The method that applied the patch.")
    tests_status: dict[str, dict[str, list[str]]] = Field(
        default_factory=dict, description="swebench's FAIL_TO_PASS/PASS_TO_PASS success/failure lists."
    )
    report: dict[str, Any] = Field(default_factory=dict, description="swebench's get_eval_report entry.")
    log: str = Field(default="", description="Patch application and test output.")
    apply_log: str = Field(
        default="",
        description="Patch application and steering lines (what swebench's run_instance.log holds).",
    )
    test_output: str = Field(
        default="", description="The eval script's output alone (what swebench's test_output.txt holds)."
    )
    timings: dict[str, float] = Field(
        default_factory=dict,
        description="Seconds: apply, tests, total (in the sandbox); sandbox (getting a pristine one and "
        "giving it back: create and close, or reset).",
    )
    grading: GradingMode = Field(default="official", description="The grading mode that gave this verdict.")
    test_runner: str = Field(
        default="",
        description="How the tests ran where a warm runner was offered (harness/warm.py): 'forked' (from the "
        "sandbox's pytest server) or 'cold <reason>'; '' when they ran as the eval script wrote them.",
    )
    seal: str = Field(
        default="",
        description="Strict mode, tests run by pytest (harness/seal.py): 'confirmed' (the sealed results pass "
        "every test the log passes), 'contradicted', 'tripped' or 'missing or not signed ...' (then not "
        "resolved), 'nothing to confirm'; '' where the results were not sealed.",
    )
    seal_trips: list[str] = Field(
        default_factory=list,
        description="Strict mode: the tripwires that fired in the test process (the patched code walked gc, "
        "asked for frames, loaded ctypes, hooked pytest, replaced the runner's functions ...): each makes "
        "the grading unresolved.",
    )
    screen_flags: list[ScreenFlag] = Field(
        default_factory=list,
        description="Strict mode: what the screen of the patch's source found (harness/screen.py: comparisons "
        "that cannot fail, the runner's machinery, introspection): any makes the grading unresolved.",
    )
    steering_files: list[SteeringFile] = Field(
        default_factory=list,
        description="Files the patch touches that steer the test run without being the fix (docs/SECURITY.md):"
        " flagged in official mode, reverted or refused in strict mode.",
    )

    def summary(self) -> str:
        f2p = self.tests_status.get("FAIL_TO_PASS", {})
        p2p = self.tests_status.get("PASS_TO_PASS", {})
        counts = (
            f"F2P {len(f2p.get('success', []))}/{len(f2p.get('success', [])) + len(f2p.get('failure', []))}"
            f" P2P {len(p2p.get('success', []))}/{len(p2p.get('success', [])) + len(p2p.get('failure', []))}"
        )
        text = f"{self.status} ({counts})" if self.tests_status else self.status
        if self.status == "unparseable_log":
            text += "; the test log begins:\n" + "\n".join(f"    {line}" for line in self.log_head())
        return text

    def log_head(self, lines: int = 8) -> list[str]:
        """The first non-blank lines of the test output (what an unparseable log is shown by)."""
        _, marker, after = self.log.partition(START_TEST_OUTPUT)
        text = after if marker else self.log
        return [line[:200] for line in text.splitlines() if line.strip()][:lines]
