"""The validator follows the official grading: a task is valid when its gold patch resolves and its unchanged
base does not. A FAIL_TO_PASS name that the base's log reports as passing (swebench keeps the last status of a
name reported twice: django-16429 has two tests of one name) is noted, not refused, while the base is
unresolved. Real ns sandboxes, the builtin textkit-3 with its lists changed."""

from __future__ import annotations

import pytest
from tests.conftest import available_factory

from swe_rl.harness.validate import validate_task

pytestmark = pytest.mark.ns


async def test_a_fail_to_pass_name_passing_at_base_is_noted_while_the_base_is_unresolved(task_by_id, envs):
    task = task_by_id["swe-rl-builtin__textkit-3"]
    env = envs.ensure(task)
    factory = available_factory("ns")
    passing = task.PASS_TO_PASS[0]  # passes before and after the fix
    mixed = task.model_copy(
        update={
            "FAIL_TO_PASS": [*task.FAIL_TO_PASS, passing],
            "PASS_TO_PASS": [n for n in task.PASS_TO_PASS if n != passing],
        }
    )
    checked = await validate_task(mixed, factory, env, timeout=120)
    assert checked.gold.resolved and not checked.empty.resolved
    assert checked.valid and checked.problems == []
    assert len(checked.notes) == 1 and passing in checked.notes[0] and "still unresolved" in checked.notes[0]
    # the control: where every FAIL_TO_PASS name passes at base, the base resolves, and that is refused
    only = task.model_copy(update={"FAIL_TO_PASS": [passing], "PASS_TO_PASS": []})
    refused = await validate_task(only, factory, env, timeout=120)
    assert refused.empty.resolved and not refused.valid
    assert refused.problems == ["the unchanged base commit already resolves the task"]


def _with_test(task, name: str, body: str):  # type: ignore[no-untyped-def]
    """``task`` whose test patch also adds ``name`` to tests/test_wrap.py, listed as PASS_TO_PASS."""
    lines = ["", "", f"def {name}():", *(f"    {line}" for line in body.splitlines())]
    head, tail = task.test_patch.rsplit("@@ -22,3 +22,7 @@", 1)
    hunk = f"@@ -22,3 +22,{7 + len(lines)} @@" + tail.rstrip("\n") + "\n" + "".join(f"+{x}\n" for x in lines)
    return task.model_copy(
        update={
            "test_patch": head + hunk,
            "PASS_TO_PASS": [*task.PASS_TO_PASS, f"tests/test_wrap.py::{name}"],
        }
    )


async def test_a_gold_failure_where_tests_reach_for_the_network_is_classed_as_needing_it(task_by_id, envs):
    """Sandboxes have loopback alone: a test that fetches from a host fails there, where the official harness's
    containers would reach it. The validator says so (and the report classes it); the control, a test failing
    for its own reason, stays 'gold does not resolve'."""
    from swe_rl.runs.buildreport import BuildEntry, cause_of

    task = task_by_id["swe-rl-builtin__textkit-3"]
    env = envs.ensure(task)
    factory = available_factory("ns")
    fetch = 'import urllib.request\nurllib.request.urlopen("http://192.0.2.1/", timeout=5)'
    by_ip = await validate_task(_with_test(task, "test_fetch", fetch), factory, env, timeout=120)
    by_name = 'import socket\nsocket.getaddrinfo("pypi.org", 443)'
    by_dns = await validate_task(_with_test(task, "test_resolve", by_name), factory, env, timeout=120)
    plain = (  # https to a loopback server that speaks http: the local httpbin standing in for httpbin.org
        "import http.server, threading, urllib.request\n"
        'srv = http.server.HTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)\n'
        "threading.Thread(target=srv.serve_forever, daemon=True).start()\n"
        'urllib.request.urlopen(f"https://127.0.0.1:{srv.server_address[1]}/", timeout=5)'
    )
    by_tls = await validate_task(_with_test(task, "test_tls", plain), factory, env, timeout=120)
    control = await validate_task(_with_test(task, "test_own", "assert 1 == 2"), factory, env, timeout=120)
    for checked, name in ((by_ip, "test_fetch"), (by_dns, "test_resolve"), (by_tls, "test_tls")):
        assert not checked.valid and not checked.gold.resolved, checked.gold.test_output[-2000:]
        [problem] = checked.problems
        assert f"test_wrap.py::{name}" in problem and "needs the network" in problem, problem
        assert cause_of(BuildEntry(instance_id="i", status="invalid", reason=problem)) == "needs the network"
    assert "Network is unreachable" in by_ip.problems[0]
    [problem] = control.problems
    assert "test_wrap.py::test_own" in problem and "network" not in problem, problem
    assert cause_of(BuildEntry(instance_id="i", status="invalid", reason=problem)) == "gold does not resolve"


async def test_a_gold_failure_for_want_of_a_conda_only_package_says_so(task_by_id, envs):
    """xarray 0.12's official env has cdms2 from conda (no PyPI release): its tests skip here, and PASS_TO_PASS
    wants them passed. Given the env's conda-only packages, the validator names the cause; the control, without
    that list, is 'gold does not resolve'."""
    from swe_rl.runs.buildreport import BuildEntry, cause_of

    task = task_by_id["swe-rl-builtin__textkit-3"]
    env = envs.ensure(task)
    factory = available_factory("ns")
    wanting = _with_test(task, "test_cdms2", 'import pytest\npytest.importorskip("swe_rl_cdms2")')
    named = await validate_task(wanting, factory, env, timeout=120, conda_only=["swe-rl-cdms2"])
    unnamed = await validate_task(wanting, factory, env, timeout=120)
    [problem] = named.problems
    assert "test_wrap.py::test_cdms2" in problem and "conda-only package" in problem, problem
    assert "swe_rl_cdms2: 1 test(s) skipped" in problem, problem
    assert cause_of(BuildEntry(instance_id="i", status="invalid", reason=problem)) == "conda-only package"
    [problem] = unnamed.problems
    assert "conda" not in problem, problem
    assert cause_of(BuildEntry(instance_id="i", status="invalid", reason=problem)) == "gold does not resolve"
