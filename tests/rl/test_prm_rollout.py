"""Process rewards in a rollout: a judge on loopback scores every step, the reward combines them."""

from __future__ import annotations

import pytest
from tests.conftest import available_factory

from swe_rl.errors import ConfigError
from swe_rl.executors.base import EpisodeRequest, Policy, ProcessReward
from swe_rl.executors.local import LocalExecutor
from swe_rl.integrations.adapter_kit import build_request
from swe_rl.llm.fake_server import FakeLLMServer
from swe_rl.llm.oracle import oracle_policy

tokenizer_mod = pytest.importorskip("swe_rl.rl.tokenizer", exc_type=ImportError)


@pytest.mark.ns
async def test_judge_scores_steps_m_times_and_the_reward_is_outcome_plus_coef_mean(task_by_id, envs):
    task = task_by_id["swe-rl-builtin__textkit-3"]
    tok = tokenizer_mod.qwen_tokenizer()
    verdicts = iter(["ok \\boxed{+1}", "no \\boxed{-1}", "ok \\boxed{+1}", "garbled"] * 10)
    judged: list[str] = []

    def judge(messages):
        judged.append(messages[-1]["content"])
        return next(verdicts)

    async with (
        FakeLLMServer(oracle_policy([task]), tokenizer=tok) as policy,
        FakeLLMServer(judge) as judge_srv,
    ):
        executor = LocalExecutor(available_factory("ns"), envs, capacity=1)
        result = await executor.run(
            EpisodeRequest(
                task=task.to_record(),
                model=Policy(url=policy.url, tokenizer="qwen"),
                prm=ProcessReward(url=judge_srv.api_base, m=4, coef=0.5, concurrency=1),
            )
        )
    assert result.status == "completed" and result.resolved is True
    steps = len(result.trajectory.steps)
    assert len(judged) == 4 * steps  # m judgements per step
    # each step got 4 votes: +1, -1, +1 and one unparsable (dropped) -> mean 1/3; reward 1 + 0.5 * 1/3
    assert result.metrics["reward/prm_scored_steps"] == steps
    assert result.metrics["reward/prm_step_mean"] == pytest.approx(1 / 3)
    assert result.reward == pytest.approx(1 + 0.5 / 3)
    assert all(s.reward == result.reward for s in result.samples)


def test_trainer_settings_turn_process_rewards_on(monkeypatch):
    from swe_rl.llm.base import SamplingParams

    policy = Policy(url="http://p")
    assert build_request({}, policy, SamplingParams(), dynamic_history=True).prm is None
    monkeypatch.setenv("SWE_RL_PRM_URL", "http://judge:30000/v1")
    monkeypatch.setenv("SWE_RL_PRM_M", "5")
    monkeypatch.setenv("SWE_RL_PRM_COEF", "0.2")
    prm = build_request({}, policy, SamplingParams(), dynamic_history=True).prm
    assert build_request({}, policy, SamplingParams(), dynamic_history=True).unsubmitted == "graded"
    monkeypatch.setenv("SWE_RL_UNSUBMITTED", "unresolved")
    assert build_request({}, policy, SamplingParams(), dynamic_history=True).unsubmitted == "unresolved"
    monkeypatch.setenv("SWE_RL_UNSUBMITTED", "never")
    with pytest.raises(ConfigError, match="SWE_RL_UNSUBMITTED='never'"):
        build_request({}, policy, SamplingParams(), dynamic_history=True)
    monkeypatch.delenv("SWE_RL_UNSUBMITTED")
    assert prm is not None
    assert (prm.url, prm.m, prm.coef, prm.model) == ("http://judge:30000/v1", 5, 0.2, "judge")
