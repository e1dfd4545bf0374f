"""The adapters' settings: read from the environment in integrations/ only, typed, errors naming the variable."""

from __future__ import annotations

import pytest

from swe_rl.errors import ConfigError
from swe_rl.integrations.settings import AdapterSettings


def test_the_variables_become_typed_settings():
    settings = AdapterSettings.from_environ(
        {
            "SWE_RL_EXECUTOR": "service:http://a:18100,http://b:18100",
            "SWE_RL_TOKEN": "t0k",
            "SWE_RL_STEP_LIMIT": "12",
            "SWE_RL_MAX_CONTEXT": "0",  # 0 is unset, as before
            "SWE_RL_DYNAMIC_HISTORY": "0",
            "SWE_RL_PRM_URL": "http://judge/v1",
            "SWE_RL_PRM_M": "5",
            "SWE_MAX_CONCURRENT": "7",
            "SWE_RL_REUSE": "1",
        }
    )
    assert settings.executor == "service:http://a:18100,http://b:18100" and settings.token == "t0k"
    assert (settings.step_limit, settings.max_context, settings.dynamic_history) == (12, None, False)
    assert settings.prm is not None and (settings.prm.m, settings.prm.coef) == (5, 1.0)
    assert settings.pool_slots == 7 and settings.reuse is True
    assert AdapterSettings.from_environ({}) == AdapterSettings()
    # Ray's own variable names the cluster of a plain `ray` executor, and only of that
    ray = {"SWE_RL_EXECUTOR": "ray", "RAY_ADDRESS": "10.0.0.1:6379"}
    assert AdapterSettings.from_environ(ray).executor == "ray:10.0.0.1:6379"
    assert AdapterSettings.from_environ({**ray, "SWE_RL_EXECUTOR": "ray:h:1"}).executor == "ray:h:1"
    assert AdapterSettings.from_environ({"RAY_ADDRESS": "h:1"}).executor == "local"


@pytest.mark.parametrize(
    "environ,named",
    [
        ({"SWE_RL_STEP_LIMIT": "ten"}, "SWE_RL_STEP_LIMIT='ten'"),
        ({"SWE_RL_MAX_CONTEXT": "100"}, "SWE_RL_MAX_CONTEXT='100'"),
        ({"SWE_RL_POLICY_KIND": "vllm"}, "SWE_RL_POLICY_KIND='vllm'"),
        ({"SWE_RL_PRM_URL": "http://j", "SWE_RL_PRM_M": "many"}, "SWE_RL_PRM_M='many'"),
        ({"SWE_RL_DYNAMIC_HISTORY": "yes"}, "SWE_RL_DYNAMIC_HISTORY must be 1 or 0"),
        ({"SWE_RL_REUSE": "true"}, "SWE_RL_REUSE must be 1 or 0"),
        ({"SWE_RL_SLIME_REWARD": "int"}, "SWE_RL_SLIME_REWARD='int'"),
        ({"SWE_RL_EXECUTOR": "pool"}, "SWE_RL_EXECUTOR='pool': executor pool needs the pool server's URL"),
        ({"SWE_RL_EXECUTOR": "k8s:x"}, "SWE_RL_EXECUTOR='k8s:x': unknown executor"),
    ],
)
def test_an_unusable_value_is_a_config_error_naming_its_variable(environ, named):
    with pytest.raises(ConfigError) as caught:
        AdapterSettings.from_environ(environ)
    assert named in str(caught.value)
