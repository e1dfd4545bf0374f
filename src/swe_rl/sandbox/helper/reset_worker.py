"""The reset worker: what a reset in place (reset.py) does inside a sandbox's namespaces, as root.

It runs in the spawner's helper (spawn_helper.py: ``python -S``, this folder first on its path, the standard
library only), in a process the helper forks on the first reset. The helper never leaves its own namespaces:
the worker does, and the caller talks to it over a socket of its own, one request a line, one JSON answer a
line. For each reset it opens the sandbox's namespaces, removes its System V IPC objects, puts a new overlay of
the testbed over a new, empty upper layer at the workdir in place of the old one, and empties ``/tmp``,
``/dev/shm`` and ``/root`` (the commands' $HOME); then it comes back to its own namespaces (a worker that
cannot exits).

The next reset's overlay is built ahead: after answering, the worker builds the overlay the request
names as the next one (its layer's directories, the same testbed) and keeps it detached, so the next
reset of that sandbox only swaps it in. Nothing can write to it meanwhile: it is mounted nowhere, and its
directories are on the sandbox's tmpfs outside every path bound into the sandbox. It is dropped (and its
directories removed) when the next reset asks for another one (a reset to another env's testbed), and
closed when the sandbox's bwrap exits (a pidfd of it is watched), so a closed sandbox's tmpfs is not kept.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import select
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

# mypy reads the first; run, this folder is first on sys.path and the sibling is imported by its name
if TYPE_CHECKING:
    from swe_rl.sandbox.helper.tree_walk import empty_tree
else:
    from tree_walk import empty_tree

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
CLONE_NEWNS, CLONE_NEWIPC, MNT_DETACH, AT_FDCWD = 0x00020000, 0x08000000, 2, -100
FSCONFIG_SET_STRING, FSCONFIG_CMD_CREATE, MOVE_MOUNT_F_EMPTY_PATH = 1, 6, 4
MOUNT_ATTR_NOSUID, MOUNT_ATTR_NODEV = 0x2, 0x4
MSG_INFO, SHM_INFO, SEM_INFO = 12, 14, 19
# one number on every architecture since Linux 5.2 (the unified table from 424 on)
SYS_MOVE_MOUNT, SYS_FSOPEN, SYS_FSCONFIG, SYS_FSMOUNT = 429, 430, 431, 432
_OCTAL = re.compile(r"\\([0-7]{3})")
Request = dict[str, Any]  # one reset, as spawner.Spawner.reset sends it
Ahead = tuple[str, str, int, int]  # layer, lower, its detached mount's fd, a pidfd of bwrap
# bwrap pid -> the next overlay built ahead; each pidfd is in WATCHED (bwrap's exit lets its overlay go) from
# when it is kept until it is taken
AHEAD: dict[int, Ahead] = {}
WATCHED: dict[int, int] = {}  # pidfd -> bwrap pid
POLLER = select.poll()  # the caller's socket and WATCHED
MAX_AHEAD = 1024  # sandboxes with one (two fds each); beyond, resets build their own


def check(ret: int, what: str) -> int:
    if ret < 0:
        raise OSError(ctypes.get_errno(), f"{what}: {os.strerror(ctypes.get_errno())}")
    return ret


def reset_worker(conn: socket.socket) -> None:
    """Serve one reset per line on ``conn`` until it closes, each answered with a line of JSON."""
    home = [os.open(f"/proc/self/ns/{ns}", os.O_RDONLY) for ns in ("ipc", "mnt")]
    POLLER.register(conn.fileno(), select.POLLIN)
    pending = b""
    while True:
        ready = {fd for fd, _ in POLLER.poll()}
        for fd in ready & WATCHED.keys():  # that sandbox's bwrap has exited: its tmpfs must not be kept
            if (ahead := take_ahead(WATCHED[fd])) is not None:
                drop(ahead)
        if conn.fileno() not in ready:
            continue
        chunk = conn.recv(1 << 16)
        if not chunk:
            return
        pending += chunk
        while b"\n" in pending:
            line, _, pending = pending.partition(b"\n")
            if not serve_reset(conn, json.loads(line), home):
                return


def serve_reset(conn: socket.socket, req: Request, home: list[int]) -> bool:
    fds: list[int] = []
    error: str | None
    old: int | None
    try:
        prebuilt, old = reset_in_sandbox(req, fds)
        error = None
    except BaseException as exc:
        error, prebuilt, old = repr(exc) or "failed", False, None
    stranded = not go_home(home)
    conn.sendall(json.dumps({"error": error, "stranded": stranded, "prebuilt": prebuilt}).encode() + b"\n")
    if old is not None:
        # the old overlay's last reference: it is torn down now, after the answer, and with it its upper
        # layer's tmpfs (all of the previous use's files at once). The next use has a tmpfs of its own, so
        # nothing it can use waits for this
        os.close(old)
        fds.remove(old)
    if not error and not stranded and req.get("next"):
        build_ahead(req, fds[0])
        stranded = not go_home(home)
    for fd in fds:  # a handle on a namespace would keep it (and its mounts) alive
        os.close(fd)
    return not stranded


def go_home(home: list[int]) -> bool:
    """Back to this process's namespaces, root and cwd (setns(mnt) resets both); False when it cannot."""
    try:
        check(libc.setns(home[0], CLONE_NEWIPC), "setns(ipc) back")
        check(libc.setns(home[1], CLONE_NEWNS), "setns(mnt) back")
        return True
    except OSError:
        return False


def reset_in_sandbox(req: Request, fds: list[int]) -> tuple[bool, int]:
    shell, bwrap, mnt, workdir = req["shell_pid"], req["bwrap_pid"], req["mountpoint"], req["workdir"]
    # every handle first: once in the sandbox's mount namespace, /proc is the sandbox's
    for path, flags in (
        (f"/proc/{bwrap}/ns/mnt", os.O_RDONLY),
        (f"/proc/{shell}/ns/mnt", os.O_RDONLY),
        (f"/proc/{shell}/ns/ipc", os.O_RDONLY),
        (f"/proc/{shell}/root", os.O_PATH | os.O_DIRECTORY),
    ):
        fds.append(os.open(path, flags | os.O_CLOEXEC))
    outer, inner, ipc, root = fds
    with open(f"/proc/{shell}/mountinfo") as f:
        mounts = [unescape(line.split()[4]) for line in f]
    with open(f"/proc/{shell}/stat") as f:
        if int(f.read().rsplit(")", 1)[1].split()[19]) != req["shell_start"]:
            raise OSError("the shell is not the one we were sent")
    if mounts.count(workdir) != 1 or any(m.startswith(workdir.rstrip("/") + "/") for m in mounts):
        raise OSError(f"unexpected mounts at {workdir}")
    check(libc.setns(ipc, CLONE_NEWIPC), "setns(ipc)")
    if sysv_in_use():
        remove_sysv_ipc()
    check(libc.setns(outer, CLONE_NEWNS), "setns(outer mnt)")
    lower = lower_of(req)
    ahead = take_ahead(bwrap)
    prebuilt = ahead is not None and ahead[:2] == (req["layer"], lower) and alive(ahead[3])
    if ahead is not None and prebuilt:
        fds.extend(ahead[2:])
        layer = ahead[2]
    else:
        if ahead is not None:  # built for another testbed (or its bwrap is gone): its tmpfs goes too
            drop(ahead, mnt if alive(ahead[3]) else None)
        layer = new_overlay(mnt, lower, req["layer"], req["uid"], req["tmpfs_opts"], fds)
    # the old layer's tmpfs, mounted here, is let go: the old overlay holds a private mount of it (overlayfs
    # clones its upper layer's), so it lives as long as that overlay, whose last reference the caller drops
    detach(mnt, req["old"])
    check(libc.setns(inner, CLONE_NEWNS), "setns(sandbox mnt)")
    os.fchdir(root)
    os.chroot(".")
    # held until the swap is done: closed (its teardown) by serve_reset before it answers
    fds.append(os.open(workdir, os.O_PATH | os.O_CLOEXEC))
    old = fds[-1]
    check(libc.umount2(workdir.encode(), MNT_DETACH), f"unmounting {workdir}")
    check(
        libc.syscall(SYS_MOVE_MOUNT, layer, b"", AT_FDCWD, workdir.encode(), MOVE_MOUNT_F_EMPTY_PATH),
        f"move_mount onto {workdir}",
    )
    for path, mode in (("/tmp", 0o1777), ("/dev/shm", 0o1777), ("/root", 0o700)):
        wipe(path, set(mounts), req["uid"], mode)
    return prebuilt, old


def lower_of(req: Request) -> str:
    return str(req.get("lower") or f"{req['mountpoint']}/b/testbed")


def build_ahead(req: Request, outer: int) -> None:
    """The overlay of the layer ``req["next"]`` names, detached and kept for the sandbox's next reset, built in
    the mount namespace of its bwrap (``outer``: the one just reset, opened while it was alive)."""
    mnt, name, bwrap = req["mountpoint"], req["next"], req["bwrap_pid"]
    if len(AHEAD) >= MAX_AHEAD:
        return
    own: list[int] = []
    try:
        check(libc.setns(outer, CLONE_NEWNS), "setns(outer mnt)")
        own.append(os.pidfd_open(bwrap))
        if os.stat(f"/proc/{bwrap}/ns/mnt").st_ino != os.stat("/proc/self/ns/mnt").st_ino:
            raise OSError("its bwrap has exited")  # and the pid is another process's now
        if os.path.lexists(f"{mnt}/{name}"):
            raise OSError("the next layer's directory exists")
    except OSError:
        for fd in own:
            os.close(fd)
        return
    lower = lower_of(req)
    try:
        layer = new_overlay(mnt, lower, name, req["uid"], req["tmpfs_opts"], own)
        AHEAD[bwrap] = (name, lower, layer, own[0])
        WATCHED[own[0]] = bwrap
        POLLER.register(own[0], select.POLLIN)
        own = own[1:-1]  # the fsopen contexts and the tmpfs's fd are closed; the overlay and the pidfd kept
    except OSError:  # the next reset builds its own (and fails where it would have)
        with contextlib.suppress(OSError):
            detach(mnt, name)
    for fd in own:
        os.close(fd)


def take_ahead(bwrap: int) -> Ahead | None:
    """The overlay built ahead for ``bwrap`` (None: none), no longer kept or watched: the caller closes it."""
    ahead = AHEAD.pop(bwrap, None)
    if ahead is not None:
        POLLER.unregister(ahead[3])
        del WATCHED[ahead[3]]
    return ahead


def alive(pidfd: int) -> bool:
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return not poller.poll(0)


def drop(ahead: Ahead, mnt: str | None = None) -> None:
    """Close an overlay built ahead; with ``mnt`` (its bwrap's tmpfs, in its mount namespace), let its layer's
    tmpfs go there too."""
    os.close(ahead[2])
    os.close(ahead[3])
    if mnt is not None:
        detach(mnt, ahead[0])


def detach(mnt: str, name: str) -> None:
    """Unmount (lazily: an overlay may still hold it) the layer's tmpfs at ``{mnt}/{name}`` and remove the
    directory it was mounted on; nothing when there is none."""
    top = f"{mnt}/{name}"
    if not os.path.lexists(top):
        return
    if os.path.ismount(top):
        check(libc.umount2(top.encode(), MNT_DETACH), f"unmounting {top}")
    os.rmdir(top)


def unescape(path: str) -> str:
    return _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), path) if "\\" in path else path


def new_overlay(mnt: str, lower: str, name: str, uid: int, tmpfs_opts: str, fds: list[int]) -> int:
    """A detached overlay of the testbed ``lower`` (the one bwrap bound, or another env's: a host path, which
    bwrap's mount namespace still sees) over a new, empty upper layer on a tmpfs of its own (``tmpfs_opts``:
    the sandbox's disk_mb and inodes), mounted at ``{mnt}/{name}``, outside every path bound into the
    sandbox (fsopen/fsconfig/fsmount)."""
    top = f"{mnt}/{name}"
    os.mkdir(top, 0o755)
    tmpfs = make_fs(b"tmpfs", [opt.partition("=")[::2] for opt in tmpfs_opts.split(",")], fds)
    check(
        libc.syscall(SYS_MOVE_MOUNT, tmpfs, b"", AT_FDCWD, top.encode(), MOVE_MOUNT_F_EMPTY_PATH),
        f"move_mount onto {top}",
    )
    for sub in ("upper", "work"):
        os.mkdir(f"{top}/{sub}", 0o755)
        os.chown(f"{top}/{sub}", uid, uid)
    options = {
        "lowerdir": lower,
        "upperdir": f"{top}/upper",
        "workdir": f"{top}/work",
        "redirect_dir": "nofollow",
        "index": "off",
        "metacopy": "off",
    }
    return make_fs(b"overlay", list(options.items()), fds)


def make_fs(kind: bytes, options: list[tuple[str, str]], fds: list[int]) -> int:
    """A detached mount (nosuid, nodev) of a new filesystem of ``kind`` with ``options`` (key, value pairs):
    its fd."""
    fs = check(libc.syscall(SYS_FSOPEN, kind, 0), f"fsopen({kind.decode()})")
    fds.append(fs)
    try:
        for key, value in options:
            check(libc.syscall(SYS_FSCONFIG, fs, FSCONFIG_SET_STRING, key.encode(), value.encode(), 0), key)
        check(
            libc.syscall(SYS_FSCONFIG, fs, FSCONFIG_CMD_CREATE, None, None, 0),
            f"creating the {kind.decode()}",
        )
        fds.append(check(libc.syscall(SYS_FSMOUNT, fs, 0, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV), "fsmount"))
        return fds[-1]
    except OSError as exc:
        log = b""
        with contextlib.suppress(OSError):
            log = os.read(fs, 4096)  # the kernel's own words on why
        raise OSError(exc.errno, f"{exc.strerror} {log.decode(errors='replace').strip()}") from None


def sysv_in_use() -> bool:
    """Whether the ipc namespace holds any System V object: the kernel's counts (SHM_INFO's used_ids, MSG_INFO's
    msgpool, SEM_INFO's semusz), three calls instead of reading three /proc files. A call that fails counts as
    in use (the files are read then)."""
    buf = ctypes.create_string_buffer(256)
    calls: tuple[tuple[Callable[[], int], int], ...] = (
        (lambda: libc.shmctl(0, SHM_INFO, buf), 0),
        (lambda: libc.msgctl(0, MSG_INFO, buf), 0),
        (lambda: libc.semctl(0, 0, SEM_INFO, buf), 7),
    )
    for call, index in calls:
        ctypes.memset(buf, 0, len(buf))
        if call() < 0 or ctypes.c_int.from_buffer(buf, 4 * index).value:
            return True
    return False


def remove_sysv_ipc() -> None:
    """Every System V shared memory segment, semaphore set and message queue of the ipc namespace."""
    removers: tuple[tuple[str, Callable[[int], int]], ...] = (
        ("shm", lambda i: libc.shmctl(i, 0, None)),
        ("sem", lambda i: libc.semctl(i, 0, 0)),
        ("msg", lambda i: libc.msgctl(i, 0, None)),
    )
    for kind, rm in removers:
        with open(f"/proc/sysvipc/{kind}") as f:
            ids = [int(line.split()[1]) for line in list(f)[1:] if line.strip()]
        for ipc_id in ids:
            check(rm(ipc_id), f"removing {kind} {ipc_id}")


def wipe(top: str, mounts: set[str], uid: int, mode: int) -> None:
    """Empty ``top`` without crossing into a mount under it (nor removing a mount point's parents), however deep
    its tree (tree_walk.py)."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        empty_tree(fd, top, frozenset(mounts))
    finally:
        os.close(fd)
    os.chown(top, uid, uid)
    os.chmod(top, mode)
    for name in os.listxattr(top, follow_symlinks=False):
        os.removexattr(top, name, follow_symlinks=False)
