"""`swe-rl train sft` on CPU: a tiny Qwen3 (real vocabulary) fine-tuned on SFT data from a real oracle run."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from tests.conftest import available_factory

from swe_rl.agent.config import load_agent_config
from swe_rl.llm.base import SamplingParams
from swe_rl.llm.oracle import scripted_for
from swe_rl.runs.evaluation import Attempts, EvalSettings, run_eval
from swe_rl.sftdata.from_runs import sft_from_runs

pytest.importorskip("trl")
pytest.importorskip("torch")


@pytest.fixture(scope="module")
def sft_dir(tmp_path_factory, tasks, envs) -> Path:
    root = tmp_path_factory.mktemp("train-sft")
    asyncio.run(
        run_eval(
            tasks[:2],
            Attempts.here(
                lambda t: scripted_for("oracle", t), envs, available_factory("ns"), load_agent_config()
            ),
            SamplingParams(),
            EvalSettings(output_dir=root / "run", max_concurrent=2),
            quiet=True,
        )
    )
    card = sft_from_runs([root / "run"], root / "sft", tokenizer="qwen")
    assert card.counts["trajectories_kept"] == 2
    return root / "sft"


@pytest.mark.ns
def test_loss_decreases_and_the_checkpoint_loads(sft_dir, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM

    from swe_rl.train.sft import SFTTrainSettings, train_sft

    settings = SFTTrainSettings(output_dir=tmp_path / "out", max_steps=4, learning_rate=1e-2, max_length=1024)
    result = train_sft(sft_dir, "tiny-qwen", settings)
    assert result["steps"] == 4 and len(result["losses"]) == 4
    assert result["losses"][-1] < result["losses"][0], result["losses"]
    assert result["trained_tokens"] > 0 and (tmp_path / "out" / "train_sft.json").is_file()
    model = AutoModelForCausalLM.from_pretrained(result["model_dir"])
    ids = torch.tensor([[151644, 872, 198]])
    with torch.no_grad():
        assert model(ids).logits.shape[-1] >= 151669


def test_missing_data_is_a_clear_error(tmp_path):
    from swe_rl.errors import ConfigError
    from swe_rl.train.sft import SFTTrainSettings, train_sft

    with pytest.raises(ConfigError, match="no SFT data"):
        train_sft(tmp_path, "tiny-qwen", SFTTrainSettings(output_dir=tmp_path / "o"))


@pytest.mark.ns
def test_cli_json_output_is_json_alone(sft_dir, tmp_path):
    import json
    import subprocess
    import sys

    args = ["train", "sft", str(sft_dir), "--model", "tiny-qwen", "--max-steps", "2", "--max-length", "512"]
    out = subprocess.run(
        [sys.executable, "-m", "swe_rl.cli.app", *args, "-o", str(tmp_path / "o"), "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout)  # the trainer's log lines went to stderr
    assert result["steps"] == 2 and "loss" in out.stderr
