"""The adapters' settings: read from the environment in integrations/ only, typed, errors naming the variable."""

from __future__ import annotations

from typing import get_args

import pytest

from swe_rl.episode.spec import Unsubmitted
from swe_rl.errors import ConfigError
from swe_rl.integrations.settings import AdapterSettings


@pytest.fixture
def setenv(monkeypatch):
    """Set these variables, with every other one the settings read (and Ray's address) unset."""
    for variable in [*AdapterSettings.variables().values(), "RAY_ADDRESS"]:
        monkeypatch.delenv(variable, raising=False)

    def put(variables: dict[str, str]) -> None:
        for variable, value in variables.items():
            monkeypatch.setenv(variable, value)

    return put


def test_the_variables_become_typed_settings(setenv):
    assert AdapterSettings.read() == AdapterSettings()
    setenv(
        {
            "SWE_RL_EXECUTOR": "service:http://a:18100,http://b:18100",
            "SWE_RL_TOKEN": "t0k",
            "SWE_RL_STEP_LIMIT": " 12 ",
            "SWE_RL_MAX_CONTEXT": "0",  # 0 is unset, as before
            "SWE_RL_DYNAMIC_HISTORY": "0",
            "SWE_RL_PRM_URL": "http://judge/v1",
            "SWE_RL_PRM_M": "5",
            "SWE_RL_POLICY_MODEL": "",  # empty is unset
            "SWE_MAX_CONCURRENT": "7",
            "SWE_RL_ROLLOUT_TIMEOUT": "90",
            "SWE_RL_REUSE": "1",
        }
    )
    settings = AdapterSettings.read()
    assert settings.executor == "service:http://a:18100,http://b:18100" and settings.token == "t0k"
    assert (settings.step_limit, settings.max_context, settings.dynamic_history) == (12, None, False)
    # what is unset keeps the judge's own defaults
    prm = settings.prm
    assert prm is not None and (prm.url, prm.m, prm.model, prm.coef) == ("http://judge/v1", 5, "judge", 1.0)
    assert (settings.pool_slots, settings.rollout_timeout_s, settings.reuse) == (7, 90.0, True)
    assert settings.policy_model is None and "policy_model" not in settings.model_fields_set


def test_ray_address_names_the_cluster_of_a_plain_ray_executor_only(setenv):
    setenv({"RAY_ADDRESS": "h:1"})
    assert AdapterSettings.read().executor == "local"
    setenv({"SWE_RL_EXECUTOR": "ray", "RAY_ADDRESS": "10.0.0.1:6379"})
    assert AdapterSettings.read().executor == "ray:10.0.0.1:6379"
    setenv({"SWE_RL_EXECUTOR": "ray:h:1"})
    assert AdapterSettings.read().executor == "ray:h:1"


def test_the_unsubmitted_choices_are_the_episodes():
    # paths.py sits below the episode, so it spells the choices out; they must stay the episode's
    unset_or = get_args(AdapterSettings.model_fields["unsubmitted"].annotation)  # Literal[...] | None
    assert get_args(unset_or[0]) == get_args(Unsubmitted) and unset_or[1] is type(None)


@pytest.mark.parametrize(
    "environ,named",
    [
        ({"SWE_RL_STEP_LIMIT": "ten"}, "SWE_RL_STEP_LIMIT='ten': Input should be a valid integer"),
        ({"SWE_RL_MAX_CONTEXT": "100"}, "SWE_RL_MAX_CONTEXT='100'"),
        ({"SWE_MAX_CONCURRENT": "-1"}, "SWE_MAX_CONCURRENT='-1'"),
        ({"SWE_RL_ROLLOUT_TIMEOUT": "soon"}, "SWE_RL_ROLLOUT_TIMEOUT='soon'"),
        ({"SWE_RL_POLICY_KIND": "vllm"}, "SWE_RL_POLICY_KIND='vllm'"),
        ({"SWE_RL_PRM_URL": "http://j", "SWE_RL_PRM_M": "many"}, "SWE_RL_PRM_M='many'"),
        ({"SWE_RL_PRM_URL": "http://j", "SWE_RL_PRM_M": "20"}, "SWE_RL_PRM_M=20: Input should be less than"),
        ({"SWE_RL_DYNAMIC_HISTORY": "yes"}, "SWE_RL_DYNAMIC_HISTORY='yes': must be 1 or 0"),
        ({"SWE_RL_REUSE": "true"}, "SWE_RL_REUSE='true': must be 1 or 0"),
        ({"SWE_RL_SLIME_REWARD": "int"}, "SWE_RL_SLIME_REWARD='int'"),
        ({"SWE_RL_UNSUBMITTED": "zero"}, "SWE_RL_UNSUBMITTED='zero'"),
        ({"SWE_RL_EXECUTOR": "pool"}, "SWE_RL_EXECUTOR='pool': executor pool needs the pool server's URL"),
        ({"SWE_RL_EXECUTOR": "k8s:x"}, "SWE_RL_EXECUTOR='k8s:x': unknown executor"),
    ],
)
def test_an_unusable_value_is_a_config_error_naming_its_variable(setenv, environ, named):
    setenv(environ)
    with pytest.raises(ConfigError) as caught:
        AdapterSettings.read()
    assert named in str(caught.value)
