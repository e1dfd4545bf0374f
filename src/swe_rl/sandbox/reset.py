"""Reset an ns sandbox in place: back to the pristine env without restarting bubblewrap.

A restart pays bubblewrap's whole start-up again (namespaces, some thirty mounts, a new shell). In place,
the same bwrap and the same persistent shell (the control process) stay, and everything a command could
have changed goes:

1. every process of the sandbox's cgroup but bwrap and the shell (and those the caller keeps: a warm test
   runner, harness/grade_many.py) is SIGKILLed and waited for (until it has exited, its files closed), again
   until none is left; the shell reaps those that were its children (orphans are, it is pid 1) as their
   SIGCHLD arrives. A command runs as the shell's uid, so it may lower the shell's (and a kept process's)
   scheduling and resource limits, which every later command would inherit: the scheduling (nice, policy,
   CPU affinity, I/O priority) is copied back from bwrap's, which no command can reach; resource limits cannot be put
   back (raising a hard limit needs CAP_SYS_RESOURCE, which root on these machines lacks), so a shell
   whose limits differ from bwrap's makes the reset restart bubblewrap, and a kept process whose limits
   differ is ended with the rest;
2. the spawner's reset worker (root; forked once by the spawner's helper, see spawner.py) opens the
   sandbox's namespaces and
   - removes every System V IPC object of the sandbox's ipc namespace (POSIX message queues, which would
     survive, cannot be made: seccomp denies ``mq_open``);
   - builds a new overlay of the testbed over a new, empty upper layer in bwrap's mount namespace, where
     the sandbox's tmpfs is (``fsopen``/``fsconfig``/``fsmount``: a detached mount, nosuid and nodev), the
     upper layer on a new tmpfs of its own (``disk_mb``, ``Limits.inodes``, as the first one, which the
     spawner mounts), mounted on a directory of the sandbox's tmpfs outside every path bound in; the
     testbed may be another env's of the same runtime (``NsSandbox.reset(env=...)``: the same venv,
     interpreter and root, so everything else bwrap bound is the same); the overlay was usually built
     ahead, after the previous reset, and is only taken (reset_worker.py);
   - unmounts the old layer's tmpfs there (lazily: the old overlay holds a private mount of it, as overlayfs
     does of its upper layer) and removes its directory;
   - in the sandbox's mount namespace, detaches the old overlay and moves the new one into its place;
   - empties ``/tmp``, ``/dev/shm`` and ``/root`` (directories of the sandbox's tmpfs; ``/root`` is $HOME,
     writable as in the official images: numba's and matplotlib's caches go there) without crossing a mount
     under them (an env's venv may be bound below ``/tmp`` or ``/root``), and gives them back their mode and
     owner;
3. after it has answered, the worker drops the old overlay's last reference, and with it the old layer's
   tmpfs: every file of the previous use goes at once, in the kernel, and nothing the next use can reach
   waits for it. The layers used to be directories of the sandbox's one tmpfs, shared with ``/tmp``, and
   removed by a walk in the background after the reset: the next use's first ``df`` showed the previous
   use's bytes and inodes, and a write of most of the capacity could fail with ENOSPC.

The shell itself is left alone: no command runs during a reset (the sandbox's lock), and its state is
out of the commands' reach: each command runs in a subshell, and the shell's memory and pipes are
closed to them (identity.py). The rest of the sandbox cannot keep a change: its root,
``/dev`` and every bound path are read-only, and ``/run/ctl`` is host root's. Anything unexpected on the
way (a dead shell, a mount under the testbed, a full tmpfs) is an error, and NsSandbox.reset then
restarts bubblewrap instead.
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
import os
import time
import weakref
from collections.abc import Collection
from pathlib import Path

from swe_rl.errors import SandboxError
from swe_rl.sandbox._proc import SpawnedProcess, state_and_start
from swe_rl.sandbox.base import Limits
from swe_rl.sandbox.bwrap import FIRST_LAYER, MOUNTPOINT, layer_tmpfs_options
from swe_rl.sandbox.cgroups import SandboxCgroup
from swe_rl.sandbox.identity import SANDBOX_UID
from swe_rl.sandbox.spawner import spawner


def layer_dir(layer: int) -> str:
    """The directory of the sandbox's tmpfs where overlay number ``layer``'s own tmpfs (its ``upper`` and
    ``work`` directories) is mounted (0: the one bwrap mounted, on the spawner's)."""
    return FIRST_LAYER if layer == 0 else f"{FIRST_LAYER}.{layer}"


async def reset_in_place(
    cgroup: SandboxCgroup,
    bwrap: SpawnedProcess,
    workdir: str,
    layer: int,
    keep: Collection[int] = (),
    lower: str | None = None,
    *,
    old: int,
    limits: Limits,
) -> None:
    """Steps 1 and 2 above, with overlay number ``layer`` (new: its directory must not exist yet) over a tmpfs of
    ``limits``, in place of overlay number ``old``.
    ``keep``: pids (as the sandbox sees them) of processes left running besides the shell, treated as the
    shell is. ``lower``: the testbed the new overlay shows, as a host path (None: the one bwrap bound)."""
    keep = host_pids(cgroup, keep) if keep else set()
    bwrap_pid, (shell_pid, shell_start) = bwrap.pid, bwrap.child()  # ProcessLookupError once it has exited
    pristine = _PRISTINE.get(bwrap) or _PRISTINE.setdefault(bwrap, _limits(bwrap_pid))
    if _limits(shell_pid) != pristine:
        raise SandboxError("a command changed the shell's resource limits")
    keep = {pid for pid in keep if _limits(pid) == pristine}
    await cgroup.kill_except({bwrap_pid, shell_pid, *keep})
    for pid in (shell_pid, *keep):  # a command may lower them: its processes run as their uid
        _copy_scheduling(bwrap_pid, pid)
    await spawner().reset(
        bwrap_pid=bwrap_pid,
        shell_pid=shell_pid,
        shell_start=shell_start,
        mountpoint=str(MOUNTPOINT),
        workdir=workdir,
        layer=layer_dir(layer),
        old=layer_dir(old),
        uid=SANDBOX_UID,
        lower=lower,
        tmpfs_opts=layer_tmpfs_options(limits),
        next=layer_dir(layer + 1),  # built ahead by the worker for the next reset (reset_worker.py)
    )
    await _wait_reaped(shell_pid, keep)


def lowerdir_misread(path: str) -> str | None:
    """Why overlayfs would misread ``path`` as a lowerdir (':' separates layers, ',' options, '\\' escapes):
    None when it would not. A testbed at such a path is reset to by a restart (bwrap's bind takes any path)."""
    if any(c in path for c in ":,\\"):
        return f"the testbed's path {path!r} has a character overlayfs's lowerdir parses"
    return None


def host_pids(cgroup: SandboxCgroup, inner: Collection[int]) -> set[int]:
    """Host pids of the sandbox's processes whose pids inside it are ``inner`` (those still running)."""
    found = set()
    for pid in cgroup.pids():
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        ns_pids = next((line.split()[1:] for line in status.splitlines() if line.startswith("NSpid:")), [])
        if ns_pids and int(ns_pids[-1]) in inner:
            found.add(pid)
    return found


def process_state(cgroup: SandboxCgroup, inner: int) -> tuple[str, int] | None:
    """The state letter and start time (clock ticks since boot) of the sandbox's process ``inner`` (its pid
    inside), read from the host: what ``cat /proc/<inner>/stat`` in the sandbox says, without a command.
    None when no such process is left."""
    for pid in host_pids(cgroup, {inner}):
        return state_and_start(pid)
    return None


async def _wait_reaped(shell_pid: int, keep: Collection[int], timeout: float = 2.0) -> None:
    """Until the shell (the sandbox's pid 1) has reaped every process that was killed, so the next command
    sees no zombie: its children are then the kept processes only. It reaps on SIGCHLD, usually while the
    overlay is being replaced; a shell that has not after ``timeout`` is restarted (SandboxError)."""
    deadline = time.monotonic() + timeout
    while left := _unreaped(shell_pid, keep):
        if time.monotonic() > deadline:
            raise SandboxError(f"the shell has not reaped {sorted(left)[:5]}")
        await asyncio.sleep(0.0002)


def _unreaped(shell_pid: int, keep: Collection[int]) -> set[int]:
    """The shell's children but ``keep`` (none on a kernel without the listing: nothing to wait on)."""
    try:
        children = Path(f"/proc/{shell_pid}/task/{shell_pid}/children").read_text().split()
    except OSError:
        return set()
    return {int(p) for p in children} - set(keep)


# bwrap's resource limits, read at its first reset: no command can change them (it is outside the sandbox's
# pid namespace), and every process of the sandbox is compared with them
_PRISTINE: weakref.WeakKeyDictionary[SpawnedProcess, str] = weakref.WeakKeyDictionary()


def _limits(pid: int) -> str:
    """A process's resource limits, as /proc shows them (readable where prlimit(2) is not: without
    CAP_SYS_RESOURCE, the host cannot set or even read another uid's)."""
    try:
        return Path(f"/proc/{pid}/limits").read_text()
    except OSError as exc:
        raise SandboxError(f"cannot read the limits of process {pid}: {exc}") from exc


def _copy_scheduling(source: int, target: int) -> None:
    os.sched_setscheduler(target, os.sched_getscheduler(source), os.sched_param(0))
    os.setpriority(os.PRIO_PROCESS, target, os.getpriority(os.PRIO_PROCESS, source))
    os.sched_setaffinity(target, os.sched_getaffinity(source))
    _copy_io_priority(source, target)  # after the nice level: the I/O priority of class "none" follows it


# (ioprio_get, ioprio_set): os has neither, and their numbers differ between architectures
_IOPRIO_CALLS = {"x86_64": (252, 251), "aarch64": (31, 30)}
_IOPRIO_WHO_PROCESS = 1


def _copy_io_priority(source: int, target: int) -> None:
    """Give ``target`` the I/O priority ``source`` reads as (a command may lower its own shell's: ``ionice -c 3
    -p 1``, and every later command inherits it). Class "none" (a fresh process's, which follows the nice
    level) is tried first, so an untouched bwrap's is copied as itself, not as the value it reads as."""
    calls = _IOPRIO_CALLS.get(os.uname().machine)
    if calls is None:  # OSError: the reset restarts bubblewrap, which cannot leave a lowered priority
        raise OSError(f"cannot put I/O priorities back on {os.uname().machine}")
    get, put = calls
    want = _ioprio(get, source)
    for value in (0, want):
        if _ioprio(get, target) == want:
            return
        _ioprio(put, target, value)
    if _ioprio(get, target) != want:
        raise OSError(f"the I/O priority of process {target} could not be put back")


@functools.cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def _ioprio(call: int, pid: int, *value: int) -> int:
    ret = int(_libc().syscall(ctypes.c_long(call), _IOPRIO_WHO_PROCESS, pid, *value))
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"ioprio of process {pid}: {os.strerror(err)}")
    return ret


__all__ = [
    "host_pids",
    "layer_dir",
    "lowerdir_misread",
    "process_state",
    "reset_in_place",
]
