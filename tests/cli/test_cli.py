"""The command line, run as a user runs it: a subprocess of the installed entry point."""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

SWE_RL = [sys.executable, "-m", "swe_rl.cli.app"]


def swe_rl(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SWE_RL, *args], capture_output=True, text=True, cwd=cwd, timeout=600, check=False)


@pytest.mark.parametrize("command", [[], ["tasks"], ["env"], ["grade"], ["demo"], ["env", "validate"]])
def test_help_explains(command):
    out = swe_rl(*command, "--help")
    assert out.returncode == 0, out.stderr
    assert "Usage" in out.stdout and len(out.stdout) > 200


def test_tasks_list_and_show(tasks):
    listed = json.loads(swe_rl("tasks", "list", "--json").stdout)
    assert [t["instance_id"] for t in listed] == [t.instance_id for t in tasks]
    shown = json.loads(swe_rl("tasks", "show", tasks[0].instance_id, "--json").stdout)
    assert shown == tasks[0].to_record()
    text = swe_rl("tasks", "show", tasks[0].instance_id).stdout
    assert "problem_statement" in text and tasks[0].FAIL_TO_PASS[0] in text


def test_unknown_instance_is_a_clean_error():
    out = swe_rl("tasks", "show", "nope__nope-1")
    assert out.returncode == 2
    assert out.stderr.strip().startswith("error:") and "nope__nope-1" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize(
    "args,message",
    [(["tasks", "list", "builtin"], "unexpected extra argument"), (["eval", "--nope"], "No such option")],
)
def test_usage_errors_are_one_message_not_a_traceback(args, message):
    out = swe_rl(*args)
    assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_an_option_its_settings_refuse_is_one_message_naming_the_field():
    """--lr 0 passes the option's own bound (min=0.0, closed) but not the settings' (gt=0)."""
    out = swe_rl("train", "rl", "--lr", "0")
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert "invalid GRPOSettings: learning_rate: Input should be greater than 0 (got 0.0)" in out.stderr


def test_env_validate_json(tasks, tmp_path):
    report = tmp_path / "r.json"
    out = swe_rl(
        "env", "validate", "-b", "local", "-i", tasks[0].instance_id, "--json", "--report", str(report)
    )
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert (summary["total"], summary["valid"], summary["invalid"]) == (1, 1, [])
    assert json.loads(report.read_text())["results"][0]["gold"]["log"]
    assert "validate 1/1" in out.stderr, "progress goes to stderr"


def test_env_validate_fails_on_an_invalid_task(tasks, tmp_path):
    broken = tasks[0].to_record() | {"FAIL_TO_PASS": ["tests/test_nothing.py::test_missing"]}
    path = tmp_path / "broken.jsonl"
    path.write_text(json.dumps(broken) + "\n")
    out = swe_rl("env", "validate", "-b", "local", "-s", str(path))
    assert out.returncode == 1
    assert "NO:" in out.stdout


def _preds(path: Path, entries: list[dict]) -> Path:
    path.write_text(json.dumps(entries))
    return path


def test_grade_writes_official_layout_and_resumes(tasks, tmp_path):
    a, b = tasks[0], tasks[1]
    preds = _preds(
        tmp_path / "preds.json",
        [
            {"instance_id": a.instance_id, "model_name_or_path": "org/model", "model_patch": a.patch},
            {"instance_id": b.instance_id, "model_name_or_path": "org/model", "model_patch": ""},
        ],
    )
    out_dir = tmp_path / "out"
    first = swe_rl("grade", "-p", str(preds), "-b", "local", "--run-id", "r1", "-o", str(out_dir), "--json")
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert report["resolved_ids"] == [a.instance_id] and report["empty_patch_ids"] == [b.instance_id]
    assert json.loads((out_dir / "org__model.r1.json").read_text()) == report
    inst = out_dir / "logs" / "run_evaluation" / "r1" / "org__model" / a.instance_id
    assert json.loads((inst / "report.json").read_text())[a.instance_id]["resolved"] is True
    assert (inst / "patch.diff").read_text() == a.patch and ">>>>> Start Test Output" in (
        inst / "test_output.txt"
    ).read_text()
    again = swe_rl("grade", "-p", str(preds), "-b", "local", "--run-id", "r1", "-o", str(out_dir), "--json")
    assert json.loads(again.stdout) == report and "cached" in again.stderr


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ([{"instance_id": "nope__nope-1", "model_patch": "x"}], "unknown instance ids: nope__nope-1"),
        ([{"model_patch": "x"}], "instance_id"),
        ({"not": "a list"}, "prediction #0"),
        ([], "empty"),
    ],
)
def test_bad_predictions_write_nothing(tmp_path, entries, message):
    preds = _preds(tmp_path / "preds.json", entries)
    out_dir = tmp_path / "out"
    out = swe_rl("grade", "-p", str(preds), "-b", "local", "-o", str(out_dir))
    assert out.returncode == 2, out.stderr
    assert message in out.stderr and "Traceback" not in out.stderr
    assert not out_dir.exists()


def test_invalid_json_predictions(tmp_path):
    bad = tmp_path / "preds.json"
    bad.write_text("[{")
    out = swe_rl("grade", "-p", str(bad), "-b", "local", "-o", str(tmp_path / "o"))
    assert out.returncode == 2 and "invalid JSON" in out.stderr


def test_invalid_json_on_a_later_line_of_jsonl_predictions_names_that_line(tasks, tmp_path):
    good = {"instance_id": tasks[0].instance_id, "model_patch": ""}
    bad = tmp_path / "preds.jsonl"
    bad.write_text(json.dumps(good) + "\n\n" + '{"instance_id": \n')  # the third line, after a blank one
    out = swe_rl("grade", "-p", str(bad), "-b", "local", "-o", str(tmp_path / "o"))
    assert out.returncode == 2 and f"{bad}: invalid JSON at line 3:" in out.stderr, out.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ["eval", "--llm", "scripted:oracle", "-b", "local", "-i", "{id}", "-o", "{file}"],
            "--output-dir {file} is a file",
        ),
        (["eval", "--llm", "scripted:oracle", "-b", "local", "-i", "{id}", "-o", "{file}/run"], "is under"),
        (["grade", "-p", "{preds}", "-b", "local", "-o", "{file}"], "--output-dir {file} is a file"),
        (["data", "export", "-o", "{file}"], "--output-dir {file} is a file"),
        (["data", "prepare", "-o", "{file}"], "--output-dir {file} is a file"),
        (["report", "{dir}", "-o", "{dir}"], "--out {dir} is a directory"),
        (["report", "{dir}", "-o", "{file}/report.html"], "is under"),
        (["demo", "-b", "local", "--no-rl", "-o", "{file}"], "--output-dir {file} is a file"),
        (["env", "validate", "-b", "local", "-i", "{id}", "--report", "{file}/r.json"], "is under"),
        (["train", "sft", "{file}", "--model", "tiny-qwen", "-o", "{file}"], "--output-dir {file} is a file"),
        pytest.param(
            ["train", "rl", "--model", "tiny-qwen", "-b", "local", "-i", "{id}", "-o", "{file}"],
            "--output-dir {file} is a file",
            marks=pytest.mark.skipif(importlib.util.find_spec("trl") is None, reason="the train extra"),
        ),
    ],
    ids=[
        "eval",
        "eval-under",
        "grade",
        "data-export",
        "data-prepare",
        "report",
        "report-under",
        "demo",
        "env-validate",
        "train-sft",
        "train-rl",
    ],
)
def test_an_output_path_that_cannot_be_written_is_one_message_before_any_work(tasks, tmp_path, args, says):
    """It was a traceback at the first write (demo: after a minute of work), or a run that went on."""
    places = {"file": tmp_path / "afile", "dir": tmp_path, "id": tasks[0].instance_id}
    places["file"].write_text("not a folder")
    entry = {"instance_id": tasks[0].instance_id, "model_name_or_path": "m", "model_patch": tasks[0].patch}
    places["preds"] = _preds(tmp_path / "preds.json", [entry])
    out = swe_rl(*(arg.format(**places) for arg in args))
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.startswith("error: ") and says.format(**places) in out.stderr, out.stderr
    assert places["file"].read_text() == "not a folder" and sorted(p.name for p in tmp_path.iterdir()) == [
        "afile",
        "preds.json",
    ]


def test_unknown_backend():
    out = swe_rl("env", "validate", "-b", "vm")
    assert out.returncode == 2 and "unknown sandbox backend 'vm'" in out.stderr


def test_data_prepare_and_export(tasks, tmp_path):
    out = swe_rl("data", "prepare", "-o", str(tmp_path), "-s", "builtin:statkit")
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in (tmp_path / "train.jsonl").read_text().splitlines()]
    assert (
        rows[0]["metadata"]["data_source"] == "builtin:statkit"
        and rows[0]["text"] == rows[0]["metadata"]["instance"]["problem_statement"]
    )
    # the trainer rows load back as tasks
    again = swe_rl("tasks", "list", "-s", str(tmp_path / "train.jsonl"), "--json")
    assert len(json.loads(again.stdout)) == len(rows)
    out = swe_rl("data", "export", "-o", str(tmp_path), "-s", "builtin:statkit", "--flavor", "swegym")
    assert out.returncode == 0, out.stderr
    images = (tmp_path / "docker_images.txt").read_text().split()
    assert images[0].startswith("xingyaoww/sweb.eval.x86_64.swe-rl-builtin_s_statkit")
    exported = [json.loads(line) for line in (tmp_path / "eval.jsonl").read_text().splitlines()]
    assert [row["image_name"] for row in exported] == images  # every row names its image (#23 item 1)
    assert (tmp_path / "instance_ids.txt").read_text().split() == [
        t.instance_id for t in tasks if "statkit" in t.instance_id
    ]


@pytest.mark.parametrize(
    "args",
    [
        ["--slice", "a:b"],
        ["--slice", "3"],
        # these two get as far as the sandbox backend (ns by default)
        pytest.param(["--llm", "scripted:nope"], marks=pytest.mark.ns),
        pytest.param(["--llm", "gpt"], marks=pytest.mark.ns),
    ],
)
def test_eval_bad_options_are_clean_errors(args, tmp_path):
    out = swe_rl("eval", *args, "-o", str(tmp_path / "run"))
    assert out.returncode == 2 and out.stderr.startswith("error:") and "Traceback" not in out.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("slice_", "says"),
    [
        ("12:", "no task selected: --slice 12: keeps none of the 12 tasks"),
        ("3:3", "no task selected: --slice 3:3 keeps none of the 12 tasks"),
        ("::0", "a step is not 0"),
        ("", "no task selected: {empty} holds no tasks"),
    ],
)
def test_an_empty_task_selection_says_so_and_runs_nothing(tmp_path, slice_, says):
    """It printed 'resolved 0/1' for an attempt that never happened, then suggested a report of the folder."""
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    chosen = ["--slice", slice_] if slice_ else ["-s", str(empty)]
    out = swe_rl("eval", "--llm", "scripted:oracle", "-b", "local", *chosen, "-o", str(tmp_path / "run"))
    assert out.returncode == 2 and out.stderr.startswith("error: ") and len(out.stderr.splitlines()) == 1
    assert says.format(empty=empty) in out.stderr, out.stderr
    assert out.stdout == "" and not (tmp_path / "run").exists()


def test_a_slice_takes_a_step_as_python_slices_do(tasks, tmp_path):
    """The help said 'Python slice' and '::6' was refused."""
    out = swe_rl(
        "eval", "--llm", "scripted:oracle", "-b", "local", "--slice", "::6", "-o", str(tmp_path / "run")
    )
    assert out.returncode == 0, out.stderr
    ids = [
        json.loads(line)["instance_id"]
        for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()
    ]
    assert sorted(ids) == sorted(t.instance_id for t in tasks[::6]) and len(ids) == 2


@pytest.mark.parametrize(
    ("trl", "message"),
    [
        ("top_entropy_quantile", "takes KEY=VALUE"),
        ("no_such_field=1", "not GRPOConfig fields: no_such_field"),
    ],
)
def test_train_rl_bad_trl_fields_are_clean_errors(trl, message, tmp_path):
    pytest.importorskip("trl")
    out = swe_rl("train", "rl", "--model", "tiny-qwen", "--trl", trl, "-o", str(tmp_path / "run"))
    assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert not (tmp_path / "run").exists()


def test_a_sampling_option_the_settings_refuse_is_refused_before_anything_is_printed(tmp_path):
    """--top-p 0 passes the option's own bound (max=1) but not SamplingParams' (gt=0)."""
    out = swe_rl(
        "eval", "--llm", "scripted:oracle", "-b", "local", "--top-p", "0", "-o", str(tmp_path / "run")
    )
    assert out.returncode == 2, out.stderr
    assert out.stderr.splitlines() == [
        "error: invalid SamplingParams: top_p: Input should be greater than 0 (got 0.0)"
    ]  # no run header, no backend note before it
    assert out.stdout == "" and not (tmp_path / "run").exists()


def test_ctrl_c_in_eval_names_the_command_that_resumes_and_that_command_does(tasks, tmp_path):
    run_dir = tmp_path / "run"
    args = ["eval", "--llm", "scripted:oracle", "-b", "local", "-j", "1", "-o", str(run_dir)]
    proc = subprocess.Popen(
        [*SWE_RL, *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        # a shell's background job starts with SIGINT ignored, and Python then keeps it so: undo that
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        if line.startswith("[eval 1/"):  # one attempt finished, the others to come
            proc.send_signal(signal.SIGINT)
            break
    rest = proc.communicate(timeout=300)[1]
    assert proc.returncode == 130, rest
    hint = rest.strip().splitlines()[-1]
    assert hint.startswith("interrupted;") and "to continue: " in hint, rest
    command = shlex.split(hint.partition("to continue: ")[2])
    assert command == ["swe-rl", *args, "--resume"]
    done = swe_rl(*command[1:])
    assert done.returncode == 0, done.stderr
    ids = [json.loads(line)["instance_id"] for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert sorted(ids) == sorted(t.instance_id for t in tasks)  # each once: the finished ones were kept


def test_resume_with_another_model_is_refused_and_rewrites_nothing(tasks, tmp_path):
    """It was accepted: summary.json's model and every preds.json model_name_or_path became the second
    model's while the trajectories kept the first."""
    run_dir = tmp_path / "run"
    args = ["eval", "-b", "local", "-i", tasks[0].instance_id, "-i", tasks[1].instance_id, "-o", str(run_dir)]
    first = swe_rl(*args, "--llm", "scripted:oracle", "--slice", ":1")
    assert first.returncode == 0, first.stderr
    files = {name: (run_dir / name).read_bytes() for name in ("summary.json", "preds.json", "results.jsonl")}
    other = swe_rl(*args, "--llm", "scripted:never-submit", "--resume")
    assert other.returncode == 2 and "Traceback" not in other.stderr, other.stderr
    assert other.stderr.splitlines()[-1] == (
        f"error: {run_dir} is a run of model 'scripted:oracle', not 'scripted:never-submit': --resume it with "
        "the same model, or choose another --output-dir"
    )
    assert {name: (run_dir / name).read_bytes() for name in files} == files
    same = swe_rl(*args, "--llm", "scripted:oracle", "--resume")  # the control: the same model continues
    assert same.returncode == 0 and same.stdout.startswith("resolved 2/2"), same.stderr


@pytest.mark.parametrize(
    ("files", "says"),
    [
        ({"notes.txt": "x"}, "is not a run"),
        ({"rollouts.jsonl": "{}\n"}, "is a training run (rollouts.jsonl)"),
    ],
)
def test_data_sft_refuses_a_folder_that_is_not_an_eval_run_and_writes_nothing(tmp_path, files, says):
    folder = tmp_path / "folder"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    out = swe_rl("data", "sft", str(folder), "-o", str(tmp_path / "sft"), "--tokenizer", "none")
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.startswith(f"error: {folder} {says}: SFT data comes from `swe-rl eval` run directories")
    assert not (tmp_path / "sft").exists()


class _NotFound(BaseHTTPRequestHandler):
    def do_HEAD(self) -> None:
        self.send_response(404)
        self.end_headers()

    do_GET = do_HEAD

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def answering_hub() -> Iterator[str]:
    """A Hub on loopback that answers every request: no such dataset."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class _Unauthorized(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint that refuses every call: each attempt ends as an infrastructure error."""

    def do_POST(self) -> None:
        body = b'{"error": {"message": "invalid api key"}}'
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_an_all_error_run_has_no_rate_and_its_max_tokens_is_no_secret(tasks, tmp_path):
    """README's rate is resolved / (attempts - infrastructure errors): 0/0 here, which read 'rate 0.0%';
    max_tokens was '<redacted>' in summary.json, matched as a 'token'."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Unauthorized)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    api_base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    args = ["eval", "--model", "m", "--api-base", api_base, "-b", "local", "--max-tokens", "64"]
    args += [arg for t in tasks[:2] for arg in ("-i", t.instance_id)]
    try:
        out = swe_rl(*args, "-o", str(tmp_path / "run"))
    finally:
        server.shutdown()
        server.server_close()
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert out.stdout.startswith("resolved 0/2 (rate n/a: 0/0 graded); errors 2;"), out.stdout
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert (summary["completed"], summary["errors"], summary["resolve_rate"]) == (0, 2, None)
    assert summary["args"]["max_tokens"] == 64 and summary["args"]["api_base"] == api_base


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("hub", ["silent", "answering"])
def test_a_hub_dataset_that_cannot_load_is_one_message_at_once(tmp_path, hub, request):
    """Silent: the Hub's client used to retry for ~25 s, every retry logged twice; answering: the probe lets
    the request through, and the dataset's own error is the one line."""
    pytest.importorskip("datasets")
    endpoint = (
        request.getfixturevalue("answering_hub")
        if hub == "answering"
        else f"http://127.0.0.1:{_closed_port()}"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env |= {
        "HF_ENDPOINT": endpoint,
        "HF_HOME": str(tmp_path / "hf"),
        "HF_DATASETS_CACHE": str(tmp_path / "ds"),
    }
    started = time.monotonic()
    out = subprocess.run(
        [*SWE_RL, "tasks", "list", "-s", "owner/name"], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 2 and time.monotonic() - started < 15, out.stderr
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: cannot load Hugging Face dataset 'owner/name'"), (
        lines
    )
    assert ("the Hub does not answer" in lines[0]) == (hub == "silent")
