"""pip for the install commands only pip can run, kept once per Python version beside the venvs, not in them.

A command uv cannot run (a pip-only option such as scikit-learn's ``--no-use-pep517``, a build backend without
PEP 660) is run by pip, and the pip a venv was seeded with may be too old for it (Python 3.6's bundled 18.1 knows
no ``--no-use-pep517`` and reads no manylinux2014 wheel). Upgrading the venv's own pip put a new pip (11 MB for
3.6's 21.3.1) into every instance's clone of a version's venv, the clone's own files, not links. Instead the
last pip for the interpreter's version (``pip<25``, as the official images' conda pip was: today's) is installed
once into ``<env cache>/pip-tools/<python version>`` and run from there on the venv's interpreter
(``PYTHONPATH``), which installs into the venv it runs in.

``wheel`` sits beside it, as it sat beside the images' pip in every conda env: pip decides by whether ``wheel`` is
importable how to install a project without a ``pyproject.toml``. With it, an editable install runs the repo's
``setup.py develop`` in the venv, where what the build needs is installed (astropy 3.1's ``astropy_helpers``);
without it, pip builds in an isolated env with today's setuptools, where neither that nor ``pkg_resources`` is.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from swe_rl.locks import exclusive

PIP = "pip<25"
WHEEL = "wheel<0.44"  # 0.43.0 (2024-03), of the build tools' date (envs/build/dating.py); 3.6/3.7 get an older one


def pip_tool(root: Path, python: Path, uv: str | None, environ: dict[str, str]) -> Path | None:
    """The directory holding ``pip<25`` and ``wheel`` for ``python``'s version (made once, under a lock,
    atomically; a directory an earlier swe-rl made without ``wheel`` is made again), installed
    by uv with ``environ`` (the install commands' environment: its index and cache); None where uv is missing or
    cannot install it (the caller then runs the venv's own pip)."""
    if uv is None:
        return None
    version = subprocess.run(
        [str(python), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    if not version:
        return None
    tools = root / "pip-tools"
    final = tools / version
    if _complete(final):
        return final
    tools.mkdir(parents=True, exist_ok=True)
    with exclusive(tools / f"{version}.lock"):
        if _complete(final):  # another build made it while this one waited
            return final
        work = Path(tempfile.mkdtemp(dir=tools, prefix=f".{version}."))
        try:
            made = subprocess.run(
                [uv, "pip", "install", "--quiet", "--python", str(python), "--target", str(work), PIP, WHEEL],
                capture_output=True,
                text=True,
                check=False,
                env=environ,
            )
            if made.returncode != 0 or not _complete(work):
                return None
            # one made without wheel: set aside, not deleted under a pip that may be running from it
            if final.exists():
                os.rename(final, Path(tempfile.mkdtemp(dir=tools, prefix=f".{version}.old.")) / "tool")
            os.rename(work, final)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return final


def _complete(tool: Path) -> bool:
    return (tool / "pip").is_dir() and ((tool / "wheel").is_dir() or (tool / "wheel.py").is_file())


__all__ = ["PIP", "WHEEL", "pip_tool"]
