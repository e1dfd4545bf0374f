"""Every server (exec, pool, rollout), each a real process on loopback, answers a malformed or deeply nested
body on every POST endpoint with 400 and the structured error body (issue 58, item 8): one parsing path
(server_kit.validate, pydantic's depth-bounded JSON parser) for all of them. ``serve rollout`` used to read
its body with ``json.loads`` first (to tell a NeMo-Gym body from its own), and a 50,000-deep body made it
answer 500 RecursionError.

The positive control: the deep bodies are real recursion bombs for ``json.loads`` (RecursionError), and a
well-formed body sent to the same endpoint is parsed (whatever its answer, it is not about the JSON)."""

from __future__ import annotations

import json

import pytest

from tests.service.servers import Server, exec_server, free_port, pool_server, post
from tests.service.test_fuzz import EXEC_PATHS, POOL_PATHS

DEPTH = 50_000
MALFORMED = {
    "nested arrays": b"[" * DEPTH + b"]" * DEPTH,
    "nested objects": b'{"a":' * DEPTH + b"1" + b"}" * DEPTH,
    "nested in a field": b'{"image": "x", "instance_id": ' + b"[" * DEPTH + b"]" * DEPTH + b"}",
    "cut short": b'{"image": "x", "command": ',
    "not UTF-8": b'{"image": "\xff\xfe"}',
    "trailing data": b'{"image": "x"} {"image": "y"}',
    "not JSON": b"image=x",
    "a number out of range": b'{"timeout": ' + b"9" * 5000 + b"}",
}


@pytest.fixture(scope="module")
def servers():
    node = exec_server(None, "--capacity", "2", backend="local").start()
    pool = pool_server([node]).start()
    rollout = Server(["serve", "rollout", "--backend", "local", "--capacity", "1"], free_port()).start()
    yield {"exec": (node, EXEC_PATHS), "pool": (pool, POOL_PATHS), "rollout": (rollout, ["/run"])}
    for server in (rollout, pool, node):
        server.stop()


def test_the_deep_bodies_are_recursion_bombs_for_json_loads():
    for name in ("nested arrays", "nested objects", "nested in a field"):
        with pytest.raises(RecursionError):
            json.loads(MALFORMED[name])


@pytest.mark.parametrize("server", ["exec", "pool", "rollout"])
async def test_every_endpoint_answers_a_malformed_body_with_a_structured_400(servers, server):
    target, paths = servers[server]
    for path in paths:
        for name, body in MALFORMED.items():
            status, reply, _ = await post(target.url + path, body)
            assert status == 400, (path, name, status, reply)
            assert reply["ok"] is False and reply["error"]["kind"] == "bad_request", (path, name, reply)
            assert "Invalid JSON" in reply["error"]["message"], (path, name, reply)  # the parser's words
        # the control: a well-formed body is parsed (its 400, if any, is about a field, not the JSON)
        status, reply, _ = await post(target.url + path, {"nested": [[[[{"a": [1]}]]]]})
        assert "Invalid JSON" not in json.dumps(reply), (path, status, reply)
