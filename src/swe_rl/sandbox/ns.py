"""The ns backend: bubblewrap + overlayfs + cgroups. The default on Linux as root.

One sandbox = one ``bwrap`` process tree::

    python (this process) ── spawner helper (root; forks for us, see spawner.py)
                               └─ bwrap   joined the sandbox's cgroups and mounted a private tmpfs as
                                          root, then dropped to SANDBOX_UID: it runs unprivileged
                                    └─ bash      pid 1 of a new pid namespace; the persistent shell,
                                                 non-dumpable (an execute-only copy, identity.py)
                                         └─ ( command )   one subshell per exec, its own process group

Every namespace is unshared (net keeps only loopback unless Limits.network), uid 0 inside is the
unprivileged host uid SANDBOX_UID, all capabilities are dropped, user namespaces are disabled inside, a
seccomp filter denies the calls in :mod:`.seccomp`, and the root holds only the host's /usr, a minimal
/etc, the env's venv and interpreter prefix (read-only), and the testbed as an overlay whose upper
layer lives on a tmpfs of its own (a new one for each use: reset.py), mounted on the private tmpfs. When bwrap or this process dies, everything goes with it: no mount or
process outlives it.

The control channel is out of the commands' reach: the shell reads requests on its stdin and answers
each with the exit status; a command's stdin is /dev/null, its output a file of its own (a random name)
in ``/run/ctl``, host root's directory the sandbox can neither list nor create files in, read after the
status and removed: no forged status, no cut or mixed output. A kept helper's channel goes through it too.

``reset()`` works in place (reset.py): the same bwrap and shell over a new, empty overlay (of another env's
testbed, where asked), every other process ended, /tmp, /dev/shm and IPC emptied; else bwrap restarts.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import re
import secrets
import shlex
import time
import uuid
from collections.abc import AsyncIterator, Collection
from typing import Self

from swe_rl.errors import OutputLimitError, SandboxError, SandboxUnavailableError
from swe_rl.sandbox._output import CappedBuffer
from swe_rl.sandbox._proc import SpawnedProcess, boot_ticks, finish_in_thread, kill_started_since
from swe_rl.sandbox.base import EnvSpec, ExecResult, Limits
from swe_rl.sandbox.bwrap import MOUNTPOINT, ns_unavailable_reason, start_bwrap
from swe_rl.sandbox.cgroups import SandboxCgroup, reap_stale_cgroups
from swe_rl.sandbox.channel import FifoChannel
from swe_rl.sandbox.ctl_files import CTL, create_ctl_file, read_all, write_all
from swe_rl.sandbox.identity import own_testbed
from swe_rl.sandbox.reply import await_status
from swe_rl.sandbox.reset import lowerdir_misread, process_state, reset_in_place
from swe_rl.sandbox.shell import DIFF_TOO_LARGE, FILE_CAP, diff_command

START_TIMEOUT = 30.0
KILL_GRACE = 5.0
_STATUS = re.compile(rb"(\d{1,3})\n")


class NsSandbox:
    """A bubblewrap sandbox with a persistent shell. Create with :meth:`NsFactory.create`."""

    def __init__(self, env: EnvSpec, limits: Limits) -> None:
        self.id = f"ns-{uuid.uuid4().hex[:12]}"
        self.env = env
        self.limits = limits
        self._proc: SpawnedProcess | None = None
        self._ctl: int | None = None  # O_PATH fd of the sandbox's ctl directory, seen from the host
        self._cgroup: SandboxCgroup | None = None
        self._stderr_tail = b""
        self._stderr_task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._closed = False
        self._broken: str | None = None
        self.generation = 0  # resets so far (in place or not)
        self.restart_reason: str | None = None  # why the last reset restarted bwrap (None: it was in place)
        self._layer = 0  # the testbed overlay's number (reset.layer_dir)
        self._lower: str | None = None  # the overlay's testbed when not the one bwrap bound (reset(env=...))

    @property
    def bwrap_pid(self) -> int | None:
        """Host pid of the sandbox's bwrap process (a reset in place keeps it)."""
        return self._proc.pid if self._proc is not None else None

    async def process_state(self, pid: int) -> tuple[str, int] | None:
        """State letter and start time of the process ``pid`` (as the sandbox sees it), read from the host
        (reset.process_state: no command, no round trip); None when it is gone."""
        self._check_open()
        return process_state(self._cgroup, pid) if self._cgroup is not None else None

    async def open_channel(self) -> FifoChannel:
        """A private channel to a process this sandbox will keep (channel.py), through its ctl directory."""
        self._check_open()
        if self._ctl is None:
            raise SandboxError(f"sandbox {self.id} has died{self._died_detail()}")
        return FifoChannel(self._ctl)

    async def _start(self) -> None:
        try:
            cgroup = self._cgroup  # reset() keeps the cgroup: only its processes are replaced
            if cgroup is None:
                own = functools.partial(setattr, self, "_cgroup")
                made: SandboxCgroup = await finish_in_thread(SandboxCgroup, self.id, self.limits, adopt=own)
                cgroup = self._cgroup = made
            self._layer, self._lower = 0, None
            args = (self.id, self.env, self.limits, cgroup.procs_files)
            await self._attach(await finish_in_thread(start_bwrap, *args, adopt=self._attach))
            await self._greeted()
        except BaseException:  # a cancellation at any point too: all it made goes (finish_in_thread)
            await asyncio.shield(self._teardown())
            raise

    async def _attach(self, started: tuple[int, int, int, int]) -> None:
        self._proc = await SpawnedProcess.attach(*started)
        self._stderr_task = asyncio.ensure_future(self._drain_stderr())

    async def _greeted(self) -> None:
        assert self._proc is not None
        try:
            line = await asyncio.wait_for(self._proc.stdout.readline(), START_TIMEOUT)
            if line != b"ready\n":
                raise SandboxError(f"unexpected greeting {line[:80]!r}")
            # bwrap's own process stays in the spawner's mount namespace, where the tmpfs is
            ctl = f"/proc/{self._proc.pid}/root{MOUNTPOINT}/ctl"
            self._ctl = os.open(ctl, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        except (TimeoutError, SandboxError, OSError) as exc:
            await asyncio.sleep(0.01)  # let the drain task collect bwrap's message
            detail = self._stderr_tail.decode(errors="replace").strip()
            raise SandboxError(f"sandbox {self.id} did not start: {detail or exc}") from None

    async def _drain_stderr(self) -> None:
        assert self._proc is not None
        while chunk := await self._proc.stderr.read(65536):
            self._stderr_tail = (self._stderr_tail + chunk)[-4096:]

    async def _teardown(self, *, keep_cgroup: bool = False) -> None:
        proc, self._proc = self._proc, None
        if self._ctl is not None:
            os.close(self._ctl)
            self._ctl = None
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

    async def reset(
        self, *, in_place: bool = True, keep: Collection[int] = (), env: EnvSpec | None = None
    ) -> None:
        """Back to the pristine env, same id: in place when it can (reset.py: the same bwrap and shell, a
        new upper layer), else (or ``in_place=False``) a fresh bwrap; :attr:`restart_reason` says why.
        ``keep`` and ``env``: as :class:`.base.KeepsProcesses` says (``env`` of another runtime: ValueError)."""
        self._check_open()
        target = self.env if env is None else env
        if target.runtime() != self.env.runtime():
            raise ValueError(f"{self.id}: env {target.key} does not share {self.env.key}'s runtime")
        switch = target.testbed != self.env.testbed
        if switch:
            await asyncio.to_thread(own_testbed, target.testbed)
        async with self._lock:
            self.generation += 1
            lower = str(target.testbed) if switch else self._lower
            reason = await self._reset_in_place(keep, lower) if in_place else "a restart was asked for"
            self.env, self.restart_reason = target, reason
            if reason is None:
                self._lower = lower
                return
            await self._teardown(keep_cgroup=True)
            self._broken = None
            await self._start()

    async def _reset_in_place(self, keep: Collection[int] = (), lower: str | None = None) -> str | None:
        """None when done; else why not (the caller restarts bwrap, whatever state this left)."""
        proc, cgroup = self._proc, self._cgroup
        if self._broken:
            return f"the sandbox was unusable: {self._broken}"
        if lower is not None and (misread := lowerdir_misread(lower)):
            return misread
        if proc is None or cgroup is None or not proc.alive:
            return "bwrap had exited"
        try:
            layer = self.generation  # new in this tmpfs: a reset restarting bwrap starts again from 0
            # the new layer's upper is a new tmpfs of its own: the old one's capacity is never the next use's
            # to wait for (reset.py)
            workdir = self.env.workdir
            await reset_in_place(
                cgroup, proc, workdir, layer, keep, lower, old=self._layer, limits=self.limits
            )
            self._layer = layer
        except (OSError, SandboxError) as exc:
            return f"in-place reset failed: {exc}"
        return None

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

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxError(f"sandbox {self.id} is closed")

    async def exec(
        self, command: str, *, timeout: float, cwd: str | None = None, env: dict[str, str] | None = None
    ) -> ExecResult:
        if "\0" in command:
            self._check_open()
            return ExecResult(returncode=2, output="swe-rl: the command contains a NUL byte\n")
        exports = "".join(
            f"export {k}={shlex.quote(v)}\n" for k, v in (env or {}).items() if k.replace("_", "a").isalnum()
        )
        started = time.monotonic()
        async with self._command(f"{exports}{command}", timeout=timeout, cwd=cwd) as (status, out, timed_out):
            buf = CappedBuffer.from_file(out, self.limits.output_bytes)
        return buf.result(status, timed_out=timed_out, started=started)

    @contextlib.asynccontextmanager
    async def _command(
        self, command: str, *, timeout: float, cwd: str | None = None, stdin: bytes | None = None
    ) -> AsyncIterator[tuple[int, int, bool]]:
        """Run ``command``; yield its exit status, an fd of its output file and whether it timed out.
        ``stdin``: bytes the command reads on its stdin (passed as a file of the ctl directory)."""
        self._check_open()
        async with self._lock:
            proc, ctl = self._proc, self._ctl
            if self._broken:
                raise SandboxError(f"sandbox {self.id} is unusable: {self._broken}")
            if proc is None or ctl is None or not proc.alive:
                raise SandboxError(f"sandbox {self.id} has died{self._died_detail()}")
            names = [secrets.token_hex(16)]
            out = create_ctl_file(ctl, names[0], 0o622)
            try:
                if stdin is not None:
                    names.append(secrets.token_hex(16))
                    data = create_ctl_file(ctl, names[1], 0o644)
                    try:
                        await asyncio.to_thread(write_all, data, stdin)
                    finally:
                        os.close(data)
                    command = f"( {command}\n) < {CTL}/{names[1]}"
                snippet = f"cd -- {shlex.quote(cwd or self.env.workdir)} || exit 1\n{command}\n"
                status, timed_out = await self._send(proc, names[0], snippet, timeout)
                yield status, out, timed_out
            finally:
                os.close(out)
                for name in names:
                    with contextlib.suppress(OSError):
                        os.unlink(name, dir_fd=ctl)

    async def _send(self, proc: SpawnedProcess, out: str, snippet: str, timeout: float) -> tuple[int, bool]:
        since = boot_ticks()
        # start times count in clock ticks (10 ms): a process an earlier command left may share the tick
        running = self._cgroup.members() if self._cgroup is not None else frozenset()
        try:
            proc.stdin.write(f"{out}\n".encode() + snippet.encode("utf-8", "surrogateescape") + b"\0")
            # timed out or cancelled, the command is stopped and its status read before the lock is let go
            stop = functools.partial(self._stop, proc, since, running)
            read = functools.partial(self._read_status, proc)
            unusable = functools.partial(setattr, self, "_broken")
            return await await_status(
                proc.stdin.drain, read, stop, timeout=timeout, grace=KILL_GRACE, unusable=unusable
            )
        except (ConnectionError, OSError) as exc:
            self._broken = f"shell pipe failed: {exc}"
            raise SandboxError(f"sandbox {self.id} died during a command{self._died_detail()}") from None

    async def _read_status(self, proc: SpawnedProcess) -> int:
        """The shell's one-line reply. Anything else on the channel leaves the sandbox unusable."""
        try:
            line = await proc.stdout.readuntil(b"\n")
        except asyncio.IncompleteReadError:
            self._broken = "its shell exited"
            raise SandboxError(f"sandbox {self.id} closed its control channel{self._died_detail()}") from None
        except asyncio.LimitOverrunError:
            line = b""
        if (match := _STATUS.fullmatch(line)) is None:
            self._broken = f"unexpected data on its control channel: {line[:80]!r}"
            raise SandboxError(f"sandbox {self.id}: {self._broken}")
        return int(match.group(1))

    async def _stop(self, proc: SpawnedProcess, since: int, running: frozenset[int]) -> None:
        """Kill the running command (timed out or cancelled, reply.py): every process started since it began
        (``running``: those there before it), ``setsid`` ones included, from the host; the shell is never
        signalled (one sent while it reads or replies could end it). The sandbox stays usable."""
        await asyncio.to_thread(self._kill_started_since, proc, since, running)

    def _kill_started_since(self, proc: SpawnedProcess, since: int, running: frozenset[int]) -> None:
        if self._cgroup is None:
            return
        spare = {proc.pid, *running}  # bwrap, what ran before the command, and the shell if it is still there
        with contextlib.suppress(ProcessLookupError):
            spare.add(self._shell_pid(proc))
        kill_started_since((pid for pid in self._cgroup.pids() if pid not in spare), since)

    def _shell_pid(self, proc: SpawnedProcess) -> int:
        """Host pid of the shell: bwrap's only child (the shell is pid 1 inside with --as-pid-1)."""
        return proc.child()[0]

    def _died_detail(self) -> str:
        detail = self._stderr_tail.decode(errors="replace").strip()
        oom = self._cgroup is not None and self._cgroup.oom_killed()
        return (" (out of memory)" if oom else "") + (f": {detail[-500:]}" if detail else "")

    async def _output_of(self, command: str, *, what: str, timeout: float) -> bytes:
        """The whole output of ``command`` (at most FILE_CAP bytes, else OutputLimitError)."""
        async with self._command(command, timeout=timeout) as (status, out, timed_out):
            size = os.fstat(out).st_size
            if size > FILE_CAP:  # whatever the status: past the cap, the command may have hit a full ctl
                raise OutputLimitError(f"{self.id}: {what} gave more than {FILE_CAP} bytes")
            if status != 0 or timed_out:
                tail = CappedBuffer.from_file(out, 4096).text().strip()
                kind = OutputLimitError if status == DIFF_TOO_LARGE else OSError  # a file over the cap
                raise kind(f"{self.id}: {what} failed{' (timed out)' if timed_out else ''}: {tail}")
            return await asyncio.to_thread(read_all, out, size)

    async def read_file(self, path: str) -> bytes:
        q = shlex.quote(path)
        try:
            return await self._output_of(
                # without head (a minimal image), the ctl tmpfs's size stops an endless file
                f"if command -v head >/dev/null; then head -c {FILE_CAP + 1} -- {q}; else cat -- {q}; fi",
                what=f"reading {path}",
                timeout=120,
            )
        except OutputLimitError:
            raise
        except OSError as exc:
            kind = FileNotFoundError if "No such file" in str(exc) else OSError
            raise kind(str(exc)) from None

    async def write_file(self, path: str, data: bytes) -> None:
        if len(data) > FILE_CAP:
            raise OutputLimitError(f"{self.id}: refusing to write {len(data)} bytes (limit {FILE_CAP})")
        quoted = shlex.quote(path)
        command = f'mkdir -p -- "$(dirname -- {quoted})" && cat > {quoted}'
        async with self._command(command, timeout=120, stdin=data) as (status, out, _):
            if status != 0:
                message = CappedBuffer.from_file(out, 4096).text().strip()
                raise OSError(f"{self.id}: cannot write {path}: {message}")

    async def diff(self) -> str:
        try:
            data = await self._output_of(diff_command(self.env.base_commit), what="git diff", timeout=300)
        except OutputLimitError:
            raise
        except OSError as exc:
            raise SandboxError(str(exc)) from None
        return data.decode("utf-8", "replace")

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
