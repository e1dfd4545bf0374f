"""``--executor pool:<URL>``: attempts in this process, sandboxes from a pool server (real processes)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from swe_rl.executors.local import LocalExecutor

pytestmark = pytest.mark.ns


def test_eval_with_the_pool_executor_resolves_through_the_pool(remote_service, tmp_path):
    args = ["--executor", f"pool:{remote_service.url}", "-i", "swe-rl-builtin__inikit-2", "-o", str(tmp_path)]
    out = subprocess.run(
        [sys.executable, "-m", "swe_rl.cli.app", "eval", "--llm", "scripted:oracle", "--json", *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads(out.stdout)
    assert (summary["resolved"], summary["errors"]) == (1, 0)
    assert summary["args"]["backend"] == remote_service.url


def test_a_pool_executor_is_a_local_executor_on_the_pool(remote_service, monkeypatch, shared_executors):
    from swe_rl.integrations.adapter_kit import shared_executor

    monkeypatch.setenv("SWE_RL_EXECUTOR", f"pool:{remote_service.url}")
    monkeypatch.setenv("SWE_MAX_CONCURRENT", "7")  # read by the adapters' settings, passed to get_executor
    executor = shared_executor()
    assert isinstance(executor, LocalExecutor) and executor.factory.backend == "remote"
    assert executor.capacity == 7
