"""Task records and loaders: SWE-bench schema, every file format, clear errors for bad input."""

from __future__ import annotations

import json

import pytest

from swe_rl.errors import ConfigError, TaskFormatError
from swe_rl.tasks.image_names import image_name
from swe_rl.tasks.loaders import load_tasks, write_jsonl
from swe_rl.tasks.model import Task, parse_task

RECORD = {
    "instance_id": "astropy__astropy-12907",
    "repo": "astropy/astropy",
    "base_commit": "d16bfe05a744909de4b27f5875fe0d4ed41ce607",
    "patch": "diff --git a/x b/x\n",
    "test_patch": "diff --git a/astropy/tests/test_a.py b/astropy/tests/test_a.py\n",
    "problem_statement": "Bug",
    "hints_text": "",
    "created_at": "2022-03-03T15:14:54Z",
    "version": "4.3",
    "environment_setup_commit": "298ccb478e6bf092953bca67a3d29dc6c35f6752",
    "FAIL_TO_PASS": '["astropy/tests/test_a.py::test_x[a b]"]',
    "PASS_TO_PASS": "[]",
}


def test_tests_accepted_as_json_strings_or_lists():
    from_str = parse_task(RECORD)
    from_list = parse_task(
        {**RECORD, "FAIL_TO_PASS": ["astropy/tests/test_a.py::test_x[a b]"], "PASS_TO_PASS": []}
    )
    assert from_str == from_list
    assert from_str.FAIL_TO_PASS == ["astropy/tests/test_a.py::test_x[a b]"]
    assert from_str.test_files == ["astropy/tests/test_a.py"]


def test_extras_are_kept_and_round_trip():
    task = parse_task({**RECORD, "eval_script": "#!/bin/bash\n", "image_name": "img", "mystery": 3})
    record = task.to_record()
    assert record["eval_script"] == "#!/bin/bash\n" and record["mystery"] == 3
    assert Task.model_validate(record) == task


def test_float_version_from_parquet_is_a_string():
    assert parse_task({**RECORD, "version": 3.0}).version == "3.0"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"FAIL_TO_PASS": "[not json"}, "FAIL_TO_PASS"),
        ({"PASS_TO_PASS": [1, 2]}, "PASS_TO_PASS"),
        ({"base_commit": None}, "base_commit"),
        ({"repo": ""}, "repo"),
        ({"FAIL_TO_PASS": "[]"}, "FAIL_TO_PASS"),
        ({"problem_statement": None}, "problem_statement"),
    ],
)
def test_malformed_record_names_record_and_field(change, field):
    with pytest.raises(TaskFormatError) as info:
        parse_task({**RECORD, **change}, where="tasks.jsonl:7")
    assert info.value.field == field
    assert "astropy__astropy-12907" in str(info.value) and "tasks.jsonl:7" in str(info.value)


def test_missing_instance_id_names_the_line(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(
        json.dumps(RECORD) + "\n" + json.dumps({k: v for k, v in RECORD.items() if k != "instance_id"})
    )
    with pytest.raises(TaskFormatError) as info:
        load_tasks(path)
    assert "t.jsonl:2" in str(info.value) and info.value.field == "instance_id"


def test_a_record_without_what_an_episode_needs_is_refused_naming_it_and_what_it_lacks(tmp_path):
    """instance_id, repo and base_commit alone used to load: the agent got no issue, any patch resolved."""
    path = tmp_path / "t.jsonl"
    bare = {"instance_id": "owner__name-1", "repo": "owner/name", "base_commit": "abcd1234"}
    path.write_text(json.dumps(RECORD) + "\n" + json.dumps(bare) + "\n")
    with pytest.raises(TaskFormatError) as info:
        load_tasks(path)
    assert str(info.value).startswith(
        "record owner__name-1 (t.jsonl:2): missing problem_statement and FAIL_TO_PASS"
    )
    # a test patch may be empty: a synthesized task's tests are in its repository already
    assert parse_task({**RECORD, "test_patch": ""}).test_patch == ""


def test_invalid_json_line(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(RECORD) + "\n{oops\n")
    with pytest.raises(TaskFormatError, match=r"t\.jsonl:2"):
        load_tasks(path)


def test_jsonl_json_and_parquet_load_the_same(tmp_path, tasks):
    import pyarrow as pa
    import pyarrow.parquet as pq

    jsonl = tmp_path / "t.jsonl"
    write_jsonl(tasks, jsonl)
    as_json = tmp_path / "t.json"
    as_json.write_text(json.dumps([t.to_record() for t in tasks]))
    # parquet as HF exports it: test lists as JSON strings
    rows = [
        {
            **t.to_record(),
            "FAIL_TO_PASS": json.dumps(t.FAIL_TO_PASS),
            "PASS_TO_PASS": json.dumps(t.PASS_TO_PASS),
        }
        for t in tasks
    ]
    parquet = tmp_path / "t.parquet"
    pq.write_table(pa.Table.from_pylist(rows), parquet)
    assert load_tasks(jsonl) == load_tasks(as_json) == load_tasks(parquet) == tasks


def test_trainer_jsonl_rows_are_unwrapped(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text(json.dumps({"text": "Bug", "metadata": {"instance": RECORD, "data_source": "x"}}) + "\n")
    assert load_tasks(path)[0].instance_id == RECORD["instance_id"]


def test_duplicate_ids_rejected(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text((json.dumps(RECORD) + "\n") * 2)
    with pytest.raises(TaskFormatError, match="duplicate"):
        load_tasks(path)


def test_select_instances_and_unknown_id(tasks):
    some = load_tasks("builtin", instance_ids=[tasks[2].instance_id, tasks[0].instance_id])
    assert [t.instance_id for t in some] == [tasks[2].instance_id, tasks[0].instance_id]
    with pytest.raises(ConfigError, match="nope__nope-1"):
        load_tasks("builtin", instance_ids=["nope__nope-1"])


def test_missing_file_and_bad_suffix(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_tasks(tmp_path / "missing.jsonl")
    bad = tmp_path / "t.csv"
    bad.write_text("x")
    with pytest.raises(ConfigError, match="unsupported"):
        load_tasks(bad)


def test_hf_dataset_offline_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    with pytest.raises(ConfigError, match="cannot load Hugging Face dataset 'princeton-nlp/SWE-bench_Lite'"):
        load_tasks("princeton-nlp/SWE-bench_Lite:test")


def test_image_names():
    assert (
        image_name("astropy__astropy-12907") == "swebench/sweb.eval.x86_64.astropy_1776_astropy-12907:latest"
    )
    assert image_name("Django__Django-1", "swegym") == "xingyaoww/sweb.eval.x86_64.django_s_django-1:latest"


def test_rows_of_a_version_get_the_newest_rows_base_commit_as_their_setup_stand_in(tmp_path):
    """A version's rows (same repo, version and setup commit) name the newest row's base commit, which the env
    cache builds at where the source lacks the setup commit; a subset written out keeps what the whole set
    said, so its envs are the whole set's."""

    def row(n: int, created: str, **extra: str) -> dict:
        return {
            "instance_id": f"django__django-{n}",
            "repo": "django/django",
            "base_commit": f"{n:04d}" * 10,
            "created_at": created,
            "version": "3.0",
            "environment_setup_commit": "f" * 40,
            "problem_statement": "x",
            "FAIL_TO_PASS": ["t"],
            **extra,
        }

    rows = [
        row(1, "2019-02-01T00:00:00Z"),
        row(3, "2019-07-01T00:00:00Z"),
        row(2, "2019-05-01T00:00:00Z"),
        row(4, "2019-09-01T00:00:00Z", version="3.1"),  # another version: its own group
        row(5, "2019-08-01T00:00:00Z", environment_setup_commit=""),  # no setup commit: no group
    ]
    (tmp_path / "all.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    loaded = load_tasks(tmp_path / "all.jsonl")
    newest = "0003" * 10
    assert [t.setup_stand_in for t in loaded] == [newest, None, newest, None, None]
    write_jsonl(load_tasks(tmp_path / "all.jsonl", instance_ids=["django__django-1"]), tmp_path / "one.jsonl")
    (again,) = load_tasks(tmp_path / "one.jsonl")
    assert again.setup_stand_in == newest and again.to_record()["setup_stand_in"] == newest
    # the control: the row alone, never loaded with the others, stands in for itself
    (tmp_path / "alone.jsonl").write_text(json.dumps(rows[0]) + "\n")
    assert load_tasks(tmp_path / "alone.jsonl")[0].setup_stand_in is None
