"""``env build`` over a dataset: one broken record fails alone, the report resumes and feeds data prepare."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

from tests.conftest import available_factory

from swe_rl.envs.cache import EnvCache
from swe_rl.fileio import atomic_write_text
from swe_rl.runs.envbuild import BuildReport, build_dataset


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
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "swe_rl.cli.app",
            "data",
            "prepare",
            "-s",
            str(source),
            "-o",
            str(tmp_path / "d"),
            "--valid-only",
            str(report_path),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in (tmp_path / "d" / "train.jsonl").read_text().splitlines()]
    assert [r["metadata"]["instance"]["instance_id"] for r in rows] == [t.instance_id for t in good]
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "swe_rl.cli.app",
            "data",
            "prepare",
            "-s",
            str(source),
            "-o",
            str(tmp_path / "e"),
            "--valid-only",
            str(source),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2 and "not an `swe-rl env build` report" in bad.stderr
