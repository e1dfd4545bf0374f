"""Malformed input to every endpoint of both servers gets a typed 4xx, never a 500 (hypothesis-generated);
the pool's forwarded calls are fuzzed with a live lease too, so that they reach its forwarding."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from swe_rl.envs.cache import EnvCache
from swe_rl.sandbox import get_factory
from swe_rl.service.exec_server import create_app as exec_app
from swe_rl.service.pool_server import create_app as pool_app
from tests.conftest import available_factory
from tests.service.servers import exec_server

EXEC_PATHS = [
    "/container/create",
    "/container/exec",
    "/container/diff",
    "/container/evaluate",
    "/container/reset",
    "/container/read_file",
    "/container/write_file",
    "/container/destroy",
]
POOL_PATHS = [
    "/allocate",
    "/exec",
    "/diff",
    "/evaluate",
    "/reset",
    "/read_file",
    "/write_file",
    "/heartbeat",
    "/close",
]

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=False)
    | st.text(max_size=40)
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
keys = st.sampled_from(
    [
        "image",
        "container_id",
        "lease_id",
        "command",
        "cwd",
        "timeout",
        "env",
        "patch",
        "instance",
        "eval_script",
        "path",
        "data_b64",
        "ttl",
        "wait",
        "limits",
    ]
)
bodies = st.dictionaries(keys, values, max_size=6).map(json.dumps) | st.binary(max_size=64).map(
    lambda b: b.decode("latin-1")
)


@pytest.fixture(scope="module")
def exec_client():
    app = exec_app(get_factory("local"), EnvCache(), [], capacity=2)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


@pytest.fixture(scope="module")
def pool_client():
    app = pool_app(["http://127.0.0.1:9"], wait=0.2, health_period=60, reap_period=60)  # a node never up
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(EXEC_PATHS), body=bodies)
def test_exec_server_never_answers_500(exec_client, path, body):
    response = exec_client.post(path, content=body, headers={"Content-Type": "application/json"})
    assert response.status_code < 500 or response.json()["error"]["kind"] in ("sandbox_error", "capacity"), (
        response.text
    )
    assert response.json().get("ok") in (True, False)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(POOL_PATHS), body=bodies)
def test_pool_server_never_answers_500(pool_client, path, body):
    response = pool_client.post(path, content=body, headers={"Content-Type": "application/json"})
    assert response.status_code != 500, response.text
    assert response.json()["ok"] in (True, False)


@pytest.fixture(scope="module")
def leased(textkit_env):
    """A pool (in process) in front of a real exec server (ns: fuzzed commands run sandboxed), and a live lease."""
    available_factory("ns")
    node = exec_server(None, "--capacity", "3").start()
    app = pool_app([node.url], wait=5, health_period=60, reap_period=60)
    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            reply = client.post("/allocate", json={"image": textkit_env.key}).json()
            assert reply["ok"], reply
            yield client, reply["lease_id"]
            client.post("/close", json={"lease_id": reply["lease_id"]})
    finally:
        node.stop()


MALFORMED = [
    ("/exec", {"command": "true", "timeout": "abc"}),
    ("/exec", {"command": "true", "timeout": -1}),
    ("/exec", {"command": 5}),
    ("/exec", {"command": "true", "env": "PATH=/bin"}),
    ("/exec", {"command": "true", "cwd": ["/"]}),
    ("/evaluate", {"timeout": "abc"}),
    ("/evaluate", {"patch": 5}),
    ("/read_file", {"path": ["x"]}),
    ("/write_file", {"path": "x", "data_b64": 5}),
    ("/diff", {"cwd": {}}),
    ("/reset", {"lease_id": 5}),
]


@pytest.mark.ns
@pytest.mark.parametrize(("path", "fields"), MALFORMED, ids=[f"{p}-{sorted(f)}" for p, f in MALFORMED])
def test_pool_answers_400_to_malformed_fields_of_a_live_lease(leased, path, fields):
    client, lease_id = leased
    response = client.post(path, json={"lease_id": lease_id, **fields})
    assert response.status_code == 400 and response.json()["error"]["kind"] == "bad_request", response.text
    # control: the lease is live and the same call, well formed, is answered
    assert client.post("/exec", json={"lease_id": lease_id, "command": "echo ok"}).json()["output"] == "ok\n"


@pytest.mark.ns
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(POOL_PATHS[1:7]), fields=st.dictionaries(keys, values, max_size=5))
def test_pool_with_a_live_lease_never_answers_500(leased, path, fields):
    client, lease_id = leased
    body = (
        {**fields, "lease_id": lease_id, "timeout": 5}
        if "timeout" not in fields
        else {**fields, "lease_id": lease_id}
    )
    response = client.post(path, content=json.dumps(body), headers={"Content-Type": "application/json"})
    assert response.status_code < 500 or response.json()["error"]["kind"] in ("sandbox_error", "timeout"), (
        response.text
    )
    assert response.json()["ok"] in (True, False)
