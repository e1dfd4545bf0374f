"""Long-lived servers import swebench's grading at start, so their first verdict does not wait for it."""

from __future__ import annotations

import json
import urllib.request

import pytest
from starlette.testclient import TestClient

from swe_rl.envs.cache import EnvCache
from swe_rl.sandbox import get_factory
from swe_rl.service.exec_server import create_app as exec_app
from swe_rl.service.rollout_server import create_app as rollout_app
from tests.service.servers import exec_server


def test_both_servers_load_grading_before_they_answer() -> None:
    for make in (exec_app, rollout_app):
        app = make(get_factory("local"), EnvCache(), [], capacity=1)
        unstarted = TestClient(app).get("/healthz").json()  # no lifespan: nothing preloaded (the control)
        assert unstarted["grading_loaded_s"] is None
        with TestClient(app) as client:
            assert isinstance(client.get("/healthz").json()["grading_loaded_s"], float)


@pytest.mark.ns
def test_a_real_exec_server_process_has_grading_loaded_when_it_is_up() -> None:
    server = exec_server(backend="local").start()
    try:
        with urllib.request.urlopen(f"{server.url}/healthz", timeout=10) as reply:
            health = json.loads(reply.read())
    finally:
        server.stop()
    assert isinstance(health["grading_loaded_s"], float) and health["grading_loaded_s"] > 0
