"""Issue #38, "reuse without forgery": what a command could do in an ns sandbox that a reset in place (or the
seccomp filter) did not undo or stop. Each test carries its positive control: the attack is shown to work
where the guarantee is absent (on the host, or without the reset), so no test passes because its target is
missing on this kernel."""

from __future__ import annotations

import asyncio
import errno
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import available_factory

from swe_rl.sandbox.base import Limits
from swe_rl.sandbox.bwrap import MOUNTPOINT
from swe_rl.sandbox.ns import NsSandbox

# Calls each io_uring system call (425-427 on every architecture: the unified table) and prints
# "<name> <return value> <errno>"; a ring's fd is closed. The same script runs on the host (the control)
# and inside a sandbox.
IO_URING = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
params = ctypes.create_string_buffer(120)  # struct io_uring_params, zeroed
for name, args in (("setup", (425, 4, params)), ("enter", (426, -1, 0, 0, 0, None, 0)),
                   ("register", (427, -1, 0, None, 0))):
    ctypes.set_errno(0)
    ret = libc.syscall(*args)
    print(name, ret, ctypes.get_errno())
    if ret >= 0 and name == "setup":
        os.close(ret)
"""
EPERM, ENOSYS = errno.EPERM, errno.ENOSYS
KEEP = "setsid sleep 1000 >/dev/null 2>&1 < /dev/null & echo $!"  # a process reset(keep=...) can keep


def _calls(output: str) -> dict[str, tuple[int, int]]:
    lines = [line.split() for line in output.strip().splitlines()]
    return {name: (int(ret), int(err)) for name, ret, err in lines}


@pytest.mark.parametrize("backend", ["ns", "docker"])
async def test_io_uring_is_denied(backend, textkit_env):
    ran = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-c", IO_URING], capture_output=True, text=True
    )
    host = _calls(ran.stdout)
    # the control: this kernel hands out a ring, and the other two calls reach io_uring's own checks (a bad fd)
    assert host["setup"][0] >= 0, f"io_uring_setup fails on the host: {host}"
    assert all(host[name][1] not in (0, EPERM, ENOSYS) for name in ("enter", "register")), host
    async with await available_factory(backend).create(textkit_env) as box:
        inside = await box.exec(f"python3 - <<'EOF'\n{IO_URING}EOF", timeout=30)
        assert inside.returncode == 0, inside.output
        assert _calls(inside.output) == {name: (-1, EPERM) for name in ("setup", "enter", "register")}


def _ns(box: object) -> NsSandbox:
    assert isinstance(box, NsSandbox)
    return box


@pytest.mark.ns
async def test_a_lowered_io_priority_is_put_back(textkit_env):
    """ioprio_set is allowed on a process of the same uid: a command can put the shell (and a kept process)
    in the idle I/O class, and every later command inherits it."""
    async with await available_factory("ns").create(textkit_env) as box:
        kept = int((await box.exec(KEEP, timeout=10)).output.split()[-1])
        pristine = (await box.exec(f"ionice -p 1 {kept}; ionice", timeout=10)).output
        lowered = await box.exec(f"ionice -c 3 -p 1 {kept} && ionice -p 1 {kept}", timeout=10)
        # the control: lowered, and inherited by the next command when nothing puts it back
        assert lowered.returncode == 0 and lowered.output == "idle\nidle\n", lowered.output
        assert (await box.exec("ionice", timeout=10)).output == "idle\n"
        await box.reset(keep=[kept])
        assert box.restart_reason is None
        assert (await box.exec(f"ionice -p 1 {kept}; ionice", timeout=10)).output == pristine


# A directory tree 1500 levels deep, each named argv[1], under each path given after it: deeper than Python's
# recursion limit; named "deep", its paths (7,500 characters) are longer than PATH_MAX too, so only a walk
# that neither recurses nor names whole paths removes it.
DEEP = r"""
import os, sys
for top in sys.argv[2:]:
    os.chdir(top)
    for _ in range(1500):
        os.mkdir(sys.argv[1])
        os.chdir(sys.argv[1])
    open("leaf", "w").close()
"""


@pytest.mark.ns
@pytest.mark.parametrize("name", ["d", "deep"])
async def test_a_deep_tree_is_removed_by_a_reset_in_place(textkit_env, name):
    async with await available_factory("ns").create(textkit_env) as box:
        box = _ns(box)
        await box.reset()  # the reset worker is up, and the next layer built ahead
        made = await box.exec(
            f"python3 - {name} /tmp /testbed <<'EOF'\n{DEEP}EOF\nfind /tmp/{name} | wc -l", timeout=60
        )
        assert made.returncode == 0 and made.output.split() == ["1501"], (
            made.output
        )  # the control: it is there
        old = _tmpfs(box) / f"layer.{box.generation}"
        assert (old / "upper" / name).is_dir()
        await box.reset()
        assert box.restart_reason is None
        left = await box.exec(f"ls -d /tmp/{name} /testbed/{name}; git status --porcelain", timeout=30)
        gone = "".join(
            f"ls: cannot access '{top}/{name}': No such file or directory\n" for top in ("/tmp", "/testbed")
        )
        assert left.output == gone, left.output
        assert not old.exists(), "the old layer's tmpfs is let go, its directory removed"


def _tmpfs(box: NsSandbox) -> Path:
    """The sandbox's private tmpfs, seen from the host through bwrap's mount namespace."""
    return Path(f"/proc/{box.bwrap_pid}/root{MOUNTPOINT}")


# Creates empty files in /tmp/many until one fails or ``argv[1]`` exist; prints how many, the errno of the
# failure (0: none), and the tmpfs's free inodes and free bytes then.
MANY = r"""
import errno, os, sys
os.mkdir("/tmp/many")
made, err = 0, 0
try:
    while made < int(sys.argv[1]):
        os.close(os.open(f"/tmp/many/{made}", os.O_CREAT | os.O_WRONLY, 0o600))
        made += 1
except OSError as exc:
    err = exc.errno
vfs = os.statvfs("/tmp")
print(made, err, vfs.f_ffree, vfs.f_bavail * vfs.f_frsize)
"""


@pytest.mark.parametrize("backend", ["ns", "docker"])
async def test_the_file_count_is_bounded_by_the_disk_size(backend, textkit_env):
    """Empty files cost no disk, but ~1 KiB of kernel memory each (an inode and its dentry), charged to the
    memory cgroup: without a bound on inodes, a sandbox's disk limit does not bound its file count."""
    limits = Limits(disk_mb=16)
    bound = limits.inodes
    async with await available_factory(backend).create(textkit_env, limits) as box:
        ran = await box.exec(f"python3 - {bound + 1000} <<'EOF'\n{MANY}EOF", timeout=120)
        made, err, free_inodes, free_bytes = map(int, ran.output.split())
        assert err == errno.ENOSPC and made <= bound, ran.output
        # the control: the bound stopped it, not the space, which has room for a thousand more
        assert free_inodes == 0 and free_bytes > 1000 * 4096, ran.output
        assert (await box.exec("rm -rf /tmp/many && touch /tmp/one && echo ok", timeout=60)).output == "ok\n"


# A process with every signal's default action (a background job of a non-interactive shell ignores INT and QUIT)
# (it says when its handlers are set: a signal sent before would find INT and QUIT still ignored, under load)
DEFAULT_AND_WAIT = "import signal, time; [signal.signal(s, signal.SIG_DFL) for s in signal.valid_signals() if s not in (signal.SIGKILL, signal.SIGSTOP)]; open('/tmp/ready', 'w').close(); time.sleep(30)"


@pytest.mark.ns
async def test_a_command_cannot_end_the_shell_with_a_signal(textkit_env):
    """The shell is the sandbox's pid 1 and has no signal handler, so it ignores every signal a command sends
    it (commands are stopped from the host, ns.py): the sandbox stays usable. Control: the same signals end
    an ordinary process of the sandbox."""
    signals = ["INT", "TERM", "HUP", "USR1", "USR2", "QUIT", "ALRM"]
    async with await available_factory("ns").create(textkit_env) as box:
        for name in signals:
            ended = await box.exec(
                f"rm -f /tmp/ready; python -c {shlex.quote(DEFAULT_AND_WAIT)} & p=$!; "
                f"while [ ! -e /tmp/ready ]; do sleep 0.05; done; kill -{name} $p; wait $p; echo $?",
                timeout=30,
            )
            assert int(ended.output.split()[-1]) > 128, (name, ended.output)  # the control
            await box.exec(f"kill -{name} 1", timeout=10)
            assert (await box.exec("echo alive", timeout=10)).output == "alive\n", name
