"""The sandbox protocol every backend implements, and the models it exchanges."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Protocol, Self, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

TESTBED = "/testbed"


class ExecResult(BaseModel):
    """What one command did. A non-zero exit or a timeout is data, not an exception."""

    model_config = ConfigDict(frozen=True)

    returncode: int = Field(description="Exit status; -9 style negative values or 124 on timeout.")
    output: str = Field(description="stdout and stderr interleaved, capped at Limits.output_bytes.")
    timed_out: bool = Field(default=False, description="The command was killed at its timeout.")
    duration: float = Field(default=0.0, description="Wall seconds from start to exit.")
    output_bytes: int = Field(default=0, description="Bytes the command wrote in all, before any cap.")

    @property
    def truncated(self) -> bool:
        return self.output_bytes > len(self.output.encode("utf-8", "surrogateescape"))


class Limits(BaseModel):
    """Resource limits of one sandbox."""

    model_config = ConfigDict(frozen=True)

    memory_mb: int = Field(default=4096, ge=64, description="Memory (RSS + page cache) of the whole tree.")
    pids: int = Field(default=512, ge=16, description="Processes and threads alive at once.")
    cpus: float = Field(default=2.0, gt=0, description="CPU bandwidth in cores.")
    output_bytes: int = Field(
        default=2_000_000, ge=1024, description="Output kept per exec; the rest is counted."
    )
    disk_mb: int = Field(default=2048, ge=16, description="Size of the writable layer.")
    network: bool = Field(default=False, description="Loopback inside the sandbox only when false.")

    @property
    def inodes(self) -> int:
        """Files and directories the writable space holds at most (its tmpfs's ``nr_inodes``): one per 16 KiB
        of ``disk_mb``, the ratio mke2fs gives ext4 by default; 131,072 for the default 2 GiB. An empty file
        costs no space but ~1 KiB of kernel memory (its inode and dentry), charged to the sandbox's memory:
        without a bound (the kernel's default is one inode per two pages of RAM), 300,000 empty files took
        ~275 MiB of the memory limit and nothing of the disk's. Past it, creating a file fails with ENOSPC,
        as on a full disk."""
        return self.disk_mb * 1024 * 1024 // 16384


class EnvSpec(BaseModel):
    """A built environment: what a backend needs to start a sandbox of it."""

    model_config = ConfigDict(frozen=True)

    key: str = Field(description="Content hash of the environment.")
    repo: str = Field(description="'owner/name' of the repository.")
    base_commit: str = Field(description="Commit checked out in the testbed; diffs are taken against it.")
    testbed: Path = Field(description="Host directory with the repository at base_commit.")
    venv: Path | None = Field(default=None, description="Host directory of the env's virtualenv.")
    python: Path | None = Field(default=None, description="The interpreter the venv is based on.")
    python_prefix: Path | None = Field(default=None, description="Install prefix of that interpreter.")
    image: str | None = Field(default=None, description="Container image, for the docker backend.")
    rootfs: Path | None = Field(
        default=None,
        description="Host directory used as the sandbox's root instead of the host's /usr (an env imported "
        "from an image); venv then names a path inside it.",
    )
    workdir: str = Field(default=TESTBED, description="Where the repository appears inside the sandbox.")

    def runtime(self) -> tuple[object, ...]:
        """All a sandbox is started with but the testbed: envs that share it differ only in the tree at
        ``workdir`` (the tasks synthesized from one library), and a sandbox of one can be reset to another
        (``NsSandbox.reset(env=...)``)."""
        return (self.venv, self.python, self.python_prefix, self.rootfs, self.image, self.workdir)

    def path_entries(self) -> list[str]:
        """PATH entries the env adds in front of the system's."""
        return [str(self.venv / "bin")] if self.venv else []


@runtime_checkable
class Sandbox(Protocol):
    """An isolated copy of an environment that runs shell commands.

    Every ``exec`` runs in a fresh subshell (cwd and env from the call, default cwd the testbed,
    stdin /dev/null): a ``cd`` or ``export`` does not leak into the next command.
    """

    id: str

    async def exec(
        self, command: str, *, timeout: float, cwd: str | None = None, env: dict[str, str] | None = None
    ) -> ExecResult: ...

    async def read_file(self, path: str) -> bytes: ...

    async def write_file(self, path: str, data: bytes) -> None: ...

    async def diff(self) -> str: ...

    async def reset(self) -> None: ...

    async def close(self) -> None: ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(self, *exc: object) -> None: ...


class HelperChannel(Protocol):
    """A private line channel to one process a sandbox keeps (sandbox/channel.py): nothing else in the
    sandbox can open it once :meth:`seal` ran, and every read has a deadline."""

    @property
    def paths(self) -> str:
        """What the helper opens, inside the sandbox, before :meth:`seal`."""
        ...

    def seal(self) -> None: ...

    def send(self, line: str) -> None: ...

    async def receive(self, timeout: float) -> str | None: ...

    def close(self) -> None: ...


@runtime_checkable
class KeepsProcesses(Protocol):
    """A sandbox whose reset in place can keep named processes running (harness/grade_many.py keeps a warm test
    runner), and what a caller may rely on:

    - ``reset(keep=pids)`` ends every other process of the sandbox (waited for), drops every file change,
      empties /tmp, /dev/shm and IPC, and puts the kept processes' scheduling and I/O priority back; a kept
      process whose resource limits a command changed is ended too. It restarts the sandbox instead where it
      cannot (``restart_reason`` then says why, and nothing was kept). A kept process itself is the caller's
      to quiesce before the reset: the reset cannot know what it holds (a warm runner is disarmed first);
    - ``reset(env=...)`` makes another env of the same runtime the pristine one;
    - ``process_state(pid)`` reads a process's state letter and start time from outside the sandbox;
    - ``open_channel()`` gives a :class:`HelperChannel` to a process the caller starts in it.
    """

    restart_reason: str | None

    async def reset(
        self, *, in_place: bool = True, keep: Collection[int] = (), env: EnvSpec | None = None
    ) -> None: ...

    async def process_state(self, pid: int) -> tuple[str, int] | None: ...

    async def open_channel(self) -> HelperChannel: ...


class SandboxFactory(Protocol):
    """Creates sandboxes of one backend."""

    backend: str

    async def create(self, env: EnvSpec, limits: Limits | None = None) -> Sandbox: ...
