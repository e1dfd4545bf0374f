"""slime's contract, restated from its source (THUDM/slime 624b824a898a, 2026-08-21; slime is not on PyPI):
its ``Sample`` fields the adapter touches, ``validate_rollout_id_annotated`` (slime/observability/
rollout_data_utils.py) and the reward read with ``--reward-key`` (slime/utils/types.py). The adapter's real
output, from a real rollout against a token-level server on loopback, must pass them in both
dynamic_history modes. Checked by hand against slime's own functions at that commit (see the #23 note)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from types import SimpleNamespace
from typing import Any

import pytest

from swe_rl.errors import ConfigError
from swe_rl.integrations.slime import generate, reward_func
from swe_rl.llm.fake_server import FakeLLMServer
from swe_rl.llm.oracle import oracle_policy

tokenizer_mod = pytest.importorskip("swe_rl.rl.tokenizer", exc_type=ImportError)


@dataclass
class Sample:
    """The fields of slime's Sample (slime/utils/types.py at 624b824) that a custom generate exchanges."""

    group_index: int | None = None
    index: int | None = None
    rollout_id: int | None = None
    prompt: str | list[dict[str, str]] = ""
    tokens: list[int] = field(default_factory=list)
    response: str = ""
    response_length: int = 0
    label: str | None = None
    reward: float | dict[str, Any] | None = None
    loss_mask: list[int] | None = None
    rollout_log_probs: list[float] | None = None
    remove_sample: bool = False
    metadata: dict = field(default_factory=dict)
    generate_function_path: str | None = None
    custom_rm_path: str | None = None
    session_id: str | None = None

    class Status(Enum):
        PENDING = "pending"
        COMPLETED = "completed"
        TRUNCATED = "truncated"
        ABORTED = "aborted"
        FAILED = "failed"

    status: Status = Status.PENDING


def validate_rollout_id_annotated(node: Any, depth: int = 0) -> None:
    """slime's check: a list of Samples at depth >= 2 (one rollout fanned out) shares one set rollout_id."""
    if isinstance(node, Sample):
        return
    assert isinstance(node, list)
    if node and isinstance(node[0], Sample):
        if depth >= 2 and len(node) > 1:
            ids = [s.rollout_id for s in node]
            assert None not in ids, f"rollout_id unset: {ids}"
            assert len(set(ids)) == 1, f"siblings must share rollout_id: {ids}"
        return
    for item in node:
        validate_rollout_id_annotated(item, depth + 1)


def reward_value(sample: Sample, reward_key: str | None) -> float:
    """How slime reads a sample's reward (Sample.get_reward_value)."""
    return sample.reward if not reward_key else sample.reward[reward_key]  # type: ignore[index,return-value]


@pytest.fixture(autouse=True)
def _settings(monkeypatch, shared_executors):
    monkeypatch.setenv("SWE_RL_TOKENIZER", "qwen")
    monkeypatch.setenv("SWE_RL_BACKEND", "ns")


@pytest.mark.ns
@pytest.mark.parametrize("dynamic_history", ["1", "0"])
async def test_adapter_output_passes_slimes_validation_and_reward_key(
    task_by_id, envs, monkeypatch, dynamic_history
):
    monkeypatch.setenv("SWE_RL_DYNAMIC_HISTORY", dynamic_history)
    task = task_by_id["swe-rl-builtin__textkit-3"]
    envs.ensure(task)
    tok = tokenizer_mod.qwen_tokenizer()
    incoming = Sample(
        group_index=2,
        index=11,
        prompt=task.problem_statement,
        metadata={"instance": task.to_record()},
        session_id="sess-1",
        custom_rm_path="swe_rl.integrations.slime.reward_func",
        generate_function_path="swe_rl.integrations.slime.generate",
    )
    async with FakeLLMServer(oracle_policy([task]), tokenizer=tok) as server:
        args = SimpleNamespace(
            sglang_router_ip="127.0.0.1", sglang_router_port=server.port, reward_key="score"
        )
        out = await generate(args, incoming, {"max_new_tokens": 256})
    assert len(out) == (3 if dynamic_history == "1" else 1)
    # control: without rollout ids slime's validator refuses a fanned-out rollout
    if len(out) > 1:
        bare = [Sample(rollout_id=None), Sample(rollout_id=None)]
        with pytest.raises(AssertionError):
            validate_rollout_id_annotated([[bare]])
    validate_rollout_id_annotated([[out]])  # prompts x rollouts x samples of one rollout
    for s in out:
        assert s.rollout_id == 11 and s.session_id == "sess-1" and s.group_index == 2
        assert s.custom_rm_path and s.generate_function_path
        assert reward_value(s, "score") == 1.0 and s.reward["acc"] == 1.0
        assert s.response == tok.decode(s.tokens[len(s.tokens) - s.response_length :])
        assert "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" in "".join(x.response for x in out)
    assert [r["score"] for r in await reward_func(args, out)] == [1.0] * len(out)


@pytest.mark.ns
async def test_float_rewards_on_request(task_by_id, envs, monkeypatch):
    monkeypatch.setenv("SWE_RL_SLIME_REWARD", "float")
    task = task_by_id["swe-rl-builtin__textkit-3"]
    envs.ensure(task)
    async with FakeLLMServer(oracle_policy([task]), tokenizer=tokenizer_mod.qwen_tokenizer()) as server:
        args = SimpleNamespace(sglang_router_ip="127.0.0.1", sglang_router_port=server.port)
        out = await generate(args, Sample(index=1, metadata={"instance": task.to_record()}), {})
    assert {reward_value(s, None) for s in out} == {1.0}
    monkeypatch.setenv("SWE_RL_SLIME_REWARD", "other")
    with pytest.raises(ConfigError, match="SWE_RL_SLIME_REWARD"):
        await reward_func(args, out)
