"""The slime/miles adapter against miles' real ``Sample`` type and a token-level SGLang server on loopback."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from swe_rl.integrations.slime import generate, reward_func
from swe_rl.llm.fake_server import FakeLLMServer
from swe_rl.llm.oracle import oracle_policy

miles_types = pytest.importorskip("miles.utils.types")
tokenizer_mod = pytest.importorskip("swe_rl.rl.tokenizer", exc_type=ImportError)


@pytest.fixture(autouse=True)
def _settings(monkeypatch, shared_executors):
    monkeypatch.setenv("SWE_RL_TOKENIZER", "qwen")
    monkeypatch.setenv("SWE_RL_BACKEND", "ns")


@pytest.mark.ns
async def test_generate_returns_exact_step_samples_with_rewards(task_by_id, envs):
    Sample = miles_types.Sample
    task = task_by_id["swe-rl-builtin__textkit-3"]
    envs.ensure(task)
    tok = tokenizer_mod.qwen_tokenizer()
    async with FakeLLMServer(oracle_policy([task]), tokenizer=tok) as server:
        args = SimpleNamespace(sglang_router_ip="127.0.0.1", sglang_router_port=server.port)
        prompt = Sample(index=7, prompt=task.problem_statement, metadata={"instance": task.to_record()})
        samples = await generate(args, prompt, {"max_new_tokens": 256, "temperature": 1.0})
    assert len(samples) == 3 and all(isinstance(s, Sample) for s in samples)
    for s in samples:
        assert s.index == 7 and s.status == Sample.Status.COMPLETED
        assert s.reward == 1.0  # a float: these args set no --reward-key
        assert len(s.loss_mask) == s.response_length == len(s.rollout_log_probs) and all(
            m == 1 for m in s.loss_mask
        )
        assert s.tokens[-1] == tok.convert_tokens_to_ids("<|im_end|>")
        assert s.metadata["instance_id"] == task.instance_id
    # each sample's prompt part is exactly what the server received for that step
    sent = [r["input_ids"] for r in server.requests]
    assert [s.tokens[: len(s.tokens) - s.response_length] for s in samples] == sent
    assert await reward_func(args, samples) == [1.0] * 3
    assert await reward_func(args, samples[0]) == 1.0


@pytest.mark.ns
async def test_infra_failure_is_removed_not_scored(task_by_id, envs, monkeypatch):
    Sample = miles_types.Sample
    task = task_by_id["swe-rl-builtin__textkit-3"]
    args = SimpleNamespace(sglang_router_ip="127.0.0.1", sglang_router_port=1)  # nothing listens there
    monkeypatch.setenv("SWE_RL_STEP_LIMIT", "2")
    samples = await generate(
        args, Sample(index=1, metadata={"instance": task.to_record()}), {"max_new_tokens": 8}
    )
    assert samples == [] or all(s.remove_sample and s.status == Sample.Status.ABORTED for s in samples)
