"""One definition of each episode default (episode/spec.py): evaluation's and training's come from the two named
constructors, differ only where EVAL_DIFFERS says, and reach the request every caller builds unchanged.

Each caller that builds an episode is checked on what it builds: an eval attempt's request (runs/evaluation.py),
a trainer adapter's (integrations/adapter_kit.py, no SWE_RL_* variable set), TRL's (integrations/trl.py), and a
request built with nothing but its task and model. Before the spec, eval's settings said grade_timeout 1800.0
where the episode's said DEFAULT_TEST_TIMEOUT, and grading "official" in three classes, "strict" in two.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from swe_rl.agent.config import load_agent_config
from swe_rl.episode.request import EpisodeRequest, NamedModel, Policy
from swe_rl.episode.spec import EVAL_DIFFERS, EpisodeSpec
from swe_rl.executors.service import ServiceExecutor
from swe_rl.integrations.adapter_kit import build_request
from swe_rl.integrations.settings import AdapterSettings
from swe_rl.llm.base import SamplingParams
from swe_rl.llm.cost import ModelPrice, PriceTable
from swe_rl.runs.evaluation import Attempts, EvalSettings
from swe_rl.sandbox.base import Limits
from swe_rl.tasks.model import Task

TASK = Task(instance_id="o__r-1", repo="o/r", base_commit="0" * 40)


def _differing(a: EpisodeSpec, b: EpisodeSpec) -> dict[str, object]:
    return {
        name: getattr(a, name) for name in EpisodeSpec.model_fields if getattr(a, name) != getattr(b, name)
    }


def test_eval_and_training_differ_only_where_documented() -> None:
    assert _differing(EpisodeSpec.for_eval(), EpisodeSpec.for_training()) == EVAL_DIFFERS
    assert EpisodeSpec.for_training() == EpisodeSpec()  # training's are the fields' own defaults
    assert EpisodeSpec.for_training().grading == "strict"  # the reward: a pass the code cannot produce
    # a caller's choice wins over either constructor's default
    assert EpisodeSpec.for_eval(grading="strict").grading == "strict"
    assert EpisodeSpec.for_training(grading="official").grading == "official"


def test_a_request_with_only_its_task_and_model_is_a_training_episode() -> None:
    request = EpisodeRequest(task="o__r-1", model=Policy(url="http://127.0.0.1:1"))
    assert request.spec() == EpisodeSpec.for_training()


def test_an_eval_attempt_s_request_carries_eval_s_spec_whole(tmp_path: Path) -> None:
    """Every field of the eval run's spec, each set off its default, reaches the attempt's request: nothing is
    copied by hand, so none can be dropped (the positive control: the defaults give for_eval's spec)."""
    attempts = Attempts(ServiceExecutor("http://127.0.0.1:1"), NamedModel(model="m"), load_agent_config())
    default = attempts.request(TASK, 0, SamplingParams(), EvalSettings(output_dir=tmp_path))
    assert default.spec() == EpisodeSpec.for_eval() and default.train is False
    price = PriceTable(prices={"m": ModelPrice(input_cost_per_token=1e-9, output_cost_per_token=2e-9)})
    chosen = EpisodeSpec.for_eval(
        limits=Limits(memory_mb=1234),
        max_context=4096,
        prices=price,
        grading="strict",
        grade_timeout=77.0,
        dynamic_history=False,
        unsubmitted="unresolved",
    )
    assert set(_differing(chosen, EpisodeSpec.for_eval())) == set(EpisodeSpec.model_fields)  # all set off
    sent = attempts.request(TASK, 0, SamplingParams(), EvalSettings(output_dir=tmp_path, episode=chosen))
    assert sent.spec() == chosen


def test_eval_settings_default_to_eval_s_spec(tmp_path: Path) -> None:
    assert EvalSettings(output_dir=tmp_path).episode == EpisodeSpec.for_eval()


def test_a_trainer_adapter_s_request_is_training_s_spec_unless_a_variable_sets_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in AdapterSettings.variables().values():
        monkeypatch.delenv(name, raising=False)
    policy = Policy(url="http://127.0.0.1:1")
    assert build_request("o__r-1", policy, SamplingParams()).spec() == EpisodeSpec.for_training()
    # the trainer's own shape wins over the default; the variables over the defaults
    assert build_request("o__r-1", policy, SamplingParams(), dynamic_history=False).dynamic_history is False
    monkeypatch.setenv("SWE_RL_UNSUBMITTED", "unresolved")
    monkeypatch.setenv("SWE_RL_DYNAMIC_HISTORY", "0")
    got = build_request("o__r-1", policy, SamplingParams()).spec()
    assert _differing(got, EpisodeSpec.for_training()) == {
        "unsubmitted": "unresolved",
        "dynamic_history": False,
    }


def test_trl_s_episodes_are_training_s_spec_with_one_exact_sample() -> None:
    from swe_rl.executors.local import LocalExecutor
    from swe_rl.integrations.trl import SweRolloutFunc
    from swe_rl.sandbox.local import LocalFactory

    func = SweRolloutFunc(
        [TASK], load_agent_config(), SamplingParams(), executor=LocalExecutor(LocalFactory())
    )
    try:
        assert _differing(func.request(TASK.instance_id).spec(), EpisodeSpec.for_training()) == {
            "dynamic_history": False
        }
    finally:
        func.close()
