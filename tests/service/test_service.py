"""The execution service with real servers on loopback: leases, queueing, failover, idempotency, auth."""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from pathlib import Path

import aiohttp
import pytest

from swe_rl.errors import SandboxError
from swe_rl.sandbox.remote import RemoteFactory
from tests.conftest import available_factory
from tests.service.servers import Scrape, exec_server, free_port, pool_server


@pytest.fixture(scope="module")
def nodes():
    available_factory("ns")
    servers = [exec_server(None, "--capacity", "4").start() for _ in range(3)]
    yield servers
    for s in servers:
        s.stop()


async def _post(url: str, path: str, body: object, *, headers: dict | None = None, timeout: float = 60):
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            url + path,
            data=body if isinstance(body, (bytes, str)) else json.dumps(body),
            headers={"Content-Type": "application/json", **(headers or {})},
            timeout=aiohttp.ClientTimeout(total=timeout),
        ) as resp,
    ):
        return resp.status, json.loads(await resp.read()), resp.headers


@pytest.mark.ns
async def test_leases_spread_and_a_dead_node_fails_over(nodes, textkit_env):
    pool = pool_server(nodes).start()
    factory = RemoteFactory(pool.url, ttl=30)
    try:
        boxes = [await factory.create(textkit_env) for _ in range(6)]
        per_node = {n.url: n.get("/healthz")["running"] for n in nodes}
        assert sorted(per_node.values()) == [2, 2, 2], per_node
        status = pool.get("/status")
        assert status["pool"]["total_leases"] == 6
        # kill one node mid-run: its leases fail fast as infrastructure errors, the others are unaffected
        victim = nodes[0]
        victim.kill()
        results = await asyncio.gather(
            *(b.exec("echo alive", timeout=10) for b in boxes), return_exceptions=True
        )
        failed = [r for r in results if isinstance(r, SandboxError)]
        assert len(failed) == 2 and all("node_down" in str(e) or "unreachable" in str(e) for e in failed)
        assert sum(1 for r in results if not isinstance(r, Exception) and r.output == "alive\n") == 4
        # new leases go elsewhere
        extra = await factory.create(textkit_env)
        assert (await extra.exec("echo ok", timeout=10)).output == "ok\n"
        # the node comes back (same port, restarted process): healthy again, nothing leaked
        nodes[0] = exec_server(victim.port, "--capacity", "4").start()
        await asyncio.sleep(1.5)
        assert nodes[0].get("/healthz")["running"] == 0
        healthy = [n for n in pool.get("/status")["pool"]["nodes"] if n["healthy"]]
        assert len(healthy) == 3
        for box in [*boxes, extra]:
            await box.close()
        await asyncio.sleep(0.5)
        assert sum(n.get("/healthz")["running"] for n in nodes) == 0
    finally:
        await factory.close()
        pool.stop()


@pytest.mark.ns
async def test_lease_without_heartbeat_is_reaped(nodes, textkit_env):
    pool = pool_server(nodes).start()
    try:
        status, body, _ = await _post(pool.url, "/allocate", {"image": textkit_env.key, "ttl": 1.0})
        assert status == 200
        node_url = body["node_url"]
        started = time.monotonic()
        while time.monotonic() - started < 5:
            if pool.get("/status")["pool"]["total_leases"] == 0:
                break
            await asyncio.sleep(0.1)
        assert (
            pool.get("/status")["pool"]["total_leases"] == 0 and time.monotonic() - started < 1.0 + 0.3 + 1.5
        )
        node = next(n for n in nodes if n.url == node_url)
        assert node.get("/healthz")["running"] == 0
        status, body, _ = await _post(pool.url, "/exec", {"lease_id": body["lease_id"], "command": "true"})
        assert status == 404 and body["error"]["kind"] == "not_found"
    finally:
        pool.stop()


@pytest.mark.ns
async def test_full_pool_queues_then_answers_503_with_retry_after(nodes, textkit_env):
    pool = pool_server(nodes[:1], env={"SWE_MAX_CONTAINERS_PER_NODE": "1"}).start()
    try:
        status, first, _ = await _post(pool.url, "/allocate", {"image": textkit_env.key})
        assert status == 200
        status, body, headers = await _post(pool.url, "/allocate", {"image": textkit_env.key, "wait": 0.5})
        assert status == 503 and body["error"]["kind"] == "capacity" and "Retry-After" in headers
        waiter = asyncio.ensure_future(_post(pool.url, "/allocate", {"image": textkit_env.key, "wait": 20}))
        await asyncio.sleep(0.5)
        assert pool.get("/status")["pool"]["queue"] == 1
        await _post(pool.url, "/close", {"lease_id": first["lease_id"]})
        status, second, _ = await waiter
        assert status == 200
        await _post(pool.url, "/close", {"lease_id": second["lease_id"]})
    finally:
        pool.stop()


@pytest.mark.ns
async def test_retried_exec_runs_once(nodes, textkit_env):
    pool = pool_server(nodes).start()
    try:
        _, lease, _ = await _post(pool.url, "/allocate", {"image": textkit_env.key})
        body = {
            "lease_id": lease["lease_id"],
            "command": "echo run >> /tmp/count; sleep 1; wc -l < /tmp/count",
            "timeout": 30,
        }
        request_id = uuid.uuid4().hex
        with pytest.raises(asyncio.TimeoutError):  # the connection dies mid-exec
            await _post(pool.url, "/exec", body, headers={"X-Request-ID": request_id}, timeout=0.3)
        status, again, _ = await _post(pool.url, "/exec", body, headers={"X-Request-ID": request_id})
        assert status == 200 and again["output"].strip() == "1"
        _, check, _ = await _post(
            pool.url, "/exec", {"lease_id": lease["lease_id"], "command": "wc -l < /tmp/count"}
        )
        assert check["output"].strip() == "1", "the command ran exactly once"
        await _post(pool.url, "/close", {"lease_id": lease["lease_id"]})
    finally:
        pool.stop()


@pytest.mark.ns
async def test_typed_errors_for_bad_input(nodes):
    node = nodes[1]
    for body, kind in [
        (b"{not json", "bad_request"),
        ({"container_id": "nope", "command": "ls"}, "not_found"),
        ({"container_id": "x", "command": 5}, "bad_request"),
        ([1, 2], "bad_request"),
    ]:
        status, reply, _ = await _post(node.url, "/container/exec", body)
        assert reply["ok"] is False and reply["error"]["kind"] == kind, (body, reply)
        assert status in (400, 404)
    status, reply, _ = await _post(node.url, "/container/create", {"image": "no-such-env"})
    assert status == 404 and reply["error"]["kind"] == "not_found"


@pytest.mark.ns
async def test_bearer_token_is_enforced():
    node = exec_server(None, "--token", "s3cret", "--capacity", "1").start()
    try:
        status, reply, _ = await _post(node.url, "/container/exec", {"container_id": "x", "command": "ls"})
        assert status == 401 and reply["error"]["kind"] == "unauthorized"
        status, reply, _ = await _post(
            node.url,
            "/container/exec",
            {"container_id": "x", "command": "ls"},
            headers={"Authorization": "Bearer s3cret"},
        )
        assert status == 404
    finally:
        node.stop()


def test_non_loopback_bind_requires_a_token():
    import subprocess
    import sys

    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "swe_rl.cli.app",
            "serve",
            "exec",
            "--host",
            "0.0.0.0",
            "--port",
            str(free_port()),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "needs --token" in out.stderr


@pytest.mark.ns
async def test_seed_client_protocol_on_the_exec_server(nodes, task_by_id, envs):
    """The seed's exec-server calls, field for field, including grading in a pristine sandbox."""
    node = nodes[2]
    task = task_by_id["swe-rl-builtin__textkit-3"]
    envs.ensure(task)
    status, created, _ = await _post(
        node.url, "/container/create", {"image": task.instance_id, "cwd": "/testbed"}
    )
    assert status == 200 and created["ok"] and created["container_id"] == created["name"]
    cid = created["container_id"]
    _, ran, _ = await _post(
        node.url,
        "/container/exec",
        {
            "container_id": cid,
            "command": "git apply - <<'E'\n" + task.patch + "E\n",
            "cwd": "/testbed",
            "timeout": 30,
        },
    )
    assert ran["ok"] and ran["returncode"] == 0
    _, diff, _ = await _post(node.url, "/container/diff", {"container_id": cid, "cwd": "/testbed"})
    assert "if len(text) <= limit:" in diff["patch"]
    _, graded, _ = await _post(
        node.url,
        "/container/evaluate",
        {"container_id": cid, "patch": diff["patch"], "instance": task.instance_id},
    )
    assert graded["ok"] and graded["resolved"] is True and graded["report"]["status"] == "resolved"
    _, destroyed, _ = await _post(node.url, "/container/destroy", {"container_id": cid})
    assert destroyed == {"ok": True}
    health = node.get("/healthz")
    assert health["ok"] is True and health["running_containers"] == "0"
    metrics = await asyncio.to_thread(Scrape, node.url)
    assert (metrics.value("swe_rl_exec_requests_total", endpoint="container_exec", status="200") or 0) >= 1
    assert (metrics.value("swe_rl_exec_container_exec_seconds_count") or 0) >= 1


@pytest.mark.ns
async def test_restarted_pool_reconciles_leftover_sandboxes(nodes, textkit_env):
    pool = pool_server(nodes).start()
    factory = RemoteFactory(pool.url)
    boxes = [await factory.create(textkit_env) for _ in range(3)]
    assert sum(n.get("/healthz")["running"] for n in nodes) == 3
    pool.kill()  # no drain: the leases are lost with the process
    await factory.close()
    replacement = pool_server(nodes).start()  # reconciles every node at start-up
    try:
        await asyncio.sleep(1.0)
        assert sum(n.get("/healthz")["running"] for n in nodes) == 0, "nothing leaked"
        assert replacement.get("/status")["pool"]["total_leases"] == 0
    finally:
        replacement.stop()
        for box in boxes:
            box._closed = True  # their pool is gone; nothing to close
            box._beat.cancel()


@pytest.mark.ns
async def test_sigterm_drains_running_execs_then_destroys_sandboxes(textkit_env):
    node = exec_server(None, "--capacity", "2").start()
    try:
        _, created, _ = await _post(node.url, "/container/create", {"image": textkit_env.key})
        running = asyncio.ensure_future(
            _post(
                node.url,
                "/container/exec",
                {"container_id": created["container_id"], "command": "sleep 1; echo finished", "timeout": 30},
            )
        )
        await asyncio.sleep(0.3)
        sandbox_pids = _descendants(node.proc.pid)
        assert sandbox_pids, "the node's sandbox processes are running"
        node.proc.send_signal(15)  # SIGTERM while the command runs
        status, reply, _ = await running
        assert status == 200 and reply["output"] == "finished\n", "the running exec completed"
        await asyncio.to_thread(node.proc.wait, 30)
        for _ in range(100):  # the helper sees EOF once the node is gone; its sandboxes die with it
            if not any(_alive(pid) for pid in sandbox_pids):
                break
            await asyncio.sleep(0.1)
        assert [pid for pid in sandbox_pids if _alive(pid)] == [], "nothing outlives the node"
    finally:
        node.kill()


def _alive(pid: int) -> bool:
    """Running, not a zombie (an exited process whose new parent, this machine's pid 1, may never reap it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        children = []
        for task in Path(f"/proc/{current}/task").glob("*"):  # children hang off the thread that forked them
            try:
                children += [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
        found += children
        todo += children
    return found


@pytest.mark.ns
async def test_registry_prefixed_image_names_are_the_same_image(nodes, task_by_id, envs):
    """The seed names images docker.io/swebench/... and docker.io/xingyaoww/... (#23 item 1)."""
    from swe_rl.tasks.image_names import image_name

    node = nodes[2]
    task = task_by_id["swe-rl-builtin__textkit-3"]
    envs.ensure(task)
    for name in (
        image_name(task.instance_id),  # control: the plain name is known to the node
        "docker.io/" + image_name(task.instance_id),
        "docker.io/" + image_name(task.instance_id, "swegym").removesuffix(":latest"),
    ):
        status, created, _ = await _post(node.url, "/container/create", {"image": name})
        assert status == 200 and created["ok"], (name, created)
        await _post(node.url, "/container/destroy", {"container_id": created["container_id"]})
    status, _, _ = await _post(node.url, "/container/create", {"image": "docker.io/swebench/no-such:latest"})
    assert status == 404


class _SeedShaped:
    """A node as the seed's exec server shows itself to a pool: /healthz without 'capacity', no
    GET /containers; everything else is a real exec server behind it."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.url = ""

    async def __aenter__(self):
        from aiohttp import web

        async def healthz(request):
            return web.json_response({"ok": True, "running_containers": "0"})

        async def forward(request):
            async with (
                aiohttp.ClientSession() as session,
                session.request(
                    request.method,
                    self.target + request.path,
                    data=await request.read(),
                    headers={"Content-Type": "application/json"},
                ) as resp,
            ):
                return web.Response(
                    body=await resp.read(), status=resp.status, content_type="application/json"
                )

        app = web.Application()
        app.router.add_get("/healthz", healthz)
        app.router.add_post("/{tail:.*}", forward)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.runner.cleanup()


@pytest.mark.ns
async def test_the_pool_fronts_a_seed_shaped_exec_server(nodes, textkit_env):
    """#23 item 2: a node that reports no capacity and has no GET /containers still takes leases."""
    import types

    async with _SeedShaped(nodes[1].url) as seed, aiohttp.ClientSession() as session:
        # control: the node really looks like the seed's
        async with session.get(seed.url + "/healthz") as resp:
            assert "capacity" not in await resp.json()
        async with session.get(seed.url + "/containers") as resp:
            assert resp.status in (404, 405)
        pool = pool_server([types.SimpleNamespace(url=seed.url)]).start()  # type: ignore[list-item]
        try:
            await asyncio.sleep(1.5)  # a health round
            status, lease, _ = await _post(pool.url, "/allocate", {"image": textkit_env.key, "wait": 10})
            assert status == 200 and lease["ok"], lease
            _, ran, _ = await _post(
                pool.url, "/exec", {"lease_id": lease["lease_id"], "command": "echo via seed"}
            )
            assert ran["output"] == "via seed\n"
            await _post(pool.url, "/close", {"lease_id": lease["lease_id"]})
        finally:
            pool.stop()


@pytest.mark.ns
async def test_seed_visible_fields_timeout_status_and_images(nodes, textkit_env):
    """#23 item 8: what a seed client reads of a timed-out exec, GET /status and GET /images."""
    node = nodes[0]
    _, created, _ = await _post(node.url, "/container/create", {"image": textkit_env.key})
    cid = created["container_id"]
    try:
        _, ran, _ = await _post(
            node.url,
            "/container/exec",
            {"container_id": cid, "command": "echo started; sleep 30", "timeout": 1},
        )
        # the seed's -1 and sentence, after what the command printed; our own flag beside them
        assert ran["returncode"] == -1 and ran["timed_out"] is True
        assert ran["output"].startswith("started\n") and ran["output"].endswith("Command timed out after 1s")
        status = node.get("/status")
        assert status["ok"] and status["active_containers"] >= 1 and cid in status["containers"]
        images = node.get("/images")
        assert (
            images["ok"] and textkit_env.key in images["images"] and images["count"] == len(images["images"])
        )
    finally:
        await _post(node.url, "/container/destroy", {"container_id": cid})


@pytest.mark.ns
async def test_pool_status_and_lease_ids_in_the_seeds_shape(nodes, textkit_env):
    """#23 item 8: the pool's GET /status and lease ids as a seed client sees them.

    Restated from Gen-Verse/OpenClaw-RL at 0d034dd5e653, swe-rl/server/swe_env_pool_server.py:
    ``/status`` answers ``{"ok": True, "pool": {"total_leases": int, "nodes": [{"url": str,
    "active_containers": int, "max_containers": int, "healthy": bool}]}}`` and ``allocate`` names a lease
    ``f"swe-lease-{uuid.uuid4().hex[:16]}"``.
    """
    pool = pool_server(nodes[:2], env={"SWE_MAX_CONTAINERS_PER_NODE": "3"}).start()
    try:
        _, lease, _ = await _post(pool.url, "/allocate", {"image": textkit_env.key, "instance_id": "x"})
        assert re.fullmatch(r"swe-lease-[0-9a-f]{16}", lease["lease_id"]), lease["lease_id"]
        status = pool.get("/status")
        assert status["ok"] is True and isinstance(status["pool"], dict)
        seed_node_fields = {"url": str, "active_containers": int, "max_containers": int, "healthy": bool}
        assert type(status["pool"]["total_leases"]) is int and status["pool"]["total_leases"] == 1
        assert [n["url"] for n in status["pool"]["nodes"]] == [n.url for n in nodes[:2]]
        for node in status["pool"]["nodes"]:
            assert {k: type(node[k]) for k in seed_node_fields} == seed_node_fields, node
            assert node["healthy"] is True and node["max_containers"] == 3  # the cap under the capacity 4
        assert sorted(n["active_containers"] for n in status["pool"]["nodes"]) == [0, 1]
        # swe-rl's own fields stay beside the seed's
        assert status["pool"]["queue"] == 0 and status["pool"]["max_concurrent"] == 128
        await _post(pool.url, "/close", {"lease_id": lease["lease_id"]})
        assert pool.get("/status")["pool"]["total_leases"] == 0
    finally:
        pool.stop()


@pytest.mark.ns
async def test_an_allow_list_serves_headerless_seed_clients_off_loopback(textkit_env):
    """#23 item 3: off loopback the token stays the default; --allow opens named networks to clients that
    send no header (the seed's), and says so loudly."""
    body = {"image": textkit_env.key}
    # control: with a token alone, a headerless client is refused
    guarded = exec_server(None, "--host", "0.0.0.0", "--token", "s3cret").start()
    try:
        status, reply, _ = await _post(guarded.url, "/container/create", body)
        assert status == 401 and reply["error"]["kind"] == "unauthorized"
    finally:
        guarded.stop()
    for extra in (["--token", "s3cret", "--allow", "127.0.0.0/8"], ["--allow", "127.0.0.1/32,10.0.0.0/8"]):
        node = exec_server(None, "--host", "0.0.0.0", *extra).start()
        try:
            status, created, _ = await _post(node.url, "/container/create", body)  # no Authorization header
            assert status == 200 and created["ok"], created
            await _post(node.url, "/container/destroy", {"container_id": created["container_id"]})
            assert "WITHOUT A TOKEN" in node.log.read_text()
        finally:
            node.stop()
    # an allow-list that does not hold the client's address: refused like any headerless client
    other = exec_server(None, "--host", "0.0.0.0", "--allow", "10.0.0.0/8").start()
    try:
        status, _, _ = await _post(other.url, "/container/create", body)
        assert status == 401
    finally:
        other.stop()
