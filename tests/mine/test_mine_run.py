"""Mining a small real history end to end: real git, real env builds, ns sandboxes, the official grading."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import available_factory
from tests.mine.history import build_history

from swe_rl.envs.cache import EnvCache
from swe_rl.harness.validate import validate_task
from swe_rl.mine import MineOptions, MineReport, mine, state_path
from swe_rl.tasks.loaders import load_tasks

pytestmark = pytest.mark.ns  # mining validates in ns sandboxes

SWE_RL = [sys.executable, "-m", "swe_rl.cli.app"]
OPTIONS = MineOptions(pytest="host", concurrency=2, timeout=120)


def _mine(repo: Path, out: Path, cache: Path) -> MineReport:
    factory = available_factory("ns")
    return asyncio.run(mine(repo, out, options=OPTIONS, cache=EnvCache(cache), factory=factory))


@pytest.fixture(scope="module")
def mined(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], Path, MineReport, Path]:
    root = tmp_path_factory.mktemp("mine")
    ids = build_history(root / "repo")
    out = root / "out" / "tasks.jsonl"
    return ids, out, _mine(root / "repo", out, root / "envs"), root


def test_the_fix_and_the_merge_are_kept_with_their_split(mined):
    ids, out, _, _ = mined
    rows = {t.model_extra["mine"]["commit"]: t for t in load_tasks(out)}
    assert list(rows) == [ids["fix_add"], ids["merge"]], "history order; docs, test-only and no-F2P dropped"
    fix, merge = rows[ids["fix_add"]], rows[ids["merge"]]
    assert fix.base_commit == ids["initial"] and fix.created_at == "2024-01-02T10:00:00Z"
    assert merge.base_commit == ids["refactor"] and merge.created_at == "2024-01-07T10:00:00Z"
    for task, tests in ((fix, ["tests/test_calc.py"]), (merge, ["tests/test_sub.py"])):
        assert task.test_files == tests
        assert [f for f in _files(task.patch)] == ["tiny/calc.py"]
        assert "def test_" not in task.patch and "def test_" in task.test_patch
    assert fix.FAIL_TO_PASS == ["tests/test_calc.py::test_add"]
    assert fix.PASS_TO_PASS == ["tests/test_calc.py::test_mul"]
    assert merge.FAIL_TO_PASS == ["tests/test_sub.py::test_sub"]
    assert merge.PASS_TO_PASS == ["tests/test_sub.py::test_sub_zero"], "sub(0, 0) is 0 either way"
    meta = merge.model_extra["mine"]
    assert meta["merge"] and meta["merged_commits"] == [ids["branch_fix"], ids["branch_test"]]
    assert meta["base"] == ids["refactor"] and "source" in meta["rule"] and "FAIL_TO_PASS" in meta["rule"]
    assert meta["left_out"] == ["tests/test_old.py"], "a deleted test file is in neither patch"
    assert merge.install == "" and merge.env_seed == ["pytest"] and merge.log_parser == "parse_log_pytest"


def test_drops_are_counted_by_stage_and_reason(mined):
    _, _, report, _ = mined
    assert report.commits == 6 and report.candidates == 3
    assert report.dropped == {
        "history": {"no source change": 1, "no source or test change": 1, "root commit (no base)": 1},
        "validate": {"no FAIL_TO_PASS": 1},
    }
    state = json.loads(state_path(mined[1]).read_text())
    assert all(d["seconds"] > 0 for d in state["decided"].values())
    assert report.decide_seconds == round(sum(d["seconds"] for d in state["decided"].values()), 1)
    refactor = state["decided"][mined[0]["refactor"]]
    assert refactor == {**refactor, "kept": False, "stage": "validate", "reason": "no FAIL_TO_PASS"}


def test_problem_statements_tell_the_symptom_not_the_fix(mined):
    ids, out, _, _ = mined
    rows = {t.model_extra["mine"]["commit"]: t for t in load_tasks(out)}
    fix = rows[ids["fix_add"]].problem_statement
    assert fix.startswith("Fix add: it subtracted") and "tests/test_calc.py::test_add" in fix
    assert "assert add(2, 3) == 5" in fix, "the failing output is quoted"
    assert "return a + b" not in fix, "a line of the gold patch is left out"
    assert "Signed-off-by" not in fix and "tiny/calc.py" not in fix and "The add function in the code" in fix
    assert "0x..." in fix, "object addresses are masked (they differ from run to run)"
    merge = rows[ids["merge"]].problem_statement
    assert merge.startswith("Merge branch 'fix-sub'") and "- Make sub in the code subtract" in merge
    assert "tests/test_sub.py::test_sub" in merge and "calc" not in merge


def test_a_second_mine_gives_the_same_rows_and_a_rerun_resumes(mined):
    _, out, report, root = mined
    again = root / "again" / "tasks.jsonl"
    second = _mine(root / "repo", again, root / "envs")
    assert again.read_bytes().replace(b"again", b"out") == out.read_bytes()
    assert second.dropped == report.dropped and second.resumed == 0
    before = out.read_bytes()
    resumed = _mine(root / "repo", out, root / "envs")
    assert resumed.resumed == 3 and out.read_bytes() == before and resumed.seconds < report.seconds


def test_a_timeout_is_tried_again_on_a_rerun_and_other_drops_stand(mined, tmp_path):
    """A candidate dropped for a timeout (the machine's load as much as the candidate) is validated again by
    a rerun; one dropped for what its tests showed (no FAIL_TO_PASS: the control) is not."""
    ids, out, _, root = mined
    copy = tmp_path / "tasks.jsonl"
    state = json.loads(state_path(out).read_text())
    state["decided"][ids["fix_add"]] = {
        "kept": False,
        "stage": "validate",
        "reason": "timeout (tests ran past 1s)",
    }
    state_path(copy).write_text(json.dumps(state))
    rerun = _mine(root / "repo", copy, root / "envs")
    assert rerun.resumed == 2 and copy.read_bytes().replace(
        str(tmp_path).encode(), b""
    ) == out.read_bytes().replace(str(out.parent).encode(), b"")
    again = json.loads(state_path(copy).read_text())["decided"]
    assert again[ids["fix_add"]]["kept"] and again[ids["refactor"]]["reason"] == "no FAIL_TO_PASS"


def test_mined_rows_grade_like_any_row(mined):
    _, out, _, root = mined
    factory = available_factory("ns")
    for task in load_tasks(out):
        env = EnvCache(root / "envs").ensure(task)
        checked = asyncio.run(validate_task(task, factory, env, timeout=120))
        assert checked.valid, checked.problems
        assert checked.gold.resolved and not checked.empty.resolved


def test_the_command_mines_and_refuses_what_it_cannot_use(mined, tmp_path):
    _, out, _, root = mined
    same = ["--pytest", "host", "--timeout", "120", "--cache-dir", str(root / "envs"), "--backend", "ns"]
    done = _cli("tasks", "mine", "--repo", str(root / "repo"), "--out", str(out), *same, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["tasks"] == 2 and "resuming: 3 candidates" in done.stderr
    plain = tmp_path / "plain"
    plain.mkdir()
    bad = _cli("tasks", "mine", "--repo", str(plain), "--out", str(tmp_path / "t.jsonl"))
    assert bad.returncode == 2 and "not a git repository" in bad.stderr
    empty = _cli(
        "tasks",
        "mine",
        "--repo",
        str(root / "repo"),
        "--out",
        str(tmp_path / "t.jsonl"),
        "--since",
        "2030-01-01",
    )
    assert empty.returncode == 2 and "no commit on the first-parent line" in empty.stderr
    subprocess.run(["git", "init", "-q", str(plain)], check=True)
    (plain / "a.py").write_text("x = 1\n")
    subprocess.run(["git", "-C", str(plain), "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(plain), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a"],
        check=True,
    )
    untested = _cli("tasks", "mine", "--repo", str(plain), "--out", str(tmp_path / "t.jsonl"))
    assert untested.returncode == 2 and "no test files" in untested.stderr


def _mirrored(root: Path, tmp_path: Path) -> tuple[Path, list[str]]:
    """A repo cache holding the mined history as acme/tiny, and the options the mined fixture used."""
    mirrors = tmp_path / "mirrors"
    subprocess.run(
        ["git", "clone", "-q", "--mirror", str(root / "repo"), str(mirrors / "acme" / "tiny.git")], check=True
    )
    return mirrors, [
        "--pytest",
        "host",
        "--timeout",
        "120",
        "--cache-dir",
        str(root / "envs"),
        "--backend",
        "ns",
    ]


def test_owner_name_is_mined_from_the_repo_cache_mirror(mined, tmp_path):
    ids, _, _, root = mined
    mirrors, same = _mirrored(root, tmp_path)
    out = tmp_path / "acme.jsonl"
    done = _cli(
        "tasks", "mine", "--repo", "acme/tiny", "--repo-cache", str(mirrors), "--out", str(out), "--max-candidates", "1",
        *same,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (task,) = load_tasks(out)
    assert task.instance_id == f"swe-rl-mine__acme__tiny-{ids['fix_add'][:12]}"
    assert task.repo_source == str((mirrors / "acme" / "tiny.git").resolve())
    # the controls: a name the cache has no mirror of, and a name with no cache to look in
    missing = _cli(
        "tasks", "mine", "--repo", "acme/other", "--repo-cache", str(mirrors), "--out", str(out), *same
    )
    assert missing.returncode == 2 and "no local mirror of acme/other" in missing.stderr
    no_cache = _cli("tasks", "mine", "--repo", "acme/tiny", "--out", str(out), *same)
    assert no_cache.returncode == 2 and "--repo-cache" in no_cache.stderr


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SWE_RL, *args], capture_output=True, text=True, check=False, timeout=600)


def _files(patch: str) -> list[str]:
    return [line.split(" b/", 1)[1] for line in patch.splitlines() if line.startswith("diff --git ")]


def test_excluded_fixes_are_not_mined(mined):
    _, out, _, root = mined
    options = OPTIONS.model_copy(update={"exclude": (str(out),)})
    again = root / "excluded" / "tasks.jsonl"
    factory = available_factory("ns")
    report = asyncio.run(
        mine(root / "repo", again, options=options, cache=EnvCache(root / "envs"), factory=factory)
    )
    assert report.tasks == [] and again.read_text() == ""
    assert report.dropped["exclude"] == {"base commit is a task's in the excluded dataset": 2}
    assert report.dropped["validate"] == {"no FAIL_TO_PASS": 1}


def test_mined_rows_run_through_eval(mined, tmp_path):
    _, out, _, root = mined
    where = ["--cache-dir", str(root / "envs"), "--output-dir", str(tmp_path / "run")]
    done = _cli("eval", "--tasks", str(out), "--llm", "scripted:oracle", "--backend", "ns", "--json", *where)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert (summary["total"], summary["resolved"], summary["errors"]) == (2, 2, 0)


@pytest.mark.heavy
def test_mined_rows_train_with_grpo(mined, tmp_path):
    """`swe-rl train rl --tasks` on the mined file: one GRPO step of a tiny Qwen on its real rows."""
    pytest.importorskip("trl")
    _, out, _, root = mined
    args = [*("train", "rl", "--tasks", str(out), "--model", "tiny-qwen", "--steps", "1"), "--json"]
    args += [
        *("--tasks-per-step", "2", "-g", "2", "--max-tokens", "4", "--step-limit", "1", "--backend", "ns")
    ]
    done = _cli(*args, "--cache-dir", str(root / "envs"), "-o", str(tmp_path / "train"))
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)  # TRL's log dicts went to stderr
    rollouts = (tmp_path / "train" / "rollouts.jsonl").read_text().splitlines()
    episodes = [json.loads(line) for line in rollouts]
    assert len(episodes) == 4 and not any(e["error"] for e in episodes), summary
    assert {e["instance_id"] for e in episodes} == {t.instance_id for t in load_tasks(out)}


def test_several_repositories_are_mined_in_turn_into_one_file(mined, tmp_path):
    ids, _, _, root = mined
    mirrors, same = _mirrored(root, tmp_path)
    out = tmp_path / "all.jsonl"
    both = ["--repo", "acme/tiny", "--repo", str(root / "repo"), "--repo-cache", str(mirrors)]
    # a repository that is not there fails the run before any is mined (no part file of the first)
    bad = _cli("tasks", "mine", *both, "--repo", "acme/gone", "--out", str(out), *same)
    assert bad.returncode == 2 and "no local mirror of acme/gone" in bad.stderr
    assert not list(tmp_path.glob("all.*"))
    done = _cli("tasks", "mine", *both, "--out", str(out), "--max-candidates", "1", "--json", *same)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["tasks"] == 2 and [s["tasks"] for s in summary["repos"]] == [1, 1]
    rows = [t.instance_id for t in load_tasks(out)]
    assert rows == [
        f"swe-rl-mine__acme__tiny-{ids['fix_add'][:12]}",
        f"swe-rl-mine__repo-{ids['fix_add'][:12]}",
    ]
    parts = sorted(p.name for p in tmp_path.glob("all.*.jsonl"))
    assert len(parts) == 2 and out.read_text() == "".join(
        (tmp_path / p).read_text()
        for p in ("all.acme__tiny.jsonl", parts[1] if "acme" in parts[0] else parts[0])
    )
    again = _cli("tasks", "mine", *both, "--out", str(out), "--max-candidates", "1", *same)
    assert again.returncode == 0 and again.stderr.count("resuming: 1 candidates") == 2
