"""Executor specs: one parser from the ``--executor`` / ``SWE_RL_EXECUTOR`` strings to typed settings, and
``build()`` for the executor each names."""

from __future__ import annotations

import inspect

import pytest
from pydantic import TypeAdapter, ValidationError

from swe_rl.errors import ConfigError
from swe_rl.executors import get_executor
from swe_rl.executors.config import (
    LocalConfig,
    Placement,
    PoolConfig,
    RayConfig,
    ServiceConfig,
    parse_executor,
)
from swe_rl.executors.local import LocalExecutor


@pytest.mark.parametrize(
    ("spec", "backend", "expected"),
    [
        ("local", None, LocalConfig(backend="ns")),
        ("local:docker", "ns", LocalConfig(backend="docker")),  # the spec's own backend wins
        ("local", "local", LocalConfig(backend="local")),
        ("pool:http://pool:18090", None, PoolConfig(url="http://pool:18090")),
        ("pool", "https://pool:18090", PoolConfig(url="https://pool:18090")),  # the URL from --backend
        # a pool's sandboxes have one config, however named (a local executor's backend was a URL string)
        ("local", "http://pool:18090", PoolConfig(url="http://pool:18090")),
        ("local:http://pool:18090", "ns", PoolConfig(url="http://pool:18090")),
        ("service:http://a:18100,http://b:18100", None, ServiceConfig(urls="http://a:18100,http://b:18100")),
        ("ray", "ns", RayConfig(backend="ns")),
        ("ray:10.0.0.1:6379", None, RayConfig(address="10.0.0.1:6379")),
    ],
)
def test_each_spec_names_its_typed_config(spec, backend, expected) -> None:
    assert parse_executor(spec, backend=backend) == expected


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("pool", "needs the pool server's URL"),
        ("pool:ftp://x", "needs the pool server's URL"),
        ("service", "needs the rollout server's URL"),
        ("kubernetes", "unknown executor 'kubernetes'"),
    ],
)
def test_a_spec_that_names_nothing_usable_is_a_config_error(spec, says) -> None:
    with pytest.raises(ConfigError, match=says):
        parse_executor(spec)


def test_every_config_is_built_through_one_signature() -> None:
    """No caller switches on the config's type to build it (get_executor did: capacity for local only)."""
    signatures = {
        cls.__name__: inspect.signature(cls.build)
        for cls in (LocalConfig, PoolConfig, ServiceConfig, RayConfig)
    }
    assert len(set(map(str, signatures.values()))) == 1, signatures
    assert list(signatures["LocalConfig"].parameters) == ["self", "capacity", "token", "cache"]


def test_a_local_config_names_this_machine_s_backends_only() -> None:
    with pytest.raises(ValidationError):
        LocalConfig(backend="http://pool:18090")  # type: ignore[arg-type]


def test_the_adapters_parse_the_placement_once(monkeypatch) -> None:
    from swe_rl.integrations.settings import AdapterSettings

    monkeypatch.setenv("SWE_RL_EXECUTOR", "local")
    monkeypatch.setenv("SWE_RL_BACKEND", "http://pool:18090")
    monkeypatch.setenv("SWE_MAX_CONCURRENT", "7")
    settings = AdapterSettings.read()
    assert settings.placement == PoolConfig(url="http://pool:18090", slots=7)
    assert settings.placement is settings.placement  # kept, not parsed again
    monkeypatch.setenv("SWE_RL_BACKEND", "vm")
    with pytest.raises(ConfigError, match="SWE_RL_EXECUTOR='local': unknown sandbox backend 'vm'"):
        AdapterSettings.read()


def test_the_configs_are_one_discriminated_union() -> None:
    adapter = TypeAdapter(Placement)
    assert adapter.validate_python({"kind": "pool", "url": "http://p:1", "slots": 4}) == PoolConfig(
        url="http://p:1", slots=4
    )
    with pytest.raises(ValidationError):
        adapter.validate_python({"kind": "pool", "url": "p:1"})  # not a URL
    with pytest.raises(ValidationError):
        adapter.validate_python({"kind": "nowhere"})


@pytest.mark.ns
async def test_build_makes_the_executor_the_config_names() -> None:
    executor = parse_executor("local").build(capacity=3)
    try:
        assert isinstance(executor, LocalExecutor) and executor.capacity == 3
        assert executor.factory.backend == "ns"
    finally:
        await executor.close()
    pooled = get_executor("pool:http://127.0.0.1:9", pool_slots=5)  # nothing listens: made, not called
    try:
        assert isinstance(pooled, LocalExecutor) and pooled.capacity == 5
    finally:
        await pooled.close()


@pytest.mark.ns
async def test_reuse_is_a_local_or_pool_executors_and_a_model_object_stays_in_its_process(tasks) -> None:
    from swe_rl.episode.request import EpisodeRequest, HeldModel

    assert parse_executor("local:ns", reuse=True) == LocalConfig(backend="ns", reuse=True)
    assert parse_executor("pool:http://pool:18090", reuse=True) == PoolConfig(
        url="http://pool:18090", reuse=True
    )
    held = HeldModel(name="policy")
    executor = get_executor("local", capacity=2, reuse=True)
    try:
        assert isinstance(executor, LocalExecutor) and executor.grader.reuse
        request = EpisodeRequest(task=tasks[0].to_record(), model=held)  # a held model may train
        with pytest.raises(ConfigError, match="a held model runs only in the process that holds it"):
            await executor.run(request)  # no model object beside it
    finally:
        await executor.close()
    service = get_executor("service:http://127.0.0.1:9")  # nothing listens: made, not called
    try:
        with pytest.raises(ConfigError, match="executor service runs episodes in other processes"):
            await service.run(EpisodeRequest(task=tasks[0].to_record(), model=held), model=lambda _task: None)
    finally:
        await service.close()
