"""The random small Qwen3s: ``tiny-qwen`` (tests) and ``tiny-qwen-m`` (CPU learning runs), each cached apart."""

from __future__ import annotations

import json

import pytest

from swe_rl.errors import ConfigError

pytest.importorskip("transformers")


def test_the_m_variant_is_larger_and_cached_apart(tmp_path, monkeypatch):
    from swe_rl.rl.tokenizer import QWEN3_FIRST_SPECIAL
    from swe_rl.train.models import model_source, tiny_qwen_dir

    monkeypatch.setenv("SWE_RL_CACHE", str(tmp_path))
    small, medium = tiny_qwen_dir(0), tiny_qwen_dir(0, "tiny-qwen-m")
    assert small.name == "tiny-qwen-s0" and medium.name == "tiny-qwen-m-s0"  # the default's path is unchanged
    assert model_source("tiny-qwen-m") == str(medium) and model_source("tiny-qwen3") == str(small)
    a = json.loads((small / "config.json").read_text())
    b = json.loads((medium / "config.json").read_text())
    assert (a["hidden_size"], a["num_hidden_layers"]) == (32, 2)
    assert b["hidden_size"] > a["hidden_size"] and b["num_hidden_layers"] > a["num_hidden_layers"]
    assert a["vocab_size"] == b["vocab_size"] > QWEN3_FIRST_SPECIAL  # both speak the real Qwen vocabulary
    assert tiny_qwen_dir(0, "tiny-qwen-m") == medium  # built once


def test_an_unknown_size_is_a_config_error(tmp_path, monkeypatch):
    from swe_rl.train.models import tiny_qwen_dir

    monkeypatch.setenv("SWE_RL_CACHE", str(tmp_path))
    with pytest.raises(ConfigError, match="tiny-qwen-xl"):
        tiny_qwen_dir(0, "tiny-qwen-xl")
    assert not (tmp_path / "models").exists()
