"""Resource limits for a sandbox's process tree, applied from outside (cgroup v1 or v2).

The sandbox never sees cgroupfs. Its first process joins the cgroups before exec (see ns.py), so every
later process is born inside them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Collection
from pathlib import Path

from swe_rl.errors import SandboxError
from swe_rl.sandbox._proc import all_exited, start_ticks
from swe_rl.sandbox.base import Limits

ROOT = Path("/sys/fs/cgroup")
PARENT = "swe-rl"
GONE_WITHIN_S = 10.0  # how long a teardown waits for a killed sandbox's processes and cgroups to go


def cgroup_version() -> int | None:
    if (ROOT / "cgroup.controllers").is_file():
        return 2
    if (ROOT / "memory").is_dir() and (ROOT / "pids").is_dir():
        return 1
    return None


class SandboxCgroup:
    """The cgroup(s) of one sandbox: created with limits, joined by pid, removed when empty."""

    def __init__(self, name: str, limits: Limits) -> None:
        self.version = cgroup_version()
        if self.version is None:
            raise SandboxError("no usable cgroup hierarchy (need cgroup v2 or v1 memory+pids+cpu)")
        self.dirs = self._dirs(name)
        retry_unremoved()
        made: list[Path] = []
        try:
            self._create(limits, made)
        except OSError as exc:
            # only what this call made: a cgroup of the same name that was there already is another's (a
            # remove() would kill its processes)
            for d in reversed(made):
                with contextlib.suppress(OSError):
                    d.rmdir()
            raise SandboxError(f"cannot set up cgroup limits for {name}: {exc}") from exc

    def _dirs(self, name: str) -> list[Path]:
        name = f"{name}.{_OWNER}"  # the reaper removes it once this process is gone, at any age
        if self.version == 2:
            return [ROOT / PARENT / name]
        return [ROOT / c / PARENT / name for c in ("memory", "pids", "cpu")]

    def _create(self, limits: Limits, made: list[Path]) -> None:
        """The cgroup(s) with ``limits``; each directory made is added to ``made``. FileExistsError where one
        is there already."""
        memory = limits.memory_mb * 1024 * 1024
        quota = int(limits.cpus * 100_000)
        if self.version == 2:
            parent = ROOT / PARENT
            if not parent.is_dir():
                parent.mkdir(exist_ok=True)
            _write(parent / "cgroup.subtree_control", "+memory +pids +cpu", ignore_errors=True)
            (cg,) = self.dirs
            cg.mkdir()
            made.append(cg)
            _write(cg / "memory.max", str(memory))
            _write(cg / "memory.swap.max", "0", ignore_errors=True)
            _write(cg / "pids.max", str(limits.pids))
            _write(cg / "cpu.max", f"{quota} 100000")
            return
        mem, pids, cpu = self.dirs
        for d in self.dirs:
            d.parent.mkdir(parents=True, exist_ok=True)
            d.mkdir()
            made.append(d)
        _write(mem / "memory.limit_in_bytes", str(memory))
        _write(mem / "memory.memsw.limit_in_bytes", str(memory), ignore_errors=True)
        _write(pids / "pids.max", str(limits.pids))
        _write(cpu / "cpu.cfs_period_us", "100000")
        _write(cpu / "cpu.cfs_quota_us", str(quota))

    @property
    def procs_files(self) -> list[bytes]:
        """Paths of the cgroup.procs files, for joining from a forked child without Python objects."""
        return [str(d / "cgroup.procs").encode() for d in self.dirs]

    def pids(self) -> list[int]:
        found: set[int] = set()
        for d in self.dirs:
            with contextlib.suppress(OSError):
                found.update(int(p) for p in (d / "cgroup.procs").read_text().split())
        return sorted(found)

    def members(self) -> frozenset[int]:
        """The same processes, read from one hierarchy only (every process joins all of them and none can
        leave): the snapshot ns.py takes before each command, a third of the reads of :meth:`pids`."""
        try:
            return frozenset(int(p) for p in (self.dirs[0] / "cgroup.procs").read_text().split())
        except OSError:
            return frozenset(self.pids())

    def memory_peak(self) -> int | None:
        name = "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"
        try:
            return int((self.dirs[0] / name).read_text())
        except (OSError, ValueError):
            return None

    def oom_killed(self) -> bool:
        try:
            if self.version == 2:
                events = (self.dirs[0] / "memory.events").read_text()
                return any(
                    line.split()[0] == "oom_kill" and int(line.split()[1]) > 0 for line in events.splitlines()
                )
            # v1: the kill count of memory.oom_control (kernel 4.13+); memory.failcnt stays 0 here when the
            # kernel reclaims to the limit and then kills (a 400 MB allocation under 128 MB: failcnt 0, oom_kill 1)
            control = (self.dirs[0] / "memory.oom_control").read_text().split()
            if "oom_kill" in control:
                return int(control[control.index("oom_kill") + 1]) > 0
            return int((self.dirs[0] / "memory.failcnt").read_text()) > 0
        except (OSError, ValueError, IndexError):
            return False

    def kill_all(self, *, timeout: float = GONE_WITHIN_S) -> bool:
        """SIGKILL every process in the cgroup until it is empty, for at most ``timeout`` seconds (a
        killed process stays a member until its exit is done, and unmounting a sandbox's namespace can
        take a while on a loaded machine). Whether it emptied."""
        deadline, pause = time.monotonic() + timeout, 0.0005
        while pids := self.pids():
            if time.monotonic() > deadline:
                return False
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, 9)
            time.sleep(pause)
            pause = min(pause * 2, 0.01)
        return True

    async def kill_except(self, keep: Collection[int], *, timeout: float = 5.0) -> None:
        """SIGKILL every process in the cgroup but ``keep`` and wait until each has exited (its files closed,
        so nothing it was writing can land later), again until only ``keep`` is left (a process may fork
        while it is being killed). SandboxError when they do not go within ``timeout``. One hierarchy is
        read (:meth:`members`), and the exits are awaited on the event loop: a reset in place runs this on
        its hot path."""
        deadline = time.monotonic() + timeout
        while others := [pid for pid in self.members() if pid not in keep]:
            pidfds = []
            try:
                for pid in others:
                    with contextlib.suppress(ProcessLookupError):
                        pidfds.append(os.pidfd_open(pid))  # then a reused pid cannot be hit
                        signal.pidfd_send_signal(pidfds[-1], signal.SIGKILL)
                await all_exited(pidfds, deadline)
            finally:
                for fd in pidfds:
                    os.close(fd)
            if time.monotonic() > deadline:
                raise SandboxError(f"processes of {self.dirs[0].name} would not end: {others[:10]}")

    def remove(self) -> None:
        """Kill whatever is still inside, then remove the cgroups. One that stays busy past the deadline is
        remembered and removed later (:func:`retry_unremoved`): the reaper spares a live owner's cgroups."""
        deadline, pause = time.monotonic() + GONE_WITHIN_S, 0.0005
        self.kill_all()
        for d in self.dirs:
            while True:
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        _UNREMOVED.add(d)
                        break
                    time.sleep(pause)
                    pause = min(pause * 2, 0.01)


_UNREMOVED: set[Path] = set()  # this process's cgroups that were still busy when their sandbox closed


def retry_unremoved() -> int:
    """Remove the cgroups :meth:`SandboxCgroup.remove` had to leave (killing what is left in them).
    Returns how many are still there. Called before each new cgroup is made."""
    for d in list(_UNREMOVED):
        with contextlib.suppress(OSError):
            for pid in (d / "cgroup.procs").read_text().split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), 9)
        try:
            d.rmdir()
        except FileNotFoundError:
            pass
        except OSError:
            continue
        _UNREMOVED.discard(d)
    return len(_UNREMOVED)


REAP_AFTER_S = 120  # a cgroup without an owner tag (an older swe-rl's) is reaped after this


# "<pid>-<start time>": a pid alone could have been reused by an unrelated process since
_OWNER = f"{os.getpid()}-{start_ticks(os.getpid())}"


def _owner_alive(name: str) -> bool | None:
    """Whether the process that made cgroup ``name`` lives; None when the name carries no owner."""
    owner = name.rpartition(".")[2]
    pid, _, ticks = owner.partition("-")
    if not pid.isdigit() or not ticks:
        return None
    return str(start_ticks(int(pid))) == ticks


def reap_stale_cgroups() -> int:
    """Remove empty sandbox cgroups whose owning process is gone. Returns how many were removed.

    A cgroup is named after the process that made it (pid and start time): another live process's
    sandbox may sit in a fresh, still empty cgroup, and that one is left alone; a dead process's are
    removed at once, so a server restarted seconds after a SIGKILL leaves nothing behind.
    """
    removed = 0
    cutoff = time.time() - REAP_AFTER_S
    version = cgroup_version()
    parents = [ROOT / PARENT] if version == 2 else [ROOT / c / PARENT for c in ("memory", "pids", "cpu")]
    for parent in parents:
        if not parent.is_dir():
            continue
        for child in parent.iterdir():
            if child.is_dir():
                try:
                    alive = _owner_alive(child.name)
                    if alive or (alive is None and child.stat().st_mtime > cutoff):
                        continue
                    if not (child / "cgroup.procs").read_text().strip():
                        child.rmdir()
                        removed += 1
                except OSError:
                    pass
    return removed


def _write(path: Path, value: str, *, ignore_errors: bool = False) -> None:
    try:
        path.write_text(value)
    except OSError:
        if not ignore_errors:
            raise
