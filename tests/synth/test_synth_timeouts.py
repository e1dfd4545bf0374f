"""Candidate timeouts scaled to the baseline, and equivalent mutants proven by bytecode: real ns sandboxes."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from tests.conftest import available_factory
from tests.synth.repos import git_repo

from swe_rl.envs.cache import EnvCache
from swe_rl.synth import SynthOptions, SynthReport, load_sources, synthesize
from swe_rl.synth.repo import TaskRepo
from swe_rl.synth.runner import (
    TIMEOUT_FACTOR,
    TIMEOUT_FLOOR,
    Baseline,
    candidate_timeout,
    run_baseline,
    run_candidate,
)
from swe_rl.synth.source import DEFAULT_TEST_CMD
from swe_rl.tasks.model import Task

pytestmark = pytest.mark.ns

LIB = """def countdown(n):
    steps = 0
    while n > 0:
        n -= 1
        steps += 1
    return steps


def first_even(xs):
    for x in xs:
        if x % 2 == 0:
            return x
    return None
"""
TESTS = """from lib import countdown, first_even


def test_countdown():
    assert countdown(3) == 3


def test_first_even():
    assert first_even([1, 4]) == 4
    assert first_even([1, 3]) is None
"""
LOOP_LINE = 4  # `n -= 1` deleted: countdown never ends
SAME_BYTECODE_LINE = 13  # `return None` deleted at a function's end: the implicit return is the same code


def _repo(root: Path) -> Path:
    return git_repo(root, {"lib.py": LIB, "tests/test_lib.py": TESTS})


@pytest.fixture(scope="module")
def synth_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[SynthReport, list[str]]:
    """Every stmt_delete candidate of LIB tried once, with the default timeouts."""
    root = tmp_path_factory.mktemp("timeouts")
    lines: list[str] = []
    options = SynthOptions(n=20, multi=0, kinds=("stmt_delete",), concurrency=2)
    report = asyncio.run(
        synthesize(
            [str(_repo(root / "lib"))],
            root / "out" / "tasks.jsonl",
            options=options,
            cache=EnvCache(),
            factory=available_factory("ns"),
            note=lines.append,
        )
    )
    return report, lines


def _line_note(lines: list[str], line: int) -> str:
    (found,) = [n for n in lines if re.search(rf"lib:lib\.py:{line} stmt_delete: ", n)]
    return found


def test_an_infinite_loop_times_out_at_the_floor_not_at_30s(synth_run):
    report, lines = synth_run
    baseline = report.baselines["lib"]["seconds"]
    new = candidate_timeout(baseline, factor=TIMEOUT_FACTOR, floor=TIMEOUT_FLOOR)
    old = candidate_timeout(baseline, factor=10, floor=30)  # the formula before #25
    # the baseline is ~0.5 s idle, ~2 s on a loaded machine: the new timeout is 10-20 s, the old one 30 s
    assert new == max(TIMEOUT_FLOOR, TIMEOUT_FACTOR * baseline) < old == 30.0
    note = _line_note(lines, LOOP_LINE)
    assert f": timeout (suite ran past {new:.0f}s;" in note
    seconds = float(re.findall(r"([\d.]+)s\)$", note)[0])
    assert new <= seconds < new + 8, note
    assert report.per_kind["stmt_delete"].timeout == 1
    kept_lines = {m["line"] for t in report.tasks for m in t.model_extra["synth"]["mutations"]}
    assert LOOP_LINE not in kept_lines, "a timed-out mutant is never a task"


def test_a_same_bytecode_mutant_is_equivalent_without_a_run(synth_run):
    report, lines = synth_run
    note = _line_note(lines, SAME_BYTECODE_LINE)
    assert ": equivalent (compiles to the original's bytecode; not run; 0.00s)" in note
    stats = report.per_kind["stmt_delete"]
    assert stats.same_bytecode == 1 and stats.equivalent == 1
    # positive control: the other deletions change the code, so each one ran (its time is not the 0.00s of
    # one that did not: a warm runner's forked run can take well under 0.1 s) and broke a test
    ran = [n for n in lines if "stmt_delete: valid (" in n]
    assert len(ran) == len(report.tasks) == 5
    for line in ran:
        failing, seconds = re.findall(r"\((\d+) failing; ([\d.]+)s\)$", line)[0]
        assert int(failing) >= 1 and float(seconds) > 0, line


async def _baseline(tmp_path: Path) -> tuple[Baseline, object]:
    source = load_sources(str(_repo(tmp_path / "lib")))[0]
    repo = TaskRepo(tmp_path / "repo.git")
    clean = repo.write_source(source)
    task = Task(
        instance_id="swe-rl-synth__lib-clean",
        repo=source.repo,
        base_commit=clean,
        created_at=source.created_at,
        test_cmd=DEFAULT_TEST_CMD,
        log_parser="parse_log_pytest",
        python="3",
        install="",
        env_seed=["pytest"],
        repo_source=str(repo.path),
    )
    env = EnvCache().ensure(task)
    factory = available_factory("ns")
    baseline = await run_baseline(factory, env, DEFAULT_TEST_CMD, ["lib.py"], timeout=120, origin="lib")
    return baseline, env


def test_a_slow_mutant_is_not_a_timeout(tmp_path):
    """A mutant 3x slower than the (traced) baseline is still classified by its tests."""

    async def main() -> None:
        baseline, env = await _baseline(tmp_path)
        delay = 3 * baseline.seconds
        slow = f"import time\ntime.sleep({delay})\n" + LIB.replace("return steps", "return steps + 1")
        timeout = candidate_timeout(baseline.seconds, factor=TIMEOUT_FACTOR, floor=TIMEOUT_FLOOR)
        run = await run_candidate(
            available_factory("ns"), env, DEFAULT_TEST_CMD, {"lib.py": slow}, baseline, timeout=timeout
        )
        assert run.seconds >= delay
        assert run.outcome == "valid" and run.fail_to_pass == ["tests/test_lib.py::test_countdown"]

    asyncio.run(main())
