"""Request bodies are bounded while they stream in, on both servers, and the servers' memory shows it.

Each server runs as its own process (local backend: only bodies are under test); its peak RSS (VmHWM,
reset through /proc/PID/clear_refs) is read around each request. Controls: a legitimate large body
does raise the peak (the instrument sees buffering), the client really streamed more than the cap,
and the server answered about the request (413 ``too_large``), so nothing passes by never arriving.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from swe_rl.sandbox.exec_protocol import FileWriteRequest
from swe_rl.service.server_kit import BODY_CAPS, CHUNKED_MAX, MIB
from tests.service.servers import exec_server, pool_server, post

pytestmark = pytest.mark.ns

BOUND_MIB = 64  # what an over-cap body may add to a server's peak memory
CHUNK = b"A" * MIB  # valid base64, so the body is a well-formed request up to where it is cut


@pytest.fixture(scope="module")
def servers(textkit_env):
    node = exec_server(None, "--capacity", "2", backend="local").start()
    pool = pool_server([node]).start()
    yield node, pool
    pool.stop()
    node.stop()


@pytest.fixture
async def lease(servers, textkit_env):
    _, pool = servers
    status, reply, _ = await post(pool.url + "/allocate", {"image": textkit_env.key})
    assert status == 200, reply
    yield reply
    await post(pool.url + "/close", {"lease_id": reply["lease_id"]})


def _rss_kib(pid: int) -> dict[str, int]:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return {k: int(fields[k].split()[0]) for k in ("VmRSS", "VmHWM")}


class Peak:
    """The growth of a process's peak RSS over what it used when the block began, in MiB."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.growth = 0.0

    def __enter__(self) -> Peak:
        Path(f"/proc/{self.pid}/clear_refs").write_text("5")  # VmHWM := the current RSS
        self.base = _rss_kib(self.pid)["VmRSS"]
        return self

    def __exit__(self, *exc: object) -> None:
        self.growth = (_rss_kib(self.pid)["VmHWM"] - self.base) / 1024


class Streamed:
    """A body of ``head`` + ``size`` bytes of base64 + ``tail``, made as it is sent; counts what was sent."""

    def __init__(self, head: bytes, size: int, tail: bytes = b'"}') -> None:
        self.head, self.size, self.tail = head, size, tail
        self.sent = 0

    @property
    def length(self) -> int:
        return len(self.head) + self.size + len(self.tail)

    async def chunks(self) -> AsyncIterator[bytes]:
        for part in (self.head, *([CHUNK] * (self.size // len(CHUNK))), self.tail):
            self.sent += len(part)
            yield part


async def _send(url: str, body: Streamed, *, declare_length: bool) -> tuple[int, dict]:
    headers = {"Content-Type": "application/json"}
    if declare_length:
        headers["Content-Length"] = str(body.length)
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, data=body.chunks(), headers=headers, timeout=aiohttp.ClientTimeout(120)) as resp,
    ):
        return resp.status, json.loads(await resp.read())


def _write_head(**ids: str) -> bytes:
    return json.dumps({**ids, "path": "big.bin", "data_b64": ""})[:-2].encode()  # ends inside data_b64


@pytest.mark.parametrize("path", ["/container/write_file", "/container/exec"])
async def test_a_150mb_chunked_body_to_the_exec_server_stops_at_its_cap(servers, path):
    node, _ = servers
    body = Streamed(_write_head(container_id="none"), 150 * MIB)
    with Peak(node.proc.pid) as peak:
        status, reply = await _send(node.url + path, body, declare_length=False)
    assert status == 413 and reply["error"]["kind"] == "too_large", reply
    assert body.sent > CHUNKED_MAX, "control: the server was sent more than the cap before it refused"
    assert peak.growth < BOUND_MIB, f"exec server peak +{peak.growth:.0f} MiB for a 150 MB chunked body"


async def test_a_120mb_write_file_is_refused_before_it_is_read(servers, lease):
    node, pool = servers
    cap = BODY_CAPS[FileWriteRequest]
    targets = [
        (node, "/container/write_file", {"container_id": lease["container_id"]}),
        (pool, "/write_file", {"lease_id": lease["lease_id"]}),
    ]
    for server, path, ids in targets:
        body = Streamed(_write_head(**ids), 120 * 1000 * 1000)
        assert body.length > cap, "control: the declared length is over the cap"
        with Peak(server.proc.pid) as peak:
            status, reply = await _send(server.url + path, body, declare_length=True)
        assert status == 413 and reply["error"]["kind"] == "too_large", reply
        assert peak.growth < BOUND_MIB, f"{path}: peak +{peak.growth:.0f} MiB for a 120 MB write_file"


async def test_a_150mb_chunked_body_to_the_pool_stops_at_its_cap(servers, lease):
    _, pool = servers
    for path in ("/write_file", "/exec", "/evaluate"):
        body = Streamed(_write_head(lease_id=lease["lease_id"]), 150 * MIB)
        with Peak(pool.proc.pid) as peak:
            status, reply = await _send(pool.url + path, body, declare_length=False)
        assert status == 413 and reply["error"]["kind"] == "too_large", (path, reply)
        assert body.sent > CHUNKED_MAX, "control: the server was sent more than the cap before it refused"
        assert peak.growth < BOUND_MIB, f"pool {path}: peak +{peak.growth:.0f} MiB for a 150 MB chunked body"


async def test_control_a_large_legitimate_write_raises_the_peak(servers, lease):
    """The instrument sees buffering: a 40 MiB file (a 53 MiB body) through the pool is written whole."""
    node, pool = servers
    data = bytes(range(256)) * (40 * MIB // 256)
    body = json.dumps(
        {"lease_id": lease["lease_id"], "path": "big.bin", "data_b64": base64.b64encode(data).decode()}
    ).encode()
    with Peak(pool.proc.pid) as pool_peak, Peak(node.proc.pid) as node_peak:
        status, reply, _ = await post(pool.url + "/write_file", body, timeout=120)
    assert status == 200, reply
    _, size, _ = await post(pool.url + "/exec", {"lease_id": lease["lease_id"], "command": "wc -c < big.bin"})
    assert size["output"].strip() == str(len(data))
    assert pool_peak.growth > 40 and node_peak.growth > 40, (pool_peak.growth, node_peak.growth)
