"""`swe-rl train rl|sft --resume`: a run SIGKILLed mid-run and resumed continues the same sequence of steps
as a run without the kill (the real CLI in subprocesses, a tiny Qwen3 on CPU, builtin tasks)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.conftest import available_factory

from swe_rl.errors import ConfigError
from swe_rl.rundir import RunDir
from swe_rl.train.resume import open_run, start

# two tasks, one a step, three steps: epoch 0 is steps 0-1 and, with seed 0, epoch 1 starts with the other
# task; the kill comes in step 2, so a resumed run that drew the task order afresh would show there
RL = [
    *("train", "rl", "--model", "tiny-qwen", "--max-instances", "2", "--steps", "3", "--tasks-per-step", "1"),
    *("-g", "2", "--max-tokens", "4", "--step-limit", "1", "-j", "1", "--seed", "0", "--backend", "ns"),
]


def _cli(*args: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "swe_rl.cli.app", *args], stdout=out, stderr=subprocess.STDOUT
        )


def _finish(proc: subprocess.Popen[bytes], log: Path) -> None:
    assert proc.wait(timeout=600) == 0, log.read_text()[-3000:]


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _kill_when(proc: subprocess.Popen[bytes], metrics: Path, seen: Callable[[dict], bool]) -> None:
    """SIGKILL the run as soon as metrics.jsonl holds a row ``seen`` picks."""
    deadline = time.monotonic() + 600
    while proc.poll() is None and time.monotonic() < deadline:
        lines = metrics.read_text().splitlines() if metrics.is_file() else []
        if any(seen(json.loads(line)) for line in lines if line.endswith("}")):
            os.kill(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.05)
    assert proc.wait(timeout=60) == -signal.SIGKILL, "the run ended before the kill"


def _rl_steps(run: Path) -> tuple[list[tuple[int, str]], dict[int, tuple[float, float]]]:
    """Per step: the instance ids of its episodes; and TRL's entropy (a function of the sampled ids) and
    learning rate (the scheduler)."""
    ids = [(r["step"], r["instance_id"]) for r in _rows(run / "rollouts.jsonl")]
    trl = {
        m["step"]: (m["trl/entropy"], m["trl/learning_rate"])
        for m in _rows(run / "metrics.jsonl")
        if "trl/loss" in m
    }
    return ids, trl


@pytest.mark.ns
def test_a_killed_rl_run_resumes_the_same_sequence(tmp_path):
    available_factory("ns")
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    ref = _cli(*RL, "-o", str(whole), log=tmp_path / "whole.log")
    proc = _cli(*RL, "-o", str(killed), log=tmp_path / "killed.log")
    # the rollouts of step 2 are logged: checkpoint-2 is complete, step 2 is in flight
    _kill_when(proc, killed / "metrics.jsonl", lambda m: m["step"] == 2 and "rl/episodes" in m)
    control = tmp_path / "control"
    shutil.copytree(killed, control)
    (control / "checkpoint-2" / "rng_state.pth").unlink()  # resumed without the RNG states
    resumed = _cli("train", "rl", "--resume", str(killed), "-j", "1", log=tmp_path / "resumed.log")
    uncontrolled = _cli("train", "rl", "--resume", str(control), log=tmp_path / "control.log")
    for p, log in ((ref, "whole"), (resumed, "resumed"), (uncontrolled, "control")):
        _finish(p, tmp_path / f"{log}.log")

    ids, trl = _rl_steps(whole)
    assert [s for s, _ in ids] == [0, 0, 1, 1, 2, 2] and sorted(trl) == [1, 2, 3]
    assert ids[4][1] != ids[0][1]  # epoch 1 starts with another task than epoch 0
    assert _rl_steps(killed) == (ids, trl)  # step for step: the same tasks, samples and learning rates
    control_ids, control_trl = _rl_steps(control)
    assert control_ids == ids  # the task order does not depend on the RNG states
    assert control_trl[3][0] != trl[3][0]  # the samples do
    summary = json.loads((killed / "summary.json").read_text())
    assert [c["step"] for c in summary["curve"]] == [0, 1, 2]  # one run, no step twice
    rl_rows = [m["step"] for m in _rows(killed / "metrics.jsonl") if "rl/episodes" in m]
    assert rl_rows == [0, 1, 2]
    # the conversations follow the records: the step in flight at the kill is not there twice
    assert [(e["step"], e["instance_id"]) for e in _rows(killed / "episodes.jsonl")] == ids
    with pytest.raises(ConfigError, match="has finished"):
        open_run(killed, "rl", RunDir(killed).summary_path)


@pytest.fixture(scope="module")
def sft_data(tmp_path_factory) -> Path:
    """A chat.jsonl of three short conversations (what `swe-rl data sft` writes)."""
    root = tmp_path_factory.mktemp("resume-sft")
    rows = [
        {
            "messages": [
                {"role": "system", "content": "You fix bugs with one bash command a turn."},
                {"role": "user", "content": f"Issue {n}: the function returns {n} instead of {n + 1}."},
                {
                    "role": "assistant",
                    "content": f"THOUGHT: off by one.\n\n```bash\nsed -i 's/{n}/{n + 1}/' f.py\n```",
                },
            ]
        }
        for n in range(3)
    ]
    (root / "chat.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


@pytest.mark.heavy
def test_a_killed_sft_run_resumes_the_same_losses(sft_data, tmp_path):
    args = ["train", "sft", str(sft_data), "--model", "tiny-qwen", "--max-steps", "6", "--lr", "1e-2"]
    args += ["--max-length", "256", "--save-steps", "1", "--seed", "2"]
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    ref = _cli(*args, "-o", str(whole), log=tmp_path / "whole.log")
    proc = _cli(*args, "-o", str(killed), log=tmp_path / "killed.log")
    # step 3 is logged: its checkpoint is being written or done (a kill mid-save resumes from step 2)
    _kill_when(proc, killed / "metrics.jsonl", lambda m: m["step"] == 3 and "sft/loss" in m)
    control = tmp_path / "control"
    shutil.copytree(killed, control)
    for ckpt in control.glob("checkpoint-*"):
        (ckpt / "optimizer.pt").unlink(missing_ok=True)  # resumed without Adam's moments
    resumed = _cli("train", "sft", "--resume", str(killed), log=tmp_path / "resumed.log")
    uncontrolled = _cli("train", "sft", "--resume", str(control), log=tmp_path / "control.log")
    for p, log in ((ref, "whole"), (resumed, "resumed"), (uncontrolled, "control")):
        _finish(p, tmp_path / f"{log}.log")

    def losses(run: Path) -> list[tuple[int, float]]:
        return [(m["step"], m["sft/loss"]) for m in _rows(run / "metrics.jsonl") if "sft/loss" in m]

    expected = losses(whole)
    assert [s for s, _ in expected] == [1, 2, 3, 4, 5, 6]
    got = losses(killed)
    assert [s for s, _ in got] == [1, 2, 3, 4, 5, 6]  # the step in flight logged once
    assert [loss for _, loss in got] == pytest.approx([loss for _, loss in expected], abs=1e-4)
    assert json.loads((killed / "train_sft.json").read_text())["losses"] == pytest.approx(
        [loss for _, loss in expected], abs=1e-4
    )
    assert losses(control)[-1][1] != pytest.approx(expected[-1][1], abs=1e-4)


def test_resume_refuses_what_is_not_an_unfinished_run_of_its_kind(tmp_path):
    from swe_rl.fileio import atomic_write_json

    with pytest.raises(ConfigError, match="not a training run"):
        open_run(tmp_path, "rl", tmp_path / "summary.json")
    atomic_write_json(tmp_path / "config.json", {"kind": "sft", "settings": {}})
    with pytest.raises(ConfigError, match="a `train sft` run, not one of `train rl`"):
        open_run(tmp_path, "rl", tmp_path / "summary.json")
    (tmp_path / "train_sft.json").write_text("{}")
    with pytest.raises(ConfigError, match="has finished"):
        open_run(tmp_path, "sft", tmp_path / "train_sft.json")


def test_the_cli_rejects_a_setting_that_would_change_the_run(tmp_path):
    from swe_rl.fileio import atomic_write_json
    from swe_rl.train.grpo import GRPOSettings

    run = tmp_path / "run"
    settings = GRPOSettings(output_dir=run, model="tiny-qwen", steps=4, seed=1, args={"tasks": "builtin"})
    run.mkdir()
    atomic_write_json(run / "config.json", {"kind": "rl", "settings": settings.model_dump(mode="json")})
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "swe_rl.cli.app",
            "train",
            "rl",
            "--resume",
            str(run),
            "--seed",
            "2",
            "--steps",
            "4",
            "--micro-batch",
            "4",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode != 0
    assert "seed (the run has 1, given 2)" in out.stderr and "steps" not in out.stderr.split("change it:")[1]
    assert "micro_batch (the run has 0, given 4)" in out.stderr, out.stderr


def test_resume_takes_the_newest_complete_checkpoint_and_drops_the_step_in_flight(tmp_path):
    run = RunDir(tmp_path)
    for step in (1, 2, 3):
        (tmp_path / f"checkpoint-{step}").mkdir()
    for step in (1, 2):  # checkpoint-3: the kill came while it was written
        (tmp_path / f"checkpoint-{step}" / RunDir.CHECKPOINT_COMPLETE).write_text("{}")
    rollouts = [{"instance_id": "a", "step": s, "exit_status": "x"} for s in (0, 1, 2)]
    run.rollouts_path.write_text("".join(json.dumps(r) + "\n" for r in rollouts) + '{"torn')
    episodes = [{"instance_id": "a", "step": s, "messages": []} for s in (0, 1, 2)]
    run.episodes_path.write_text("".join(json.dumps(e) + "\n" for e in episodes))
    metrics = [
        {"step": 0, "rl/episodes": 2},
        {"step": 1, "trl/loss": 0.5},
        {"step": 1, "rl/episodes": 2},
        {"step": 2, "trl/loss": 0.4},
        {"step": 2, "rl/episodes": 2},  # step 2 in flight: its rollouts were logged, its update was not saved
        {"step": 3, "trl/loss": 0.3},
    ]
    run.metrics_path.write_text("".join(json.dumps(m) + "\n" for m in metrics))
    assert start(tmp_path) == tmp_path / "checkpoint-2"
    assert not (tmp_path / "checkpoint-3").exists()
    assert [r["step"] for r in _rows(run.rollouts_path)] == [0, 1]
    assert _rows(run.episodes_path) == episodes[:2]  # the step in flight's conversations go with its records
    assert _rows(run.metrics_path) == metrics[:4]
