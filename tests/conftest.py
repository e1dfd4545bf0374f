"""Shared fixtures. Every test session gets its own cache root (SWE_RL_CACHE), so nothing touches ~/.cache.

Markers say what a test needs beyond Python: ``ns`` (root, namespaces, overlayfs: the ns backend, and the
remote one, which runs on it), ``docker`` (a running dockerd), ``heavy`` (minutes of CPU). Tests that take
a backend as a parameter, or the remote service, are marked here; the others carry their marks in their
modules. ``./dev test --quick`` leaves out all three; ``./dev test`` (CI) runs them.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

_SESSION_CACHE = Path(tempfile.mkdtemp(prefix="swe-rl-test-cache-"))
os.environ["SWE_RL_CACHE"] = str(_SESSION_CACHE)

from swe_rl.envs.cache import EnvCache  # noqa: E402
from swe_rl.sandbox.base import EnvSpec  # noqa: E402
from swe_rl.tasks.builtin import builtin_tasks  # noqa: E402
from swe_rl.tasks.model import Task  # noqa: E402

_BACKEND_MARKS = {"ns": "ns", "remote": "ns", "docker": "docker"}
_running: list[pytest.Item] = []  # the test being set up or run, for available_factory's check


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks each test with a parameter (its own or a fixture's) that names a backend with what that backend
    needs (ns or docker), and each test of the remote service with ns."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        params = callspec.params.values() if callspec else ()
        needs = {
            _BACKEND_MARKS[value] for value in params if isinstance(value, str) and value in _BACKEND_MARKS
        }
        if "remote_service" in getattr(item, "fixturenames", ()):
            needs.add("ns")
        for name in sorted(needs):
            item.add_marker(name)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _running[:] = [item]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The session's cache goes with it (envs, repositories: ~0.7 GiB for the whole suite), unless
    SWE_RL_KEEP_TEST_CACHE is set: left behind, every run of the suite filled /tmp a little more."""
    if not os.environ.get("SWE_RL_KEEP_TEST_CACHE"):
        shutil.rmtree(_SESSION_CACHE, ignore_errors=True)


@pytest.fixture(scope="session")
def cache_root() -> Path:
    return _SESSION_CACHE


@pytest.fixture
async def shared_executors() -> AsyncIterator[None]:
    """For tests that reach the process-wide executors (the trainer adapters' ``shared_executor``): closes them."""
    yield
    from swe_rl.integrations.adapter_kit import close_shared_executors

    await close_shared_executors()


@pytest.fixture(scope="session")
def tasks() -> list[Task]:
    return builtin_tasks()


@pytest.fixture(scope="session")
def task_by_id(tasks: list[Task]) -> dict[str, Task]:
    return {t.instance_id: t for t in tasks}


@pytest.fixture(scope="session")
def envs() -> EnvCache:
    return EnvCache()


@pytest.fixture(scope="session")
def textkit_env(envs: EnvCache, task_by_id: dict[str, Task]) -> EnvSpec:
    return envs.ensure(task_by_id["swe-rl-builtin__textkit-3"])


@pytest.fixture
def clean_tmp() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="swe-rl-t-") as d:
        yield Path(d)


async def readme_patch(factory, env) -> str:  # type: ignore[no-untyped-def]
    """A patch that changes nothing the tests see (a line added to README.md): a non-fix to grade."""
    async with await factory.create(env) as box:
        await box.exec("echo 'Looked at it.' >> README.md", timeout=10)
        return await box.diff()


def available_factory(backend: str):  # type: ignore[no-untyped-def]
    """The factory of ``backend``; skips when it cannot run here, except in CI where that is a failure, and
    in a test without the backend's marker: ``./dev test --quick`` would run it, and skip it silently."""
    from swe_rl.errors import SandboxUnavailableError
    from swe_rl.sandbox import get_factory

    try:
        return get_factory(backend)
    except SandboxUnavailableError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"{backend} backend unavailable in CI: {exc}")
        mark = _BACKEND_MARKS.get(backend)
        unmarked = [item.nodeid for item in _running if mark and item.get_closest_marker(mark) is None]
        if unmarked:
            pytest.fail(f"{unmarked[0]} needs the {backend} backend but is not marked {mark}: {exc}")
        pytest.skip(f"{backend} backend unavailable: {exc}")


def _backends() -> list[str]:
    from swe_rl.sandbox import BACKENDS

    return [*BACKENDS, "remote"]


@pytest.fixture(scope="session")
def remote_service():  # type: ignore[no-untyped-def]
    """A pool server in front of one exec server (ns backend), both real processes on loopback."""
    from tests.service.servers import exec_server, pool_server

    available_factory("ns")
    node = exec_server().start()
    pool = pool_server([node]).start()
    yield pool
    pool.stop()
    node.stop()


def factory_of(request: pytest.FixtureRequest, backend: str):  # type: ignore[no-untyped-def]
    """A generator for a fixture: the factory of ``backend``; remote is a pool -> exec -> ns service."""
    if backend == "remote":
        import asyncio

        from swe_rl.sandbox.remote import RemoteFactory

        remote = RemoteFactory(request.getfixturevalue("remote_service").url)
        yield remote
        asyncio.run(remote.close())
        return
    yield available_factory(backend)


@pytest.fixture(params=_backends())
def factory(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """Every sandbox backend, one after the other: the contract suite runs on each (remote: pool -> exec -> ns)."""
    yield from factory_of(request, request.param)


def unbuildable_task():  # type: ignore[no-untyped-def]
    """A valid task record whose environment cannot be built: its repository exists nowhere."""
    from swe_rl.tasks.model import Task

    return Task(
        instance_id="nobody__nothing-1",
        problem_statement="Nothing works.",
        repo="nobody/nothing",
        base_commit="deadbeef",
        install="true",
        test_cmd="pytest",
        FAIL_TO_PASS=["t"],
    )


def tiny_grpo_settings(output_dir: Path, **fields: object):  # type: ignore[no-untyped-def]
    """GRPO settings of the smallest real run: the tiny random Qwen3, one task a step, groups of two, 8 new
    tokens a turn, frozen embeddings (its large vocabulary would eat the replies); ``fields`` override."""
    from swe_rl.train.grpo import GRPOSettings

    base: dict[str, object] = {
        "model": "tiny-qwen",
        "tasks_per_step": 1,
        "num_generations": 2,
        "max_tokens": 8,
        "max_concurrent": 2,
        "freeze_embeddings": True,
    }
    return GRPOSettings(output_dir=output_dir, **{**base, **fields})
