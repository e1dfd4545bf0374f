"""The two installers, uv and pip: which one a build gets, the shell functions that send a command's installs to
it, the environment it runs in (the host's network settings passed on), and the set of packages it lists."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import IO

from swe_rl.envs.build.recipe import EnvRecipe, Installer
from swe_rl.errors import ConfigError, EnvBuildError, SandboxError
from swe_rl.sandbox.base import Limits
from swe_rl.sandbox.cgroups import SandboxCgroup
from swe_rl.sandbox.shell import base_environment

UV_LOCK_TIMEOUT_S = "7200"  # the host's UV_LOCK_TIMEOUT, when set, wins

PASS_VARS = {
    "PIP_CERT",
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_FIND_LINKS",
    "PIP_NO_INDEX",
    "PIP_TRUSTED_HOST",
    "PIP_DEFAULT_TIMEOUT",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
}

# bash functions in front of every install command: `pip install` and `python -m pip install` run
# $SWE_RL_INSTALL, the chosen installer with the build's options. With $SWE_RL_PROBE set, that command runs first
# (its output to $SWE_RL_PROBE_LOG); when it fails, PROBE_FAILED is added there and the whole install command
# stops before installing anything (exit 86)
PROBE_FAILED = "swe-rl: the probe failed"
SHIMS = r"""
swe_rl_install() {
  if [ -n "${SWE_RL_PROBE:-}" ]; then
    eval "$SWE_RL_PROBE" '"$@"' >>"$SWE_RL_PROBE_LOG" 2>&1 || { echo "swe-rl: the probe failed" >>"$SWE_RL_PROBE_LOG"; exit 86; }
  fi
  eval "$SWE_RL_INSTALL" '"$@"'
}
pip() { if [ "${1:-}" = install ]; then shift; swe_rl_install "$@"; else command pip "$@"; fi; }
pip3() { pip "$@"; }
python() {
  if [ "${1:-}" = -m ] && [ "${2:-}" = pip ] && [ "${3:-}" = install ]; then shift 3; swe_rl_install "$@";
  else command python "$@"; fi
}
export -f swe_rl_install pip pip3 python
"""


def uv_binary() -> str | None:
    """uv from the ``uv`` wheel installed with swe-rl, else one on PATH."""
    try:
        from uv import find_uv_bin

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        return shutil.which("uv")


def uv_cache_dir(cache: Path) -> str:
    """The uv cache that installs use: ``cache``, unless the environment names one (UV_CACHE_DIR wins)."""
    return os.environ.get("UV_CACHE_DIR") or str(cache)


def forget_cached(packages: set[str], cache: Path) -> None:
    """Drop ``packages`` from uv's cache at ``cache``: uv links installed files to its cache's, so a file
    changed in place through a venv is changed there too, and would be linked into the next venv."""
    uv = uv_binary()
    where = uv_cache_dir(cache)
    if uv is None or not packages or not Path(where).is_dir():
        return
    environ = {**os.environ, "UV_CACHE_DIR": where}
    subprocess.run(
        [uv, "cache", "clean", *sorted(packages)], env=environ, capture_output=True, check=False, timeout=600
    )


def choose_installer(wanted: Installer, recipe: EnvRecipe) -> tuple[Installer, str | None]:
    """(installer, uv path); uv falls back to pip, which cannot resolve as of a date."""
    uv = uv_binary() if wanted == "uv" else None
    if uv is not None:
        return "uv", uv
    if recipe.exclude_newer:
        raise ConfigError(
            "resolving packages as of the task's date needs uv (`pip install uv`); "
            "or build with --latest (today's releases)"
        )
    return "pip", None


def install_environ(testbed: Path, venv: Path, cache: Path) -> dict[str, str]:
    """The environment of install commands: the venv first on PATH, the host's network settings."""
    from swe_rl.sandbox.base import EnvSpec

    spec = EnvSpec(key="build", repo="", base_commit="", testbed=testbed, venv=venv)
    environ = base_environment(spec, home=str(venv.parent), tmpdir=str(venv.parent))
    environ["PIP_CONFIG_FILE"] = "/dev/null"  # a host pip config can send old Pythons into long backtracking
    environ["UV_CACHE_DIR"] = uv_cache_dir(cache)
    # builds in parallel share the cache: one waits while another compiles the same sdist (pandas 1.1.2
    # for Python 3.9 takes over 20 minutes on 2 cores), longer than uv's default of 300 s
    environ["UV_LOCK_TIMEOUT"] = UV_LOCK_TIMEOUT_S
    # the testbed may belong to the ns sandboxes' uid already: git (setuptools-scm, versioneer) must
    # still answer here, where root runs the install
    environ.update(GIT_CONFIG_COUNT="1", GIT_CONFIG_KEY_0="safe.directory", GIT_CONFIG_VALUE_0="*")
    # the host's network settings (proxy, CA bundle, index) are needed to reach an index at all
    environ.update({k: v for k, v in os.environ.items() if k in PASS_VARS or k.startswith("UV_")})
    return environ


def freeze(kind: Installer, uv: str | None, venv: Path) -> list[str]:
    """The packages installed in ``venv``, sorted ``pip freeze`` lines."""
    if kind == "uv":
        assert uv is not None
        cmd = [uv, "pip", "freeze", "--python", str(venv / "bin" / "python")]
    else:
        cmd = [str(venv / "bin" / "python"), "-m", "pip", "freeze", "--all"]
    proc = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PIP_CONFIG_FILE": "/dev/null"},
    )
    if proc.returncode != 0:
        raise EnvBuildError(f"cannot list the installed packages of {venv}: {proc.stderr.strip()[-1000:]}")
    return sorted(line.strip() for line in proc.stdout.splitlines() if line.strip())


# An install command runs on the host as root: one that runs away (astropy 3.1's setup.py built in its venv ran
# itself in a child without end, 400 processes deep) took the machine until the kernel's OOM killer chose what to
# kill, the dataset run beside it included. Each command runs in a cgroup of its own with these bounds instead.
BUILD_LIMITS = Limits(memory_mb=8192, pids=1024, cpus=float(os.cpu_count() or 1))
_UNBOUNDED_SAID: list[bool] = []  # the build log says once per process that commands run unbounded


def run_bounded(
    argv: list[str], cwd: Path, env: dict[str, str], out: IO[bytes], name: str, limits: Limits = BUILD_LIMITS
) -> int:
    """Run ``argv`` (output to ``out``, the build log) in a cgroup of its own with ``limits``; whatever it leaves
    running is killed when it exits. Its exit code; the log then says which limit stopped it, if one did. Where
    no cgroup can be made (not root, no hierarchy) it runs unbounded, and the log says so (once)."""
    try:
        # unique: builds running side by side (-j) have the same ``name`` (their temporary venv dirs' "out")
        group: SandboxCgroup | None = SandboxCgroup(f"build-{name}-{uuid.uuid4().hex[:12]}", limits)
    except SandboxError as exc:
        group = None
        if not _UNBOUNDED_SAID:
            out.write(f"swe-rl: install commands run without limits here ({exc})\n".encode())
            out.flush()
        _UNBOUNDED_SAID.append(True)
    paths = group.procs_files if group is not None else []

    def join() -> None:  # in the child, before exec: every process it starts is born inside
        for path in paths:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, str(os.getpid()).encode())
            finally:
                os.close(fd)

    try:
        proc = subprocess.run(
            argv,
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=join if group is not None else None,
        )
    finally:
        if group is not None:
            said = (
                [f"swe-rl: the command ran over {limits.memory_mb} MiB and was killed"]
                if group.oom_killed()
                else []
            )
            if _pids_hit(group):
                said.append(f"swe-rl: the command reached {limits.pids} processes and could start no more")
            group.remove()
            out.write("".join(f"{line}\n" for line in said).encode())
    return proc.returncode


def _pids_hit(group: SandboxCgroup) -> bool:
    """The pids limit refused a fork (``pids.events``' max count, cgroup v1 and v2)."""
    for d in group.dirs:
        with contextlib.suppress(OSError, ValueError, IndexError):
            for line in (d / "pids.events").read_text().splitlines():
                if line.split()[0] == "max" and int(line.split()[1]) > 0:
                    return True
    return False
