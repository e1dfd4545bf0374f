"""A task object of the caller's process reaches the episode as it is on executors that run episodes here,
and an executor whose episodes run elsewhere refuses it (it sends the task's record instead)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.conftest import available_factory

from swe_rl.agent.config import load_agent_config
from swe_rl.envs.cache import EnvCache
from swe_rl.episode.request import EpisodeRequest, NamedModel
from swe_rl.errors import ConfigError, InProcessObjectError
from swe_rl.executors.local import LocalExecutor
from swe_rl.executors.service import ServiceExecutor
from swe_rl.llm.base import SamplingParams
from swe_rl.llm.oracle import scripted_for
from swe_rl.runs.evaluation import Attempts, EvalSettings, run_eval
from swe_rl.sandbox.base import EnvSpec
from swe_rl.tasks.model import Task

PARAMS = SamplingParams(max_tokens=512)
ORACLE = NamedModel(llm="scripted:oracle")


class SeenCache(EnvCache):
    """The env cache, keeping every task object ``run_episode`` asked it for (its first use of the task)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[Task] = []

    def ensure(self, task: Task) -> EnvSpec:
        self.seen.append(task)
        return super().ensure(task)


@pytest.mark.ns
async def test_the_local_executor_runs_the_callers_task_object(task_by_id):
    task = task_by_id["swe-rl-builtin__textkit-1"]
    cache = SeenCache()
    executor = LocalExecutor(available_factory("ns"), cache, capacity=1)
    request = EpisodeRequest(task=task.instance_id, model=ORACLE, sampling=PARAMS, train=False)
    oracle = lambda t: scripted_for("oracle", t)  # noqa: E731 -- the caller's model object, beside the request
    try:
        result = await executor.run(request, task=task, model=oracle)
        with pytest.raises(ConfigError, match="names 'swe-rl-builtin__textkit-1'"):
            await executor.run(request, task=task_by_id["swe-rl-builtin__textkit-2"], model=oracle)
    finally:
        await executor.close()
    assert result.record is not None and result.record.resolved, result.error
    assert len(cache.seen) == 1 and cache.seen[0] is task


@pytest.mark.ns
async def test_eval_in_this_process_hands_each_task_object_to_its_episode(tmp_path: Path, task_by_id):
    tasks = [task_by_id["swe-rl-builtin__textkit-1"], task_by_id["swe-rl-builtin__textkit-2"]]
    cache = SeenCache()
    attempts = Attempts.here(
        lambda t: scripted_for("oracle", t), cache, available_factory("ns"), load_agent_config()
    )
    try:
        summary = await run_eval(
            tasks, attempts, PARAMS, EvalSettings(output_dir=tmp_path / "run"), quiet=True
        )
    finally:
        await attempts.close()
    assert summary["resolved"] == 2
    assert sorted(map(id, cache.seen)) == sorted(map(id, tasks)), "no task was parsed back from a record"


async def test_a_rollout_service_refuses_a_task_object_and_sends_nothing(task_by_id):
    task = task_by_id["swe-rl-builtin__textkit-1"]
    executor = ServiceExecutor("http://127.0.0.1:9", None)  # nothing listens: a request sent would fail
    request = EpisodeRequest(task=task.instance_id, model=ORACLE, sampling=PARAMS, train=False)
    try:
        with pytest.raises(InProcessObjectError, match=r"task object 'swe-rl-builtin__textkit-1'.*record"):
            await executor.run(request, task=task)
        assert executor.statistics().requests == 0
    finally:
        await executor.close()


def test_eval_on_a_rollout_service_sends_the_record(task_by_id):
    task = task_by_id["swe-rl-builtin__textkit-1"]
    attempts = Attempts(ServiceExecutor("http://127.0.0.1:9", None), ORACLE, load_agent_config())
    request = attempts.request(task, 0, PARAMS, EvalSettings(output_dir=Path("unused")))
    assert request.task == task.to_record()
