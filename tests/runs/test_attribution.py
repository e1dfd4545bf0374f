"""Outcome attribution (docs/TRAINING.md): what the agent's own commands did to its own sandbox is its
outcome, scored with the failure reward (``agent_error``, samples ``aborted``); a fault outside its
control is ``infra_error``, dropped from the batch. Real sandboxes on every backend and real servers on
loopback; only the model is scripted.

Positive controls. Agent-caused: where the attack breaks the sandbox, the run's exit message names the
SweRlError the sandbox call raised, which the old rollout caught as infra_error (``except SweRlError``);
where it does not, the attack is shown to have happened (a full /tmp, a surviving shell). Infrastructure:
the fault is shown to be real (the exec server is dead, the engine does not answer, the agent finished
before grading failed).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import available_factory, unbuildable_task
from tests.service.servers import exec_server, pool_server

from swe_rl.agent.config import load_agent_config
from swe_rl.episode.result import RolloutResult
from swe_rl.errors import OutputLimitError, SandboxError, SweRlError
from swe_rl.llm.base import Message, SamplingParams
from swe_rl.llm.openai import OpenAIClient
from swe_rl.llm.oracle import scripted_for
from swe_rl.llm.scripted import SUBMIT, ScriptedLLM, bash_reply
from swe_rl.rl.rewards import OutcomeReward
from swe_rl.rl.rollout import run_rollout
from swe_rl.runs.evaluation import Attempts, EvalSettings, run_eval
from swe_rl.sandbox.remote import RemoteFactory
from swe_rl.tasks.model import Task

PARAMS = SamplingParams(max_tokens=64)
FAILURE = OutcomeReward()(False)
TASK = "swe-rl-builtin__statkit-1"
ALL = frozenset({"ns", "docker", "remote"})

# attack -> (the agent's commands, backends whose sandbox it breaks, what the sandbox call raises there)
ATTACKS: dict[str, tuple[list[str], frozenset[str], type[SweRlError]]] = {
    "delete-git": (["rm -rf .git", "git status"], ALL, SandboxError),
    # ns (and remote, on ns): the shell is out of the commands' reach; docker: the container stops
    "kill-init": (
        ["kill -TERM 1", "kill -KILL -1", "kill 1", "echo still here"],
        frozenset({"docker"}),
        SandboxError,
    ),
    # ns: /tmp and the testbed share the disk_mb tmpfs, but nothing changed in the testbed: git's index is fresh
    # (core.checkStat minimal, and settled: gitpacks.settle_index) and the diff writes nothing, so the sandbox
    # survives a full disk
    "fill-tmp": (["dd if=/dev/zero of=/tmp/fill bs=4M; df /tmp"], frozenset(), SandboxError),
    # after an edit the diff must write git's index: /tmp is a tmpfs of its own beside the testbed's (ns since
    # #58's per-use layers, docker always), so a full /tmp leaves the diff, and the run, whole
    "edit-then-fill-tmp": (
        ["echo edit >> README.md", "dd if=/dev/zero of=/tmp/fill bs=4M; df /tmp"],
        frozenset(),
        SandboxError,
    ),
    "over-cap-patch": (["head -c 52000000 /dev/urandom | base64 > big.txt"], ALL, OutputLimitError),
}


@pytest.fixture(params=sorted(ALL))
def backend(request: pytest.FixtureRequest) -> Iterator[tuple[str, Any]]:
    if request.param == "remote":
        remote = RemoteFactory(request.getfixturevalue("remote_service").url)
        yield "remote", remote
        asyncio.run(remote.close())
        return
    yield request.param, available_factory(request.param)


@pytest.fixture(scope="module")
def tok() -> Any:
    return pytest.importorskip("swe_rl.rl.tokenizer", exc_type=ImportError).qwen_tokenizer()


def _turn(messages: Sequence[Message]) -> int:
    return sum(1 for m in messages if m.role == "assistant")


async def _rollout(task: Task, llm: Any, factory: Any, envs: Any, tok: Any, steps: int) -> RolloutResult:
    config = load_agent_config(step_limit=steps)
    return await run_rollout(task, llm, factory, envs, config, PARAMS, tokenizer=tok)


def _scripted(commands: list[str]) -> ScriptedLLM:
    return ScriptedLLM([bash_reply(f"step {i}", c) for i, c in enumerate(commands)])


def _assert_unscored(result: RolloutResult) -> None:
    assert result.status == "infra_error" and result.exit_status == "infra_error"
    assert result.reward is None and result.resolved is None and not result.samples


@pytest.mark.ns
@pytest.mark.parametrize("attack", sorted(ATTACKS))
async def test_what_the_agent_does_to_its_own_sandbox_is_scored(attack, backend, task_by_id, envs, tok):
    name, factory = backend
    commands, breaks, raised = ATTACKS[attack]
    result = await _rollout(task_by_id[TASK], _scripted(commands), factory, envs, tok, len(commands))
    traj = result.trajectory
    assert traj is not None
    # scored with the failure reward, every sample kept
    assert result.status != "infra_error" and result.error is None
    assert result.reward == FAILURE and result.resolved is False
    assert result.samples and all(s.reward == FAILURE and s.status == result.status for s in result.samples)
    if name in breaks:
        assert result.exit_status == "agent_error" and result.status == "aborted"
        # control: the sandbox call raised this SweRlError, which the old rollout made an infra_error
        assert f"{raised.__name__}: " in traj.exit_message, traj.exit_message
        assert "BackendLostError" not in traj.exit_message
    else:  # control: the attack happened and the sandbox survived it; scored as any run out of steps
        assert result.exit_status == "limits_exceeded" and result.status == "truncated"
        full = "No space left on device"
        evidence = {"kill-init": "still here", "fill-tmp": full, "edit-then-fill-tmp": full}[attack]
        assert any(evidence in s.observation for s in traj.steps), [s.observation for s in traj.steps]


async def test_a_sandbox_that_cannot_be_created_is_infra(task_by_id, envs, tok):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    factory = RemoteFactory(f"http://127.0.0.1:{port}")  # no pool there
    llm = _scripted(["ls"])
    try:
        result = await _rollout(task_by_id[TASK], llm, factory, envs, tok, 1)
    finally:
        await factory.close()
    _assert_unscored(result)
    assert "SandboxUnavailableError" in (result.error or "") and llm.calls == 0  # control: no agent ran


@pytest.mark.ns
async def test_an_env_that_cannot_be_built_is_infra(envs, tok):
    broken = unbuildable_task()
    llm = _scripted(["ls"])
    result = await _rollout(broken, llm, available_factory("ns"), envs, tok, 1)
    _assert_unscored(result)
    assert "nobody/nothing" in (result.error or "") and llm.calls == 0  # control: the build failed


@pytest.mark.ns
async def test_an_unreachable_model_server_is_infra(task_by_id, envs, tok):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = OpenAIClient("m", f"http://127.0.0.1:{port}/v1", max_retries=0)
    try:
        result = await _rollout(task_by_id[TASK], client, available_factory("ns"), envs, tok, 3)
    finally:
        await client.close()
    _assert_unscored(result)
    assert "LLMError" in (result.error or "")


@pytest.mark.docker
async def test_a_grading_sandbox_that_fails_is_infra(task_by_id, envs, tok):
    factory = available_factory("docker")
    task = task_by_id[TASK]
    testbed = envs.ensure(task).testbed
    away = testbed.with_name(testbed.name + ".away")

    def policy(messages: Sequence[Message]) -> str:
        if _turn(messages) == 0:
            return bash_reply("edit", "echo note >> NOTES.txt")
        testbed.rename(away)  # the env's testbed is gone from the host: no new sandbox of it can start
        return bash_reply("submit", SUBMIT)

    try:
        result = await _rollout(task, ScriptedLLM(policy), factory, envs, tok, 3)
    finally:
        if away.exists():
            away.rename(testbed)
    _assert_unscored(result)
    assert result.trajectory is not None and result.trajectory.exit_status == "submitted"  # control
    assert "NOTES.txt" in (result.trajectory.submission or "")
    assert "cannot start container" in (result.error or "")


@pytest.mark.ns
async def test_an_exec_server_killed_mid_episode_is_infra(task_by_id, envs, tok):
    available_factory("ns")
    node = exec_server().start()
    pool = pool_server([node]).start()
    factory = RemoteFactory(pool.url)

    def policy(messages: Sequence[Message]) -> str:
        if _turn(messages) == 1:
            node.kill()  # SIGKILL, between two of the agent's commands
        return bash_reply("look", f"echo step {_turn(messages)}")

    try:
        result = await _rollout(task_by_id[TASK], ScriptedLLM(policy), factory, envs, tok, 3)
    finally:
        await factory.close()
        pool.stop()
        node.kill()
    _assert_unscored(result)
    traj = result.trajectory
    assert traj is not None and traj.steps[0].returncode == 0 and len(traj.steps) == 2  # control: it ran
    assert node.proc is not None and node.proc.returncode is not None  # control: the node is dead
    assert "BackendLostError" in (result.error or "") and "node_down" in (result.error or "")


class EngineProxy:
    """A loopback TCP front for the Docker engine's socket that can be cut: an engine the client can no
    longer reach, as a lost node looks to it (the real dockerd stays up for everyone else)."""

    def __init__(self, socket_path: str) -> None:
        self.socket_path = socket_path
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.live: set[asyncio.StreamWriter] = set()
        self.server: asyncio.AbstractServer | None = None

    def start(self) -> int:
        self.thread.start()
        self.server = self._call(asyncio.start_server(self._handle, "127.0.0.1", 0))
        return int(self.server.sockets[0].getsockname()[1])

    def cut(self) -> None:
        async def cut() -> None:
            assert self.server is not None
            self.server.close()
            for writer in list(self.live):
                writer.transport.abort()

        self._call(cut())

    def close(self) -> None:
        self.cut()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(10)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.open_unix_connection(self.socket_path)
        except OSError:
            writer.transport.abort()
            return
        self.live |= {writer, up_w}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while chunk := await src.read(65536):
                    dst.write(chunk)
                    await dst.drain()
            except OSError:
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_w), pipe(up_r, writer))
        self.live -= {writer, up_w}


def _ours(client: Any) -> set[str]:
    from swe_rl.sandbox.docker import LABEL, OWNER_LABEL, _owner

    found = client.containers.list(all=True, filters={"label": LABEL}, ignore_removed=True)
    return {c.id for c in found if c.labels.get(OWNER_LABEL) == _owner()}


@pytest.mark.docker
async def test_an_unreachable_docker_engine_is_infra(task_by_id, envs, tok, monkeypatch):
    available_factory("docker")
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if not host.startswith("unix://"):
        pytest.skip(f"the engine is not on a unix socket here ({host})")
    from swe_rl.sandbox.docker import DockerFactory, docker_client

    real = docker_client()
    before = _ours(real)
    proxy = EngineProxy(host.removeprefix("unix://"))
    monkeypatch.setenv("DOCKER_HOST", f"tcp://127.0.0.1:{proxy.start()}")
    factory = DockerFactory()

    def policy(messages: Sequence[Message]) -> str:
        if _turn(messages) == 1:
            proxy.cut()  # the engine is unreachable from here on
        return bash_reply("look", f"echo step {_turn(messages)}")

    try:
        result = await _rollout(task_by_id[TASK], ScriptedLLM(policy), factory, envs, tok, 3)
    finally:
        proxy.close()
        for leftover in _ours(real) - before:  # what the cut-off client could not remove
            real.containers.get(leftover).remove(force=True)
    _assert_unscored(result)
    traj = result.trajectory
    assert traj is not None and traj.steps[0].returncode == 0 and len(traj.steps) == 2  # control: it ran
    assert "BackendLostError" in (result.error or "") and "does not answer" in (result.error or "")


@pytest.mark.ns
async def test_eval_counts_an_agent_caused_failure_as_an_unresolved_attempt(tmp_path, task_by_id, envs):
    breaker, fixed = task_by_id[TASK], task_by_id["swe-rl-builtin__statkit-3"]
    # the executor gets each task as its record (it may run elsewhere): the model tells them apart by id
    make: Callable[[Task], Any] = lambda t: (  # noqa: E731
        _scripted(["rm -rf .git", "git status", "ls"])
        if t.instance_id == breaker.instance_id
        else scripted_for("oracle", t)
    )
    settings = EvalSettings(output_dir=tmp_path / "run", args={"model": "test"})
    summary = await run_eval(
        [breaker, fixed],
        Attempts.here(make, envs, available_factory("ns"), load_agent_config(step_limit=3)),
        PARAMS,
        settings,
        quiet=True,
    )
    assert summary["errors"] == 0 and summary["completed"] == 2 and summary["resolved"] == 1
    assert summary["resolve_rate"] == 0.5 and summary["exit_statuses"] == {"agent_error": 1, "submitted": 1}
    rows = {
        r["instance_id"]: r
        for r in map(json.loads, (tmp_path / "run" / "results.jsonl").read_text().splitlines())
    }
    row = rows[breaker.instance_id]
    assert row["exit_status"] == "agent_error" and row["resolved"] is False and row["error"] is None
    assert row["patch_source"] == "none"
    traj = json.loads((Path(row["artifacts"]) / "traj.json").read_text())
    assert "then no diff: SandboxError: " in traj["exit_message"]  # control: diff() raised
    # --resume retries infrastructure failures only: the agent's outcome stands
    again = await run_eval(
        [breaker, fixed],
        Attempts.here(make, envs, available_factory("ns"), load_agent_config(step_limit=3)),
        PARAMS,
        settings.model_copy(update={"resume": True}),
        quiet=True,
    )
    assert again["exit_statuses"] == summary["exit_statuses"]
    assert len((tmp_path / "run" / "results.jsonl").read_text().splitlines()) == 2
