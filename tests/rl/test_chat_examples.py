"""SFT examples: with the real Qwen vocabulary and chat templates, the loss mask covers exactly the assistant's ids."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from swe_rl.errors import ConfigError
from swe_rl.llm.base import Message
from swe_rl.llm.scripted import SUBMIT, bash_reply
from swe_rl.rl.chat_examples import encode_chat
from swe_rl.rl.samples import chat_ids

tokenizer_mod = pytest.importorskip("swe_rl.rl.tokenizer", exc_type=ImportError)
THINK = "<think>\nThe test fails on the boundary; let me look.\n</think>\n\n"


@pytest.fixture(scope="module")
def project_tok():
    return tokenizer_mod.qwen_tokenizer()


@pytest.fixture(scope="module")
def qwen3_tok(project_tok):
    """The real Qwen vocabulary with Qwen3's own chat template (shipped by TRL)."""
    trl = pytest.importorskip("trl")
    tok = copy.deepcopy(project_tok)
    tok.chat_template = (Path(trl.__file__).parent / "chat_templates" / "qwen3.jinja").read_text()
    return tok


def _conversation(turns: int, thinking: bool) -> list[Message]:
    messages = [
        Message(role="system", content="You fix bugs."),
        Message(role="user", content="<task>fix</task>"),
    ]
    for i in range(turns):
        reply = (
            bash_reply(f"step {i}", f"grep -n x file{i}.py") if i < turns - 1 else bash_reply("done", SUBMIT)
        )
        messages.append(Message(role="assistant", content=(THINK if thinking else "") + reply))
        messages.append(
            Message(role="user", content=f"<returncode>0</returncode>\n<output>{i}\n中文 ✓</output>")
        )
    return messages[:-1]


def _spans(mask: list[int]) -> list[tuple[int, int]]:
    spans, start = [], None
    for i, bit in enumerate([*mask, 0]):
        if bit and start is None:
            start = i
        elif not bit and start is not None:
            spans.append((start, i))
            start = None
    return spans


CASES = [
    ("project", {}, False),
    ("project", {"enable_thinking": False}, False),
    ("project", {"enable_thinking": True}, True),
    ("qwen3", {}, False),
    ("qwen3", {"enable_thinking": False}, False),
    ("qwen3", {"enable_thinking": True}, True),
]


@pytest.mark.parametrize(("template", "kwargs", "thinking"), CASES)
@pytest.mark.parametrize("merge", [True, False])
def test_mask_is_exactly_what_the_model_generates_after_each_inference_prompt(
    request, template, kwargs, thinking, merge
):
    tok = request.getfixturevalue(f"{template}_tok")
    messages = _conversation(5, thinking)
    examples = encode_chat(messages, tok, merge=merge, **kwargs)
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    assistant_at = [i for i, m in enumerate(messages) if m.role == "assistant"]
    assert sorted(t for e in examples for t in e.turns) == assistant_at, "every assistant turn trained once"
    for e in examples:
        assert len(e.input_ids) == len(e.assistant_masks)
        spans = _spans(e.assistant_masks)
        assert len(spans) == len(e.turns), "one masked span per assistant turn, nothing else masked"
        for (start, end), turn in zip(spans, e.turns, strict=True):
            prompt = chat_ids(tok, messages[:turn], generation_prompt=True, **kwargs)
            assert e.input_ids[:start] == prompt[:start] and start == len(prompt), (
                "the span starts exactly where the inference prompt ends"
            )
            generated = e.input_ids[start:end]
            assert generated[-1] == eos and eos not in generated[:-1], "the reply ends with one end token"
            text = tok.decode(generated[:-1])
            reply = messages[turn].content
            # the reply itself is in the span; with Qwen3's template and thinking not off, the reply carries
            # its (possibly empty) think block as the template renders it
            assert text.endswith(reply.split("</think>")[-1].lstrip("\n")), text
            if template == "project" or kwargs.get("enable_thinking") is False:
                assert text == reply, "nothing but the reply and its end token is trained"
            if thinking:
                assert text.startswith("<think>") and "The test fails" in text
    if merge and template == "project" and not kwargs:
        assert len(examples) == 1, "plain ChatML: prompts extend each other, one example per conversation"


def test_encode_refuses_conversations_it_cannot_train_on(project_tok):
    with pytest.raises(ConfigError, match="no assistant message"):
        encode_chat([Message(role="user", content="hi")], project_tok)
    with pytest.raises(ConfigError, match="starts with an assistant"):
        encode_chat([Message(role="assistant", content="hi")], project_tok)
