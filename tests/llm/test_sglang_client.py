"""The SGLang token-in/token-out client against the loopback server, with the real Qwen tokenizer."""

from __future__ import annotations

import pytest

from swe_rl.llm.base import LLMError, Message, SamplingParams
from swe_rl.llm.fake_server import FakeLLMServer, Fault
from swe_rl.llm.sglang import SGLangClient

tokenizer_mod = pytest.importorskip("swe_rl.rl.tokenizer", exc_type=ImportError)


@pytest.fixture(scope="module")
def tok():
    return tokenizer_mod.qwen_tokenizer()


async def test_ids_in_ids_out(tok):
    messages = [Message(role="system", content="s"), Message(role="user", content="fix it")]
    reply = "THOUGHT: look\n\n```bash\nls\n```"
    async with FakeLLMServer([Fault(status=503), reply], tokenizer=tok) as server:
        client = SGLangClient(server.url, tok, backoff_s=0.01)
        try:
            completion = await client.complete(messages, SamplingParams(max_tokens=32, seed=3))
        finally:
            await client.close()
    sent = server.requests[-1]
    assert sent["input_ids"] == completion.prompt_ids == client.prompt_ids(messages)
    assert sent["sampling_params"]["max_new_tokens"] == 32 and sent["return_logprob"] is True
    assert completion.completion_ids[:-1] == tok.encode(reply, add_special_tokens=False)
    assert completion.completion_ids[-1] == tok.convert_tokens_to_ids("<|im_end|>")
    assert len(completion.logprobs) == len(completion.completion_ids) and completion.text == reply


async def test_malformed_reply_is_an_llm_error(tok):
    async with FakeLLMServer([Fault(garbage=True)], tokenizer=tok) as server:
        client = SGLangClient(server.url, tok, max_retries=0)
        try:
            with pytest.raises(LLMError, match="malformed"):
                await client.complete([Message(role="user", content="x")], SamplingParams())
        finally:
            await client.close()
