"""The host's part of env builds: the Debian packages that provide what the recipes' ``system`` lists name.

A recipe names commands (compilers), libraries its build compiles against (``pc:<module>``) and shared libraries
its tests load (``lib:<name>``); :func:`~swe_rl.tasks.specs.check_system` refuses a build whose host lacks one,
naming the Debian package. With ``swe-rl env build --install-system-deps`` they are installed first, once for
all the tasks of the run (before builds start in parallel), when swe-rl runs as root on a host with apt-get.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from swe_rl.envs.build.recipe import InstallOptions, recipe_for
from swe_rl.errors import ConfigError, EnvBuildError
from swe_rl.tasks.model import Task
from swe_rl.tasks.specs import check_system, debian_package, missing_system

APT_TIMEOUT_S = 1800
# another apt-get or dpkg holding the lock (a person, unattended-upgrades): wait for it, not fail
APT_LOCK_WAIT_S = "600"


def system_needs(tasks: list[Task], options: InstallOptions) -> list[str]:
    """What the recipes of ``tasks`` name in ``system``, each once (a task with no recipe is left to its build,
    which says why)."""
    needs: dict[str, None] = {}
    for task in tasks:
        try:
            needs.update(dict.fromkeys(recipe_for(task, options).system))
        except ConfigError:
            continue
    return list(needs)


def install_system_deps(needs: list[str]) -> list[str]:
    """Install the Debian packages that provide the ``needs`` the host lacks; returns the packages.

    EnvBuildError naming the packages when this process cannot install them (not root, no apt-get) or apt-get
    fails, and when the packages are installed but the need is still missing (a mapping that is wrong here)."""
    missing = missing_system(needs)
    if not missing:
        return []
    apt_get = shutil.which("apt-get")
    if os.geteuid() != 0 or apt_get is None:
        why = "not root" if os.geteuid() != 0 else "no apt-get on this host"
        check_system(missing, "these envs", hint=f"; --install-system-deps cannot install them: {why}")
    assert apt_get is not None
    packages = list(dict.fromkeys(debian_package(need) for need in missing))
    install = [apt_get, "-o", f"DPkg::Lock::Timeout={APT_LOCK_WAIT_S}", "install", "-y"]
    install += ["--no-install-recommends", *packages]
    proc = _apt(install)
    if proc.returncode != 0:  # a host whose package lists are stale or were never fetched (a fresh image)
        _apt([apt_get, "-o", f"DPkg::Lock::Timeout={APT_LOCK_WAIT_S}", "update"])
        proc = _apt(install)
    if proc.returncode != 0:
        raise EnvBuildError(
            f"apt-get install {' '.join(packages)} exited {proc.returncode}:\n{proc.stdout[-3000:]}"
        )
    check_system(missing, "these envs", hint=" even after apt-get installed those packages")
    return packages


def _apt(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    return subprocess.run(
        cmd,
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        timeout=APT_TIMEOUT_S,
        check=False,
    )
