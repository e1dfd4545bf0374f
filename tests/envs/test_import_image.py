"""``env import-image``: an image made here becomes an env; docker (the image) and ns (the import) agree."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
from tests.conftest import available_factory
from tests.envs import rootfs

from swe_rl.envs.cache import EnvCache
from swe_rl.envs.images.importing import import_image, instance_from_image
from swe_rl.harness.grade_patch import grade_patch, run_tests
from swe_rl.tasks.model import Task

pytestmark = [pytest.mark.docker, pytest.mark.ns]


def test_instance_from_official_names():
    assert (
        instance_from_image("swebench/sweb.eval.x86_64.django_1776_django-11099:latest")
        == "django__django-11099"
    )
    assert (
        instance_from_image("xingyaoww/sweb.eval.x86_64.pandas-dev_s_pandas-1:latest")
        == "pandas-dev__pandas-1"
    )
    assert instance_from_image("ubuntu:22.04") is None


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    docker = available_factory("docker")
    return docker, *rootfs.test_image(docker._client, tmp_path_factory.mktemp("img"))


def _task(tag: str, base: str) -> Task:
    return Task(
        instance_id="acme__widget-7",
        repo="acme/widget",
        base_commit=base,
        patch=rootfs.GOLD,
        test_patch=rootfs.TEST_PATCH,
        FAIL_TO_PASS=["test_widget.py::test_answer"],
        PASS_TO_PASS=["test_widget.py::test_type"],
        test_cmd="pytest -rA",
        image_name=tag,
    )


def _git(cwd, *args):
    # safe.directory: a testbed belongs to the ns sandboxes' uid once one has run on it
    return subprocess.run(
        ["git", "-c", "safe.directory=*", *args], cwd=cwd, capture_output=True, text=True, check=False
    ).stdout


def test_imported_env_grades_like_the_image(tmp_path, image):
    docker, tag, base = image
    ns = available_factory("ns")
    cache = EnvCache(tmp_path / "envs")
    env = import_image(cache, tag)
    assert (env.repo, env.base_commit, str(env.venv)) == ("acme/widget", base, "/opt/venv")
    assert env.rootfs is not None and env.image == tag
    # no history after the base: the future commit and its tag are gone; the working tree is kept as is
    assert _git(env.testbed, "rev-list", "--all").split() == [base]
    assert _git(env.testbed, "tag").strip() == ""
    assert (env.testbed / "build.log").is_file()
    task = _task(tag, base)
    assert cache.ensure(task) == env, "a task whose image was imported uses the import"

    async def verdicts(factory):
        gold = await grade_patch(task, task.patch, factory, env, timeout=120)
        empty = await run_tests(task, factory, env, timeout=120)
        return gold, empty

    d_gold, d_empty = asyncio.run(verdicts(docker))
    n_gold, n_empty = asyncio.run(verdicts(ns))
    assert d_gold.resolved and n_gold.resolved
    assert not d_empty.resolved and not n_empty.resolved
    assert d_gold.tests_status == n_gold.tests_status
    assert d_empty.tests_status == n_empty.tests_status

    async def inside():
        async with await ns.create(env) as box:
            return await box.exec(
                "python -c 'import sys; print(sys.prefix)'; test -e /usr/bin/dockerd && echo HOST-VISIBLE; "
                "git rev-list --all --count; test -e /usr/bin/wc || echo no-host-wc",
                timeout=60,
            )

    out = asyncio.run(inside())
    # the image's root, not the host's /usr: the host has wc and dockerd, the image has neither
    assert out.output.split() == ["/opt/venv", "1", "no-host-wc"], out.output


def test_import_image_cli(tmp_path, image):
    _, tag, base = image
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "swe_rl.cli.app",
            "env",
            "import-image",
            tag,
            "--cache-dir",
            str(tmp_path / "c"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert base[:12] in out.stderr
    missing = subprocess.run(
        [
            sys.executable,
            "-m",
            "swe_rl.cli.app",
            "env",
            "import-image",
            "no/such-image:1",
            "--cache-dir",
            str(tmp_path / "c"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert missing.returncode == 2 and "no image" in missing.stderr


def test_exec_server_lists_imported_images(tmp_path, image):
    import httpx

    from swe_rl.service.exec_server import create_app

    _, tag, _ = image
    cache = EnvCache(tmp_path / "envs")
    env = import_image(cache, tag)
    app = create_app(available_factory("ns"), cache)

    async def get():
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
        ) as c:
            listed = (await c.get("/images")).json()
            created = (await c.post("/container/create", json={"image": tag})).json()
            assert created["ok"], created
            box = created["container_id"]
            command = "python -c 'import sys; print(sys.prefix)'"
            ran = (await c.post("/container/exec", json={"container_id": box, "command": command})).json()
            await c.post("/container/destroy", json={"container_id": box})
            return listed, ran

    body, ran = asyncio.run(get())
    assert ran["output"].strip() == "/opt/venv", "the image's name creates a sandbox of the imported env"
    assert tag in body["images"] and env.key in body["images"]
    assert {"name": tag, "docker": False, "size": None, "env": env.key} in body["inventory"]
