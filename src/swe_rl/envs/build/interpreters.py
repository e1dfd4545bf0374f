"""Finding the Python an environment needs.

Providers, in order: the running interpreter, pyenv's versions, uv-managed Pythons, ``pythonX.Y`` on
PATH; then, only when asked (``fetch=True``), ``uv python install`` and a conda/mamba/micromamba named
by ``$SWE_RL_CONDA`` (into ``<cache>/pythons``). A version none of them provides is a ConfigError
that names the version and how to provide it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from swe_rl.envs.build.venv import host_interpreter
from swe_rl.errors import ConfigError
from swe_rl.paths import conda_executable

_VERSION = re.compile(r"^\d+(\.\d+){0,2}$")


def _candidates(version: str) -> list[Path]:
    found: list[Path] = []
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    if pyenv.is_dir():
        for folder in sorted(pyenv.glob(f"{version}*"), key=_version_key, reverse=True):
            found += [
                folder / "bin" / f"python{version}",
                folder / "bin" / "python3",
                folder / "bin" / "python",
            ]
    uv = Path(os.environ.get("UV_PYTHON_INSTALL_DIR", Path.home() / ".local" / "share" / "uv" / "python"))
    if uv.is_dir():
        for folder in sorted(uv.glob(f"cpython-{version}*"), key=_version_key, reverse=True):
            found.append(folder / "bin" / "python3")
    on_path = shutil.which(f"python{version}")
    if on_path:
        found.append(Path(on_path))
    return [p for p in found if p.is_file() and os.access(p, os.X_OK)]


def _version_key(path: Path) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", path.name)[:3])


def find_python(version: str, *, fetch: bool = False, store: Path | None = None) -> tuple[Path, Path]:
    """(executable, install prefix) of a Python ``version`` ('3.9', '3.11.7'; '3' = the running one)."""
    if version in ("", "3"):
        return host_interpreter()
    if not _VERSION.match(version):
        raise ConfigError(f"not a Python version: {version!r}")
    exe, prefix = host_interpreter()
    running = ".".join(str(x) for x in sys.version_info[:3])
    if running == version or running.startswith(version + "."):
        return exe, prefix
    found = _probe_all(_candidates(version), version)
    if found is None and fetch:
        found = _fetch(version, store)
    if found is not None:
        return found
    raise ConfigError(
        f"Python {version} is needed but not installed; provide it with `pyenv install {version}` or "
        f"`uv python install {version}` (looked in pyenv, uv's python dir and PATH"
        + (
            "; `uv python install` and $SWE_RL_CONDA found none)"
            if fetch
            else "; --install-python tries uv and conda)"
        )
    )


def provider(executable: Path) -> str:
    """Which provider an interpreter came from, for the env's record."""
    text = str(executable)
    if "/.pyenv/" in text or text.startswith(os.environ.get("PYENV_ROOT", "/nonexistent")):
        return "pyenv"
    if "/uv/python/" in text or text.startswith(os.environ.get("UV_PYTHON_INSTALL_DIR", "/nonexistent")):
        return "uv"
    if "/pythons/conda-" in text:
        return "conda"
    return "system"


def _probe_all(candidates: list[Path], version: str) -> tuple[Path, Path] | None:
    for candidate in candidates:
        code = "import sys; sys.stdout.write(sys.version.split()[0] + ' ' + getattr(sys, 'base_prefix', sys.prefix))"
        probe = subprocess.run([str(candidate), "-c", code], capture_output=True, text=True, check=False)
        lines = probe.stdout.split()
        if (
            probe.returncode == 0
            and len(lines) == 2
            and (lines[0] == version or lines[0].startswith(version + "."))
        ):
            return candidate.resolve(), Path(lines[1]).resolve()
    return None


def _fetch(version: str, store: Path | None) -> tuple[Path, Path] | None:
    """``uv python install``, then conda, when the network allows; None when neither works."""
    from swe_rl.envs.build.install_tools import uv_binary

    uv = uv_binary()
    if uv is not None:
        proc = subprocess.run([uv, "python", "install", version], capture_output=True, text=True, check=False)
        if proc.returncode == 0:
            found = subprocess.run(
                [uv, "python", "find", version], capture_output=True, text=True, check=False
            )
            if found.returncode == 0 and found.stdout.strip():
                hit = _probe_all([Path(found.stdout.strip())], version)
                if hit is not None:
                    return hit
    conda = conda_executable()
    if conda and store is not None:
        prefix = store / f"conda-{version}"
        if not (prefix / "bin" / "python").exists():
            subprocess.run(
                [conda, "create", "-y", "-q", "-p", str(prefix), f"python={version}"],
                capture_output=True,
                check=False,
            )
        return _probe_all([prefix / "bin" / "python"], version)
    return None
