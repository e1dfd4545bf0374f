"""The eval script run after the candidate patch is applied, as the official harness writes it.

swebench 5 rows carry their own ``eval_script``. Other rows get one composed here the way swebench
4's ``make_eval_script_list`` does: reset the test files, apply the test patch, set the spec's eval
environment, run the test command on the test directives (the test files less data files; django's
as dotted modules) between the log markers, record its exit code. swebench's script then resets the
test files again; this one does not: the sandbox is reset or destroyed after every grading, and nothing
after the exit code's line is part of the log.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from swe_rl.errors import ConfigError
from swe_rl.harness import warm
from swe_rl.harness.official import END_TEST_OUTPUT, START_TEST_OUTPUT, TEST_EXIT_CODE, parser_name
from swe_rl.harness.seal import Seal, runner_of, self_hosted
from swe_rl.tasks.model import Task
from swe_rl.tasks.repospec import RepoSpec
from swe_rl.tasks.rowspec import row_eval_setup, row_spec
from swe_rl.tasks.specs import spec_for, test_directives

# Grading files live inside the repo's .git: every backend can write there and `git diff` ignores it.
SCRATCH = ".git/swe-rl"
CANDIDATE_PATCH = f"{SCRATCH}/candidate.diff"
TEST_PATCH = f"{SCRATCH}/test.diff"
EVAL_SCRIPT = f"{SCRATCH}/eval.sh"
# Files of a test patch that are data, not tests to run (swebench's NON_TEST_EXTS; "csv" without its dot there).
NON_TEST_EXTS = (".json", ".png", "csv", ".txt", ".md", ".jpg", ".jpeg", ".pkl", ".yml", ".yaml", ".toml")


def image_bound(script: str) -> bool:
    """Whether an eval script needs the official image's conda env."""
    return any(mark in script for mark in _IMAGE_BOUND)


def runnable(files: list[str]) -> list[str]:
    """The test patch's files that are tests, as the official harness picks its test directives."""
    return [f for f in files if not f.endswith(NON_TEST_EXTS)]


# An eval script written for the official images: it activates their conda env and reinstalls the repo there.
_IMAGE_BOUND = ("/opt/miniconda3", "conda activate")


@dataclass(frozen=True)
class GradingSpec:
    """How one task's tests are run and read, derived once per grading and passed along (as swebench builds
    one ``TestSpec`` per instance): the spec (the row's own, else the table's), the composed test command
    (None: the row's own ``eval_script``, run as written), and the log parser."""

    spec: RepoSpec | None
    test_cmd: str | None
    parser: str
    repo: str = ""  # 'owner/name' of the task's repository

    @classmethod
    def of(cls, task: Task, *, image_env: bool = False) -> GradingSpec:
        spec = row_spec(task) or spec_for(task)
        return cls(spec, _test_cmd(task, spec, image_env), parser_name(task), task.repo)

    @property
    def seal_runner(self) -> str | None:
        """The runner whose seal the test command runs with (harness/seal.py: 'pytest', 'unittest', 'sympy'),
        or None where none can (a row's own script, a tox that makes its own envs; a runner that is the repository under test)."""
        return None if self.self_hosted else self._runner

    @property
    def self_hosted(self) -> bool:
        """Whether the test command's runner is the repository under test (harness/seal.py ``SELF_HOSTED``)."""
        return self_hosted(self.repo, self._runner)

    @property
    def _runner(self) -> str | None:
        return runner_of(self.test_cmd) if self.test_cmd is not None else None


def _test_cmd(task: Task, spec: RepoSpec | None, image_env: bool) -> str | None:
    if task.eval_script and (image_env or spec is None or not image_bound(task.eval_script)):
        return None
    test_cmd = task.test_cmd or (spec.test_cmd if spec else None)
    if not test_cmd:
        raise ConfigError(
            f"{task.instance_id}: the record has neither 'eval_script' nor 'test_cmd', and swe-rl's spec "
            "table does not know its repo and version; cannot run its tests"
        )
    return test_cmd


def eval_script(
    task: Task,
    *,
    image_env: bool = False,
    runner: warm.WarmRunner | None = None,
    seal: Seal | None = None,
    spec: GradingSpec | None = None,
) -> str:
    """The bash script whose output is the test log.

    A row's own ``eval_script`` (swebench 5) is used as written, except where it was written for the official
    image and the env is not one (``image_env``: imported from that image): then it is composed from the spec
    the row or the table gives, as for a classic row.

    ``runner``: a warm test runner in the sandbox; a composed script whose test command runs pytest sends
    the run to it (:mod:`.warm`) and prints which way it ran as its last line. A row's own script runs as
    written. ``seal``: the composed test command runs with the seal (``GradingSpec.seal_runner`` says
    where). ``spec``: the grading's spec, where the caller has it (else derived here).
    """
    grading = spec or GradingSpec.of(task, image_env=image_env)
    test_cmd, spec_ = grading.test_cmd, grading.spec
    if test_cmd is None:
        return task.eval_script or ""
    base = shlex.quote(task.base_commit)
    files = " ".join(shlex.quote(f) for f in task.test_files)
    directives = " ".join(shlex.quote(d) for d in test_directives(spec_, runnable(task.test_files)))
    # each file on its own: one the base lacks (new with the test patch) fails alone (git says so before the
    # log's start marker) and is left as it is
    reset = f'for f in {files}; do git checkout -q {base} -- "$f"; done' if files else ":"
    if seal is not None:
        test_cmd = seal.plugged(test_cmd)
    hooked = warm.hook(test_cmd, runner)
    run = hooked or test_cmd
    if seal is not None:
        run = f"{seal.variables(cold=not hooked)} {run}"
    return "\n".join(
        [
            "#!/bin/bash",
            "set -uo pipefail",
            *([warm.note_line(SCRATCH)] if hooked else []),
            reset,
            f"git apply -v {TEST_PATCH}" if task.test_patch.strip() else ":",
            *(spec_.eval_commands if spec_ else ()),
            *row_eval_setup(task),
            f"echo '{START_TEST_OUTPUT}'",
            f"{run} {directives}",
            "swe_rl_rc=$?",
            f"echo '{END_TEST_OUTPUT}'",
            f"echo '{TEST_EXIT_CODE}: '$swe_rl_rc",
            *([warm.report_line()] if hooked else []),
            "",
        ]
    )
