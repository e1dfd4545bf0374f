"""The seccomp filters of the isolating backends: one list of denied system calls, each with its reason.

Everything else is allowed: test suites need a wide, ordinary Linux. Denied calls fail with EPERM
(not a kill), so a test that probes one gets an error it can handle. The ns backend compiles the list into
a BPF program for bubblewrap (:func:`seccomp_bpf`); the docker backend hands the engine a profile built
from the same list (:func:`docker_profile`) in place of the engine's default.
"""

from __future__ import annotations

import errno
import functools
import json
import tempfile

from swe_rl.errors import SandboxUnavailableError

DENIED: dict[str, str] = {
    "mount": "no new mounts; the sandbox's mounts are fixed by bubblewrap",
    "umount2": "no unmounting the overlay or /proc to reach what is underneath",
    "pivot_root": "no changing the root",
    "move_mount": "new mount API",
    "open_tree": "new mount API: cloning mounts",
    "fsopen": "new mount API",
    "fsmount": "new mount API",
    "fsconfig": "new mount API",
    "fspick": "new mount API",
    "mount_setattr": "new mount API: changing mount flags",
    "kexec_load": "no loading another kernel",
    "kexec_file_load": "no loading another kernel",
    "init_module": "no kernel modules",
    "finit_module": "no kernel modules",
    "delete_module": "no kernel modules",
    "bpf": "no eBPF programs",
    "perf_event_open": "no perf counters: side channels and kernel attack surface",
    "keyctl": "the kernel keyring is not namespaced",
    "add_key": "the kernel keyring is not namespaced",
    "request_key": "the kernel keyring is not namespaced",
    "ptrace": "no tracing (a debugger is not needed to run tests)",
    "process_vm_readv": "no reading other processes' memory",
    "process_vm_writev": "no writing other processes' memory",
    "pidfd_getfd": "no taking another process's file descriptors (ptrace access, without ptrace)",
    "process_madvise": "no advising on another process's memory (ptrace access, as process_vm_*)",
    "kcmp": "no comparing kernel objects of other processes (ptrace access)",
    "userfaultfd": "a classic exploitation primitive",
    "open_by_handle_at": "bypasses path checks (the 'shocker' container escape)",
    "name_to_handle_at": "pairs with open_by_handle_at",
    "iopl": "no raw I/O port access",
    "ioperm": "no raw I/O port access",
    "reboot": "no rebooting",
    "swapon": "no swap changes",
    "swapoff": "no swap changes",
    "settimeofday": "the clock is not namespaced",
    "clock_settime": "the clock is not namespaced",
    "clock_adjtime": "the clock is not namespaced",
    "adjtimex": "the clock is not namespaced",
    "acct": "no process accounting",
    "quotactl": "no disk quota changes",
    "quotactl_fd": "no disk quota changes",
    "setns": "no joining other namespaces",
    "unshare": "no new namespaces inside the sandbox",
    "syslog": "no reading the kernel log",
    "vhangup": "no terminal hangups",
    "lookup_dcookie": "kernel profiling interface",
    "nfsservctl": "kernel NFS server",
    "personality": "no switching off ASLR",
    "io_uring_setup": "operations submitted through an io_uring ring are not system calls: seccomp never "
    "sees them (openat, connect, ... would pass every rule here), and io_uring is a large kernel attack surface",
    "io_uring_enter": "io_uring (see io_uring_setup)",
    "io_uring_register": "io_uring (see io_uring_setup)",
    "mq_open": "POSIX message queues live in the ipc namespace's own filesystem, which a reset in place "
    "does not empty (System V IPC it does; see reset.py)",
}


@functools.cache
def seccomp_bpf() -> bytes:
    """The compiled BPF program (built once per process)."""
    try:
        import pyseccomp
    except (ImportError, OSError) as exc:  # OSError: libseccomp.so missing
        raise SandboxUnavailableError(f"pyseccomp/libseccomp unavailable: {exc}") from None
    flt = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
    eperm = pyseccomp.ERRNO(1)
    for name in DENIED:
        try:
            flt.add_rule(eperm, name)
        except (ValueError, RuntimeError, OSError):
            continue  # a call this architecture does not have
    # socket(AF_PACKET) and raw sockets need CAP_NET_RAW, which is dropped; no rule needed.
    with tempfile.TemporaryFile() as out:  # export_bpf writes to a real file descriptor
        flt.export_bpf(out)
        out.seek(0)
        return out.read()


# clone(2)'s flags that make a new namespace. A process without capabilities may still ask clone for a user
# namespace, and holds every capability inside it (then mounts, the other namespaces, ...). The ns backend
# refuses that with bubblewrap's --disable-userns; the docker backend refuses these flags in its profile, as
# the engine's default profile does for a container without CAP_SYS_ADMIN. unshare and setns are in DENIED.
CLONE_NAMESPACES: dict[str, int] = {
    "CLONE_NEWNS": 0x00020000,
    "CLONE_NEWCGROUP": 0x02000000,
    "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000,
    "CLONE_NEWUSER": 0x10000000,
    "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
}
# The engine's architecture -> the others its processes can make system calls in (32-bit compat): each
# gets the same rules; a call in an architecture the profile does not name kills the process.
_SUB_ARCHES = {"SCMP_ARCH_X86_64": ["SCMP_ARCH_X86", "SCMP_ARCH_X32"], "SCMP_ARCH_AARCH64": ["SCMP_ARCH_ARM"]}
_S390 = ["s390", "s390x"]  # clone's flags are its second argument there


@functools.cache
def docker_profile() -> str:
    """The docker backend's seccomp profile, in the engine's JSON format (built once per process).

    Everything is allowed but DENIED (EPERM), clone with a namespace flag (EPERM) and clone3 (ENOSYS: its
    flags are in memory, out of seccomp's reach, and on ENOSYS glibc falls back to clone, whose flags a rule
    can read; the engine's default profile does the same)."""
    eperm = {"action": "SCMP_ACT_ERRNO", "errnoRet": errno.EPERM}
    rules: list[dict[str, object]] = [{"names": sorted(DENIED), **eperm}]
    for flag in CLONE_NAMESPACES.values():
        for index, arches in ((0, {"excludes": {"arches": _S390}}), (1, {"includes": {"arches": _S390}})):
            test = {"index": index, "value": flag, "valueTwo": flag, "op": "SCMP_CMP_MASKED_EQ"}
            rules.append({"names": ["clone"], **eperm, "args": [test], **arches})
    rules.append({"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": errno.ENOSYS})
    arch_map = [{"architecture": arch, "subArchitectures": sub} for arch, sub in _SUB_ARCHES.items()]
    return json.dumps({"defaultAction": "SCMP_ACT_ALLOW", "archMap": arch_map, "syscalls": rules})
