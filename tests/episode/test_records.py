"""One record and one summary: an eval run and a training run over the same episodes write the same record
schema, and their summaries agree (resolve rate, format-error rate, infrastructure failures)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import available_factory, unbuildable_task

from swe_rl.agent.config import load_agent_config
from swe_rl.episode.record import EpisodeRecord
from swe_rl.episode.summary import summarize
from swe_rl.integrations.adapter_kit import episode_metrics
from swe_rl.llm.base import SamplingParams
from swe_rl.llm.oracle import scripted_for
from swe_rl.rl.rewards import OutcomeReward
from swe_rl.rl.rollout import run_rollout
from swe_rl.rundir import RunDir
from swe_rl.runs.evaluation import Attempts, EvalSettings, run_eval
from swe_rl.train.grpo import RolloutLog, training_summary

pytestmark = pytest.mark.ns

PARAMS = SamplingParams(max_tokens=512)
# one of each outcome: resolved, unresolved by its diff, unresolved with malformed replies; and a task
# whose env cannot be built (an infrastructure failure, graded by neither run)
KINDS = ["oracle", "never-submit", "format-errors"]


@pytest.fixture
def tok() -> Any:
    return pytest.importorskip("swe_rl.rl.tokenizer", exc_type=ImportError).qwen_tokenizer()


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def test_eval_and_training_runs_keep_the_same_records_and_agree_on_their_summary(
    tmp_path, tasks, envs, tok
):
    chosen = [*tasks[: len(KINDS)], unbuildable_task()]
    kind = {t.instance_id: k for t, k in zip(chosen, [*KINDS, "oracle"], strict=True)}
    agent = load_agent_config(step_limit=3)
    factory = available_factory("ns")

    eval_summary = await run_eval(
        chosen,
        Attempts.here(lambda t: scripted_for(kind[t.instance_id], t), envs, factory, agent),
        PARAMS,
        EvalSettings(output_dir=tmp_path / "eval"),
        quiet=True,
    )
    results = [
        await run_rollout(
            t, scripted_for(kind[t.instance_id], t), factory, envs, agent, PARAMS, tokenizer=tok
        )
        for t in chosen
    ]
    (tmp_path / "train").mkdir()
    RolloutLog(tmp_path / "train").step(0, [t.instance_id for t in chosen], results, episode_metrics(results))

    eval_lines = _lines(tmp_path / "eval" / "results.jsonl")
    train_lines = _lines(tmp_path / "train" / "rollouts.jsonl")
    # each training episode's conversation beside its record, in the same order, as the eval's traj.json has it
    conversations = _lines(tmp_path / "train" / "episodes.jsonl")
    assert [(c["step"], c["instance_id"], c["exit_status"]) for c in conversations] == [
        (0, line["instance_id"], line["exit_status"]) for line in train_lines
    ]
    for conversation, result in zip(conversations, results, strict=True):
        if result.trajectory is None:  # the infrastructure error: no conversation happened
            assert result.status == "infra_error" and conversation["messages"] == []
            continue
        assert conversation["messages"] == [m.model_dump() for m in result.trajectory.messages]
        assert [m["role"] for m in conversation["messages"][:2]] == ["system", "user"]
        assert any(m["role"] == "assistant" for m in conversation["messages"])
    fields = set(EpisodeRecord.model_fields)
    assert [set(line) for line in eval_lines + train_lines] == [fields] * (2 * len(chosen))
    # what only training knows is there, and only there (the lines read are the runs' own)
    assert {line["step"] for line in train_lines} == {0} and {line["step"] for line in eval_lines} == {None}
    assert all(line["reward"] is None for line in eval_lines)
    rewards = {line["reward"] for line in train_lines if line["exit_status"] != "infra_error"}
    assert rewards == {OutcomeReward()(True), OutcomeReward()(False)}

    by_eval = summarize(RunDir(tmp_path / "eval").load_results())
    by_train = summarize([EpisodeRecord.model_validate(line) for line in train_lines])
    agreed = (
        "completed",
        "resolved",
        "resolve_rate",
        "errors",
        "exit_statuses",
        "format_error_rate",
        "no_patch",
    )
    assert by_eval.model_dump(include=set(agreed)) == by_train.model_dump(include=set(agreed))
    assert (by_eval.completed, by_eval.resolved, by_eval.errors) == (3, 1, 1)
    assert by_eval.format_error_rate == pytest.approx(1 / 3)
    # every view of the runs reads the same numbers: eval's summary.json, the trainer's metrics, the curve
    rate = by_eval.resolve_rate
    assert rate == pytest.approx(1 / 3) and eval_summary["resolve_rate"] == rate
    assert episode_metrics(results)["rl/resolve_rate"] == rate
    assert training_summary(tmp_path / "train")["curve"][0]["resolve_rate"] == rate
