"""Backend specs parse once into typed configs, and each config builds its factory."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import TypeAdapter

from swe_rl.errors import ConfigError
from swe_rl.executors.config import parse_executor
from swe_rl.sandbox import get_factory, parse_backend
from swe_rl.sandbox.config import BackendConfig, DockerBackend, LocalBackend, NsBackend, PoolBackend
from swe_rl.sandbox.local import LocalFactory
from swe_rl.sandbox.remote import RemoteFactory


@pytest.mark.parametrize(
    ("spec", "config"),
    [
        ("ns", NsBackend()),
        ("docker", DockerBackend()),
        (" local ", LocalBackend()),
        ("http://127.0.0.1:18090", PoolBackend(url="http://127.0.0.1:18090")),
        ("remote:https://pool:1", PoolBackend(url="https://pool:1")),
    ],
)
def test_a_spec_names_one_config_and_round_trips(spec, config):
    parsed = parse_backend(spec)
    assert parsed == config and parse_backend(parsed.spec) == parsed
    adapter = TypeAdapter(BackendConfig)
    assert adapter.validate_python(parsed.model_dump()) == parsed  # the typed form crosses a wire as it is


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("vm", "unknown sandbox backend 'vm'; available: ns, docker, local or a pool server's URL"),
        ("remote:ftp://pool", "starts with http:// or https://"),
        ("", "unknown sandbox backend ''"),
    ],
)
def test_a_spec_that_names_nothing_is_a_clear_error(spec, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_backend(spec)


def test_each_config_builds_its_factory_and_a_pool_gets_the_token():
    assert isinstance(get_factory("local"), LocalFactory)
    pool = get_factory(PoolBackend(url="http://127.0.0.1:9"), token="sekrit")
    assert isinstance(pool, RemoteFactory) and pool.client.url == "http://127.0.0.1:9"
    assert pool.client.token == "sekrit"
    asyncio.run(pool.close())


def test_a_local_executor_with_an_unknown_backend_fails_when_parsed_not_when_first_used():
    with pytest.raises(ConfigError, match="unknown sandbox backend 'vm'"):
        parse_executor("local:vm")
    assert parse_executor("local", backend="docker").backend == "docker"  # type: ignore[union-attr]
