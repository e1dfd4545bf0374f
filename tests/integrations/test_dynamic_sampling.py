"""Dynamic sampling in TRL's rollout function (``resample_rounds``): a group whose episodes all got one reward
gives GRPO no gradient; it is run again on a training task the step has not used, and a group that mixes
rewards takes its place in the update. Every episode run is kept, the replaced ones marked. Real ns sandboxes
and grading, the real Qwen tokenizer; only the policy is scripted (per task: solve it, or submit at once)."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest
from tests.conftest import available_factory, tiny_grpo_settings

from swe_rl.agent.config import load_agent_config
from swe_rl.llm.base import Completion, Message, SamplingParams
from swe_rl.llm.oracle import oracle_replies
from swe_rl.llm.scripted import SUBMIT, bash_reply
from swe_rl.tasks.model import Task

pytest.importorskip("torch")
trl_mod = pytest.importorskip("swe_rl.integrations.trl", exc_type=ImportError)
grpo_mod = pytest.importorskip("swe_rl.train.grpo", exc_type=ImportError)

GIVE_UP = bash_reply("I will submit as it is.", SUBMIT)


class ScriptedWithIds:
    """A scripted policy that gives token ids, as the trainer's own model does: the real Qwen chat template,
    prompts extended id for id. ``mixed`` tasks alternate (first episode solves, second submits at once);
    every other task is submitted unchanged, so its group gets one reward."""

    def __init__(self, tasks: Sequence[Task], mixed: set[str]) -> None:
        from swe_rl.llm.token_prompts import PromptExtender
        from swe_rl.rl.tokenizer import load_tokenizer

        self.name = "scripted-ids"
        self.tokenizer = load_tokenizer("qwen")
        self.extender = PromptExtender(self.tokenizer)
        self.tasks, self.mixed = list(tasks), mixed
        self.started: dict[str, int] = {}

    def reply(self, messages: Sequence[Message]) -> str:
        task = next(t for t in self.tasks if t.problem_statement in messages[1].content)
        turn = sum(1 for m in messages if m.role == "assistant")
        if task.instance_id not in self.mixed:
            return GIVE_UP
        if turn == 0:
            n = self.started[task.instance_id] = self.started.get(task.instance_id, 0) + 1
            if n % 2 == 0:
                return GIVE_UP
        return oracle_replies(task)[turn]

    async def complete(self, messages: Sequence[Message], params: SamplingParams) -> Completion:
        text = self.reply(messages)
        prompt = self.extender.prompt_ids(messages)
        eos = self.tokenizer.convert_tokens_to_ids(self.tokenizer.eos_token)
        ids = [*self.tokenizer.encode(text, add_special_tokens=False), eos]
        self.extender.record(messages, text, [*prompt, *ids])
        return Completion(text=text, prompt_ids=prompt, completion_ids=ids, logprobs=[0.0] * len(ids))

    async def close(self) -> None:
        return None


@pytest.fixture
def ns_executor(monkeypatch):  # type: ignore[no-untyped-def]
    available_factory("ns")  # skips where ns sandboxes cannot run
    monkeypatch.setenv("SWE_RL_EXECUTOR", "local:ns")
    monkeypatch.setenv("SWE_RL_CAPACITY", "2")


def rollout_func(tasks: Sequence[Task], rounds: int) -> object:
    return trl_mod.SweRolloutFunc(
        tasks, load_agent_config(step_limit=4), SamplingParams(), resample_rounds=rounds, max_concurrent=2
    )


def rewards(results: Sequence[object]) -> list[float | None]:
    return [r.reward for r in results]  # type: ignore[attr-defined]


@pytest.mark.ns
def test_a_one_reward_group_is_replaced_by_a_mixed_group_of_an_unused_task(tasks, ns_executor):
    stuck, mixed = tasks[0], tasks[1]
    policy = ScriptedWithIds([stuck, mixed], mixed={mixed.instance_id})
    # control: without dynamic sampling the stuck group goes to the update with one reward (no gradient)
    off = rollout_func([stuck, mixed], rounds=0)
    try:
        ids, results, dropped = off.episodes([stuck.instance_id] * 2, policy, group=2, step=0)
    finally:
        off.close()
    assert ids == [stuck.instance_id] * 2 and rewards(results) == [-1.0, -1.0] and dropped == []
    assert trl_mod.one_reward_groups(results, 2) == [0]
    on = rollout_func([stuck, mixed], rounds=1)
    try:
        ids, results, dropped = on.episodes([stuck.instance_id] * 2, policy, group=2, step=0)
    finally:
        on.close()
    assert ids == [mixed.instance_id] * 2 and sorted(rewards(results)) == [-1.0, 1.0]  # type: ignore[type-var]
    assert trl_mod.one_reward_groups(results, 2) == []
    # the replaced group's episodes are kept, not lost
    assert [i for i, _ in dropped] == [stuck.instance_id] * 2 and rewards([r for _, r in dropped]) == [
        -1.0
    ] * 2


@pytest.mark.ns
def test_a_retry_that_also_gets_one_reward_is_logged_and_the_group_stays(tasks, ns_executor):
    stuck, other = tasks[0], tasks[2]
    policy = ScriptedWithIds([stuck, other], mixed=set())
    func = rollout_func([stuck, other], rounds=3)  # one unused task: one retry, then nothing left to draw
    try:
        ids, results, dropped = func.episodes([stuck.instance_id] * 2, policy, group=2, step=0)
    finally:
        func.close()
    assert ids == [stuck.instance_id] * 2 and rewards(results) == [-1.0, -1.0]
    assert [i for i, _ in dropped] == [other.instance_id] * 2


@pytest.mark.ns
def test_train_rl_logs_every_episode_and_marks_the_dropped(tasks, envs, tmp_path, ns_executor):
    """Through ``train_grpo``: a random tiny model's groups all fail (one reward), so each step runs one more
    group on an unused task; rollouts.jsonl and episodes.jsonl keep all four episodes, two marked dropped."""
    settings = tiny_grpo_settings(tmp_path / "run", steps=1, save_steps=0, resample_rounds=1)
    grpo_mod.train_grpo(tasks[:3], settings, envs, load_agent_config(step_limit=1), quiet=True)
    rows = [json.loads(line) for line in (tmp_path / "run/rollouts.jsonl").read_text().splitlines()]
    episodes = [json.loads(line) for line in (tmp_path / "run/episodes.jsonl").read_text().splitlines()]
    assert [r.get("dropped", False) for r in rows] == [False, False, True, True], rows
    assert [e.get("dropped", False) for e in episodes] == [False, False, True, True]
    assert rows[0]["instance_id"] != rows[2]["instance_id"]  # the retry drew a task the step had not used
    metrics = [json.loads(line) for line in (tmp_path / "run/metrics.jsonl").read_text().splitlines()]
    step0 = next(m for m in metrics if "rl/resampled_groups" in m)
    assert step0["rl/resampled_groups"] == 1.0 and step0["rl/replaced_groups"] == 0.0
    assert step0["rl/episodes"] == 4.0 and step0["rl/one_reward_groups"] == 1.0
