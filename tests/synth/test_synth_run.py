"""A reduced real synthesis run: builtin statkit, ns sandboxes, the official parser, env validate."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import available_factory

from swe_rl.envs.cache import EnvCache
from swe_rl.synth import SynthOptions, SynthReport, synthesize
from swe_rl.tasks.builtin import builtin_mirror
from swe_rl.tasks.loaders import load_tasks

SWE_RL = [sys.executable, "-m", "swe_rl.cli.app"]
OPTIONS = SynthOptions(n=6, seed=3, multi=0.34, concurrency=2)
SPLIT = {"train": 0.5, "test": 0.5}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


async def _synth(out: Path) -> SynthReport:
    return await synthesize(
        ["builtin:statkit"],
        out,
        options=OPTIONS,
        cache=EnvCache(),
        factory=available_factory("ns"),
        split=SPLIT,
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SynthReport]:
    import asyncio

    out = tmp_path_factory.mktemp("synth") / "tasks.jsonl"
    return out, asyncio.run(_synth(out))


@pytest.mark.ns
def test_tasks_are_written_with_their_repo(run):
    out, report = run
    assert len(report.tasks) == 6
    assert sorted(p.name for p in out.parent.iterdir()) == [
        "tasks.git",
        "tasks.jsonl",
        "tasks.test.jsonl",
        "tasks.train.jsonl",
    ], "no staging folder or temp file left behind"
    loaded = load_tasks(out)
    assert [t.instance_id for t in loaded] == [t.instance_id for t in report.tasks]
    assert loaded == report.tasks, "the loader reads back exactly what the run returned"
    for line in out.read_text().splitlines():
        assert json.loads(line)["repo_source"] == "tasks.git", "relative: the folder can move"
    difficulties = {t.model_extra["synth"]["difficulty"] for t in loaded}
    assert "multi-location" in difficulties and difficulties & {"one-line", "multi-line"}
    for task in loaded:
        meta = task.model_extra["synth"]
        assert task.FAIL_TO_PASS and task.test_patch == ""
        assert set(task.FAIL_TO_PASS).isdisjoint(task.PASS_TO_PASS)
        assert meta["mutations"] and all(m["line"] >= 1 and m["kind"] for m in meta["mutations"])
        assert task.FAIL_TO_PASS[0] in task.problem_statement
        assert "statkit/" not in task.problem_statement.split("```")[-1], "no bug location in the prose"


@pytest.mark.ns
def test_base_commits_are_orphans_without_the_fix(run):
    out, report = run
    repo = out.parent / "tasks.git"
    clean_tree = _git(builtin_mirror("swe-rl-builtin/statkit"), "rev-parse", "main^{tree}").strip()
    trees = set()
    for task in report.tasks:
        assert _git(repo, "rev-list", task.base_commit).split() == [task.base_commit], "no parent"
        trees.add(_git(repo, "rev-parse", f"{task.base_commit}^{{tree}}").strip())
        assert _git(repo, "cat-file", "-t", task.base_commit).strip() == "commit"
    assert clean_tree not in trees
    every_commit = _git(repo, "rev-list", "--all").split()
    assert sorted(every_commit) == sorted(t.base_commit for t in report.tasks)
    objects = _git(repo, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)").split()
    assert clean_tree not in objects, "the unmutated tree is not even stored"


@pytest.mark.ns
def test_same_seed_same_records(run, tmp_path):
    import asyncio

    out, _ = run
    again = tmp_path / "tasks.jsonl"
    asyncio.run(_synth(again))
    assert again.read_text() == out.read_text()
    assert (tmp_path / "tasks.train.jsonl").read_text() == (out.parent / "tasks.train.jsonl").read_text()


@pytest.mark.ns
def test_same_tasks_as_before_the_timeout_change(run):
    """The tasks this seed gave at 2822205 (timeout floor 30 s, no bytecode shortcut): same ids, same patches."""
    _, report = run
    before = json.loads((Path(__file__).parent / "statkit_seed3_tasks.json").read_text())["tasks"]
    assert [{"instance_id": t.instance_id, "patch": t.patch} for t in report.tasks] == before


@pytest.mark.ns
def test_splits_by_function_do_not_overlap(run):
    out, report = run
    parts = {name: load_tasks(out.with_name(f"tasks.{name}.jsonl")) for name in SPLIT}
    assert all(parts.values()), "both splits have tasks"
    assert sum(len(p) for p in parts.values()) == len(report.tasks)
    functions = {name: {t.model_extra["synth"]["function"] for t in tasks} for name, tasks in parts.items()}
    assert not functions["train"] & functions["test"]
    assert all(t.model_extra["split"] == name for name, tasks in parts.items() for t in tasks)


@pytest.mark.ns
def test_env_validate_from_a_moved_copy(run, tmp_path):
    """The output folder alone, copied elsewhere, with an empty env cache: gold resolves, empty does not."""
    out, _ = run
    moved = tmp_path / "elsewhere"
    shutil.copytree(out.parent, moved)
    proc = subprocess.run(
        [
            *SWE_RL,
            "env",
            "validate",
            "--tasks",
            str(moved / "tasks.test.jsonl"),
            "--backend",
            "ns",
            "--cache-dir",
            str(tmp_path / "fresh-envs"),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["valid"] == result["total"] >= 1 and not result["errors"]
    for r in result["results"]:
        assert r["gold"]["resolved"] and not r["empty"]["resolved"]


@pytest.mark.ns
def test_stats_command(run):
    out, report = run
    proc = subprocess.run(
        [*SWE_RL, "tasks", "stats", "--tasks", str(out), "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    counts = json.loads(proc.stdout)
    assert counts["tasks"] == len(report.tasks)
    assert sum(counts["per_split"].values()) == len(report.tasks) and set(counts["per_split"]) == set(SPLIT)
    assert sum(counts["per_difficulty"].values()) == len(report.tasks)
    assert set(counts["per_kind"]) <= set(report.per_kind)


@pytest.mark.ns
def test_cli_with_a_relative_output_path(tmp_path):
    """The bare repository is written from inside itself: a relative ``--out`` must still resolve."""
    proc = subprocess.run(
        [*SWE_RL, "tasks", "synth", "--repo", "builtin:statkit", "-o", "tasks.jsonl", "-n", "1", "-j", "1"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(load_tasks(str(tmp_path / "tasks.jsonl"))) == 1
