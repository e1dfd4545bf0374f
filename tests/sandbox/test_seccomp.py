"""The seccomp filters of the isolating backends (src/swe_rl/sandbox/seccomp.py): the ns backend's BPF program and
the docker backend's profile, which replaces the engine's default. Each attack carries its positive control: the
same calls made on the host, as a plain process, reach the kernel, so no test passes because a call is missing
on this kernel."""

from __future__ import annotations

import asyncio
import errno
import json
import platform
import shlex
import subprocess
import sys

import pytest
from tests.conftest import available_factory

from swe_rl.sandbox.seccomp import DENIED

ISOLATING = ["ns", "docker"]
EPERM, ENOSPC, ENOSYS = errno.EPERM, errno.ENOSPC, errno.ENOSYS


async def _on_host(script: str, *args: str) -> str:
    ran = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=60
    )
    assert ran.returncode == 0, ran.stderr
    return ran.stdout


async def _in_sandbox(backend: str, env, script: str, *args: str) -> str:  # type: ignore[no-untyped-def]
    async with await available_factory(backend).create(env) as box:
        argv = " ".join(shlex.quote(arg) for arg in args)
        ran = await box.exec(f"python3 - {argv} <<'EOF'\n{script}EOF", timeout=60)
        assert ran.returncode == 0, ran.output
        return ran.output


def _results(output: str) -> dict[str, int]:
    return {name: int(value) for name, value in (line.split() for line in output.strip().splitlines())}


# Asks for a user namespace three ways and prints "<way> <errno>" (0: made; a clone's child exits at once),
# then starts a thread and a process ("spawn <exit status>"): glibc tries clone3 for both first.
USERNS = r"""
import ctypes, os, struct, subprocess, threading
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
NEWUSER, SIGCHLD = 0x10000000, 17
def clone(nr, *args):
    ctypes.set_errno(0)
    pid = libc.syscall(nr, *args)
    if pid == 0:  # the child, in its user namespace
        libc._exit(0)
    if pid > 0:
        os.waitpid(pid, 0)
    return 0 if pid > 0 else ctypes.get_errno()
print("clone", clone(56, ctypes.c_long(NEWUSER | SIGCHLD), 0, 0, 0, 0))
clone_args = ctypes.create_string_buffer(struct.pack("8Q", NEWUSER, 0, 0, 0, SIGCHLD, 0, 0, 0), 64)
print("clone3", clone(435, clone_args, ctypes.c_size_t(64)))
child = os.fork()
if child == 0:  # unshare moves the caller itself: a child of its own
    os._exit(0 if libc.unshare(NEWUSER) == 0 else ctypes.get_errno())
print("unshare", os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]))
thread = threading.Thread(target=lambda: None)
thread.start()
thread.join()
print("spawn", subprocess.run(["true"]).returncode)
"""
USERNS_REFUSED = {
    # bubblewrap's --disable-userns leaves no user namespace to make (ENOSPC); seccomp denies unshare
    "ns": {"clone": ENOSPC, "clone3": ENOSPC, "unshare": EPERM, "spawn": 0},
    # the profile: clone with a namespace flag and unshare EPERM; clone3 ENOSYS, and glibc falls back to clone
    "docker": {"clone": EPERM, "clone3": ENOSYS, "unshare": EPERM, "spawn": 0},
}


@pytest.mark.parametrize("backend", ISOLATING)
async def test_no_user_namespace_by_clone_clone3_or_unshare(backend, textkit_env):
    """A process needs no capability to make a user namespace, and holds every capability inside it: from
    there, mounts and the other namespaces. Threads and processes still start."""
    host = _results(await _on_host(USERNS))
    assert host == {"clone": 0, "clone3": 0, "unshare": 0, "spawn": 0}, host  # the control
    inside = _results(await _in_sandbox(backend, textkit_env, USERNS))
    assert inside == USERNS_REFUSED[backend]


# Makes each call of argv[1] (name -> number) in a child of its own, every argument -1 (a bad pointer, fd,
# flag or length: nothing is changed where the call runs), and prints "<name> <errno>" (0: it succeeded).
CALL_EACH = r"""
import ctypes, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
for name, nr in json.loads(sys.argv[1]).items():
    pid = os.fork()
    if pid == 0:
        ctypes.set_errno(0)
        ret = libc.syscall(nr, *[ctypes.c_long(-1)] * 6)
        os._exit(0 if ret >= 0 else ctypes.get_errno())
    print(name, os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


def _denied_numbers() -> dict[str, int]:
    """DENIED's calls that this architecture has, by number; not vhangup, which has no argument to make
    harmless (on the host it would hang up the terminal)."""
    import pyseccomp

    numbers = {name: pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name) for name in DENIED}
    return {name: nr for name, nr in numbers.items() if nr >= 0 and name != "vhangup"}


@pytest.mark.parametrize("backend", ISOLATING)
async def test_every_denied_call_fails_with_eperm(backend, textkit_env):
    """For a call that needs a capability the sandbox lacks, EPERM could come from the kernel without the
    filter; for the others (ptrace, personality, io_uring, mq_open, adjtimex, setns, unshare...) only the
    filter gives it. The engine's default profile let ptrace, personality, io_uring, mq_open, adjtimex and
    clock_adjtime through."""
    numbers = json.dumps(_denied_numbers())
    host = _results(await _on_host(CALL_EACH, numbers))
    assert host.keys() == json.loads(numbers).keys() and EPERM not in host.values(), host  # the control
    inside = _results(await _in_sandbox(backend, textkit_env, CALL_EACH, numbers))
    assert inside == dict.fromkeys(host, EPERM)


# Calls io_uring_setup(4, NULL) and getpid through int 0x80, the 32-bit entry (i386 numbers 425 and 20) that
# a 64-bit process can use too, and prints "<name> <return value>", or "<name> killed <signal>".
INT80 = r"""
import ctypes, mmap, os, struct
page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
for name, nr, arg in (("io_uring_setup", 425, 4), ("getpid", 20, 0)):
    # push rbx; mov eax, nr; mov ebx, arg; xor ecx, ecx; int 0x80; pop rbx; ret
    code = b"\x53\xb8" + struct.pack("<I", nr) + b"\xbb" + struct.pack("<I", arg) + b"\x31\xc9\xcd\x80\x5b\xc3"
    page[: len(code)] = code
    call = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(page)))
    pid = os.fork()
    if pid == 0:
        print(name, call(), flush=True)
        os._exit(0)
    status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if status < 0:
        print(name, "killed", -status)
"""
SIGSYS = 31


def _answers(output: str) -> dict[str, str]:
    return {name: value for name, value in (line.split(maxsplit=1) for line in output.strip().splitlines())}


@pytest.mark.skipif(platform.machine() != "x86_64", reason="int 0x80 is x86's")
@pytest.mark.parametrize("backend", ISOLATING)
async def test_the_32_bit_entry_does_not_pass_the_filter(backend, textkit_env):
    """A filter written for x86_64 numbers does not see i386 calls unless it names that architecture too. The
    ns filter kills a process that makes one; the docker profile applies its rules there too (32-bit
    programs keep working, as under the engine's default profile)."""
    host = _answers(await _on_host(INT80))
    if host["io_uring_setup"] != str(-errno.EFAULT):
        pytest.skip(f"no 32-bit entry on this kernel: {host}")
    assert int(host["getpid"]) > 0  # the control: the call reached io_uring (a bad pointer), getpid answered
    inside = _answers(await _in_sandbox(backend, textkit_env, INT80))
    if backend == "ns":
        assert inside["io_uring_setup"] == f"killed {SIGSYS}", inside
    else:
        assert inside["io_uring_setup"] == str(-EPERM) and int(inside["getpid"]) > 0, inside
