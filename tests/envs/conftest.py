"""The loopback package index that uv and pip install from in the env-build tests."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
from tests.envs.index import Index


@pytest.fixture
def index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Index]:
    served = Index(tmp_path / "wheels")
    server = ThreadingHTTPServer(("127.0.0.1", 0), served.handler())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("UV_INDEX_URL", f"http://127.0.0.1:{server.server_port}/simple")
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{server.server_port}/simple")  # the pip fallback
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.delenv("UV_FIND_LINKS", raising=False)
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    yield served
    server.shutdown()
    thread.join()
