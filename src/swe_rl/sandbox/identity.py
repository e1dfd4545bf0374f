"""Who a sandboxed process is on the host, and the two files that make that safe.

No process of an ns sandbox is host root. bubblewrap started by root with ``--unshare-user`` maps uid 0
inside to uid 0 outside, and the kernel checks writes to host-global files such as ``/proc/sys/*`` by
uid, not by capability: dropping capabilities does not help. So the spawner drops to
:data:`SANDBOX_UID` before it starts bubblewrap, which then builds an unprivileged user namespace where
uid 0 inside is :data:`SANDBOX_UID` outside (and the kernel keeps ``/proc/sys`` read-only).

Two consequences are handled here:

- **The testbed is owned by the sandbox uid.** An overlay copies a file up with its owner; with only one
  uid mapped, a lower file owned by host root could not be copied up, so an agent could not edit the
  repository. :func:`own_testbed` hands a cached testbed to the sandbox uid once (inside, it is owned by
  root, as in a container). The venv and the interpreter stay root's and read-only.
- **The persistent shell is not dumpable.** Commands run as the same uid as the shell that serves them.
  A dumpable shell would let a command read its memory (``/proc/1/mem``) or open its pipes
  (``/proc/1/fd/*``). The kernel makes a process non-dumpable when it executes a file it may not read,
  so the shell runs from an execute-only copy of bash (:func:`exec_only_shell`); without
  ``CAP_SYS_PTRACE`` no command can look inside it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import uuid
from pathlib import Path

from swe_rl.errors import SandboxError
from swe_rl.locks import exclusive
from swe_rl.paths import cache_dir

SANDBOX_UID = 1_600_000
"""Host uid (and gid) of every process of every ns sandbox: no user, no group, no file of the host."""

_SHELLS: dict[tuple[str, int, int], Path] = {}


def own_testbed(testbed: Path, *, again: bool = False) -> None:
    """Give ``testbed`` to the sandbox uid (once; the top directory's owner marks it done).

    ``again``: walk it even if marked, for files a later venv build wrote into it as root.
    """
    # stat, not lstat: a packed testbed's path is a link into its image (envs/store/packing.py), given before packing
    if testbed.stat().st_uid == SANDBOX_UID and not again:
        return
    lock = testbed.parent / f".{testbed.name}.own.lock"
    with exclusive(lock):
        if testbed.stat().st_uid == SANDBOX_UID and not again:
            return
        for root, dirs, files in os.walk(testbed):
            for name in (*dirs, *files):
                os.lchown(os.path.join(root, name), SANDBOX_UID, SANDBOX_UID)
        if (testbed / ".git").exists():
            # chown changed every ctime: refresh git's stat cache once here, not in every sandbox's diff
            subprocess.run(
                ["git", "-c", "safe.directory=*", "update-index", "-q", "--refresh"],
                cwd=testbed,
                capture_output=True,
                check=False,
            )
            for entry in (testbed / ".git").iterdir():
                os.lchown(entry, SANDBOX_UID, SANDBOX_UID)
        os.lchown(testbed, SANDBOX_UID, SANDBOX_UID)  # last: it marks the tree as done


def exec_only_shell(rootfs: Path | None) -> Path:
    """An execute-only (mode 0111, root's) copy of the bash the sandbox runs: of ``rootfs``, else the host's."""
    source = (
        _bash_in(rootfs) if rootfs is not None else Path(shutil.which("bash", path="/usr/bin:/bin") or "")
    )
    if not source.is_file():
        raise SandboxError(f"no bash to serve the sandbox (looked for {source})")
    stat = source.stat()
    key = (str(source), stat.st_mtime_ns, stat.st_size)
    if (cached := _SHELLS.get(key)) is not None and cached.exists():
        return cached
    data = source.read_bytes()
    target = cache_dir() / "runtime" / "shells" / f"bash-{hashlib.sha256(data).hexdigest()[:16]}"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(
            f".{target.name}.{uuid.uuid4().hex}"
        )  # unique: threads may write it at once
        partial.write_bytes(data)
        os.chmod(partial, 0o111)
        os.replace(partial, target)
    _SHELLS[key] = target
    return target


def _bash_in(rootfs: Path) -> Path:
    """bash inside an image's root, following its symlinks within that root (never onto the host)."""
    for candidate in ("usr/bin/bash", "bin/bash"):
        path = rootfs / candidate
        for _ in range(16):
            if not path.is_symlink():
                break
            link = os.readlink(path)
            path = rootfs / link.lstrip("/") if link.startswith("/") else path.parent / link
        with contextlib.suppress(OSError):
            if path.is_file() and path.resolve().is_relative_to(rootfs.resolve()):
                return path
    return rootfs / "bin" / "bash"


__all__ = ["SANDBOX_UID", "exec_only_shell", "own_testbed"]
