"""The rollout server on loopback (a real subprocess, ns sandboxes), with the fake LLM server (real Qwen
tokenizer) as the policy, driven by raw HTTP and by the trainer's side (ServiceExecutor)."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from types import SimpleNamespace

import aiohttp
import pytest

from swe_rl.episode.result import RolloutResult
from swe_rl.errors import ConfigError
from swe_rl.executors import default_capacity
from swe_rl.executors.base import EpisodeRequest, Policy
from swe_rl.executors.local import LocalExecutor
from swe_rl.executors.service import ServiceExecutor
from swe_rl.llm.base import SamplingParams
from swe_rl.llm.fake_server import FakeLLMServer, Fault
from swe_rl.llm.oracle import oracle_policy
from swe_rl.sandbox.capacity import host_cpus, host_memory_mb, machine_capacity
from tests.conftest import available_factory
from tests.service.servers import Scrape, Server, TcpProxy, free_port, serve_in_thread

tokenizer_mod = pytest.importorskip("swe_rl.rl.tokenizer", exc_type=ImportError)


@pytest.fixture(scope="module")
def tok():
    return tokenizer_mod.qwen_tokenizer()


def _policy_server(tasks, tok, delay_s: float = 0.0):  # type: ignore[no-untyped-def]
    server = FakeLLMServer(oracle_policy(tasks), tokenizer=tok, delay_s=delay_s)
    thread, loop = serve_in_thread(server)
    yield server
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)


@pytest.fixture(scope="module")
def policy(tok, tasks):
    yield from _policy_server(tasks, tok)


@pytest.fixture
def slow_policy(tok, tasks):
    yield from _policy_server(tasks, tok, delay_s=2.0)


@pytest.fixture(scope="module")
def rollout_server():
    available_factory("ns")
    server = Server(
        ["serve", "rollout", "--backend", "ns", "--capacity", "3", "--wait", "300"], free_port()
    ).start()
    yield server
    server.stop()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _run(url: str, body: object, *, request_id: str | None = None, timeout: float = 300):
    headers = {"Content-Type": "application/json", **({"X-Request-ID": request_id} if request_id else {})}
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            url + "/run",
            data=body if isinstance(body, str) else json.dumps(body),
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=timeout),
        ) as resp,
    ):
        return resp.status, json.loads(await resp.read()), resp.headers


def _body(task, policy, **extra):
    return {
        "task": task,
        "model": {"url": policy.url, "tokenizer": "qwen"},
        "sampling": {"max_tokens": 512},
        **extra,
    }


def _request(task: str, url: str, **extra) -> EpisodeRequest:  # type: ignore[no-untyped-def]
    return EpisodeRequest(
        task=task, model=Policy(url=url, tokenizer="qwen"), sampling=SamplingParams(max_tokens=512), **extra
    )


def _samples(result: RolloutResult) -> list[dict]:
    """The samples without their trajectory id (a fresh uuid per rollout)."""
    return [s.model_dump(exclude={"trajectory_id"}) for s in result.samples]


def _metric(server: Server, sample: str, **labels: str) -> float:
    """A counter's sample on the server's /metrics; 0 before the first count (no sample yet)."""
    return Scrape(server.url).value(f"swe_rl_rollout_{sample}", **labels) or 0.0


@pytest.mark.ns
async def test_oracle_resolves_the_builtin_suite_with_exact_samples(rollout_server, policy, tasks, envs):
    """Every builtin task through the service resolves, and its samples equal the in-process rollout's."""
    requests = [_request(t.instance_id, policy.url) for t in tasks]
    remote = ServiceExecutor(rollout_server.url)
    local = LocalExecutor(available_factory("ns"), envs, capacity=3, tasks=tasks)
    try:
        served = await asyncio.gather(*(remote.run(r) for r in requests))
    finally:
        await remote.close()
    in_process = await asyncio.gather(*(local.run(r) for r in requests))
    for task, got, want in zip(tasks, served, in_process, strict=True):
        assert (got.status, got.resolved, got.reward) == ("completed", True, 1.0), (
            task.instance_id,
            got.error,
        )
        assert len(got.samples) == 3 and got.metrics["agent/turns"] == 3.0
        assert all(s.instance_id == task.instance_id for s in got.samples)
        assert want.resolved is True and _samples(got) == _samples(want), task.instance_id
    stats = remote.statistics()
    assert (stats.rollouts, stats.requests, stats.retries, stats.infra_errors) == (
        len(tasks),
        len(tasks),
        0,
        0,
    )


@pytest.mark.ns
def test_capacity_comes_from_the_machine_unless_set(rollout_server, envs, monkeypatch):
    from swe_rl.service.rollout_server import create_app

    assert rollout_server.get("/healthz")["capacity"] == 3  # --capacity
    monkeypatch.delenv("SWE_RL_CAPACITY", raising=False)
    machine = min(int(host_cpus() * 8), host_memory_mb() // 512)
    assert default_capacity() == max(1, machine)
    factory = available_factory("ns")
    assert create_app(factory, envs).state.node.capacity == default_capacity()
    assert create_app(factory, envs, capacity=2).state.node.capacity == 2
    # whichever of CPU and memory is scarcer bounds it
    assert machine_capacity(per_cpu=10_000, mem_mb_each=host_memory_mb() // 3) == 3
    assert machine_capacity(per_cpu=1, mem_mb_each=1) == int(host_cpus())


@pytest.mark.ns
async def test_an_openai_policy_runs_end_to_end_with_fixed_base_ids(rollout_server, tok, tasks, envs):
    """kind openai: the endpoint returns text only; the server encodes the samples by the fixed-base method."""
    task = tasks[6]
    async with FakeLLMServer(oracle_policy(tasks), tokenizer=tok) as server:
        request = EpisodeRequest(
            task=task.instance_id,
            model=Policy(url=server.api_base, kind="openai", model="fake-model", tokenizer="qwen"),
            sampling=SamplingParams(max_tokens=512),
        )
        remote = ServiceExecutor(rollout_server.url)
        try:
            served = await remote.run(request)
        finally:
            await remote.close()
        sent = [r["messages"] for r in server.requests]
        local = await LocalExecutor(available_factory("ns"), envs, tasks=tasks).run(request)
    assert (served.status, served.resolved, served.reward) == ("completed", True, 1.0), served.error
    assert len(served.samples) == len(sent) == 3 and _samples(served) == _samples(local)
    assert served.trajectory is not None
    end = tok.convert_tokens_to_ids("<|im_end|>")
    for sample, messages, step in zip(served.samples, sent, served.trajectory.steps, strict=True):
        prompt = tok.apply_chat_template(
            messages, tokenize=True, add_generation_prompt=True, return_dict=False
        )
        assert sample.tokens[: sample.prompt_length] == list(prompt)
        reply = sample.tokens[sample.prompt_length :]
        assert reply[-1] == end and tok.decode(reply[:-1]) == step.completion.text
        assert sample.loss_mask == [1] * len(reply) == [1] * sample.response_length


@pytest.mark.ns
async def test_a_retried_request_runs_once(rollout_server, policy, tasks):
    before = len(policy.requests)
    request_id = uuid.uuid4().hex
    body = _body(tasks[1].instance_id, policy)
    first, second = await asyncio.gather(
        _run(rollout_server.url, body, request_id=request_id),
        _run(rollout_server.url, body, request_id=request_id),
    )
    assert first[1] == second[1] and first[1]["resolved"] is True
    assert len(policy.requests) - before == 3, "three model calls: one rollout, not two"
    assert second[2].get("X-Idempotent-Replay") == "true" or first[2].get("X-Idempotent-Replay") == "true"


@pytest.mark.ns
async def test_a_dropped_connection_is_retried_with_the_same_id_and_runs_once(
    rollout_server, slow_policy, tasks
):
    """The network drops the trainer's connection mid-rollout: its retry joins the running rollout."""
    before = _metric(rollout_server, "rollouts_total", status="completed")
    async with TcpProxy(rollout_server.port) as link:
        executor = ServiceExecutor(link.url)
        running = asyncio.ensure_future(executor.run(_request(tasks[7].instance_id, slow_policy.url)))
        assert await _wait_for(lambda: rollout_server.get("/healthz")["running"] == 1)
        link.drop()
        result = await running
        await executor.close()
    assert (result.status, result.resolved) == ("completed", True), result.error
    assert len(slow_policy.requests) == 3, "one rollout's model calls"
    stats = executor.statistics()
    assert (stats.requests, stats.retries) == (2, 1) and link.connections == 2
    assert _metric(rollout_server, "rollouts_total", status="completed") - before == 1


@pytest.mark.ns
async def test_a_full_server_queues_then_answers_503_and_the_executor_waits(tasks, tok):
    slow = FakeLLMServer(oracle_policy(tasks), tokenizer=tok, delay_s=2.0)
    thread, loop = serve_in_thread(slow)
    server = Server(
        ["serve", "rollout", "--backend", "ns", "--capacity", "1", "--wait", "2"], free_port()
    ).start()
    try:
        busy = asyncio.ensure_future(_run(server.url, _body(tasks[2].instance_id, slow)))
        assert await _wait_for(lambda: server.get("/healthz")["running"] == 1)
        queued = asyncio.ensure_future(_run(server.url, _body(tasks[3].instance_id, slow)))
        assert await _wait_for(lambda: server.get("/healthz")["waiting"] == 1), "queued first"
        status, reply, headers = await queued
        assert status == 503 and reply["error"]["kind"] == "capacity" and "Retry-After" in headers
        # the trainer's side waits as told (Retry-After) and gets its rollout once the slot frees
        executor = ServiceExecutor(server.url)
        try:
            waited = await executor.run(_request(tasks[3].instance_id, slow.url))
        finally:
            await executor.close()
        assert (waited.status, waited.resolved) == ("completed", True), waited.error
        assert executor.statistics().retries >= 1
        status, reply, _ = await busy
        assert status == 200 and reply["resolved"] is True, reply.get("error")
    finally:
        server.stop()
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


@pytest.mark.ns
@pytest.mark.parametrize("fault", ["down", "garbage"])
async def test_a_dead_or_garbled_policy_is_an_infra_error_not_a_reward(rollout_server, tasks, fault):
    before = _metric(rollout_server, "rollouts_total", status="infra_error")
    async with FakeLLMServer(lambda _messages: Fault(garbage=True)) as garbled:
        url = garbled.url if fault == "garbage" else f"http://127.0.0.1:{_closed_port()}"
        executor = ServiceExecutor(rollout_server.url)
        try:
            result = await executor.run(_request(tasks[0].instance_id, url, step_limit=2))
        finally:
            await executor.close()
    assert (result.status, result.reward, result.resolved, result.samples) == ("infra_error", None, None, [])
    assert result.error and "LLMError" in result.error
    assert executor.statistics().infra_errors == 1
    assert _metric(rollout_server, "rollouts_total", status="infra_error") - before == 1, "counted"


@pytest.mark.ns
@pytest.mark.parametrize(
    ("body", "kind"),
    [
        ("{not json", "bad_request"),
        ({"task": "nope__nope-1", "model": {"url": "http://127.0.0.1:9"}}, "not_found"),
        ({"task": {"instance_id": "x"}, "model": {"url": "http://127.0.0.1:9"}}, "bad_request"),
        ({"task": "x"}, "bad_request"),
        ("[1, 2]", "bad_request"),
        ({"task": "x", "model": {"url": "http://127.0.0.1:9", "kind": "vllm"}}, "bad_request"),
        (
            {"task": "x", "model": {"url": "http://127.0.0.1:9"}, "sampling": {"max_tokens": -1}},
            "bad_request",
        ),
        (
            {
                "task": "swe-rl-builtin__inikit-1",
                "model": {"url": "http://127.0.0.1:9", "tokenizer": "/nope"},
            },
            "bad_request",
        ),
        (
            {
                "task": "swe-rl-builtin__inikit-1",
                "model": {"url": "http://x"},
                "agent_config": "/etc/x.yaml",
            },
            "bad_request",
        ),
        (
            {"task": "swe-rl-builtin__inikit-1", "model": {"url": "http://x"}, "agent_config": "nope"},
            "bad_request",
        ),
        (
            {"task": "x", "model": {"url": "http://x"}, "max_context": 300, "sampling": {"max_tokens": 512}},
            "bad_request",
        ),
    ],
)
async def test_malformed_requests_get_typed_4xx(rollout_server, body, kind):
    status, reply, _ = await _run(rollout_server.url, body)
    assert 400 <= status < 500 and reply["error"]["kind"] == kind


@pytest.mark.ns
async def test_the_executor_raises_config_error_for_a_refused_request(rollout_server):
    executor = ServiceExecutor(rollout_server.url)
    try:
        with pytest.raises(ConfigError, match="not_found"):
            await executor.run(_request("nope__nope-1", "http://127.0.0.1:9"))
    finally:
        await executor.close()
    assert executor.statistics().requests == 1, "a refused request is not retried"


async def test_an_unreachable_server_is_an_infra_error(tasks):
    executor = ServiceExecutor(f"http://127.0.0.1:{_closed_port()}", retries=2, backoff_s=0.01)
    try:
        result = await executor.run(_request(tasks[0].instance_id, "http://127.0.0.1:9"))
    finally:
        await executor.close()
    assert (result.status, result.reward, result.samples) == ("infra_error", None, [])
    assert result.error and "ClientConnectorError" in result.error
    assert executor.statistics().requests == 3


@pytest.mark.ns
async def test_rollouts_spread_over_several_servers_and_skip_a_dead_one(rollout_server, policy, tasks):
    """``service:URL1,URL2,...``: least-loaded server per rollout; a refused connection moves it on."""
    async with TcpProxy(rollout_server.port) as second:  # a second address of the same server, counted
        dead = f"http://127.0.0.1:{_closed_port()}"
        executor = ServiceExecutor(f"{dead},{rollout_server.url},{second.url}", backoff_s=0.01)
        try:
            results = await asyncio.gather(
                *(executor.run(_request(t.instance_id, policy.url)) for t in tasks[10:12])
            )
        finally:
            await executor.close()
    assert [(r.status, r.resolved) for r in results] == [("completed", True)] * 2, [r.error for r in results]
    assert second.connections == 1, "one of the two rollouts went to the second server"
    stats = executor.statistics()
    assert (stats.requests, stats.retries) == (3, 1), "the dead server cost one refused connection"


async def _wait_for(predicate, timeout: float = 30.0) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.1)
    return predicate()


def _sandboxes_of(server: Server) -> list[int]:
    from tests.service.test_service import _alive, _descendants

    return [pid for pid in _descendants(server.proc.pid) if _alive(pid) and "bwrap" in _comm(pid)]


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text()
    except OSError:
        return ""


def _cgroups_of(pids: list[int]) -> set[Path]:
    """The sandbox cgroup directories (v1 or v2) these processes are in."""
    found = set()
    for pid in pids:
        try:
            lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            _, controllers, path = line.split(":", 2)
            if "/swe-rl/" in path:
                found.add(Path("/sys/fs/cgroup", controllers.split(",")[0] if controllers else "", path[1:]))
    return found


def _leftovers(server: Server, cgroups: set[Path]) -> list[str]:
    """What a freed rollout must not leave: a running slot, sandbox processes, cgroups, host mounts."""
    left = []
    if server.get("/healthz")["running"]:
        left.append("a running rollout")
    if _sandboxes_of(server):
        left.append("bwrap processes")
    left += [str(c) for c in cgroups if c.exists()]
    left += [m for m in Path("/proc/self/mountinfo").read_text().splitlines() if ".swe-rl-ns" in m]
    return left


@pytest.mark.ns
async def test_delete_cancels_a_running_rollout_and_frees_its_sandbox(rollout_server, slow_policy, tasks):
    running = asyncio.ensure_future(
        _run(rollout_server.url, _body(tasks[4].instance_id, slow_policy), request_id="r-del")
    )
    assert await _wait_for(
        lambda: rollout_server.get("/healthz")["running"] == 1 and _sandboxes_of(rollout_server)
    )
    cgroups = _cgroups_of(_sandboxes_of(rollout_server))
    async with aiohttp.ClientSession() as session, session.delete(rollout_server.url + "/run/r-del") as resp:
        assert resp.status == 200 and (await resp.json())["cancelled"] is True
    status, reply, _ = await running
    assert status == 409 and reply["error"]["kind"] == "cancelled"
    assert await _wait_for(lambda: not _leftovers(rollout_server, cgroups)), _leftovers(
        rollout_server, cgroups
    )


CLIENT = """
import asyncio, sys
from swe_rl.executors.base import EpisodeRequest
from swe_rl.executors.service import ServiceExecutor
request = EpisodeRequest.model_validate_json(sys.argv[2])
print(asyncio.run(ServiceExecutor(sys.argv[1]).run(request)).status)
"""


@pytest.mark.ns
async def test_a_killed_client_frees_the_rollout_and_leaks_nothing(rollout_server, slow_policy, tasks):
    """SIGKILL the trainer process mid-rollout: the server cancels it, its sandbox and cgroups vanish."""
    cancelled = _metric(rollout_server, "errors_total", endpoint="run", kind="cancelled")
    request = _request(tasks[5].instance_id, slow_policy.url)
    client = subprocess.Popen(
        [sys.executable, "-c", CLIENT, rollout_server.url, request.model_dump_json()],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert await _wait_for(
            lambda: rollout_server.get("/healthz")["running"] == 1 and _sandboxes_of(rollout_server)
        )
        cgroups = _cgroups_of(_sandboxes_of(rollout_server))
        assert cgroups, "the sandbox runs in its own cgroup(s)"
    finally:
        client.kill()
        client.wait()
    assert await _wait_for(lambda: not _leftovers(rollout_server, cgroups)), _leftovers(
        rollout_server, cgroups
    )
    assert len(slow_policy.requests) < 3, "the rollout was stopped, not run to the end"
    assert _metric(rollout_server, "errors_total", endpoint="run", kind="cancelled") - cancelled == 1


@pytest.mark.ns
async def test_an_executor_timeout_cancels_the_rollout_on_the_server(rollout_server, slow_policy, tasks):
    executor = ServiceExecutor(rollout_server.url, timeout_s=3)
    try:
        result = await executor.run(_request(tasks[9].instance_id, slow_policy.url))
    finally:
        await executor.close()
    assert (result.status, result.reward) == ("infra_error", None) and "no answer within 3s" in (
        result.error or ""
    )
    assert await _wait_for(lambda: not _leftovers(rollout_server, set())), _leftovers(rollout_server, set())


@pytest.mark.ns
async def test_slime_generate_through_the_rollout_service(
    rollout_server, tok, tasks, monkeypatch, shared_executors
):
    """The trainer side of the service: miles' real Sample from the returned ids, infra failures removed."""
    from swe_rl.integrations.slime import generate

    Sample = pytest.importorskip("miles.utils.types").Sample
    monkeypatch.setenv("SWE_RL_EXECUTOR", f"service:{rollout_server.url}")
    monkeypatch.setenv("SWE_RL_TOKENIZER", "qwen")
    task = tasks[10]
    async with FakeLLMServer(oracle_policy(tasks), tokenizer=tok) as server:
        args = SimpleNamespace(sglang_router_ip="127.0.0.1", sglang_router_port=server.port)
        prompt = Sample(index=4, prompt=task.problem_statement, metadata={"instance": task.to_record()})
        samples = await generate(args, prompt, {"max_new_tokens": 512, "temperature": 1.0})
    assert len(samples) == 3 and all(isinstance(s, Sample) for s in samples)
    for s in samples:
        assert (
            s.index == 4 and s.status == Sample.Status.COMPLETED and s.reward == 1.0
        )  # no --reward-key: a float
        assert len(s.loss_mask) == s.response_length == len(s.rollout_log_probs)
    sent = [r["input_ids"] for r in server.requests]
    assert [s.tokens[: len(s.tokens) - s.response_length] for s in samples] == sent, "ids, not re-tokenized"
    # a rollout server that is gone: the samples leave the batch, nothing is scored
    monkeypatch.setenv("SWE_RL_EXECUTOR", f"service:http://127.0.0.1:{_closed_port()}")
    gone = await generate(args, Sample(index=5, metadata={"instance": task.to_record()}), {})
    assert gone and all(
        s.remove_sample and s.status == Sample.Status.ABORTED for s in gone
    )  # as slime means it


@pytest.mark.ns
async def test_reused_grading_sandboxes_are_reset_kept_and_closed_with_the_server(policy, tasks):
    """`serve rollout --reuse-grading`: the second grading of a task's env reuses the first one's sandbox
    (with a warm runner); stopping the server closes every sandbox it kept."""
    available_factory("ns")
    server = Server(
        ["serve", "rollout", "--backend", "ns", "--capacity", "1", "--reuse-grading"], free_port()
    )
    server.start()
    try:
        assert server.get("/healthz")["grading_sandboxes"]["created"] == 0
        for _ in range(3):
            status, reply, _ = await _run(server.url, _body(tasks[0].instance_id, policy))
            assert status == 200 and reply["resolved"] is True, reply
        stats = server.get("/healthz")["grading_sandboxes"]
        assert stats["created"] == 1 and stats["reused"] == 2 and stats["runners"] == 3, stats
        kept = _sandboxes_of(server)
        assert kept, "the grading sandbox is kept between rollouts"
        cgroups = _cgroups_of(kept)
    finally:
        server.stop()
    # uvicorn shuts the app down (its lifespan closes the kept sandboxes), then re-raises SIGTERM
    assert server.proc is not None and server.proc.returncode in (0, -15)
    assert cgroups and not [c for c in cgroups if c.exists()], "closed with the server"
