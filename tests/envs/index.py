"""A real package index on loopback (PEP 691 JSON with PEP 700 upload times) for dated-resolution tests."""

from __future__ import annotations

import hashlib
import json
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from tests.envs.helpers import make_wheel


class Index:
    """Wheels with upload times, served as a simple index (JSON) on 127.0.0.1."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files: dict[str, list[dict[str, object]]] = {}

    def add(
        self,
        name: str,
        version: str,
        uploaded: str,
        requires: tuple[str, ...] = (),
        tag: str = "py3-none-any",
        source: str = "",
    ) -> None:
        self.serve(name, make_wheel(self.root, name, version, requires, tag, source), uploaded)

    def serve(self, name: str, dist: Path, uploaded: str) -> None:
        digest = hashlib.sha256(dist.read_bytes()).hexdigest()
        entry = {"filename": dist.name, "url": f"/files/{dist.name}", "hashes": {"sha256": digest}}
        self.files.setdefault(name, []).append({**entry, "upload-time": uploaded})

    def handler(self) -> type[BaseHTTPRequestHandler]:
        index = self

        class Handler(BaseHTTPRequestHandler):
            def do_HEAD(self) -> None:
                self.answer(body=False)

            def do_GET(self) -> None:
                self.answer(body=True)

            def answer(self, *, body: bool) -> None:
                parts = [p for p in self.path.split("/") if p]
                if len(parts) == 2 and parts[0] == "simple" and parts[1] in index.files:
                    data = json.dumps(
                        {"meta": {"api-version": "1.1"}, "name": parts[1], "files": index.files[parts[1]]}
                    ).encode()
                    kind = "application/vnd.pypi.simple.v1+json"
                elif len(parts) == 2 and parts[0] == "files" and (index.root / parts[1]).is_file():
                    data, kind = (index.root / parts[1]).read_bytes(), "application/octet-stream"
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if body:
                    self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        return Handler
