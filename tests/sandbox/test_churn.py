"""Create/exec/reset/destroy cycles with random kills leave no process, mount, cgroup or upper dir behind."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
from pathlib import Path

import pytest
from tests.conftest import available_factory

from swe_rl.errors import SandboxError
from swe_rl.sandbox._proc import start_ticks
from swe_rl.sandbox.cgroups import PARENT, ROOT


def _host_state() -> dict[str, int]:
    """What a leaked sandbox would leave in this process's view of the host (no other job adds to it)."""
    mounts = Path("/proc/self/mountinfo").read_text()
    return {
        "host overlay/tmpfs mounts of swe-rl": mounts.count("swe-rl") + mounts.count(" overlay "),
        "mountpoint entries": len(os.listdir("/tmp/.swe-rl-ns")) if os.path.isdir("/tmp/.swe-rl-ns") else 0,
    }


def _ours_left(made: list[tuple[str, int, int | None]]) -> list[str]:
    """What is left of the sandboxes ``made`` (id, bwrap's host pid, its start time): only this test's
    sandboxes count, whatever other jobs start or end meanwhile."""
    left = [f"bwrap {pid} of {box_id}" for box_id, pid, started in made if start_ticks(pid) == started]
    return left + [
        str(d) for box_id, _, _ in made for d in ROOT.glob(f"**/{PARENT}/{box_id}.*") if d.is_dir()
    ]


async def _churn(cycles: int, textkit_env) -> None:
    factory = available_factory("ns")
    rng = random.Random(1234)
    before = _host_state()
    made: list[tuple[str, int, int | None]] = []
    for i in range(cycles):
        box = await factory.create(textkit_env)
        made.append((box.id, box.bwrap_pid or 0, start_ticks(box.bwrap_pid or 0)))
        try:
            assert (await box.exec(f"echo {i} > /tmp/n && cat /tmp/n", timeout=10)).output == f"{i}\n"
            if i == 0:  # the control: an open sandbox is seen, its bwrap and its cgroups
                left = _ours_left(made)
                assert left[0].startswith("bwrap") and len(left) >= 2, left
            action = rng.choice(["none", "kill-bwrap", "kill-shell", "timeout", "reset"])
            if action == "kill-bwrap" and box._proc is not None:
                os.kill(box._proc.pid, signal.SIGKILL)
            elif action == "kill-shell" and box._proc is not None:
                os.kill(box._shell_pid(box._proc), signal.SIGKILL)
            elif action == "timeout":
                assert (await box.exec("sleep 5", timeout=0.05)).timed_out
            elif action == "reset":
                await box.reset()
            if action.startswith("kill"):
                # the kill lands asynchronously: the next command either still runs or fails as infra
                with contextlib.suppress(SandboxError):
                    await box.exec("true", timeout=5)
            if box.bwrap_pid is not None and box.bwrap_pid != made[-1][1]:  # a reset restarted bwrap
                made.append((box.id, box.bwrap_pid, start_ticks(box.bwrap_pid)))
        finally:
            await box.close()
    assert _ours_left(made) == []
    assert _host_state() == before


@pytest.mark.ns
async def test_churn_with_random_kills_leaves_nothing(textkit_env):
    await _churn(60, textkit_env)


@pytest.mark.ns
@pytest.mark.slow
async def test_churn_1000_cycles(textkit_env):
    await _churn(1000, textkit_env)


def _alive_containers(ids: list[str]) -> list[str]:
    """Which of ``ids`` (containers this test made) still exist: other jobs' containers are not counted."""
    import docker

    client = docker.from_env()
    try:
        found = client.containers.list(all=True, filters={"label": "swe-rl.sandbox"}, ignore_removed=True)
        return [c.id for c in found if c.id in ids]
    finally:
        client.close()


@pytest.mark.docker
async def test_docker_churn_with_random_kills_leaves_no_container(textkit_env):
    factory = available_factory("docker")
    rng = random.Random(99)
    made: list[str] = []
    for i in range(12):
        box = await factory.create(textkit_env)
        made.append(box._container.id)
        try:
            assert (await box.exec(f"echo {i}", timeout=30)).output == f"{i}\n"
            action = rng.choice(["none", "kill-container", "timeout", "reset"])
            if action == "kill-container":
                box._container.kill()
                with pytest.raises(SandboxError):
                    await box.exec("true", timeout=10)
            elif action == "timeout":
                assert (await box.exec("sleep 5", timeout=0.5)).timed_out
            elif action == "reset":
                await box.reset()
                made.append(box._container.id)
        finally:
            await box.close()
    assert len(made) >= 12 and _alive_containers(made) == []


_ORPHAN = """
import asyncio, sys
from swe_rl.sandbox.base import EnvSpec
from swe_rl.sandbox.ns import NsFactory
async def main():
    box = await NsFactory().create(EnvSpec.model_validate_json(sys.argv[1]))
    print(box.id, flush=True)
    await asyncio.sleep(600)
asyncio.run(main())
"""


@pytest.mark.ns
async def test_cgroups_of_a_killed_process_are_reaped_at_once(textkit_env):
    import asyncio
    import sys

    from swe_rl.sandbox.cgroups import reap_stale_cgroups

    available_factory("ns")
    proc = subprocess.Popen(
        [sys.executable, "-c", _ORPHAN, textkit_env.model_dump_json()], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    box_id = (await asyncio.to_thread(proc.stdout.readline)).strip()
    proc.kill()  # SIGKILL: no cleanup ran
    proc.wait()
    leftovers = [d for d in ROOT.glob(f"**/{PARENT}/{box_id}.*") if d.is_dir()]
    assert leftovers, "control: the killed process left its sandbox's cgroups behind"
    for _ in range(100):  # its sandbox dies with it (bwrap --die-with-parent), leaving them empty
        if not any((d / "cgroup.procs").read_text().strip() for d in leftovers):
            break
        await asyncio.sleep(0.05)
    reap_stale_cgroups()  # what a restarted server does at start-up, seconds later
    assert not [d for d in leftovers if d.exists()]


@pytest.mark.docker
def test_docker_reaper_removes_leftovers_of_dead_owners():
    import docker

    from swe_rl.sandbox.docker import BASE_IMAGE, LABEL, OWNER_LABEL

    available_factory("docker")  # imports the base image
    client = docker.from_env()
    dead = subprocess.Popen(["true"])
    dead.wait()
    orphan = client.containers.create(
        BASE_IMAGE,
        command=["bash", "-c", "sleep 100"],
        labels={LABEL: "1", OWNER_LABEL: f"{socket.gethostname()}:{dead.pid}"},
    )
    try:
        available_factory("docker")  # a new factory reaps at start-up
        assert orphan.id not in [c.id for c in client.containers.list(all=True, filters={"label": LABEL})]
    finally:
        with contextlib.suppress(docker.errors.NotFound):
            orphan.remove(force=True)
        client.close()


@pytest.mark.ns
async def test_sandboxes_outlive_the_thread_that_started_the_spawner(textkit_env):
    """The spawner must not die with the worker thread that happened to start it (PDEATHSIG is per thread)."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from swe_rl.sandbox.spawner import spawner

    factory = available_factory("ns")
    spawner().close()
    pool = ThreadPoolExecutor(max_workers=1)
    await asyncio.get_running_loop().run_in_executor(pool, spawner()._ensure)  # started from that thread...
    helper = spawner()._proc
    assert helper is not None
    pool.shutdown(wait=True)  # ...which is gone now
    await asyncio.sleep(0.3)
    assert helper.poll() is None, "the helper survived its starting thread"
    async with await factory.create(textkit_env) as box:
        assert spawner()._proc is helper
        await asyncio.sleep(0.3)
        assert (await box.exec("echo still here", timeout=10)).output == "still here\n"
