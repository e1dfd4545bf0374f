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

A reset in place (reset.py) goes to a worker the helper forks on the first one: the caller talks to it
over a socket of its own (resets never hold up a spawn), and it enters a sandbox's namespaces for each
reset and comes back to its own after; the helper itself never leaves them.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from typing import Any

from swe_rl.errors import SandboxError

RESET_TIMEOUT = 20.0  # seconds a reset in place may take before the sandbox is restarted instead

# Runs in the helper (python -S: no site, no swe_rl import). Kept dependency-free on purpose.
_HELPER = r"""
import contextlib, ctypes, json, os, re, select, signal, socket, stat, sys
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
                                 ("shm", 0o1777, uid), ("ctl", 0o711, 0), ("b", 0o755, 0)):
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

# -- reset in place (see reset.py). The helper never leaves its own namespaces: it forks a worker that the
# caller talks to directly (a socket of the caller's), which joins a sandbox's namespaces for each reset and
# then comes back to its own; one that cannot come back exits.
CLONE_NEWNS, CLONE_NEWIPC, MNT_DETACH, AT_FDCWD = 0x00020000, 0x08000000, 2, -100
FSCONFIG_SET_STRING, FSCONFIG_CMD_CREATE, MOVE_MOUNT_F_EMPTY_PATH = 1, 6, 4
MOUNT_ATTR_NOSUID, MOUNT_ATTR_NODEV = 0x2, 0x4
# one number on every architecture since Linux 5.2 (the unified table from 424 on)
SYS_MOVE_MOUNT, SYS_FSOPEN, SYS_FSCONFIG, SYS_FSMOUNT = 429, 430, 431, 432
libc.syscall.restype = ctypes.c_long
_OCTAL = re.compile(r"\\([0-7]{3})")

def check(ret, what):
    if ret < 0:
        raise OSError(ctypes.get_errno(), f"{what}: {os.strerror(ctypes.get_errno())}")
    return ret

def reset_worker(conn):
    # Serves one reset per line on ``conn`` until it closes, each answered with a line of JSON.
    home = [os.open(f"/proc/self/ns/{ns}", os.O_RDONLY) for ns in ("ipc", "mnt")]
    requests = conn.makefile("rb")
    for line in requests:
        fds = []
        try:
            reset_in_sandbox(json.loads(line), fds)
            error = None
        except BaseException as exc:
            error = repr(exc) or "failed"
        for fd in fds:  # a handle on a namespace would keep it (and its mounts) alive
            os.close(fd)
        try:  # back home: this process's namespaces, root and cwd (setns(mnt) resets both)
            check(libc.setns(home[0], CLONE_NEWIPC), "setns(ipc) back")
            check(libc.setns(home[1], CLONE_NEWNS), "setns(mnt) back")
            stranded = False
        except OSError as exc:
            error, stranded = f"{error}; {exc}", True
        conn.sendall(json.dumps({"error": error, "stranded": stranded}).encode() + b"\n")
        if stranded:
            return

def reset_in_sandbox(req, fds):
    shell, bwrap, mnt, workdir = req["shell_pid"], req["bwrap_pid"], req["mountpoint"], req["workdir"]
    # every handle first: once in the sandbox's mount namespace, /proc is the sandbox's
    for path, flags in ((f"/proc/{bwrap}/ns/mnt", os.O_RDONLY), (f"/proc/{shell}/ns/mnt", os.O_RDONLY),
                        (f"/proc/{shell}/ns/ipc", os.O_RDONLY), (f"/proc/{shell}/root", os.O_PATH | os.O_DIRECTORY)):
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
    remove_sysv_ipc()
    check(libc.setns(outer, CLONE_NEWNS), "setns(outer mnt)")
    lower = req.get("lower") or f"{mnt}/b/testbed"
    layer = new_overlay(mnt, lower, req["upper"], req["work"], req["uid"], fds)
    check(libc.setns(inner, CLONE_NEWNS), "setns(sandbox mnt)")
    os.fchdir(root)
    os.chroot(".")
    check(libc.umount2(workdir.encode(), MNT_DETACH), f"unmounting {workdir}")
    check(libc.syscall(SYS_MOVE_MOUNT, layer, b"", AT_FDCWD, workdir.encode(), MOVE_MOUNT_F_EMPTY_PATH),
          f"move_mount onto {workdir}")
    for path in ("/tmp", "/dev/shm"):
        wipe(path, set(mounts), req["uid"])

def unescape(path):
    return _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), path) if "\\" in path else path

def new_overlay(mnt, lower, upper, work, uid, fds):
    # A detached overlay of the testbed ``lower`` (the one bwrap bound, or another env's: a host path, which
    # bwrap's mount namespace still sees) over a new, empty upper layer (fsopen/fsconfig/fsmount).
    for sub in (upper, work):
        os.mkdir(f"{mnt}/{sub}", 0o755)
        os.chown(f"{mnt}/{sub}", uid, uid)
    fs = check(libc.syscall(SYS_FSOPEN, b"overlay", 0), "fsopen(overlay)")
    fds.append(fs)
    options = {"lowerdir": lower, "upperdir": f"{mnt}/{upper}", "workdir": f"{mnt}/{work}",
               "redirect_dir": "nofollow", "index": "off", "metacopy": "off"}
    try:
        for key, value in options.items():
            check(libc.syscall(SYS_FSCONFIG, fs, FSCONFIG_SET_STRING, key.encode(), value.encode(), 0), key)
        check(libc.syscall(SYS_FSCONFIG, fs, FSCONFIG_CMD_CREATE, None, None, 0), "creating the overlay")
        fds.append(check(libc.syscall(SYS_FSMOUNT, fs, 0, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV), "fsmount"))
        return fds[-1]
    except OSError as exc:
        log = b""
        with contextlib.suppress(OSError):
            log = os.read(fs, 4096)  # the kernel's own words on why
        raise OSError(exc.errno, f"{exc.strerror} {log.decode(errors='replace').strip()}") from None

def remove_sysv_ipc():
    # Every System V shared memory segment, semaphore set and message queue of the ipc namespace.
    for kind, rm in (("shm", lambda i: libc.shmctl(i, 0, None)), ("sem", lambda i: libc.semctl(i, 0, 0)),
                     ("msg", lambda i: libc.msgctl(i, 0, None))):
        with open(f"/proc/sysvipc/{kind}") as f:
            ids = [int(line.split()[1]) for line in list(f)[1:] if line.strip()]
        for ipc_id in ids:
            check(rm(ipc_id), f"removing {kind} {ipc_id}")

def wipe(top, mounts, uid):
    # Empty ``top`` without crossing into a mount under it (nor removing a mount point's parents).
    dev = os.lstat(top).st_dev
    def walk(d):
        kept = False
        for entry in os.scandir(d):
            st = entry.stat(follow_symlinks=False)
            if entry.path in mounts or st.st_dev != dev:
                kept = True
            elif stat.S_ISDIR(st.st_mode):
                if walk(entry.path):
                    kept = True
                else:
                    os.rmdir(entry.path)
            else:
                os.unlink(entry.path)
        return kept
    walk(top)
    os.chown(top, uid, uid)
    os.chmod(top, 0o1777)
    for name in os.listxattr(top, follow_symlinks=False):
        os.removexattr(top, name, follow_symlinks=False)

def serve(req, fds):
    try:
        pid = os.fork()
    except OSError as exc:
        pid = -exc.errno
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

while True:
    try:
        msg, fds, _, _ = socket.recv_fds(sock, 1 << 20, 8)
    except OSError:
        break
    if not msg:
        break
    sock.sendall(json.dumps(serve(json.loads(msg), fds)).encode() + b"\n")
"""


class Spawner:
    """The client side: one helper per process, shared by every ns sandbox (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._reader: socket.SocketIO | None = None
        self._reset_lock = threading.Lock()  # resets go to the worker, not the helper: spawns never wait
        self._reset_sock: socket.socket | None = None
        self._reset_pidfd: int | None = None

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
        ``work``, ``tmp`` and ``shm`` (owned by ``uid``), ``ctl`` (a tmpfs of its own, root's, mode 0711: files in
        it can be opened by name but not listed or created) and ``b/<name>`` for each ``(host path, name)`` of ``binds``.
        """
        reply = self._call(
            {
                "argv": argv,
                "cgroup_procs": cgroup_procs,
                "mountpoint": mountpoint,
                "tmpfs_opts": tmpfs_opts,
                "ctl_tmpfs_opts": ctl_tmpfs_opts,
                "uid": uid,
                "binds": binds,
            },
            fds,
        )
        pid = int(reply["pid"])
        if pid < 0:
            raise SandboxError(f"the spawner could not fork: {os.strerror(-pid)}")
        return pid

    def reset(self, **request: object) -> None:
        """Give a live sandbox a new, empty overlay upper layer and empty /tmp, /dev/shm and System V IPC.

        ``request``: ``bwrap_pid``, ``shell_pid`` and ``shell_start`` (its start time, see _proc.start_ticks),
        ``mountpoint``, ``workdir``, ``upper`` and ``work`` (the new layer's directory names), ``uid``, and
        ``lower``: the testbed the overlay shows (a host path; None: the one bwrap was started with). The
        helper's child opens the sandbox's namespaces, builds the overlay in bwrap's mount namespace (where the
        tmpfs is), swaps it for the old one at ``workdir`` inside, and empties the rest; see reset.py.
        """
        with self._reset_lock:
            worker = self._reset_worker()
            try:
                worker.sendall(json.dumps(request).encode() + b"\n")
                reply = b""
                while not reply.endswith(b"\n"):
                    chunk = worker.recv(4096)
                    if not chunk:
                        raise OSError("the reset worker exited")
                    reply += chunk
                answer = json.loads(reply)
            except TimeoutError:
                answer = {
                    "error": f"no answer from the reset worker in {RESET_TIMEOUT:.0f} s",
                    "stranded": True,
                }
            except (OSError, ValueError) as exc:
                answer = {"error": f"the reset worker is gone ({exc})", "stranded": True}
            if answer["stranded"]:  # it has exited (or is killed now): the next reset gets a new one
                self._close_reset_worker()
        if answer["error"]:
            raise SandboxError(answer["error"])

    def _reset_worker(self) -> socket.socket:
        if self._reset_sock is None:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                pid = int(self._call({"op": "reset_worker"}, [theirs.fileno()])["pid"])
            finally:
                theirs.close()
            if pid < 0:
                ours.close()
                raise SandboxError(f"the spawner could not fork: {os.strerror(-pid)}")
            ours.settimeout(RESET_TIMEOUT)
            # a pidfd, not the pid: the helper reaps the worker when it exits, and its pid may be reused
            self._reset_sock, self._reset_pidfd = ours, os.pidfd_open(pid)
        return self._reset_sock

    def _close_reset_worker(self) -> None:
        sock, pidfd, self._reset_sock, self._reset_pidfd = self._reset_sock, self._reset_pidfd, None, None
        if sock is not None:
            sock.close()  # it exits at EOF
        if pidfd is not None:  # ... or is stuck
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            os.close(pidfd)

    def _call(self, request: dict[str, object], fds: list[int]) -> dict[str, Any]:
        """Send one request (with ``fds``) to the helper and return its reply."""
        data = json.dumps(request).encode()
        with self._lock:
            for attempt in range(2):  # a helper that died (killed from outside) is replaced once
                sock = self._ensure()
                try:
                    socket.send_fds(sock, [data], fds)
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
                            f"the spawner helper failed: {exc} (helper exit status {status})"
                        ) from exc
        return dict(json.loads(reply))

    def close(self) -> None:
        with self._reset_lock:
            self._close_reset_worker()
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
