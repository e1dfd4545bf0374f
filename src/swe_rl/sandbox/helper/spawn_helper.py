"""The spawner's helper program (spawner.py): it forks the ns backend's sandboxes, so the caller never does.

Run as ``python -S spawn_helper.py FD`` by the caller's own interpreter: no site, no swe_rl import, this folder
first on its path (the reset worker and the tree walk beside it are the only modules of ours it imports). FD
is its end of a UNIX socket: each request is a JSON message with its file descriptors (SCM_RIGHTS), each
answer a JSON line with the pid forked (``-errno`` when the fork failed).

A request starts a sandbox: the child, still root, joins the sandbox's cgroups, mounts its private tmpfs
and bind-mounts the host paths it needs there, drops to the sandbox's uid and execs bwrap. A request with
``"op": "reset_worker"`` forks the reset worker (reset_worker.py) on the socket it carries.

No PR_SET_PDEATHSIG: it fires when the *thread* that started us exits, not the process. The helper exits when
its socket reaches EOF instead, which is when the parent process is gone (or closed it on purpose).
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import sys
from typing import TYPE_CHECKING, Any

# mypy reads the first; run, this folder is first on sys.path and the sibling is imported by its name
if TYPE_CHECKING:
    from swe_rl.sandbox.helper.reset_worker import reset_worker
else:
    from reset_worker import reset_worker

libc = ctypes.CDLL(None, use_errno=True)
MS_REC, MS_PRIVATE, MS_NOSUID, MS_NODEV, MS_BIND = 0x4000, 1 << 18, 0x2, 0x4, 0x1000
CLONE_NEWNS = 0x00020000


def child(req: dict[str, Any], fds: list[int]) -> None:
    """In the forked child: the sandbox's fds, cgroups and mounts, then its uid and bwrap; never returns."""
    try:
        os.dup2(fds[0], 0)
        os.dup2(fds[1], 1)
        os.dup2(fds[2], 2)
        os.dup2(fds[3], 3)
        os.closerange(4, 1 << 16)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        pid = str(os.getpid()).encode()
        for path in req["cgroup_procs"]:
            fd = os.open(path, os.O_WRONLY)
            os.write(fd, pid)
            os.close(fd)
        mount_sandbox_tmpfs(req)
        uid = req["uid"]
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
        os.execv(req["argv"][0], req["argv"])
    except BaseException as exc:
        os.write(2, f"swe-rl spawner: {exc}\n".encode())
    os._exit(127)


def mount(source: bytes, target: str, kind: bytes | None, flags: int, data: bytes | None, what: str) -> None:
    if libc.mount(source, target.encode(), kind, flags, data) != 0:
        raise OSError(ctypes.get_errno(), what)


def mount_sandbox_tmpfs(req: dict[str, Any]) -> None:
    """A private mount namespace with the sandbox's tmpfs at ``req["mountpoint"]`` (spawner.Spawner.spawn says
    what is in it)."""
    mnt, uid = req["mountpoint"], req["uid"]
    if libc.unshare(CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS)")
    mount(b"none", "/", None, MS_REC | MS_PRIVATE, None, "making / private")
    mount(
        b"swe-rl",
        mnt,
        b"tmpfs",
        MS_NOSUID | MS_NODEV,
        req["tmpfs_opts"].encode(),
        "mounting the sandbox tmpfs",
    )
    for sub, mode, owner in (
        ("layer", 0o755, 0),
        ("tmp", 0o1777, uid),
        ("shm", 0o1777, uid),
        ("home", 0o700, uid),
        ("ctl", 0o711, 0),
        ("b", 0o755, 0),
    ):
        os.mkdir(f"{mnt}/{sub}")
        os.chown(f"{mnt}/{sub}", owner, owner)
        os.chmod(f"{mnt}/{sub}", mode)
    # the testbed overlay's upper layer has a tmpfs of its own (as each reset's has: reset.py), so that a
    # use's files go with its layer, at once
    mount(
        b"swe-rl-layer",
        f"{mnt}/layer",
        b"tmpfs",
        MS_NOSUID | MS_NODEV,
        req["layer_tmpfs_opts"].encode(),
        "mounting the testbed layer's tmpfs",
    )
    for sub in ("upper", "work"):
        os.mkdir(f"{mnt}/layer/{sub}", 0o755)
        os.chown(f"{mnt}/layer/{sub}", uid, uid)
    # the commands' output files get a tmpfs of their own: a full disk must not silence them
    mount(
        b"swe-rl-ctl",
        f"{mnt}/ctl",
        b"tmpfs",
        MS_NOSUID | MS_NODEV,
        req["ctl_tmpfs_opts"].encode(),
        "mounting the control tmpfs",
    )
    for source, name in req["binds"]:
        target = f"{mnt}/b/{name}"
        if os.path.isdir(source):
            os.mkdir(target)
        else:
            os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o600))
        mount(source.encode(), target, None, MS_BIND | MS_REC, None, f"binding {source}")


def serve(sock: socket.socket, req: dict[str, Any], fds: list[int]) -> dict[str, int]:
    try:
        pid = os.fork()
    except OSError as exc:
        pid = -(exc.errno or 0)
    if pid == 0 and req.get("op") == "reset_worker":
        try:
            sock.close()  # the caller must see EOF when the helper dies, whatever the worker does
            reset_worker(socket.socket(fileno=fds[0]))
        finally:
            os._exit(0)
    if pid == 0:
        child(req, fds)
    for fd in fds:
        os.close(fd)
    return {"pid": pid}


def main(fd: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the parent's to handle
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped automatically
    sock = socket.socket(fileno=fd)
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 1 << 20, 8)
        except OSError:
            break
        if not msg:
            break
        sock.sendall(json.dumps(serve(sock, json.loads(msg), fds)).encode() + b"\n")


if __name__ == "__main__":
    main(int(sys.argv[1]))
