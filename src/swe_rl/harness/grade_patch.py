"""Grade a patch with SWE-bench's semantics in a pristine sandbox of the task's environment.

The candidate patch is applied in a fresh sandbox (never the agent's working state) by swebench 5's
chain: ``git apply --verbose``, ``--verbose --3way``, ``--verbose --reject``, then
``patch --batch --forward --fuzz=5 -p1``, with the tree (and git's index, which ``--3way`` writes)
restored between attempts; when all fail, the patch counts as applied if ``git apply --check --reverse``
says the tree already holds it. The eval script runs the tests; swebench's own ``get_eval_report`` reads
the test output, as the official harness's ``test_output.txt`` holds it (the apply log is kept in
``Verdict.apply_log`` for people, never parsed). Sandbox failures propagate as InfraError, never as a
verdict.

Every patch's changes are inventoried (:mod:`.inventory`) and checked against the steering rule
(:mod:`.steering`): ``official`` mode flags what breaks it and changes no verdict; ``strict`` mode
(training rewards) refuses the patch or reverts those files before the tests run.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from swe_rl.errors import BackendLostError, OutputLimitError, SandboxError
from swe_rl.harness.evalscript import (
    CANDIDATE_PATCH,
    EVAL_SCRIPT,
    SCRATCH,
    TEST_PATCH,
    GradingSpec,
    eval_script,
)
from swe_rl.harness.guard import STEERING_MARK, Guard
from swe_rl.harness.official import (
    APPLY_PATCH_FAIL,
    APPLY_PATCH_PASS,
    official_report,
    parse_test_log,
)
from swe_rl.harness.screen import ScreenFlag, screen_sandbox
from swe_rl.harness.seal import UNARMED, UNAUDITED, Seal
from swe_rl.harness.staging import stage
from swe_rl.harness.verdict import ApplyMethod, GradeStatus, GradingMode, Verdict
from swe_rl.harness.warm import WarmRunner, runner_of
from swe_rl.sandbox.base import EnvSpec, Limits, Sandbox, SandboxFactory
from swe_rl.tasks.model import Task

_INDEX = f"{SCRATCH}/pristine.index"
_SAVE_INDEX = f"cp .git/index {_INDEX} 2>/dev/null; "
_PUT_INDEX_BACK = f"{{ [ ! -f {_INDEX} ] || cp {_INDEX} .git/index; }}"
# --3way writes blobs into .git/objects (and freshens the packs holding those it finds there) and stages
# its result: a change to .git that the steering guard refuses in strict mode. It runs on a scratch object
# store instead, holding only the preimage blobs the patch's index lines name (all --3way reads), and the
# pristine index comes back after it: the tree is left as a plain `git apply` leaves it, .git as it was.
_THREE_WAY = f"""O="$PWD/{SCRATCH}/objects"; mkdir -p "$O"
for b in $(sed -n 's/^index \\([0-9a-f]\\{{4,\\}}\\)\\.\\..*/\\1/p' {CANDIDATE_PATCH} | sort -u); do
  full=$(git rev-parse -q --verify "$b^{{blob}}" 2>/dev/null) || continue
  git cat-file blob "$full" | GIT_OBJECT_DIRECTORY="$O" git hash-object -w --stdin >/dev/null
done
git update-index -q --refresh >/dev/null 2>&1
GIT_OBJECT_DIRECTORY="$O" git apply --verbose --3way {CANDIDATE_PATCH} && {_PUT_INDEX_BACK}"""
APPLY_METHODS: list[tuple[ApplyMethod, str]] = [  # swebench.harness.run_evaluation.GIT_APPLY_CMDS
    ("git apply --verbose", f"git apply --verbose {CANDIDATE_PATCH}"),
    ("git apply --verbose --3way", _THREE_WAY),
    ("git apply --verbose --reject", f"git apply --verbose --reject {CANDIDATE_PATCH}"),
    ("patch --batch --forward --fuzz=5 -p1", f"patch --batch --forward --fuzz=5 -p1 -i {CANDIDATE_PATCH}"),
]
ALREADY_APPLIED: tuple[ApplyMethod, str] = (
    "git apply --check --reverse",
    f"git apply --check --reverse {CANDIDATE_PATCH}",
)
# a failed --3way leaves conflict entries in the index, which make a plain checkout fail: the pristine
# index goes back first, so every method starts from the pristine tree
_RESTORE = f"{_PUT_INDEX_BACK} && git checkout -q -- . && git clean -fdq -e .git"
DEFAULT_TEST_TIMEOUT = 1800.0


async def grade_patch(
    task: Task,
    patch: str | None,
    factory: SandboxFactory,
    env: EnvSpec,
    *,
    timeout: float = DEFAULT_TEST_TIMEOUT,
    limits: Limits | None = None,
    mode: GradingMode = "official",
) -> Verdict:
    """Grade ``patch`` for ``task`` in a new sandbox of ``env``."""
    if patch is None or not patch.strip():
        return Verdict(
            instance_id=task.instance_id,
            resolved=False,
            status="empty_patch",
            report={"patch_is_None": patch is None, "patch_exists": False, "resolved": False},
            grading=mode,
        )
    started = time.monotonic()
    box = await factory.create(env, limits)
    sandbox_s = time.monotonic() - started
    async with box:
        verdict = await grade_in(
            box, task, patch, timeout=timeout, mode=mode, image_env=env.rootfs is not None
        )
        closing = time.monotonic()
    verdict.timings["sandbox"] = round(sandbox_s + time.monotonic() - closing, 4)
    return verdict


async def run_tests(
    task: Task,
    factory: SandboxFactory,
    env: EnvSpec,
    *,
    timeout: float = DEFAULT_TEST_TIMEOUT,
    limits: Limits | None = None,
) -> Verdict:
    """Run the task's tests on the unchanged base commit (what an empty patch scores, without the shortcut)."""
    async with await factory.create(env, limits) as box:
        return await grade_in(box, task, None, timeout=timeout, image_env=env.rootfs is not None)


async def grade_in(
    box: Sandbox,
    task: Task,
    patch: str | None,
    *,
    timeout: float,
    mode: GradingMode = "official",
    image_env: bool = False,
    runner: WarmRunner | None = None,
    installed: set[str] | None = None,
    spec: GradingSpec | None = None,
) -> Verdict:
    """Grade in an existing pristine sandbox (fresh or just reset). ``patch=None`` runs the tests as they are.
    ``image_env``: the sandbox runs an env imported from the official image (its eval scripts apply as written).
    ``runner``: the sandbox's warm test runner (:mod:`.warm`), which a pytest test command is sent to.
    ``installed``: the env's module names (inventory.installed_modules), when the caller knows them.
    ``spec``: the grading's spec (how the tests run and are read), where the caller derived it already."""
    spec = spec or GradingSpec.of(task, image_env=image_env)
    grading = _Grading(task, patch, mode, spec.parser, self_hosted=spec.self_hosted)
    if (
        patch is not None
        and (ended := await _apply_candidate(box, task, patch, grading, installed)) is not None
    ):
        return ended
    grading.applied_at = time.monotonic()
    sealed_by = spec.seal_runner if mode == "strict" and patch is not None else None
    if sealed_by is not None:
        grading.seal = Seal.new(SCRATCH, grading.kept, sealed_by)
        await grading.seal.put_key(box)
    script = eval_script(task, image_env=image_env, runner=runner, seal=grading.seal, spec=spec)
    files = {TEST_PATCH: task.test_patch.encode(), EVAL_SCRIPT: script.encode()}
    staged = await stage(box, {**files, **(grading.seal.files() if grading.seal else {})})
    try:
        result = await box.exec(f"{staged}bash {EVAL_SCRIPT}", timeout=timeout)
        if grading.seal is not None:  # in the same sandbox: one the tests broke cannot hand it back
            grading.sealed = await grading.seal.read(box)
    except BackendLostError:
        raise
    except SandboxError as exc:
        if patch is None:  # the repository's own tests broke it: the env's fault
            raise
        # the pristine env's tests do not break their sandbox (validated): the patched code did, so it is
        # the patch's outcome, scored as unresolved, never an infra error a policy could learn to reach
        grading.log.append(f"the sandbox broke while the patched code's tests ran: {exc}")
        return grading.broken()
    output, grading.runner = runner_of(result.output)
    return grading.verdict(output, timeout_hit=result.timed_out)


async def _apply_candidate(
    box: Sandbox, task: Task, patch: str, grading: _Grading, installed: set[str] | None
) -> Verdict | None:
    """Stage, guard and apply the candidate patch (and screen it, strict); a verdict when grading ends here."""
    mode = grading.mode
    try:
        staged = await stage(
            box, {CANDIDATE_PATCH: (patch if patch.endswith("\n") else patch + "\n").encode()}
        )
    except OutputLimitError as exc:  # the agent's outcome, scored: never graded cut, never an infra error
        grading.log.append(f"{STEERING_MARK} ({mode}): patch refused: {exc}")
        return grading.refused()
    guard = Guard(task, mode, installed)
    await guard.before(box, staged + _SAVE_INDEX)  # the pristine index, kept in the same round trip
    if not guard.refusal:
        grading.method = await _apply(box, grading.log)
        if grading.method is not None:
            await guard.after(box)
    grading.guard = guard
    if grading.method is None and not guard.refusal:
        grading.log.append(APPLY_PATCH_FAIL)
        return grading.verdict("", timeout_hit=False)
    if guard.refusal:
        return grading.refused()
    grading.kept = guard.kept_paths()
    if mode == "strict":  # before the tests: their code could rewrite the files it reads
        grading.screen = await screen_sandbox(box, task, grading.kept)
    return None


async def _apply(box: Sandbox, log: list[str]) -> ApplyMethod | None:
    """The official chain, each method from the pristine tree (its index saved by ``_SAVE_INDEX`` first)."""
    for attempt, (name, command) in enumerate(APPLY_METHODS):
        if attempt:  # a failed --reject leaves partial state; start each method from a clean tree
            await box.exec(_RESTORE, timeout=120)
        result = await box.exec(command, timeout=300)
        if result.returncode == 0:
            log.append(f"{APPLY_PATCH_PASS} ({name}):\n{result.output}")
            return name
        log.append(f"Failed to apply patch with {name}:\n{result.output}")
    # as swebench: the chain can leave the patch applied while every command failed; the tree is kept as is
    name, command = ALREADY_APPLIED
    if (await box.exec(command, timeout=300)).returncode == 0:
        log.append(f"{APPLY_PATCH_PASS} ({name}): verified already applied")
        return name
    await box.exec(_RESTORE, timeout=120)
    return None


class _Grading:
    """The state of one grading, and the verdict it comes to."""

    def __init__(
        self, task: Task, patch: str | None, mode: GradingMode, parser: str, *, self_hosted: bool = False
    ) -> None:
        self.task, self.patch, self.mode, self.parser = task, patch, mode, parser
        self.self_hosted = self_hosted  # the tests' runner is the repository under test: no seal
        self.log: list[str] = []  # the apply log; the test output is the verdict's own
        self.method: ApplyMethod | None = None
        self.guard: Guard | None = None
        self.runner = ""
        self.seal: Seal | None = None  # strict mode's, where the tests run by pytest
        self.sealed: bytes | None = None  # what the run left as its sealed results
        self.seal_state = ""
        self.seal_trips: list[str] = []
        self.kept: list[str] = []  # the paths the patch changed that stay changed for the tests
        self.screen: list[ScreenFlag] = []  # strict mode's screen of the patch's source
        self.started = self.applied_at = time.monotonic()

    def refused(self) -> Verdict:
        """Strict mode refused the patch: the tests did not run, and it is not resolved."""
        self.applied_at = time.monotonic()
        return self._make("refused", False, self._unresolved(), "")

    def broken(self) -> Verdict:
        """The patched code's tests broke the grading sandbox (killed its init, its shell): not resolved."""
        return self._make("sandbox_broken", False, self._unresolved(), "")

    def _unresolved(self) -> dict[str, Any]:
        """The report of a patch graded without a test log to read."""
        applied = self.method is not None
        return {
            "patch_is_None": False,
            "patch_exists": True,
            "patch_successfully_applied": applied,
            "resolved": False,
        }

    def verdict(self, test_output: str, *, timeout_hit: bool) -> Verdict:
        """swebench's report on ``test_output`` (the eval script's output, what the official harness's
        test_output.txt holds) or, when the patch did not apply, on the apply log."""
        parsed = test_output if self.method is not None or self.patch is None else "\n".join(self.log)
        with tempfile.TemporaryDirectory(prefix="swe-rl-grade-") as tmp:
            log_path = Path(tmp) / "test_output.txt"
            log_path.write_text(parsed, encoding="utf-8")
            report = official_report(
                self.task, self.patch if self.patch is not None else "", str(log_path), self.parser
            )
        if self.seal is not None and self.method is not None:
            self._confirm(report)
        unverifiable = self._unverifiable(report)
        self._screened(report)
        resolved = bool(report.get("resolved"))
        status: GradeStatus
        if unverifiable:
            status = "unverifiable"
        elif self.method is None and self.patch is not None:
            status = "apply_failed"
        elif timeout_hit and not resolved:
            status = "test_timeout"
        elif not resolved and not parse_test_log(parsed, self.parser):
            status = "unparseable_log"
        else:
            status = "resolved" if resolved else "unresolved"
        return self._make(status, resolved, report, test_output)

    def _screened(self, report: dict[str, Any]) -> None:
        """Strict mode: a patch whose source the screen flags is not resolved, whatever the tests said."""
        for flag in self.screen:
            self.log.append(
                f"{STEERING_MARK} ({self.mode}): screen: {flag.rule} at {flag.path}:{flag.line}: {flag.reason}"
            )
        if self.screen and report.get("resolved"):
            report["resolved"] = False
            self.log.append(
                f"{STEERING_MARK} ({self.mode}): not resolved: the screen flagged the patch's source"
            )

    def _unverifiable(self, report: dict[str, Any]) -> bool:
        """Strict mode, a run no seal covers (a row's own script, a runner that is the repository under test),
        whose seal had no audit hook (Python before 3.8) or that sympy's seal could not arm: its log alone cannot
        make a pass, since the patched code writes it (and, unaudited, could reach the seal's evidence); a log
        that resolves is not trusted."""
        if self.mode != "strict" or self.patch is None or self.method is None:
            return False
        if self.seal is None and self.self_hosted:
            why = (
                f"the tests' runner is the repository under test ({self.task.repo}): a patch changes the runner, "
                "and its tests run it inside itself"
            )
        elif self.seal is None:
            why = (
                "the tests ran by a command the seal does not cover (not pytest, tox in the current env, "
                "django's, unittest's or sympy's runner), and the log alone is written by the code under test"
            )
        elif self.seal_state == UNAUDITED:
            why = (
                "the seal had no audit hook (Python before 3.8): the code under test could reach its evidence"
            )
        elif self.seal_state == UNARMED:
            why = "sympy's bin/test ran no test file by sympy's own runner (sympy 1.12.1+ runs pytest)"
        else:
            return False
        if not report.get("resolved"):
            return False
        report["resolved"] = False
        self.log.append(f"{STEERING_MARK} ({self.mode}): not resolved: unverifiable: {why}")
        return True

    def _confirm(self, report: dict[str, Any]) -> None:
        """Strict mode: a test the log passes counts only where the sealed results pass it too."""
        assert self.seal is not None
        check = self.seal.check(self.sealed, report, self.parser)
        self.seal_state, self.seal_trips = check.state, check.trips
        if check.state in (UNAUDITED, UNARMED):  # :meth:`_unverifiable` says so
            return
        for reason in check.trips:
            self.log.append(f"{STEERING_MARK} ({self.mode}): tripwire in the test process: {reason}")
        if not check.holds and report.get("resolved"):
            report["resolved"] = False
            shown = ", ".join(check.unconfirmed[:5]) + (" ..." if len(check.unconfirmed) > 5 else "")
            self.log.append(
                f"{STEERING_MARK} ({self.mode}): not resolved: the sealed test results ({check.state}) do not "
                f"pass {len(check.unconfirmed)} test(s) the log passes: {shown}"
            )

    def _make(self, status: GradeStatus, resolved: bool, report: dict[str, Any], test_output: str) -> Verdict:
        done = time.monotonic()
        lines = self.guard.log_lines() if self.guard else []
        apply_log = "\n".join([*self.log, *lines])
        log = "\n".join([*self.log, test_output, *lines] if test_output else [*self.log, *lines])
        return Verdict(
            instance_id=self.task.instance_id,
            resolved=resolved,
            status=status,
            apply_method=self.method,
            tests_status=report.pop("tests_status", {}) or {},
            report=report,
            log=log,
            apply_log=apply_log,
            test_output=test_output,
            timings={
                "apply": round(self.applied_at - self.started, 4),
                "tests": round(done - self.applied_at, 4),
                "total": round(done - self.started, 4),
            },
            grading=self.mode,
            test_runner=self.runner,
            seal=self.seal_state,
            seal_trips=self.seal_trips,
            screen_flags=self.screen,
            steering_files=list(self.guard.files) if self.guard else [],
        )
