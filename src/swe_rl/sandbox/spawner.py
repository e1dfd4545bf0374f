"""A small helper process that starts bwrap sandboxes, so the (possibly huge) caller never forks.

Forking a Python process costs time proportional to its memory (3 ms at 35 MB here, far more inside
a trainer holding a model), and the ns backend must run code between fork and exec (join cgroups,
mount a private tmpfs). So a tiny helper, started once per process with ``python -S``, does the
forking: the caller sends the argv, the cgroup files and the pipe ends over a UNIX socket
(SCM_RIGHTS) and gets the pid back. The helper exits when its socket closes (the parent died), and
bwrap (``--die-with-parent``) dies with the helper.

Between fork and exec the child, still root, joins the sandbox's cgroups, mounts its private tmpfs,
bind-mounts the host paths the sandbox needs into it (the env cache may sit under a directory only
root can enter) and then drops to the sandbox's unprivileged uid: bwrap itself never runs as root, so
no process of the sandbox is host root, and the kernel makes its ``/proc/sys`` read-only.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading

from swe_rl.errors import SandboxError

# Runs in the helper (python -S: no site, no swe_rl import). Kept dependency-free on purpose.
_HELPER = r"""
import ctypes, json, os, signal, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
# No PR_SET_PDEATHSIG: it fires when the *thread* that started us exits, not the process. We exit when
# the socket reaches EOF instead, which is when the parent process is gone (or closed it on purpose).
signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the parent's to handle
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped automatically
sock = socket.socket(fileno=int(sys.argv[1]))
MS_REC, MS_PRIVATE, MS_NOSUID, MS_NODEV, MS_BIND = 0x4000, 1 << 18, 0x2, 0x4, 0x1000

def child(req, fds):
    try:
        os.dup2(fds[0], 0); os.dup2(fds[1], 1); os.dup2(fds[2], 2); os.dup2(fds[3], 3)
        os.closerange(4, 1 << 16)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        pid = str(os.getpid()).encode()
        for path in req["cgroup_procs"]:
            fd = os.open(path, os.O_WRONLY); os.write(fd, pid); os.close(fd)
        mnt = req["mountpoint"]
        if libc.unshare(0x00020000) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS)")
        if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
            raise OSError(ctypes.get_errno(), "making / private")
        if libc.mount(b"swe-rl", mnt.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, req["tmpfs_opts"].encode()) != 0:
            raise OSError(ctypes.get_errno(), "mounting the sandbox tmpfs")
        uid = req["uid"]
        for sub, mode, owner in (("upper", 0o755, uid), ("work", 0o755, uid), ("tmp", 0o1777, uid),
                                 ("ctl", 0o711, 0), ("b", 0o755, 0)):
            os.mkdir(f"{mnt}/{sub}")
            os.chown(f"{mnt}/{sub}", owner, owner)
            os.chmod(f"{mnt}/{sub}", mode)
        # the commands' output files get a tmpfs of their own: a full disk must not silence them
        if libc.mount(b"swe-rl-ctl", f"{mnt}/ctl".encode(), b"tmpfs", MS_NOSUID | MS_NODEV,
                      req["ctl_tmpfs_opts"].encode()) != 0:
            raise OSError(ctypes.get_errno(), "mounting the control tmpfs")
        for source, name in req["binds"]:
            target = f"{mnt}/b/{name}"
            if os.path.isdir(source):
                os.mkdir(target)
            else:
                os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o600))
            if libc.mount(source.encode(), target.encode(), None, MS_BIND | MS_REC, None) != 0:
                raise OSError(ctypes.get_errno(), f"binding {source}")
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
        os.execv(req["argv"][0], req["argv"])
    except BaseException as exc:
        os.write(2, f"swe-rl spawner: {exc}\n".encode())
    os._exit(127)

while True:
    try:
        msg, fds, _, _ = socket.recv_fds(sock, 1 << 20, 8)
    except OSError:
        break
    if not msg:
        break
    req = json.loads(msg)
    try:
        pid = os.fork()
    except OSError as exc:
        pid = -exc.errno
    if pid == 0:
        child(req, fds)
    for fd in fds:
        os.close(fd)
    sock.sendall(json.dumps({"pid": pid}).encode() + b"\n")
"""


class Spawner:
    """The client side: one helper per process, shared by every ns sandbox (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._reader: socket.SocketIO | None = None

    def _ensure(self) -> socket.socket:
        if self._proc is not None and self._proc.poll() is None and self._sock is not None:
            return self._sock
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self._proc = subprocess.Popen(
            [sys.executable, "-S", "-c", _HELPER, str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            close_fds=True,
        )
        theirs.close()
        self._sock = ours
        return ours

    def spawn(
        self,
        argv: list[str],
        fds: list[int],
        *,
        cgroup_procs: list[str],
        mountpoint: str,
        tmpfs_opts: str,
        ctl_tmpfs_opts: str,
        uid: int,
        binds: list[tuple[str, str]],
    ) -> int:
        """Start ``argv`` as ``uid`` with ``fds`` as its stdin, stdout, stderr and fd 3; return its pid.

        In the child's private mount namespace ``mountpoint`` holds a fresh tmpfs with ``upper``,
        ``work`` and ``tmp`` (owned by ``uid``), ``ctl`` (a tmpfs of its own, root's, mode 0711: files in
        it can be opened by name but not listed or created) and ``b/<name>`` for each ``(host path, name)`` of ``binds``.
        """
        request = json.dumps(
            {
                "argv": argv,
                "cgroup_procs": cgroup_procs,
                "mountpoint": mountpoint,
                "tmpfs_opts": tmpfs_opts,
                "ctl_tmpfs_opts": ctl_tmpfs_opts,
                "uid": uid,
                "binds": binds,
            }
        ).encode()
        with self._lock:
            for attempt in range(2):  # a helper that died (killed from outside) is replaced once
                sock = self._ensure()
                try:
                    socket.send_fds(sock, [request], fds)
                    reply = b""
                    while not reply.endswith(b"\n"):
                        chunk = sock.recv(4096)
                        if not chunk:
                            raise OSError("the spawner helper exited")
                        reply += chunk
                    break
                except OSError as exc:
                    status = self._proc.poll() if self._proc is not None else None
                    self.close()
                    if attempt:
                        raise SandboxError(
                            f"cannot start a sandbox: {exc} (helper exit status {status})"
                        ) from exc
        pid = int(json.loads(reply)["pid"])
        if pid < 0:
            raise SandboxError(f"the spawner could not fork: {os.strerror(-pid)}")
        return pid

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None


_SPAWNER = Spawner()


def spawner() -> Spawner:
    return _SPAWNER
