"""The local backend: a temp copy of the environment on the host. For development only.

It isolates nothing: commands run as the calling user on the host, with the host's network and
files. Absolute paths ``/testbed/...`` and ``/tmp/...`` given to read_file/write_file/cwd are mapped
into the sandbox's own directories; paths inside command text are not.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import shutil
import signal
import tempfile
import time
import uuid
from pathlib import Path
from typing import Self

from swe_rl.errors import SandboxError
from swe_rl.sandbox._output import CappedBuffer
from swe_rl.sandbox.base import TESTBED, EnvSpec, ExecResult, Limits
from swe_rl.sandbox.shell import base_environment, diff_command

_log = logging.getLogger(__name__)
_WARNED = False


class LocalSandbox:
    """A copy of the env's testbed in a temp dir; each exec is a fresh ``bash -c`` process group."""

    def __init__(self, env: EnvSpec, limits: Limits, root: Path) -> None:
        self.id = f"local-{uuid.uuid4().hex[:12]}"
        self.env = env
        self.limits = limits
        self.root = root
        self._closed = False
        self._pythonpath = ""

    @classmethod
    async def start(cls, env: EnvSpec, limits: Limits) -> LocalSandbox:
        root = Path(tempfile.mkdtemp(prefix="swe-rl-local-"))
        box = cls(env, limits, root)
        try:
            await asyncio.to_thread(box._materialise)
        except OSError as exc:
            shutil.rmtree(root, ignore_errors=True)
            raise SandboxError(f"cannot copy env {env.key} into {root}: {exc}") from exc
        return box

    def _materialise(self) -> None:
        shutil.copytree(self.env.testbed, self.root / "testbed", symlinks=True)
        (self.root / "tmp").mkdir()
        self._pythonpath = editable_paths(self.env, self.root / "testbed")

    def _host_path(self, path: str) -> Path:
        for prefix, sub in ((self.env.workdir, "testbed"), (TESTBED, "testbed"), ("/tmp", "tmp")):
            if path == prefix or path.startswith(prefix + "/"):
                return self.root / sub / path[len(prefix) :].lstrip("/")
        return Path(path) if os.path.isabs(path) else self.root / "testbed" / path

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxError(f"sandbox {self.id} is closed")

    async def exec(
        self, command: str, *, timeout: float, cwd: str | None = None, env: dict[str, str] | None = None
    ) -> ExecResult:
        self._check_open()
        environ = base_environment(self.env, home=str(self.root / "tmp"), tmpdir=str(self.root / "tmp"))
        if self._pythonpath:
            environ["PYTHONPATH"] = self._pythonpath
        environ.update(env or {})
        workdir = self._host_path(cwd or self.env.workdir)
        started = time.monotonic()
        try:
            proc = await asyncio.create_subprocess_exec(
                "bash",
                "-c",
                command,
                cwd=workdir,
                env=environ,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            return ExecResult(
                returncode=127,
                output=f"cannot start command in {cwd}: {exc}\n",
                duration=time.monotonic() - started,
            )
        buf = CappedBuffer(self.limits.output_bytes)
        timed_out = False
        try:
            await asyncio.wait_for(_pump(proc, buf), timeout)
        except TimeoutError:
            timed_out = True
        finally:
            # what is left of the group once the command exited (or at the timeout); the output's end is
            # not the command's, which may close stdout and go on (coreutils do, in an exit handler)
            _kill_group(proc.pid)
        returncode = await proc.wait()
        return buf.result(returncode, timed_out=timed_out, started=started)

    async def read_file(self, path: str) -> bytes:
        self._check_open()
        return await asyncio.to_thread(self._host_path(path).read_bytes)

    async def write_file(self, path: str, data: bytes) -> None:
        self._check_open()
        target = self._host_path(path)

        def write() -> None:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)

        await asyncio.to_thread(write)

    async def diff(self) -> str:
        result = await self.exec(diff_command(self.env.base_commit), timeout=120)
        if result.returncode != 0:
            raise SandboxError(f"git diff failed in {self.id}: {result.output[-2000:]}")
        return result.output

    async def reset(self) -> None:
        self._check_open()
        await asyncio.to_thread(shutil.rmtree, self.root / "testbed")
        await asyncio.to_thread(shutil.rmtree, self.root / "tmp")
        await asyncio.to_thread(self._materialise)

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            await asyncio.to_thread(shutil.rmtree, self.root, True)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def editable_paths(env: EnvSpec, copy: Path) -> str:
    """PYTHONPATH that sends the env's editable installs (recorded at ``/testbed``) to this copy instead.

    The other backends show the repository at ``/testbed``; the local one cannot, so the directories that
    .pth files and PEP 660 finders point into are put in front of site-packages.
    """
    found: list[str] = []
    if env.venv is None:
        return ""
    for site in env.venv.glob("lib/python*/site-packages"):
        texts = [
            p.read_text(errors="replace") for p in [*site.glob("*.pth"), *site.glob("__editable__*finder.py")]
        ]
        for text in texts:
            for match in re.finditer(rf"{re.escape(env.workdir)}(/[^\s'\"]*)?", text):
                sub = (match.group(1) or "").rstrip("/")
                target = copy / sub.lstrip("/")
                entry = str(
                    target if target.is_dir() and not (target / "__init__.py").exists() else target.parent
                )
                if entry not in found:
                    found.append(entry)
    return ":".join(found)


async def _pump(proc: asyncio.subprocess.Process, buf: CappedBuffer) -> None:
    """Read the command's output to its end, then wait for the command."""
    assert proc.stdout is not None
    while chunk := await proc.stdout.read(65536):
        buf.feed(chunk)
    await proc.wait()


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


class LocalFactory:
    """Factory of :class:`LocalSandbox`. Warns once per process that nothing is isolated."""

    backend = "local"

    async def create(self, env: EnvSpec, limits: Limits | None = None) -> LocalSandbox:
        global _WARNED
        if not _WARNED:
            _WARNED = True
            _log.warning("the local sandbox backend isolates nothing: commands run on the host as this user")
        return await LocalSandbox.start(env, limits or Limits())
