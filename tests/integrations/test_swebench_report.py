"""Contract: the run directory of ``swe-rl grade`` is one that swebench's own tooling reads as its own.

swebench's ``make_run_report``, run on our output directory, writes the report we wrote; its constants
name run.json, which holds the fields its ``write_run_metadata`` writes."""

from __future__ import annotations

import asyncio
import json

import pytest

from swe_rl.envs.cache import EnvCache
from swe_rl.runs.grade_predictions import grade_predictions, infra_errors, instance_dir
from swe_rl.runs.predictions import Prediction
from swe_rl.sandbox import get_factory

GARBAGE = (
    "diff --git a/statkit/stats.py b/statkit/stats.py\n--- a/statkit/stats.py\n+++ b/statkit/stats.py\n"
    "@@ -1,3 +1,3 @@\n-this line is not there\n+replacement\n context\n"
)


def test_make_run_report_on_our_run_equals_ours(tasks, tmp_path, monkeypatch):
    pytest.importorskip("docker")  # swebench.harness.reporting imports it
    from swebench.harness.constants import LOG_INSTANCE, LOG_REPORT, LOG_RUN_METADATA, RUN_EVALUATION_LOG_DIR
    from swebench.harness.reporting import make_run_report

    by_id = {t.instance_id: t for t in tasks}
    textkit = by_id["swe-rl-builtin__textkit-3"]
    # applies, and the tests it must fix fail on a missing module: swebench classifies that (ambiguous)
    wrong = textkit.patch.replace("@@ -32,7 +32,7 @@", "@@ -32,7 +32,8 @@").replace(
        "+    if len(text) <= limit:",
        "+    import swe_rl_no_such_module  # noqa\n+    if len(text) <= limit:",
    )
    patches: dict[str, str | None] = {
        "swe-rl-builtin__statkit-1": by_id["swe-rl-builtin__statkit-1"].patch,  # gold: resolved
        "swe-rl-builtin__textkit-3": wrong,  # unresolved
        "swe-rl-builtin__textkit-1": "",  # empty
        "swe-rl-builtin__textkit-2": None,  # empty
        "swe-rl-builtin__inikit-1": "  \n",  # blank: not empty to swebench; applies by no method
        "swe-rl-builtin__statkit-2": GARBAGE,  # applies by no method: an evaluation error
    }  # every other builtin task has no prediction: incomplete
    preds = [
        Prediction(instance_id=i, model_name_or_path="org/model", model_patch=p) for i, p in patches.items()
    ]
    out = tmp_path / "out"
    path, ours = asyncio.run(
        grade_predictions(
            preds, tasks, EnvCache(), get_factory("local"), out=out, run_id="r", source="builtin", quiet=True
        )
    )
    assert ours["resolved_ids"] == ["swe-rl-builtin__statkit-1"]
    assert ours["unresolved_ids"] == ["swe-rl-builtin__textkit-3"]
    assert ours["empty_patch_ids"] == ["swe-rl-builtin__textkit-1", "swe-rl-builtin__textkit-2"]
    assert ours["error_ids"] == ["swe-rl-builtin__inikit-1", "swe-rl-builtin__statkit-2"]
    assert len(ours["incomplete_ids"]) == len(tasks) - len(patches)
    assert ours["failure_reasons"] == {"swe-rl-builtin__textkit-3": "missing_module"}
    assert ours["ambiguous_failure_ids"] == ["swe-rl-builtin__textkit-3"]
    assert infra_errors(preds, out, "r") == {}  # apply failures are errors of the run, not of the grader
    garbage = instance_dir(out, "r", preds[-1])
    assert sorted(p.name for p in garbage.iterdir()) == ["patch.diff", LOG_INSTANCE]  # no report.json
    assert ">>>>> Patch Apply Failed" in (garbage / LOG_INSTANCE).read_text()
    assert (instance_dir(out, "r", preds[0]) / LOG_REPORT).is_file()

    monkeypatch.chdir(out)
    dataset = [t.to_record() for t in tasks]
    predictions = {p.instance_id: p.model_dump() for p in preds}
    theirs = make_run_report(predictions, dataset, "r", report_dir=str(tmp_path / "swebench"))
    assert theirs.name == path.name
    assert json.loads(theirs.read_text()) == ours == json.loads(path.read_text())

    metadata = json.loads((RUN_EVALUATION_LOG_DIR / "r" / LOG_RUN_METADATA).read_text())
    assert set(metadata) == {"dataset", "split", "task_repo", "created_at"}
    assert (metadata["dataset"], metadata["split"], metadata["task_repo"]) == ("builtin", "test", None)
    from swebench.harness.run_evaluation import read_run_metadata

    assert read_run_metadata("r") == metadata
