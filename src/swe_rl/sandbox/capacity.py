"""How much a machine can run at once, from its real CPUs and memory (cgroup limits included).

Shared by the servers that size themselves to their node: the exec server (sandboxes) and the rollout
server (whole rollouts). A container's CPU quota and memory limit count, not only the host's totals.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")


def host_cpus() -> float:
    """CPUs this process may use: its affinity mask, lowered by a cgroup CPU quota."""
    try:
        cpus: float = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    quota = _cpu_quota()
    return min(cpus, quota) if quota else cpus


def host_memory_mb() -> int:
    """Physical memory, lowered by a cgroup memory limit."""
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        mem = 4096 * 2**20
    for path in (CGROUP / "memory.max", CGROUP / "memory" / "memory.limit_in_bytes"):
        limit = _read_int(path)
        if limit:
            mem = min(mem, limit)
    return int(mem // 2**20)


def machine_capacity(*, per_cpu: float, mem_mb_each: int) -> int:
    """Units that fit: ``per_cpu`` per usable CPU and ``mem_mb_each`` of memory each, whichever is less."""
    by_cpu = math.floor(host_cpus() * per_cpu)
    by_memory = host_memory_mb() // mem_mb_each
    return max(1, min(by_cpu, by_memory))


def _cpu_quota() -> float | None:
    """The cgroup's CPU bandwidth in cores (v2 ``cpu.max``, v1 ``cfs_quota_us``), or None when unlimited."""
    try:
        quota, period = (CGROUP / "cpu.max").read_text().split()
        return int(quota) / int(period) if quota != "max" else None
    except (OSError, ValueError):
        pass
    quota_us = _read_int(CGROUP / "cpu" / "cpu.cfs_quota_us")
    period_us = _read_int(CGROUP / "cpu" / "cpu.cfs_period_us")
    return quota_us / period_us if quota_us and period_us else None


def _read_int(path: Path) -> int | None:
    try:
        value = int(path.read_text().strip())
    except (OSError, ValueError):
        return None
    return value if 0 < value < 2**60 else None
