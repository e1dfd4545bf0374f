"""The reward of an episode that never submitted: SWE-agent's convention grades its diff at the limit,
mini-swe-agent's scores it unresolved. A policy trained on the first can do as well by never submitting."""

from __future__ import annotations

import pytest
from tests.conftest import available_factory

from swe_rl.executors.base import EpisodeRequest, Policy
from swe_rl.executors.local import LocalExecutor
from swe_rl.llm.fake_server import FakeLLMServer
from swe_rl.llm.oracle import bash_reply, oracle_replies

tokenizer_mod = pytest.importorskip("swe_rl.rl.tokenizer", exc_type=ImportError)


def _fixes_then(task, *, submits: bool):  # type: ignore[no-untyped-def]
    """The oracle's look and fix; then its submission, or idle commands until the step limit."""
    look, fix, submit = oracle_replies(task)
    idle = bash_reply("Let me check once more.", "git diff --stat")

    def policy(messages):  # type: ignore[no-untyped-def]
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        return [look, fix, submit if submits else idle][min(turn, 2)]

    return policy


@pytest.mark.ns
@pytest.mark.parametrize("submits", [False, True])
async def test_not_submitting_pays_only_where_the_diff_at_the_limit_is_graded(task_by_id, envs, submits):
    task = task_by_id["swe-rl-builtin__textkit-3"]
    rewards, sources = {}, set()
    for unsubmitted in ("graded", "unresolved"):
        async with FakeLLMServer(
            _fixes_then(task, submits=submits), tokenizer=tokenizer_mod.qwen_tokenizer()
        ) as srv:
            executor = LocalExecutor(available_factory("ns"), envs, capacity=1)
            result = await executor.run(
                EpisodeRequest(
                    task=task.to_record(),
                    model=Policy(url=srv.url, tokenizer="qwen"),
                    step_limit=3,
                    unsubmitted=unsubmitted,
                )
            )
            await executor.close()
        assert result.resolved is True, "the fix is in the working tree either way: the verdict says so"
        rewards[unsubmitted] = result.reward
        sources.add(result.record.patch_source if result.record else None)
        assert all(s.reward == result.reward for s in result.samples)
    if submits:  # a submitted fix is rewarded under both conventions
        assert sources == {"submission"} and rewards == {"graded": 1.0, "unresolved": 1.0}
    else:  # the control: graded, the unsubmitted fix earns what a submitted one does; unresolved, it does not
        assert sources == {"diff_fallback"} and rewards == {"graded": 1.0, "unresolved": -1.0}
