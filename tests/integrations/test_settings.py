"""The adapters' settings: read from the environment in integrations/ only, typed, errors naming the variable."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import swe_rl
from swe_rl.errors import ConfigError
from swe_rl.integrations.settings import AdapterSettings

SRC = Path(swe_rl.__file__).parent
# the floors where settings are parsed from the environment (DESIGN.md, Layers): the command line, the
# trainer adapters and the servers beside them; below them only path defaults
EDGES = ("cli", "integrations", "service")
PATH_DEFAULTS = {"paths.py": {"SWE_RL_CACHE"}, "envs/interpreters.py": {"SWE_RL_CONDA"}}


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
        }
    )
    assert settings.executor == "service:http://a:18100,http://b:18100" and settings.token == "t0k"
    assert (settings.step_limit, settings.max_context, settings.dynamic_history) == (12, None, False)
    assert settings.prm is not None and (settings.prm.m, settings.prm.coef) == (5, 1.0)
    assert settings.pool_slots == 7
    assert AdapterSettings.from_environ({}) == AdapterSettings()


@pytest.mark.parametrize(
    "environ,named",
    [
        ({"SWE_RL_STEP_LIMIT": "ten"}, "SWE_RL_STEP_LIMIT='ten'"),
        ({"SWE_RL_MAX_CONTEXT": "100"}, "SWE_RL_MAX_CONTEXT='100'"),
        ({"SWE_RL_POLICY_KIND": "vllm"}, "SWE_RL_POLICY_KIND='vllm'"),
        ({"SWE_RL_PRM_URL": "http://j", "SWE_RL_PRM_M": "many"}, "SWE_RL_PRM_M='many'"),
        ({"SWE_RL_DYNAMIC_HISTORY": "yes"}, "SWE_RL_DYNAMIC_HISTORY must be 1 or 0"),
        ({"SWE_RL_SLIME_REWARD": "int"}, "SWE_RL_SLIME_REWARD='int'"),
    ],
)
def test_an_unusable_value_is_a_config_error_naming_its_variable(environ, named):
    with pytest.raises(ConfigError) as caught:
        AdapterSettings.from_environ(environ)
    assert named in str(caught.value)


def _name(node: ast.AST) -> str | None:
    """The SWE_* variable a node reads through os.environ.get / os.getenv / os.environ[...], if any."""
    key = None
    if isinstance(node, ast.Call) and node.args and ast.unparse(node.func) in ("os.environ.get", "os.getenv"):
        key = node.args[0]
    elif isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ":
        key = node.slice
    if isinstance(key, ast.Constant) and str(key.value).startswith("SWE"):
        return str(key.value)
    return None


def _reads(path: Path) -> set[str]:
    return {name for node in ast.walk(ast.parse(path.read_text())) if (name := _name(node)) is not None}


def test_nothing_below_the_edges_reads_swe_variables():
    readers = {}
    for path in SRC.rglob("*.py"):
        relative = path.relative_to(SRC).as_posix()
        if relative.startswith("tasks/builtin/repos/"):
            continue
        names = _reads(path)
        if names:
            readers[relative] = names
    # control: the scan sees reads where they are allowed (the command line's token, the cache's path)
    assert "SWE_RL_TOKEN" in readers["cli/common.py"] and "SWE_RL_CACHE" in readers["paths.py"], readers
    below = {
        where: names - PATH_DEFAULTS.get(where, set())
        for where, names in readers.items()
        if where.split("/")[0] not in EDGES
    }
    assert {where: names for where, names in below.items() if names} == {}
