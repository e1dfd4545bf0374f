"""Virtualenvs for environments: created with the spec's interpreter, seeded or installed."""

from __future__ import annotations

import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from swe_rl.envs.store.venv_clones import rewrite_scripts
from swe_rl.errors import EnvBuildError


def host_interpreter() -> tuple[Path, Path]:
    """(executable, install prefix) of the interpreter running swe-rl, outside any venv."""
    exe = Path(getattr(sys, "_base_executable", sys.executable)).resolve()
    return exe, Path(sys.base_prefix).resolve()


def create_venv(python: Path, dest: Path) -> None:
    proc = subprocess.run(
        [str(python), "-m", "venv", "--without-pip", str(dest)], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise EnvBuildError(f"cannot create a venv with {python}: {proc.stderr.strip()}")


def ensure_pip(venv: Path) -> None:
    """pip in the venv from the interpreter's bundled wheel (offline); install commands call ``python -m pip``."""
    python = venv / "bin" / "python"
    if not (venv / "bin" / "pip").exists() and shutil.which(str(python)):
        proc = subprocess.run(
            [str(python), "-m", "ensurepip", "--default-pip"], capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            raise EnvBuildError(f"ensurepip failed in {venv}: {proc.stderr.strip()[-2000:]}")


def site_packages(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python*/site-packages"))
    if not found:
        raise EnvBuildError(f"no site-packages in {venv}")
    return found[0]


def seed_from_host(venv: Path, requirements: list[str]) -> list[str]:
    """Copy installed distributions (and what they require) from this interpreter into ``venv``.

    Works offline and takes milliseconds; used for envs whose packages are pure Python and
    already present on the host (the builtin suite needs pytest only). Returns 'name==version's.
    """
    from packaging.requirements import Requirement

    target = site_packages(venv)
    seen: dict[str, str] = {}
    todo = list(requirements)
    while todo:
        req = Requirement(todo.pop())
        key = req.name.lower().replace("_", "-")
        if key in seen or (req.marker is not None and not req.marker.evaluate({"extra": ""})):
            continue
        try:
            dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            raise EnvBuildError(
                f"cannot seed {req.name!r}: it is not installed for {sys.executable}"
            ) from None
        seen[key] = f"{dist.metadata['Name']}=={dist.version}"
        _copy_distribution(dist, target)
        todo.extend(dist.requires or [])
    return sorted(seen.values())


def _copy_distribution(dist: metadata.Distribution, target: Path) -> None:
    for file in dist.files or []:
        src = Path(str(dist.locate_file(file)))
        if file.parts[0] == ".." or "__pycache__" in file.parts or not src.is_file():
            continue  # scripts outside site-packages and bytecode are not needed
        dst = target / file
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)


def compile_venv(venv: Path) -> None:
    """Byte-compile the venv's site-packages with its own interpreter, once, at build time.

    Sandboxes run with PYTHONDONTWRITEBYTECODE over a read-only venv: without the .pyc files every test
    run compiles pytest and the repo's dependencies from source again. A failure here (an old
    interpreter, a file that does not compile) only costs that speed, so it is not an error.
    """
    python = venv / "bin" / "python"
    for site in sorted(venv.glob("lib/python*/site-packages")):
        subprocess.run(
            [str(python), "-m", "compileall", "-q", str(site)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
            timeout=1800,
        )


def relocate_venv(venv: Path, final: Path) -> None:
    """Point the venv's scripts at ``final``, where it is about to be renamed to."""
    rewrite_scripts(venv, venv, final)


def point_editables_at(venv: Path, built_at: Path, workdir: str) -> int:
    """Editable installs record the directory they were built in; sandboxes see the repo at ``workdir``.

    Rewrites .pth files, egg-links, PEP 660 finder modules and direct_url.json that name ``built_at``.
    Returns how many files changed.
    """
    old, new = str(built_at).encode(), workdir.encode()
    changed = 0
    for site in venv.glob("lib/python*/site-packages"):
        candidates = [
            *site.glob("*.pth"),
            *site.glob("*.egg-link"),
            *site.glob("__editable__*.py"),
            *site.glob("*.dist-info/direct_url.json"),
        ]
        for path in candidates:
            data = path.read_bytes()
            if old in data:
                path.write_bytes(data.replace(old, new))
                changed += 1
    return changed
