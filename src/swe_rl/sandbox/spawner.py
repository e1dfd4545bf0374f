"""A small helper process that starts bwrap sandboxes, so the (possibly huge) caller never forks.

Forking a Python process costs time proportional to its memory (3 ms at 35 MB here, far more inside
a trainer holding a model), and the ns backend must run code between fork and exec (join cgroups,
mount a private tmpfs). So a tiny helper (helper/spawn_helper.py), started once per process with
``python -S``, does the forking: the caller sends the argv, the cgroup files and the pipe ends over a
UNIX socket (SCM_RIGHTS) and gets the pid back. The helper exits when its socket closes (the parent
died), and bwrap (``--die-with-parent``) dies with the helper.

Between fork and exec the child, still root, joins the sandbox's cgroups, mounts its private tmpfs,
bind-mounts the host paths the sandbox needs into it (the env cache may sit under a directory only
root can enter) and then drops to the sandbox's unprivileged uid: bwrap itself never runs as root, so
no process of the sandbox is host root, and the kernel makes its ``/proc/sys`` read-only.

A reset in place (reset.py) goes to a worker (helper/reset_worker.py) the helper forks on the first
one: the caller talks to it over a socket of its own (resets never hold up a spawn), and it enters a
sandbox's namespaces for each reset and comes back to its own after; the helper itself never leaves them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import weakref
from pathlib import Path
from typing import Any

from swe_rl.errors import SandboxError

RESET_TIMEOUT = 20.0  # seconds a reset in place may take before the sandbox is restarted instead

# The helper program and what it imports (helper/: no swe_rl import, run by path, never imported here)
HELPER = Path(__file__).with_name("helper") / "spawn_helper.py"


class Spawner:
    """The client side: one helper per process, shared by every ns sandbox (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._reader: socket.SocketIO | None = None
        self._reset_lock = threading.Lock()  # resets go to the worker, not the helper: spawns never wait
        self._loop_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        self._reset_sock: socket.socket | None = None
        self._reset_pidfd: int | None = None

    def _ensure(self) -> socket.socket:
        if self._proc is not None and self._proc.poll() is None and self._sock is not None:
            return self._sock
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self._proc = subprocess.Popen(
            [sys.executable, "-S", str(HELPER), str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            close_fds=True,
        )
        theirs.close()
        self._sock = ours
        return ours

    def spawn(
        self,
        argv: list[str],
        fds: list[int],
        *,
        cgroup_procs: list[str],
        mountpoint: str,
        tmpfs_opts: str,
        layer_tmpfs_opts: str,
        ctl_tmpfs_opts: str,
        uid: int,
        binds: list[tuple[str, str]],
    ) -> int:
        """Start ``argv`` as ``uid`` with ``fds`` as its stdin, stdout, stderr and fd 3; return its pid.

        In the child's private mount namespace ``mountpoint`` holds a fresh tmpfs (``tmpfs_opts``) with
        ``layer`` (a tmpfs of its own, ``layer_tmpfs_opts``, holding ``upper`` and ``work``), ``tmp``, ``shm`` and
        ``home`` (owned by ``uid``), ``ctl`` (a tmpfs of its own, root's, mode 0711: files in
        it can be opened by name but not listed or created) and ``b/<name>`` for each ``(host path, name)`` of ``binds``.
        """
        reply = self._call(
            {
                "argv": argv,
                "cgroup_procs": cgroup_procs,
                "mountpoint": mountpoint,
                "tmpfs_opts": tmpfs_opts,
                "layer_tmpfs_opts": layer_tmpfs_opts,
                "ctl_tmpfs_opts": ctl_tmpfs_opts,
                "uid": uid,
                "binds": binds,
            },
            fds,
        )
        pid = int(reply["pid"])
        if pid < 0:
            raise SandboxError(f"the spawner could not fork: {os.strerror(-pid)}")
        return pid

    async def reset(self, **request: object) -> None:
        """Give a live sandbox a new, empty overlay upper layer and empty /tmp, /dev/shm, $HOME and System V IPC.

        ``request``: ``bwrap_pid``, ``shell_pid`` and ``shell_start`` (its start time, see _proc.start_ticks),
        ``mountpoint``, ``workdir``, ``layer`` and ``old`` (the new and the old layer's directory names),
        ``uid``, ``lower``: the testbed the overlay shows (a host path; None: the one bwrap was started with),
        ``tmpfs_opts`` (the new layer's tmpfs's) and ``next``: the next layer's directory name (its overlay is
        built ahead). The worker opens the
        sandbox's namespaces, swaps the new overlay for the old one at ``workdir`` and empties the rest; see
        reset.py and helper/reset_worker.py. Awaited on the caller's event loop (no thread); one reset at a time per
        process, whichever loop or thread asks.
        """
        async with self._loop_lock():
            # held by a reset of another thread's loop: polled, as blocking would stall this loop and a
            # thread waiting on it could take it after this task was cancelled, never to give it back
            while not self._reset_lock.acquire(blocking=False):  # noqa: ASYNC110
                await asyncio.sleep(0.001)
            try:
                answer = await self._ask_worker(request)
            finally:
                self._reset_lock.release()
        if answer["error"]:
            raise SandboxError(answer["error"])

    def _loop_lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        lock = self._loop_locks.get(loop)
        if lock is None:
            lock = self._loop_locks[loop] = asyncio.Lock()
        return lock

    async def _ask_worker(self, request: dict[str, object]) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        try:
            worker = self._reset_worker()
            async with asyncio.timeout(RESET_TIMEOUT):
                await loop.sock_sendall(worker, json.dumps(request).encode() + b"\n")
                reply = b""
                while not reply.endswith(b"\n"):
                    chunk = await loop.sock_recv(worker, 4096)
                    if not chunk:
                        raise OSError("the reset worker exited")
                    reply += chunk
            answer = dict(json.loads(reply))
        except TimeoutError:
            answer = {"error": f"no answer from the reset worker in {RESET_TIMEOUT:.0f} s", "stranded": True}
        except (OSError, ValueError) as exc:
            answer = {"error": f"the reset worker is gone ({exc})", "stranded": True}
        except BaseException:  # cancelled: its answer, unread, would be the next reset's
            self._close_reset_worker()
            raise
        if answer["stranded"]:  # it has exited (or is killed now): the next reset gets a new one
            self._close_reset_worker()
        return answer

    def _reset_worker(self) -> socket.socket:
        if self._reset_sock is None:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                pid = int(self._call({"op": "reset_worker"}, [theirs.fileno()])["pid"])
            finally:
                theirs.close()
            if pid < 0:
                ours.close()
                raise SandboxError(f"the spawner could not fork: {os.strerror(-pid)}")
            ours.setblocking(False)
            # a pidfd, not the pid: the helper reaps the worker when it exits, and its pid may be reused
            self._reset_sock, self._reset_pidfd = ours, os.pidfd_open(pid)
        return self._reset_sock

    def _close_reset_worker(self) -> None:
        sock, pidfd, self._reset_sock, self._reset_pidfd = self._reset_sock, self._reset_pidfd, None, None
        if sock is not None:
            sock.close()  # it exits at EOF
        if pidfd is not None:  # ... or is stuck
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            os.close(pidfd)

    def _call(self, request: dict[str, object], fds: list[int]) -> dict[str, Any]:
        """Send one request (with ``fds``) to the helper and return its reply."""
        data = json.dumps(request).encode()
        with self._lock:
            for attempt in range(2):  # a helper that died (killed from outside) is replaced once
                sock = self._ensure()
                try:
                    socket.send_fds(sock, [data], fds)
                    reply = b""
                    while not reply.endswith(b"\n"):
                        chunk = sock.recv(4096)
                        if not chunk:
                            raise OSError("the spawner helper exited")
                        reply += chunk
                    break
                except OSError as exc:
                    status = self._proc.poll() if self._proc is not None else None
                    self.close()
                    if attempt:
                        raise SandboxError(
                            f"the spawner helper failed: {exc} (helper exit status {status})"
                        ) from exc
        return dict(json.loads(reply))

    def close(self) -> None:
        with self._reset_lock:
            self._close_reset_worker()
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None


_SPAWNER = Spawner()


def spawner() -> Spawner:
    return _SPAWNER
