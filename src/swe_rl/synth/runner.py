"""Running a repository's test suite in sandboxes: the baseline (with line coverage) and candidates.

The baseline runs once per repository, with a small pytest plugin that records which lines of the
source files the suite executes (``sys.settrace``, stdlib only), so mutations land on covered code.
Each candidate then runs once in a fresh sandbox of the same environment, with the mutated files
written over the testbed; statuses come from swebench's own log parser.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from swe_rl.envs.build.venv import compile_venv
from swe_rl.errors import SynthError
from swe_rl.harness import warm
from swe_rl.harness.grade_many import Grader
from swe_rl.harness.official import parse_test_log
from swe_rl.sandbox.base import EnvSpec, SandboxFactory

PASS = {"PASSED", "XFAIL"}
FAIL = {"FAILED", "ERROR"}
_PLUGIN_DIR = ".git/swe-rl-synth"
_TRACE_OUT = f"{_PLUGIN_DIR}/lines.json"
# the coverage plugin (insandbox/swe_rl_synth_trace.py): staged beside watch.json, writes lines.json there
_PLUGIN = Path(__file__).with_name("insandbox") / "swe_rl_synth_trace.py"

# Candidate timeout, measured on `tasks synth --repo builtin` (ns, 2 busy cores, load 4-5): 348
# candidate runs took 0.6-3.2 s (median 1.1-1.4 s), 1.6-5.6x their traced baseline (0.46-0.80 s);
# two infinite loops ran into the old 30 s floor. The floor keeps 3x over the slowest run, the
# factor ~2x over the largest ratio (small suites' runs are mostly start-up, not baseline time).
TIMEOUT_FLOOR = 10.0
TIMEOUT_FACTOR = 10.0

Outcome = Literal["valid", "equivalent", "broken", "timeout", "skipped"]


class Baseline(BaseModel):
    """The unmutated suite: test statuses, the lines it covers, and how long it took."""

    model_config = ConfigDict(frozen=True)

    statuses: dict[str, str]
    covered: dict[str, list[int]] = Field(description="Source file -> executed line numbers.")
    seconds: float

    @property
    def passing(self) -> list[str]:
        return sorted(t for t, s in self.statuses.items() if s in PASS)


class CandidateRun(BaseModel):
    """What one candidate did to the suite."""

    outcome: Outcome
    fail_to_pass: list[str] = Field(default_factory=list)
    pass_to_pass: list[str] = Field(default_factory=list)
    log: str = ""
    seconds: float = 0.0
    reason: str = ""


def candidate_timeout(baseline_seconds: float, *, factor: float, floor: float) -> float:
    """Seconds a candidate's suite may run: ``factor`` x the baseline's, and never under ``floor``."""
    return max(floor, factor * baseline_seconds)


def precompile_env(env: EnvSpec) -> None:
    """Byte-compile an env built before envs compiled their venvs (a no-op when up to date)."""
    if env.venv is not None:
        compile_venv(env.venv)


async def run_baseline(
    factory: SandboxFactory,
    env: EnvSpec,
    test_cmd: str,
    sources: list[str],
    *,
    timeout: float,
    origin: str,
    allow_failures: bool = False,
) -> Baseline:
    """Run the unmutated suite once, recording coverage; a failing or empty suite is a SynthError."""
    async with await factory.create(env) as box:
        await box.write_file(f"{_PLUGIN_DIR}/{_PLUGIN.name}", _PLUGIN.read_bytes())
        await box.write_file(f"{_PLUGIN_DIR}/watch.json", json.dumps(sources).encode())
        started = time.monotonic()
        result = await box.exec(
            f"{test_cmd} -p swe_rl_synth_trace",
            timeout=timeout,
            env={"PYTHONPATH": f"{env.workdir}/{_PLUGIN_DIR}"},
        )
        seconds = time.monotonic() - started
        if result.timed_out:
            raise SynthError(f"{origin}: the unmutated test suite did not finish in {timeout:.0f}s")
        statuses = parse_test_log(result.output)
        try:
            covered = json.loads(await box.read_file(_TRACE_OUT))
        except (OSError, ValueError):
            covered = {}
    tail = "\n".join(result.output.rstrip().splitlines()[-15:])
    if not statuses:
        raise SynthError(
            f"{origin}: `{test_cmd}` ran no tests (exit {result.returncode}); synthesis needs a test suite "
            f"that passes. Last output:\n{tail}"
        )
    failing = sorted(t for t, s in statuses.items() if s in FAIL)
    if failing and not allow_failures:
        raise SynthError(
            f"{origin}: the test suite fails before any mutation ({len(failing)} failing: "
            f"{', '.join(failing[:5])}); fix it, or pass --allow-failing to leave those tests out"
        )
    if not any(s in PASS for s in statuses.values()):
        raise SynthError(f"{origin}: no test passes before any mutation. Last output:\n{tail}")
    return Baseline(statuses=statuses, covered=covered, seconds=round(seconds, 3))


async def run_candidate(
    factory: SandboxFactory,
    env: EnvSpec,
    test_cmd: str,
    files: Mapping[str, str],
    baseline: Baseline,
    *,
    timeout: float,
    sandboxes: Grader | None = None,
) -> CandidateRun:
    """Run the suite with ``files`` (path -> mutated text) written over the testbed, and classify it.
    ``sandboxes``: reused sandboxes with a warm test runner (harness/grade_many.py); else a fresh one, cold."""
    started = time.monotonic()
    if sandboxes is None:
        async with await factory.create(env) as box:
            for path, text in files.items():
                await box.write_file(path, text.encode("utf-8"))
            result = await box.exec(test_cmd, timeout=timeout)
    else:
        async with sandboxes.sandbox(env) as slot:
            for path, text in files.items():
                await slot.box.write_file(path, text.encode("utf-8"))
            hooked = warm.hook(test_cmd, slot.runner)
            command = f"{warm.note_line(_PLUGIN_DIR)}\n{hooked}\n{warm.report_line()}" if hooked else test_cmd
            result = await slot.box.exec(f"mkdir -p {_PLUGIN_DIR}\n{command}", timeout=timeout)
            output, said = warm.runner_of(result.output)
            result = result.model_copy(update={"output": output})
            slot.ran(said)
    seconds = round(time.monotonic() - started, 3)
    if result.timed_out:
        return CandidateRun(outcome="timeout", seconds=seconds, reason=f"suite ran past {timeout:.0f}s")
    return classify(baseline, parse_test_log(result.output), result.output, seconds)


def classify(baseline: Baseline, statuses: dict[str, str], log: str, seconds: float) -> CandidateRun:
    """FAIL_TO_PASS = passing at baseline, failing now; a baseline test missing now means collection broke."""
    passing = baseline.passing
    missing = [t for t in passing if t not in statuses]
    if missing:
        return CandidateRun(
            outcome="broken",
            seconds=seconds,
            reason=f"{len(missing)} tests not run (import or collection broke)",
        )
    f2p = [t for t in passing if statuses[t] in FAIL]
    if not f2p:
        return CandidateRun(outcome="equivalent", seconds=seconds, reason="no test fails")
    p2p = [t for t in passing if statuses[t] in PASS]
    return CandidateRun(outcome="valid", fail_to_pass=f2p, pass_to_pass=p2p, log=log, seconds=seconds)
