"""``env build`` over a dataset: one broken record fails alone, an instance without a mirror is unfetchable until
the mirror is there, the report (with its per-repository summary) resumes and feeds data prepare."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import available_factory

from swe_rl.envs.cache import EnvCache
from swe_rl.fileio import atomic_write_text
from swe_rl.runs.envbuild import BuildReport, build_dataset
from swe_rl.tasks.builtin import builtin_mirror
from swe_rl.tasks.model import Task

SWE_RL = [sys.executable, "-m", "swe_rl.cli.app"]


@pytest.mark.ns
def test_dataset_build_reports_the_broken_record_and_resumes(tmp_path, tasks):
    good = [tasks[0], tasks[4]]
    broken = tasks[8].model_copy(update={"instance_id": "broken__record-1", "base_commit": "0" * 40})
    dataset = [good[0], broken, good[1]]
    report_path = tmp_path / "report.json"
    cache = EnvCache(tmp_path / "envs")
    factory = available_factory("ns")

    report = asyncio.run(build_dataset(dataset, cache, jobs=2, report_path=report_path, factory=factory))
    status = {iid: e.status for iid, e in report.entries.items()}
    assert status == {
        good[0].instance_id: "valid",
        "broken__record-1": "failed",
        good[1].instance_id: "valid",
    }
    assert "0000000000" in (report.entries["broken__record-1"].reason or "")
    assert list(report.entries) == [t.instance_id for t in dataset], "report keeps the dataset's order"
    assert BuildReport.load(report_path) == report

    # a rerun keeps the finished entries as they were and retries only the failure
    again = asyncio.run(build_dataset(dataset, cache, jobs=2, report_path=report_path, factory=factory))
    for task in good:
        assert again.entries[task.instance_id] == report.entries[task.instance_id]
    assert again.entries["broken__record-1"].status == "failed"

    # data prepare keeps only the instances the report marks valid
    source = tmp_path / "tasks.jsonl"
    atomic_write_text(source, "".join(json.dumps(t.to_record()) + "\n" for t in dataset))
    out = _prepare(source, tmp_path / "d", report_path)
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in (tmp_path / "d" / "train.jsonl").read_text().splitlines()]
    assert [r["metadata"]["instance"]["instance_id"] for r in rows] == [t.instance_id for t in good]
    bad = _prepare(source, tmp_path / "e", source)  # a task file where a report belongs
    assert bad.returncode == 2 and "not an `swe-rl env build` report" in bad.stderr


def test_an_os_error_in_one_build_fails_that_instance_and_the_run_goes_on(tmp_path, tasks):
    """The whole Verified run once died on one testbed's OSError (EMLINK: a file linked 65,000 times), and the
    builds after it never ran. Here every build meets a real one: the cache's records directory is a file, so
    making it fails (FileExistsError). Each instance is a failed entry, to retry on a rerun."""
    dataset = [tasks[0], tasks[4]]
    root = tmp_path / "envs"
    root.mkdir()
    (root / "records").write_text("not a directory\n")
    report_path = tmp_path / "report.json"
    report = asyncio.run(build_dataset(dataset, EnvCache(root), jobs=2, report_path=report_path, quiet=True))
    for task in dataset:
        entry = report.entries[task.instance_id]
        assert entry.status == "failed" and (entry.reason or "").startswith("FileExistsError"), entry
    assert BuildReport.load(report_path) == report
    (root / "records").unlink()  # the fault mended: the rerun builds them
    again = asyncio.run(build_dataset(dataset, EnvCache(root), jobs=2, report_path=report_path, quiet=True))
    assert {e.status for e in again.entries.values()} == {"built"}


def _prepare(source: Path, out: Path, valid_only: Path) -> subprocess.CompletedProcess[str]:
    """`swe-rl data prepare -s SOURCE -o OUT --valid-only VALID_ONLY`, as a user runs it."""
    argv = ["data", "prepare", "-s", str(source), "-o", str(out), "--valid-only", str(valid_only)]
    return subprocess.run(
        [sys.executable, "-m", "swe_rl.cli.app", *argv], capture_output=True, text=True, check=False
    )


def _orphan(task: Task) -> Task:
    """``task`` as if its repository were one no mirror holds."""
    return task.model_copy(update={"instance_id": "nobody__nowhere-1", "repo": "nobody/nowhere"})


def test_an_instance_without_a_mirror_is_unfetchable_until_the_mirror_is_added(tmp_path, tasks):
    mirrors = tmp_path / "mirrors"
    mirrors.mkdir()
    orphan, other = _orphan(tasks[0]), tasks[4]
    dataset = [other, orphan]
    report_path = tmp_path / "report.json"
    cache = EnvCache(tmp_path / "envs", repo_cache=mirrors)

    first = asyncio.run(build_dataset(dataset, cache, jobs=2, report_path=report_path, quiet=True))
    entry = first.entries[orphan.instance_id]
    assert (entry.status, entry.repo, entry.done) == ("unfetchable", "nobody/nowhere", False)
    assert "no local mirror of nobody/nowhere" in (entry.reason or "")
    assert first.usable() == [other.instance_id] and first.counts()["unfetchable"] == 1
    summary = first.summary
    assert summary is not None and summary.disk is not None
    assert summary.repos["nobody/nowhere"].unfetchable == 1
    assert summary.repos["nobody/nowhere"].causes == {"repository not fetchable": 1}
    assert summary.repos[other.repo].built == 1 and summary.repos[other.repo].causes == {}
    assert summary.disk.parts["testbeds"] > 0 and summary.disk.parts["venvs"] > 0
    assert BuildReport.load(report_path).summary == summary

    # the user adds the mirror: a resume builds the instance, keeps the other one and counts both
    subprocess.run(
        [
            "git",
            "clone",
            "-q",
            "--mirror",
            str(builtin_mirror(tasks[0].repo)),
            str(mirrors / "nobody/nowhere.git"),
        ],
        check=True,
    )
    again = asyncio.run(build_dataset(dataset, cache, jobs=2, report_path=report_path, quiet=True))
    assert again.entries[other.instance_id] == first.entries[other.instance_id]
    assert again.entries[orphan.instance_id].status == "built"
    assert again.summary is not None and again.summary.repos[other.repo] == summary.repos[other.repo]
    assert (again.summary.overall.built, again.summary.overall.unfetchable) == (2, 0)

    # a report written before entries named their repository and before the summary: resumed and summed up
    old = json.loads(report_path.read_text())
    del old["summary"]
    for e in old["entries"].values():
        del e["repo"]
    atomic_write_text(report_path, json.dumps(old))
    third = asyncio.run(build_dataset(dataset, cache, jobs=2, report_path=report_path, quiet=True))
    assert third.summary is not None and third.summary.repos == again.summary.repos
    assert BuildReport.load(report_path).summary == third.summary


def test_the_cli_reports_an_unfetchable_instance_in_its_progress_summary_and_json(tmp_path, tasks):
    source = tmp_path / "tasks.jsonl"
    atomic_write_text(source, json.dumps(_orphan(tasks[0]).to_record()) + "\n")
    (tmp_path / "mirrors").mkdir()
    args = [
        *("env", "build", "--tasks", str(source), "--repo-cache", str(tmp_path / "mirrors")),
        *("--cache-dir", str(tmp_path / "envs"), "--report", str(tmp_path / "report.json")),
    ]
    as_json = subprocess.run([*SWE_RL, *args, "--json"], capture_output=True, text=True, check=False)
    assert as_json.returncode == 1, as_json.stderr
    assert re.search(
        r"^\[build 1/1 elapsed \S+ eta 0:00:00\] nobody__nowhere-1: unfetchable \[repository not fetchable\]: "
        r"RepoNotFoundError: no local mirror of nobody/nowhere",
        as_json.stderr,
        re.MULTILINE,
    ), as_json.stderr
    summary = json.loads(as_json.stdout)["summary"]
    assert summary["repos"]["nobody/nowhere"]["unfetchable"] == 1 and summary["disk"]["total"] >= 0
    assert json.loads((tmp_path / "report.json").read_text())["summary"]["repos"] == summary["repos"]

    table = subprocess.run([*SWE_RL, *args], capture_output=True, text=True, check=False)
    assert table.returncode == 1, table.stderr
    assert "[build 1/1 " in table.stderr  # an unfetchable instance is tried again
    assert "per repository" in table.stdout and "env cache disk use:" in table.stdout
    row = next(
        line for line in table.stdout.splitlines() if "nobody/nowhere" in line and "repository" in line
    )
    assert "repository not fetchable 1" in row


@pytest.mark.ns
def test_revalidate_grades_again_what_the_report_found_invalid_and_keeps_the_rest(tmp_path, tasks):
    """A resume keeps an invalid entry (its env is built, its grading done); --revalidate grades it again, as
    after a fix to validation, with the earlier run's seconds added. The valid entry is kept either way."""
    good, task = tasks[0], tasks[4]
    passing = task.PASS_TO_PASS[0]
    wrong = task.model_copy(update={"FAIL_TO_PASS": [passing], "PASS_TO_PASS": []})  # the base resolves it
    report_path, cache, factory = (
        tmp_path / "report.json",
        EnvCache(tmp_path / "envs"),
        available_factory("ns"),
    )

    def build(dataset: list[Task], **kw: bool) -> BuildReport:
        coro = build_dataset(dataset, cache, report_path=report_path, factory=factory, quiet=True, **kw)
        return asyncio.run(coro)

    first = build([good, wrong])
    assert (
        first.entries[task.instance_id].status == "invalid"
        and first.entries[good.instance_id].status == "valid"
    )
    kept = build([good, task])  # the record is right now, but a resume does not grade a finished entry again
    assert kept.entries == first.entries
    again = build([good, task], revalidate=True)
    assert again.entries[good.instance_id] == first.entries[good.instance_id]
    entry = again.entries[task.instance_id]
    assert (entry.status, entry.reason, entry.env) == ("valid", None, first.entries[task.instance_id].env)
    assert entry.seconds > first.entries[task.instance_id].seconds
    assert again.summary is not None and again.summary.overall.valid == 2

    # a run over one of them with the same report keeps the other's entry (and counts it)
    alone = build([good])
    assert alone.entries == again.entries and BuildReport.load(report_path).entries == again.entries
    assert alone.summary is not None and alone.summary.overall.valid == 2

    refused = subprocess.run(
        [*SWE_RL, "env", "build", "--revalidate", "--validate", "--cache-dir", str(tmp_path / "envs")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert refused.returncode == 2 and "give --validate and --report" in refused.stderr, refused.stderr


def test_a_build_run_removes_what_a_stopped_run_left_but_not_a_build_in_progress(tmp_path, tasks):
    """A killed run leaves its builds in progress in the cache's .tmp (GBs on real repos); the next run removes
    them. One whose key another process holds the lock of is being built there, and stays."""
    import fcntl

    cache = EnvCache(tmp_path / "envs")
    left, building = cache.root / ".tmp/aaaa.left", cache.root / ".tmp/bbbb.busy"
    for path in (left, building):
        (path / "out").mkdir(parents=True)
        (path / "out/half").write_bytes(b"x" * 1000)
    (cache.root / "locks").mkdir()
    holder = subprocess.Popen(  # another process building bbbb: holds its lock
        [
            sys.executable,
            "-c",
            "import fcntl, sys, time; f = open(sys.argv[1], 'w'); "
            "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)",
            str(cache.root / "locks/bbbb.lock"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        report = asyncio.run(build_dataset([tasks[0]], cache, quiet=True))
    finally:
        holder.kill()
        holder.wait()
    assert report.entries[tasks[0].instance_id].status == "built"
    assert not left.exists() and (building / "out/half").is_file()
    with open(
        cache.root / "locks/bbbb.lock"
    ) as lock:  # the control: released, it is what the next run removes
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    asyncio.run(build_dataset([tasks[0]], cache, quiet=True))
    assert not building.exists()


def test_gc_keep_report_removes_only_the_envs_no_report_entry_uses(tmp_path, tasks):
    """A dataset run's cache also holds envs of earlier runs (another recipe, a task since relabelled); `env gc
    --keep-report` leaves what the reports use. An unreadable report removes nothing."""
    cache = EnvCache(tmp_path / "envs")
    kept_task, stale_task = tasks[0], next(t for t in tasks if t.repo != tasks[0].repo)
    report_path = tmp_path / "report.json"
    report = asyncio.run(build_dataset([kept_task], cache, report_path=report_path, quiet=True))
    kept, stale = report.entries[kept_task.instance_id].env, cache.ensure(stale_task)
    assert kept is not None and kept != stale.key
    gc = [*SWE_RL, "env", "gc", "--cache-dir", str(cache.root)]

    (tmp_path / "broken.json").write_text("{not json")
    refused = subprocess.run(
        [*gc, "--keep-report", str(report_path), "--keep-report", str(tmp_path / "broken.json")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert refused.returncode != 0 and "is not an `env build` report" in refused.stderr, refused.stderr
    assert stale.testbed.is_dir() and {s.key for s in cache.records()} == {kept, stale.key}  # nothing removed

    done = subprocess.run(
        [*gc, "--keep-report", str(report_path)], capture_output=True, text=True, check=True
    )
    assert str(stale.testbed) in done.stdout.split()
    assert not stale.testbed.exists() and [s.key for s in cache.records()] == [kept]
    spec = cache.get(kept)
    assert spec is not None and spec.testbed.is_dir() and spec.venv is not None and spec.venv.is_dir()
