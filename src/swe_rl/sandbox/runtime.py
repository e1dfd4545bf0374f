"""The root a sandbox sees: the host's /usr (read-only) and a minimal /etc made by swe-rl.

Never the whole host: no /root, /home, /var, /srv, /opt, no host /etc beyond what programs need to
run (the dynamic loader's cache, the alternatives symlinks, timezone data).
"""

from __future__ import annotations

import os
from pathlib import Path

from swe_rl.fileio import atomic_write_text
from swe_rl.paths import cache_dir

_FILES = {
    "passwd": "root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
    "group": "root:x:0:\nnogroup:x:65534:\n",
    "hosts": "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n",
    "hostname": "sandbox\n",
    "nsswitch.conf": "passwd: files\ngroup: files\nhosts: files\n",
    "resolv.conf": "",
    "os-release": 'NAME="swe-rl sandbox"\nID=swe-rl\n',
}
# Host files and directories bound read-only into the minimal /etc when present.
HOST_ETC = ["ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime", "ssl", "mime.types"]
_VERSION = "1"


def runtime_etc() -> Path:
    """The sandbox /etc directory (built once in the cache; mount points for HOST_ETC included)."""
    root = cache_dir() / "runtime" / f"etc-v{_VERSION}"
    if (root / ".complete").is_file():
        return root
    root.mkdir(parents=True, exist_ok=True)
    for name, text in _FILES.items():
        atomic_write_text(root / name, text)
    # sandboxes that start together build it together: each step must stand another's having run
    for name in HOST_ETC:
        host = Path("/etc") / name
        if host.is_dir():
            (root / name).mkdir(exist_ok=True)
        elif host.is_file():
            (root / name).touch()
    (root / ".complete").touch()
    return root


def root_binds(etc: str) -> list[str]:
    """bwrap arguments for the host's /usr and the /bin, /lib... entries (symlinks on merged-/usr hosts).

    ``etc`` is where bwrap finds :func:`runtime_etc` (the ns backend binds it there beforehand: the cache
    may sit under a directory the unprivileged bwrap cannot enter).
    """
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        host = Path("/") / name
        if host.is_symlink():
            args += ["--symlink", os.readlink(host), f"/{name}"]
        elif host.is_dir():
            args += ["--ro-bind", str(host), f"/{name}"]
    args += ["--ro-bind", etc, "/etc"]
    for name in HOST_ETC:
        if (Path("/etc") / name).exists():
            args += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    return args


# Top-level entries of an image's root that the sandbox does not take from it: it mounts its own.
_OWN = {"proc", "dev", "sys", "tmp", "run", "root", "testbed"}


def rootfs_binds(rootfs: Path, source: str) -> list[str]:
    """bwrap arguments that make an image's root filesystem (an imported env) the sandbox's root.

    Entries are listed from ``rootfs`` and bound from ``source``, where the ns backend mounted it.
    """
    args: list[str] = []
    for entry in sorted(rootfs.iterdir()):
        if entry.name in _OWN or entry.name.startswith("."):
            continue
        if entry.is_symlink():
            args += ["--symlink", os.readlink(entry), f"/{entry.name}"]
        elif entry.is_dir():
            args += ["--ro-bind", f"{source}/{entry.name}", f"/{entry.name}"]
    return args
