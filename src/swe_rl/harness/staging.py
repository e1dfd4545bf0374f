"""Putting small grading files into a sandbox without a round trip of their own."""

from __future__ import annotations

import base64
import posixpath
import shlex

from swe_rl.sandbox.base import Sandbox

INLINE_BYTES = 48 * 1024  # under one argv string's limit (128 KiB) once in base64


async def stage(box: Sandbox, files: dict[str, bytes]) -> str:
    """Small files travel inside the next command (a round trip less each, which a docker exec feels);
    larger ones are written now. Returns the shell that writes them, silent when it works: run it first
    in that next command."""
    if sum(len(data) for data in files.values()) > INLINE_BYTES:
        for path, data in files.items():
            await box.write_file(path, data)
        return ""
    return "".join(
        f"mkdir -p {shlex.quote(posixpath.dirname(path) or '.')} && "
        f"printf %s {base64.b64encode(data).decode()} | base64 -d > {shlex.quote(path)}\n"
        for path, data in files.items()
    )
