"""The docker backend: one container per sandbox, over the Docker Engine API (the ``docker`` SDK).

Containers run an official evaluation image when the env names one (``EnvSpec.image``, e.g.
``swebench/sweb.eval.x86_64.<id>:latest``), else a tiny base image that swe-rl imports itself (a minimal
/etc and the merged-/usr symlinks; the host's /usr, the env's interpreter prefix and venv are bound
read-only, as in the ns backend) with the testbed copied in. Every container is labelled, limited
(memory, pids, CPU, no network, all capabilities dropped, no-new-privileges, a size-limited /tmp, the
seccomp profile of :func:`.seccomp.docker_profile` in place of the engine's default), and always
removed; a reaper removes leftovers of dead owners at start-up (containers and testbed volumes).

The testbed is bounded like the ns backend's writable layer, in bytes and in inodes: the container's own
writable layer (overlay2 on the engine's disk) has no inode bound without XFS project quotas, and a
command made 140,000 files there. So the workdir is a volume of its own, a tmpfs (the local driver's)
of the testbed's own size and file count plus ``Limits.disk_mb`` and ``Limits.inodes`` for what the
commands write (:func:`_bounded_testbed`), filled when the container has started: with the env's testbed
(``put_archive``), or with the image's (the engine copies an image's content into an empty volume when
a container using it is created: a second container, created and removed, does it while the volume is
mounted, since a copy into an unmounted tmpfs volume is lost). An image's testbed size is read once per
image (its tar, streamed). A failed call asks the engine whether it
still answers: if not, BackendLostError (the engine is gone); if so, SandboxError (this
container failed, e.g. its commands stopped it).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import shlex
import socket
import tarfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self

from swe_rl.errors import (
    BackendLostError,
    MissingExtraError,
    OutputLimitError,
    SandboxError,
    SandboxUnavailableError,
)
from swe_rl.sandbox._output import CappedBuffer
from swe_rl.sandbox._proc import boot_ticks, kill_started_since
from swe_rl.sandbox.base import EnvSpec, ExecResult, Limits
from swe_rl.sandbox.docker_testbed import bounded_testbed, image_testbed_usage, tar_usage, testbed_tar
from swe_rl.sandbox.runtime import HOST_ETC, runtime_etc
from swe_rl.sandbox.seccomp import docker_profile
from swe_rl.sandbox.shell import FILE_CAP, ShellFileOps, base_environment

LABEL = "swe-rl.sandbox"
OWNER_LABEL = "swe-rl.owner"
BASE_IMAGE = "swe-rl/base:1"
_PID1 = "trap 'exit 0' TERM; while true; do sleep 3600 & wait $!; done"


def _client() -> Any:
    try:
        import docker
    except ImportError:
        raise MissingExtraError("docker", "docker", "the docker sandbox backend") from None
    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except Exception as exc:  # docker raises DockerException, requests errors, FileNotFoundError...
        raise SandboxUnavailableError(f"no Docker engine reachable: {type(exc).__name__}: {exc}") from None
    return client


def docker_client() -> Any:
    """A Docker Engine API client (the docker extra), or SandboxUnavailableError."""
    return _client()


def _owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _base_image_tar() -> bytes:
    """The rootfs of the base image: swe-rl's minimal /etc and the merged-/usr symlinks."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            host = Path("/") / name
            if host.is_symlink():
                info = tarfile.TarInfo(name)
                info.type, info.linkname = tarfile.SYMTYPE, os.readlink(host)
                tar.addfile(info)
        for directory in ("usr", "tmp", "root", "testbed", "proc", "sys", "dev", "run", "etc"):
            info = tarfile.TarInfo(directory)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if directory == "tmp" else 0o755
            tar.addfile(info)
        etc = runtime_etc()
        for path in sorted(etc.iterdir()):
            if path.name.startswith(".") or path.name in HOST_ETC:
                continue
            tar.add(path, arcname=f"etc/{path.name}")
    return buf.getvalue()


def reap_leftovers(client: Any) -> int:
    """Remove labelled containers whose owning process on this host is gone."""
    host = socket.gethostname()
    removed = 0
    # ignore_removed: another process's container may go between the listing and its inspection
    for container in client.containers.list(all=True, filters={"label": LABEL}, ignore_removed=True):
        owner = container.labels.get(OWNER_LABEL, "")
        name, _, pid = owner.partition(":")
        if name == host and pid.isdigit() and Path(f"/proc/{pid}").exists() and int(pid) != 0:
            continue
        with contextlib.suppress(Exception):
            container.remove(force=True)
            removed += 1
    return removed


_SHM = f"size=64m,nr_inodes={Limits(disk_mb=64).inodes}"


def reap_volumes(client: Any) -> int:
    """Remove labelled testbed volumes whose owning process on this host is gone (after their containers)."""
    host = socket.gethostname()
    removed = 0
    for volume in client.volumes.list(filters={"label": LABEL}):
        name, _, pid = (volume.attrs.get("Labels") or {}).get(OWNER_LABEL, "").partition(":")
        if name == host and pid.isdigit() and Path(f"/proc/{pid}").exists() and int(pid) != 0:
            continue
        with contextlib.suppress(Exception):
            volume.remove(force=True)
            removed += 1
    return removed


class DockerSandbox(ShellFileOps):
    """A container serving the Sandbox protocol. Each exec is a ``docker exec`` of ``bash -c``."""

    def __init__(
        self,
        client: Any,
        env: EnvSpec,
        limits: Limits,
        usage_of_image: Callable[[str, str], tuple[int, int]] | None = None,
    ) -> None:
        self.id = f"docker-{uuid.uuid4().hex[:12]}"
        self.env = env
        self.limits = limits
        self._client = client
        self._container: Any = None
        self._volume: Any = None  # the testbed's tmpfs (module docstring)
        self._closed = False
        self._usage_of_image = usage_of_image

    async def _start(self) -> None:
        try:
            self._container = await asyncio.to_thread(self._create)
        except SandboxError:
            raise
        except Exception as exc:
            await self._remove()
            raise await self._failure(f"cannot start container for {self.id}", exc) from exc

    def _create(self) -> Any:
        import docker.types

        env, limits = self.env, self.limits
        image, testbed = env.image, None
        if image is None:
            testbed = testbed_tar(env.testbed, env.workdir)
            with tarfile.open(fileobj=io.BytesIO(testbed)) as tar:
                usage = tar_usage(tar)
        else:
            usage = (
                self._usage_of_image or image_testbed_usage(self._client, {LABEL: "1", OWNER_LABEL: _owner()})
            )(image, env.workdir)
        self._volume = self._client.volumes.create(
            driver="local",
            driver_opts=bounded_testbed(usage, limits),
            labels={LABEL: "1", OWNER_LABEL: _owner()},
        )
        testbed_mount = docker.types.Mount(env.workdir, self._volume.name, type="volume")
        image, binds = (BASE_IMAGE, _host_binds(env)) if image is None else (image, {})
        container = self._client.containers.create(
            # bash as pid 1 reaps orphaned processes (docker's init needs /sbin, which is the host's here)
            image,
            command=["bash", "-c", _PID1],
            name=self.id,
            labels={LABEL: "1", OWNER_LABEL: _owner()},
            working_dir=env.workdir,
            environment=base_environment(env, home="/root"),
            volumes=binds,
            mounts=[testbed_mount],
            network_mode="bridge" if limits.network else "none",
            mem_limit=f"{limits.memory_mb}m",
            memswap_limit=f"{limits.memory_mb}m",
            pids_limit=limits.pids,
            nano_cpus=int(limits.cpus * 1e9),
            cap_drop=["ALL"],
            # the profile's JSON itself: the engine reads no file for an API client
            security_opt=["no-new-privileges", f"seccomp={docker_profile()}"],
            # exec: Docker's tmpfs is noexec unless told, and tests run what they build there (Conan's
            # test client builds and runs a package in a temporary folder: exit 126); ns's /tmp allows it
            tmpfs={"/tmp": f"size={limits.disk_mb}m,nr_inodes={limits.inodes},exec", "/dev/shm": _SHM},
        )
        self._container = container
        container.start()  # its testbed volume is mounted (on the engine's host) from now until it is removed
        if testbed is not None:
            if not container.put_archive("/", testbed):
                raise OSError(f"the engine did not copy the testbed into {self.id}")  # removed (_start)
        else:  # the engine copies the image's testbed into the empty, mounted volume as it creates this one
            labels = {LABEL: "1", OWNER_LABEL: _owner()}
            filler = self._client.containers.create(
                image, command=["true"], labels=labels, mounts=[testbed_mount], network_mode="none"
            )
            filler.remove(force=True)
        return container

    async def _remove(self) -> None:
        container, self._container = self._container, None
        volume, self._volume = self._volume, None
        if container is not None:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(container.remove, force=True)
        if volume is not None:  # after its container: a volume in use cannot be removed
            with contextlib.suppress(Exception):
                await asyncio.to_thread(volume.remove, force=True)

    async def _failure(self, what: str, exc: Exception) -> SandboxError:
        """Where a failed engine call failed: the engine (it no longer answers) or this container."""
        cause = f"{type(exc).__name__}: {exc}"
        try:
            await asyncio.to_thread(self._client.ping)
        except Exception as lost:  # requests' ConnectionError, docker's APIError, a timeout...
            return BackendLostError(
                f"{what}: the Docker engine does not answer ({type(lost).__name__}: {lost}); {cause}"
            )
        return SandboxError(f"{what}: {cause}")

    def _check_open(self) -> Any:
        if self._closed:
            raise SandboxError(f"sandbox {self.id} is closed")
        if self._container is None:
            raise SandboxError(f"sandbox {self.id} has no container")
        return self._container

    async def _run(
        self, command: str, *, timeout: float, cwd: str | None, env: dict[str, str] | None, cap: int
    ) -> ExecResult:
        container = self._check_open()
        # GNU timeout runs the command in its own process group and kills the whole group.
        wrapped = (
            f"exec timeout -s KILL {max(timeout, 0.01):.3f} bash -c {shlex.quote(command)} </dev/null 2>&1"
        )
        started, since = time.monotonic(), boot_ticks()
        buf = CappedBuffer(cap)
        try:
            code = await asyncio.to_thread(self._exec_blocking, container, wrapped, cwd, env, buf, timeout)
        except SandboxError:
            raise
        except Exception as exc:
            raise await self._failure(f"docker exec failed in {self.id}", exc) from exc
        timed_out = code == 137 and time.monotonic() - started >= timeout * 0.98
        if timed_out:  # a setsid child left the process group that timeout killed
            await asyncio.to_thread(_kill_started_since, container, since)
        return buf.result(code, timed_out=timed_out, started=started)

    def _exec_blocking(
        self,
        container: Any,
        wrapped: str,
        cwd: str | None,
        env: dict[str, str] | None,
        buf: CappedBuffer,
        timeout: float,
    ) -> int:
        api = self._client.api
        created = api.exec_create(
            container.id,
            ["bash", "-c", wrapped],
            workdir=cwd or self.env.workdir,
            environment=env or None,
            stdout=True,
            stderr=True,
        )
        for chunk in api.exec_start(created["Id"], stream=True, demux=False):
            buf.feed(chunk)
        info = api.exec_inspect(created["Id"])
        if info.get("ExitCode") is None:
            raise SandboxError(f"docker exec in {self.id} ended without an exit code")
        return int(info["ExitCode"])

    async def write_file(self, path: str, data: bytes) -> None:
        """Stage the file through the container's own layer, then move it (put_archive cannot reach tmpfs)."""
        container = self._check_open()
        if len(data) > FILE_CAP:
            raise OutputLimitError(f"{self.id}: refusing to write {len(data)} bytes (limit {FILE_CAP})")
        staged = f".swe-rl-stage/{uuid.uuid4().hex}"
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo(staged)
            info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
            tar.addfile(info, io.BytesIO(data))
        try:
            ok = await asyncio.to_thread(container.put_archive, "/", buf.getvalue())
        except Exception as exc:
            raise await self._failure(f"cannot copy into {self.id}", exc) from exc
        quoted = shlex.quote(path)
        moved = await self._run(
            f'mkdir -p -- "$(dirname -- {quoted})" && mv -f /{staged} {quoted}',
            timeout=60,
            cwd=None,
            env=None,
            cap=4096,
        )
        if not ok or moved.returncode != 0:
            raise OSError(f"{self.id}: cannot write {path}: {moved.output.strip()}")

    async def reset(self) -> None:
        """A new container of the same env under the same id (docker has no cheaper way back)."""
        self._check_open()
        await self._remove()
        await self._start()

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            await self._remove()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _host_binds(env: EnvSpec) -> dict[str, dict[str, str]]:
    """An env without an image runs on the base image with the host's /usr, a minimal /etc, and the env's
    interpreter prefix and venv, read-only."""
    binds = {"/usr": {"bind": "/usr", "mode": "ro"}}
    for name in HOST_ETC:
        if (Path("/etc") / name).exists():
            binds[f"/etc/{name}"] = {"bind": f"/etc/{name}", "mode": "ro"}
    for path in (env.python_prefix, env.venv):
        if path is not None and not path.is_relative_to("/usr"):
            # resolved: a packed venv's path is a link into its image (envs/store/packing.py); it is bound at its own
            # path, where its scripts' shebangs point
            binds[os.path.realpath(path)] = {"bind": str(path), "mode": "ro"}
    return binds


def _kill_started_since(container: Any, since: int) -> None:
    """SIGKILL every process of the container (seen from the host) started at or after ``since``."""
    with contextlib.suppress(Exception):
        container.reload()
    init = int(container.attrs.get("State", {}).get("Pid") or 0)
    try:
        pid_ns = os.readlink(f"/proc/{init}/ns/pid")
    except OSError:  # no init (0) or it is gone: nothing of the container left to kill
        return
    kill_started_since((pid for pid in _pids() if pid != init and _pid_ns(pid) == pid_ns), since)


def _pids() -> list[int]:
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]


def _pid_ns(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


class DockerFactory:
    """Creates :class:`DockerSandbox` es; imports the base image and reaps leftovers on first use."""

    backend = "docker"

    def __init__(self) -> None:
        self._client = _client()
        reap_leftovers(self._client)
        reap_volumes(self._client)
        self._ensure_base_image()
        self._usage_of_image = image_testbed_usage(self._client, {LABEL: "1", OWNER_LABEL: _owner()})

    def _ensure_base_image(self) -> None:
        import docker.errors

        try:
            self._client.images.get(BASE_IMAGE)
        except docker.errors.ImageNotFound:
            repo, _, tag = BASE_IMAGE.partition(":")
            self._client.api.import_image_from_data(_base_image_tar(), repository=repo, tag=tag)

    async def create(self, env: EnvSpec, limits: Limits | None = None) -> DockerSandbox:
        box = DockerSandbox(self._client, env, limits or Limits(), self._usage_of_image)
        await box._start()
        return box
