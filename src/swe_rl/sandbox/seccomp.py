"""The seccomp filter of the ns backend: one list of denied system calls, each with its reason.

Everything else is allowed: test suites need a wide, ordinary Linux. Denied calls fail with EPERM
(not a kill), so a test that probes one gets an error it can handle.
"""

from __future__ import annotations

import functools
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
