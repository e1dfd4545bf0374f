"""Small models built here for tests and CPU runs: seeded random Qwen3s with the real Qwen vocabulary.

``model_source`` maps the names the training commands take (``tiny-qwen``, ``tiny-qwen-m``) to the
directories they are saved in; any other name (``smollm2``, a model directory) passes through.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from swe_rl.errors import ConfigError, MissingExtraError
from swe_rl.llm.hf import save_model_dir
from swe_rl.rl.tokenizer import qwen_tokenizer

TINY_QWEN = ("tiny-qwen", "tiny-qwen3")
TINY_QWEN_M = "tiny-qwen-m"
# Qwen3Config sizes of the random models: the default is a pipeline check; ``-m`` has the capacity to
# memorize a handful of tasks' golden replies (the CPU learning run). The 151k-token vocabulary's
# output layer is most of the compute either way (hidden x vocab per token), so the width stays small.
TINY_QWEN_SIZES: dict[str, dict[str, Any]] = {
    "tiny-qwen": {
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 16,
    },
    TINY_QWEN_M: {
        "hidden_size": 64,
        "intermediate_size": 192,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
    },
}


def tiny_qwen_dir(seed: int = 0, size: str = "tiny-qwen") -> Path:
    """A randomly initialised small Qwen3 with the real Qwen vocabulary and chat template.

    ``size``: ``tiny-qwen`` (hidden 32, two layers: fast pipeline tests; learns nothing useful in a few
    steps) or ``tiny-qwen-m`` (hidden 64, four layers: the CPU learning run). Saved once per size and
    seed under the cache.
    """
    from swe_rl.paths import cache_dir

    if size in TINY_QWEN:
        size = "tiny-qwen"
    if size not in TINY_QWEN_SIZES:
        raise ConfigError(f"unknown tiny Qwen3 size {size!r}; one of {', '.join(TINY_QWEN_SIZES)}")
    target = cache_dir() / "models" / f"{size}-s{seed}"
    if (target / "config.json").is_file():
        return target
    try:
        import torch
        from transformers import Qwen3Config, Qwen3ForCausalLM
    except ImportError as exc:
        raise MissingExtraError(exc.name or "transformers", "train", "the tiny Qwen3 model") from None
    tokenizer = qwen_tokenizer()
    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        **TINY_QWEN_SIZES[size],
        max_position_embeddings=32768,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.pad_token_id,
    )
    return save_model_dir(Qwen3ForCausalLM(config), tokenizer, target)


def model_source(name: str, seed: int = 0) -> str:
    """What llm.hf.load_model takes: ``tiny-qwen``/``tiny-qwen-m`` become their directories; other names
    pass through."""
    if name in TINY_QWEN or name in TINY_QWEN_SIZES:
        return str(tiny_qwen_dir(seed, name))
    return name
