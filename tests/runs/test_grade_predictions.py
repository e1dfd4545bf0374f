"""Run-level grading: infrastructure failures are errors to retry, never wrong answers."""

from __future__ import annotations

import asyncio

from tests.conftest import unbuildable_task

from swe_rl.envs.cache import EnvCache
from swe_rl.runs.grade_predictions import grade_predictions, infra_errors, instance_dir
from swe_rl.runs.predictions import Prediction
from swe_rl.sandbox import get_factory


def test_infra_failure_is_an_error_and_is_retried(tmp_path, tasks):
    cache = EnvCache(tmp_path / "envs")
    task = tasks[0]
    pred = Prediction(instance_id=task.instance_id, model_name_or_path="m", model_patch=task.patch)
    out = tmp_path / "out"
    # sandboxes from a pool server that is not there: none can be created (a lost backend, not the patch's fault)
    lost = get_factory("http://127.0.0.1:9")
    lost.client.retries, lost.client.backoff_s = 0, 0.0
    _, report = asyncio.run(grade_predictions([pred], [task], cache, lost, out=out, run_id="r", quiet=True))
    assert report["error_ids"] == [task.instance_id] and report["unresolved_ids"] == []
    assert report["failure_reasons"] == {}  # swebench's classification only: our text is in the logs
    assert "SandboxUnavailableError: no pool server" in infra_errors([pred], out, "r")[task.instance_id]
    assert (
        "SandboxUnavailableError: no pool server"
        in (instance_dir(out, "r", pred) / "run_instance.log").read_text()
    )
    assert not (instance_dir(out, "r", pred) / "report.json").exists()
    # with a backend that works, the rerun grades the instance it could not grade before
    _, report = asyncio.run(
        grade_predictions([pred], [task], cache, get_factory("local"), out=out, run_id="r", quiet=True)
    )
    assert report["resolved_ids"] == [task.instance_id] and report["error_ids"] == []
    assert infra_errors([pred], out, "r") == {}


def test_an_empty_prediction_is_not_graded_and_builds_no_env(tmp_path):
    """swebench skips empty patches ("" and None): no env, no test run, no error. The task's env cannot be
    built, so grading it at all shows as an error (the controls: the same task with a patch, and with a
    blank one, which swebench does not count as empty: it grades it, and no method applies it)."""
    task = unbuildable_task()
    cache = EnvCache(tmp_path / "envs")
    out = tmp_path / "out"
    patched = Prediction(instance_id=task.instance_id, model_name_or_path="m", model_patch="x")
    _, control = asyncio.run(
        grade_predictions([patched], [task], cache, get_factory("local"), out=out, run_id="c", quiet=True)
    )
    assert control["error_ids"] == [task.instance_id]
    blank = Prediction(instance_id=task.instance_id, model_name_or_path="m", model_patch="  \n")
    _, control = asyncio.run(
        grade_predictions([blank], [task], cache, get_factory("local"), out=out, run_id="b", quiet=True)
    )
    assert control["error_ids"] == [task.instance_id] and control["empty_patch_ids"] == []

    for patch in ("", None):
        empty = Prediction(instance_id=task.instance_id, model_name_or_path="m", model_patch=patch)
        _, report = asyncio.run(
            grade_predictions([empty], [task], cache, get_factory("local"), out=out, run_id="e", quiet=True)
        )
        assert report["error_ids"] == [] and report["empty_patch_ids"] == [task.instance_id]
        assert report["completed_ids"] == [] and report["resolved_ids"] == []
        assert not instance_dir(out, "e", empty).exists()
