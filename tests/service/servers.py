"""Start real exec and pool servers as subprocesses on loopback ports, for tests."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    def __init__(self, args: list[str], port: int, env: dict[str, str] | None = None) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.args = args
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None
        # a file of its own: a port is free again later, and /tmp's file of that name may be another user's
        fd, log = tempfile.mkstemp(prefix=f"swe-rl-test-server-{port}-", suffix=".log")
        os.close(fd)
        self.log = Path(log)

    def start(self, timeout: float = 60.0) -> Server:
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "swe_rl.cli.app", *self.args, "--port", str(self.port)],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=1) as resp:
                    if resp.status == 200:
                        return self
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"server did not come up: {self.log.read_text()[-2000:]}")

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()

    def get(self, path: str) -> dict:
        with urllib.request.urlopen(self.url + path, timeout=10) as resp:
            return dict(json.loads(resp.read()))


class Scrape:
    """A server's ``GET /metrics``, read by prometheus_client's own parser (as a Prometheus server reads it)."""

    def __init__(self, url: str) -> None:
        from prometheus_client.parser import text_string_to_metric_families

        with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
            self.content_type = str(resp.headers["Content-Type"])
            text = resp.read().decode()
        self.families = {family.name: family for family in text_string_to_metric_families(text)}

    def value(self, sample: str, **labels: str) -> float | None:
        """The value of the sample named ``sample`` (``<family>_total``, ``<family>_count``, ...) with exactly
        ``labels``; None when the server exposes no such sample."""
        for family in self.families.values():
            for found in family.samples:
                if found.name == sample and found.labels == labels:
                    return float(found.value)
        return None


def exec_server(port: int | None = None, *extra: str, backend: str = "ns") -> Server:
    return Server(["serve", "exec", "--backend", backend, *extra], port or free_port())


async def post(
    url: str, body: object, *, headers: dict | None = None, timeout: float = 60
) -> tuple[int, Any, Any]:
    """POST ``body`` (JSON-encoded unless bytes or str) and return (status, parsed JSON reply, headers)."""
    import aiohttp

    async with (
        aiohttp.ClientSession() as session,
        session.post(
            url,
            data=body if isinstance(body, (bytes, str)) else json.dumps(body),
            headers={"Content-Type": "application/json", **(headers or {})},
            timeout=aiohttp.ClientTimeout(total=timeout),
        ) as resp,
    ):
        return resp.status, json.loads(await resp.read()), resp.headers


def pool_server(nodes: list[Server], *extra: str, env: dict[str, str] | None = None) -> Server:
    return Server(
        [
            "serve",
            "pool",
            "--nodes",
            ",".join(n.url for n in nodes),
            "--health-period",
            "0.5",
            "--reap-period",
            "0.3",
            *extra,
        ],
        free_port(),
        env,
    )


def serve_in_thread(server: Any) -> tuple[threading.Thread, asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    ready = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(server.__aenter__())
        ready.set()
        loop.run_forever()
        loop.run_until_complete(server.__aexit__(None, None, None))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    ready.wait(10)
    return thread, loop


class TcpProxy:
    """A loopback TCP forwarder in front of ``target_port``: counts connections and bytes each way, and can
    drop every live connection (a network fault between a client and a real server)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self.connections = 0
        self.bytes_up = 0  # client -> server
        self.bytes_down = 0  # server -> client
        self._server: asyncio.AbstractServer | None = None
        self._live: set[asyncio.StreamWriter] = set()
        self._handlers: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> TcpProxy:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.drop()
        if self._handlers:  # let them see the aborted sockets and finish, rather than be cancelled
            await asyncio.wait(self._handlers, timeout=5)
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def drop(self) -> None:
        for writer in list(self._live):
            writer.transport.abort()
        self._live.clear()

    async def _handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        self.connections += 1
        handler = asyncio.current_task()
        assert handler is not None
        self._handlers.add(handler)
        handler.add_done_callback(self._handlers.discard)
        try:
            server_r, server_w = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            client_w.transport.abort()
            return
        self._live |= {client_w, server_w}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, up: bool) -> None:
            try:
                while chunk := await src.read(65536):
                    if up:
                        self.bytes_up += len(chunk)
                    else:
                        self.bytes_down += len(chunk)
                    dst.write(chunk)
                    await dst.drain()
            except (OSError, asyncio.IncompleteReadError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(client_r, server_w, True), pipe(server_r, client_w, False))
        self._live -= {client_w, server_w}
